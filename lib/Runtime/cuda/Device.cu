//===- Device.cu - CUDA devices, memory and kernel scratch
//------------------===//
#include "Common.cuh"

#include <cstdio>

namespace mp::rt::cuda {

int deviceCount(std::string &reason) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    reason = std::string("no usable GPU: ") + cudaGetErrorString(err);
    return 0;
  }
  if (n == 0)
    reason = "no GPU is visible";
  return n;
}

std::string describeDevice() {
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return "unknown GPU";
  char text[320];
  std::snprintf(text, sizeof text, "%s, %.1f GiB, sm_%d%d", prop.name,
                prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
  return text;
}

Status allocate(size_t bytes, void **ptr) {
  return cudaStatus(cudaMalloc(ptr, std::max<size_t>(bytes, 1)), "cudaMalloc");
}

void release(void *ptr) { cudaFree(ptr); }

/// Host copies are ordered on the compute stream and complete on return.
static Status hostCopy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind, const char *what) {
  if (Status s = cudaStatus(
          cudaMemcpyAsync(dst, src, bytes, kind, computeStream()), what);
      !s)
    return s;
  return waitForStream(computeStream(), what);
}

Status copyToDevice(void *dst, const void *src, size_t bytes) {
  return hostCopy(dst, src, bytes, cudaMemcpyHostToDevice, "copy to device");
}

Status copyToHost(void *dst, const void *src, size_t bytes) {
  return hostCopy(dst, src, bytes, cudaMemcpyDeviceToHost, "copy to host");
}

Status synchronize() {
  if (Status s =
          waitForStream(commStream(), "synchronize (communication stream)");
      !s)
    return s;
  return waitForStream(computeStream(), "synchronize (compute stream)");
}

DeviceScratch &kernelScratch() {
  static DeviceScratch scratch("kernel scratch");
  return scratch;
}

Status prepare() {
  computeStream(); // created now, not in the first step
  commStream();
  cublasHandle_t handle;
  return blasHandle(handle);
}

void lendScratch(void *ptr, size_t bytes) { kernelScratch().lend(ptr, bytes); }

void withdrawScratch() { kernelScratch().withdraw(); }

} // namespace mp::rt::cuda
