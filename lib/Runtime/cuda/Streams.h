//===- Streams.h - streams and scratch of the CUDA backend ---------*- C++
//-*-===//
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

/// Waits for the work queued on `stream` (cudaStreamSynchronize), except
/// while NCCL collectives are outstanding: a peer that stopped responding
/// leaves their kernels waiting forever, so the wait then polls, and after
/// the collective timeout (or at an error NCCL reports) aborts every NCCL
/// communicator, which ends their kernels, and fails saying why.
Status waitForStream(cudaStream_t stream, const char *what);
/// The collective timeout of waitForStream, in seconds (0: none); the
/// runtime passes its own (--collective-timeout) through the plugin table.
void setCollectiveTimeout(double seconds);
/// Called when an NCCL collective or transfer is queued (NCCLComm.cpp).
void collectivesQueued();
/// NCCLComm.cpp: the first error an NCCL communicator reports (success:
/// none), and the abort of every live one.
Status collectivesFailed();
void abortCollectives();

/// Device scratch of one user (the kernels, or one NCCL communicator): a
/// buffer lent by the executable that owns the memory (it sized it for the
/// program at load), else one of its own grown on demand (kernels called
/// directly, as in tests; cudaFree waits for the work still using the old
/// buffer). `what` names it in errors.
class DeviceScratch {
public:
  explicit DeviceScratch(const char *what) : what(what) {}
  ~DeviceScratch() { cudaFree(owned); }
  DeviceScratch(const DeviceScratch &) = delete;
  DeviceScratch &operator=(const DeviceScratch &) = delete;
  /// At least `bytes` at get() until the next reserve; an error naming both
  /// sizes when a lent buffer is smaller (the executable's plan and the
  /// kernel disagree).
  Status reserve(size_t bytes);
  /// Uses `bytes` at `ptr` (not owned) until withdraw().
  void lend(void *ptr, size_t bytes);
  void withdraw();
  void *get() const { return isLent ? lent : owned; }

private:
  const char *what;
  void *owned = nullptr;
  size_t ownedBytes = 0;
  bool isLent = false;
  void *lent = nullptr;
  size_t lentBytes = 0;
};

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDA_STREAMS_H
