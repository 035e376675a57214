//===- Plugin.cpp - the entry point of libmp-cuda.so ----------------------===//
//
// The one symbol the CUDA backend plugin exports (CudaBackend.h); the
// runtime finds it with dlsym. Everything else in the plugin is hidden.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/CudaBackend.h"
#include "mp/Runtime/CudaKernels.h"

#include "Streams.h"

extern "C" __attribute__((visibility("default"))) const mp::rt::CudaBackend *
mp_cuda_backend() {
  static const mp::rt::CudaBackend backend = {
      mp::rt::kCudaBackendAbi, MP_RUNTIME_INTERFACE,
      mp::rt::cuda::kernelTable(), mp::rt::cuda::makeNcclCommunicator,
      mp::rt::cuda::setCollectiveTimeout};
  return &backend;
}
