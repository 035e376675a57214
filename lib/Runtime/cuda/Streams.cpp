//===- Streams.cpp - the compute and communication streams ----------------===//
#include "Streams.h"

#include <string>

namespace mp::rt::cuda {

Status cudaStatus(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::success();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

namespace {

cudaStream_t makeStream() {
  cudaStream_t s = nullptr;
  // On failure the null stream is used: still correct, only serialized.
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    s = nullptr;
  return s;
}

cudaEvent_t makeEvent() {
  cudaEvent_t e = nullptr;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  return e;
}

/// `waiter` waits (on the device) for the work queued on `producer`.
Status order(cudaStream_t producer, cudaStream_t waiter, cudaEvent_t event) {
  if (Status s = cudaStatus(cudaEventRecord(event, producer), "cudaEventRecord");
      !s)
    return s;
  return cudaStatus(cudaStreamWaitEvent(waiter, event, 0),
                    "cudaStreamWaitEvent");
}

} // namespace

cudaStream_t computeStream() {
  static cudaStream_t stream = makeStream();
  return stream;
}

cudaStream_t commStream() {
  static cudaStream_t stream = makeStream();
  return stream;
}

Status DeviceScratch::reserve(size_t bytes) {
  if (bytes <= size)
    return Status::success();
  cudaFree(data);
  data = nullptr;
  size = 0;
  if (Status s = cudaStatus(cudaMalloc(&data, bytes), what); !s)
    return s;
  size = bytes;
  return Status::success();
}

Status commWaitsForCompute() {
  static cudaEvent_t event = makeEvent();
  return order(computeStream(), commStream(), event);
}

Status computeWaitsForComm() {
  static cudaEvent_t event = makeEvent();
  return order(commStream(), computeStream(), event);
}

} // namespace mp::rt::cuda
