// A CUDA backend plugin from "another build": the entry point of
// libmp-cuda.so stamped with a runtime interface that is not this build's
// (cuda-backend.test).
#include "mp/Runtime/CudaBackend.h"

extern "C" const mp::rt::CudaBackend *mp_cuda_backend() {
  static const mp::rt::CudaBackend backend = {
      mp::rt::kCudaBackendAbi, "0123456789abcdef", nullptr, nullptr};
  return &backend;
}
