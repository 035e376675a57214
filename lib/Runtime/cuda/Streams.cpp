//===- Streams.cpp - the compute and communication streams ----------------===//
#include "Streams.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace mp::rt::cuda {

namespace {
/// Whether `err` is a fault of a kernel already running, which CUDA reports
/// at some later call rather than at its launch.
bool isAsynchronousFault(cudaError_t err) {
  switch (err) {
  case cudaErrorIllegalAddress:
  case cudaErrorLaunchFailure:
  case cudaErrorMisalignedAddress:
  case cudaErrorIllegalInstruction:
  case cudaErrorInvalidAddressSpace:
  case cudaErrorInvalidPc:
  case cudaErrorHardwareStackError:
  case cudaErrorAssert:
  case cudaErrorLaunchTimeout: return true;
  default: return false;
  }
}
} // namespace

Status cudaStatus(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::success();
  std::string message = std::string(what) + ": " + cudaGetErrorString(err);
  if (isAsynchronousFault(err))
    message += " (CUDA reports a kernel's fault at a later call, so it may "
               "come from an earlier step: rerun with --profile, which "
               "synchronizes after every step, or with CUDA_LAUNCH_BLOCKING=1)";
  return Status::error(message);
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
  if (Status s =
          cudaStatus(cudaEventRecord(event, producer), "cudaEventRecord");
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
  if (isLent)
    return bytes <= lentBytes
               ? Status::success()
               : Status::error(std::string(what) + ": needs " +
                               std::to_string(bytes) +
                               " bytes but the executable reserved " +
                               std::to_string(lentBytes) + " at load");
  if (bytes <= ownedBytes)
    return Status::success();
  cudaFree(owned);
  owned = nullptr;
  ownedBytes = 0;
  if (Status s = cudaStatus(cudaMalloc(&owned, bytes),
                            (std::string("cudaMalloc (") + what + ")").c_str());
      !s)
    return s;
  ownedBytes = bytes;
  return Status::success();
}

void DeviceScratch::lend(void *ptr, size_t bytes) {
  isLent = true;
  lent = ptr;
  lentBytes = bytes;
}

void DeviceScratch::withdraw() {
  isLent = false;
  lent = nullptr;
  lentBytes = 0;
}

namespace {
std::atomic<bool> collectivesOutstanding{false};
std::atomic<double> timeoutSeconds{600.0};
} // namespace

void setCollectiveTimeout(double seconds) { timeoutSeconds = seconds; }

void collectivesQueued() { collectivesOutstanding = true; }

Status waitForStream(cudaStream_t stream, const char *what) {
  const double timeout = timeoutSeconds;
  if (!collectivesOutstanding || timeout <= 0) {
    Status s = cudaStatus(cudaStreamSynchronize(stream), what);
    if (s)
      collectivesOutstanding = false;
    return s;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t state = cudaStreamQuery(stream);
    if (state != cudaErrorNotReady) {
      // Both streams order every collective before later work, so either
      // one finished means every collective queued before it did.
      if (state == cudaSuccess)
        collectivesOutstanding = false;
      return cudaStatus(state, what);
    }
    Status reported = collectivesFailed();
    const double waited =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (!reported || waited > timeout) {
      abortCollectives();
      collectivesOutstanding = false;
      if (!reported)
        return Status::error(std::string(what) + ": " + reported.message +
                             " (the NCCL communicators were aborted)");
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout);
      return Status::error(
          std::string(what) + ": a collective did not complete within " +
          seconds +
          " s (--collective-timeout): a rank stopped responding or runs "
          "another program; the NCCL communicators were aborted");
    }
    // Spin briefly (most waits end within a step's last kernels), then
    // poll at 10 kHz.
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
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
