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
// this table with the ABI stamp below, which the loader checks.
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
  uint32_t abi;        // kCudaBackendAbi of the plugin's build
  uint32_t tableBytes; // sizeof(KernelTable) there
  const KernelTable *kernels;
  Status (*makeCommunicator)(Communicator &host,
                             std::unique_ptr<Communicator> &out);
};

/// Raised when CudaBackend or the types it passes change incompatibly.
inline constexpr uint32_t kCudaBackendAbi = 1;
/// The plugin's file name, and its one exported symbol (extern "C"):
/// `const CudaBackend *mp_cuda_backend()`.
inline constexpr const char *kCudaBackendLibrary = "libmp-cuda.so";
inline constexpr const char *kCudaBackendSymbol = "mp_cuda_backend";
/// Set to the plugin's path, it is loaded from there and nowhere else.
inline constexpr const char *kCudaBackendVariable = "MP_CUDA_BACKEND";

} // namespace mp::rt

#endif // MP_RUNTIME_CUDABACKEND_H
