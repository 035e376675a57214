//===- Streams.h - streams and scratch of the CUDA backend ---------*- C++ -*-===//
//
// Each rank (process) runs its kernels and cuBLAS calls on one compute stream
// and its NCCL collectives and their packing copies on one communication
// stream. Both are non-blocking (never ordered with the legacy default
// stream); a collective is ordered after the kernels before it and before
// the kernels after it by events, so the host never waits between them and
// a later schedule can overlap the two streams.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDA_STREAMS_H
#define MP_RUNTIME_CUDA_STREAMS_H

#include "mp/Runtime/Tensor.h"

#include <cuda_runtime.h>

namespace mp::rt::cuda {

/// Created on first use, on the device current then (after cudaSetDevice).
cudaStream_t computeStream();
cudaStream_t commStream();

/// Makes the communication stream wait for the work queued on the compute
/// stream so far (call before a collective).
Status commWaitsForCompute();
/// Makes the compute stream wait for the work queued on the communication
/// stream so far (call after a collective).
Status computeWaitsForComm();

Status cudaStatus(cudaError_t err, const char *what);

/// A device buffer grown on demand (cudaFree waits for the work still using
/// the old one); `what` names it in allocation errors.
class DeviceScratch {
public:
  explicit DeviceScratch(const char *what) : what(what) {}
  ~DeviceScratch() { cudaFree(data); }
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  /// At least `bytes` at get() until the next reserve.
  Status reserve(size_t bytes);
  void *get() const { return data; }
  size_t capacity() const { return size; }

private:
  const char *what;
  void *data = nullptr;
  size_t size = 0;
};

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDA_STREAMS_H
