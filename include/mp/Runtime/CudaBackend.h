//===- CudaBackend.h - the CUDA backend, loaded when first used --*- C++
//-*-===//
//
// The CUDA backend (kernels, cuBLAS, NCCL) is a plugin, libmp-cuda.so, that
// the runtime loads with dlopen the first time a run asks for a GPU. Loading
// cuBLAS costs about a third of a second of every process's start (its
// static initializers), and mp-opt and most mp-run runs never use it; a
// machine without the CUDA libraries can still run everything on the CPU.
//
// The plugin and the runtime come from one build: the entry point returns
// this table stamped with the runtime interface it was compiled against (a
// hash of include/mp/Runtime/*.h taken when CMake configured the build),
// which the loader compares with its own.
//
// The plugin holds its own hidden copy of the runtime code it calls, so
// state kept in the runtime's globals (the collective timeout, the shared
// memory groups) is not seen there: a setting the backend needs comes
// through this table (as the collective timeout does).
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDABACKEND_H
#define MP_RUNTIME_CUDABACKEND_H

#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Device.h"

#include <cstdint>
#include <memory>

namespace mp::rt {

struct CudaBackend {
  uint32_t abi;          // kCudaBackendAbi: the layout of this struct
  const char *interface; // MP_RUNTIME_INTERFACE of the plugin's build
  const KernelTable *kernels;
  Status (*makeCommunicator)(Communicator &host,
                             std::unique_ptr<Communicator> &out);
  /// The runtime's collective timeout (setCollectiveTimeout), which the
  /// backend's waits for NCCL work honour.
  void (*setCollectiveTimeout)(double seconds);
};

/// Raised when this struct changes (the fields after `abi` are read only
/// when it matches).
inline constexpr uint32_t kCudaBackendAbi = 3;
/// The plugin's file name, and its one exported symbol (extern "C"):
/// `const CudaBackend *mp_cuda_backend()`.
inline constexpr const char *kCudaBackendLibrary = "libmp-cuda.so";
inline constexpr const char *kCudaBackendSymbol = "mp_cuda_backend";
/// Set to the plugin's path, it is loaded from there and nowhere else.
inline constexpr const char *kCudaBackendVariable = "MP_CUDA_BACKEND";

} // namespace mp::rt

#endif // MP_RUNTIME_CUDABACKEND_H
