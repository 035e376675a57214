//===- Comm.h - communication between ranks -----------------------*- C++
//-*-===//
//
// The collectives the partitioned programs use, on one group of ranks (the
// tensor-parallel axis of the grid). Backends implement three raw
// operations; the tensor-level ones here lay chunks out along any axis.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_COMM_H
#define MP_RUNTIME_COMM_H

#include "mp/Runtime/Tensor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mp::rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char *backend() const = 0;
  /// The backend and how its collectives move data, for the load line
  /// (e.g. "MPI, shared memory").
  virtual std::string describe() const { return backend(); }
  /// Whether tensors live in device memory (NCCL) rather than host memory.
  virtual bool deviceMemory() const { return false; }

  /// out = sum over ranks of in (same shape).
  Status allReduceSum(const Tensor &in, Tensor &out);
  /// out = concatenation along `axis` of every rank's `in`, in rank order.
  Status allGather(const Tensor &in, Tensor &out, int64_t axis);
  /// out = this rank's slice along `axis` of the sum over ranks of `in`.
  Status reduceScatterSum(const Tensor &in, Tensor &out, int64_t axis);
  /// out = this rank's slice along `axis` of `in` (no communication).
  Status allSlice(const Tensor &in, Tensor &out, int64_t axis);

  /// Rows [begin, end) of a row-wise op on an all-reduced sum: reads those
  /// rows of the sum (which it may overwrite) and writes the same rows of
  /// its results.
  using RowsFinish = std::function<Status(int64_t begin, int64_t end)>;
  /// An all_reduce fused with the row-wise op that reads its sum:
  /// `reduced` = the sum over ranks of `partial` (`rows` rows each), then
  /// `finish` over every row, whose `results` (`rows` rows each) every rank
  /// gets. By default exactly that; ranks that share memory instead each
  /// sum and finish 1/n of the rows and write those rows into every rank's
  /// results, so the row-wise work is divided rather than repeated. Each
  /// element is summed in rank order and each row finished by one rank, so
  /// every rank gets the bits the unfused ops give. `reduced` is scratch
  /// for the sums `finish` reads, written on this rank only (ranks sharing
  /// memory write only the rows they finish: its other rows are left as
  /// they were); it may be `partial`, or a result (whose rows `finish` then
  /// overwrites). The row-wise op's other operands must be the same on
  /// every rank: one rank's rows go to all.
  Status allReduceRows(const Tensor &partial, Tensor &reduced, int64_t rows,
                       const RowsFinish &finish,
                       const std::vector<Tensor> &results);

  /// Sequence parallelism's reduce_scatter fused with the row-wise op after
  /// it and the all_gather of that op's results: `partial` (`rows` rows)
  /// is `outer` blocks of size() slices; this rank sums its slice of every
  /// block into those rows of `reduced` (the full layout; scratch as in
  /// allReduceRows) and calls `finish` on them, once per block (rows
  /// numbered in the full layout; what it writes besides `results` is its
  /// own business, e.g. the rank's slice of a sum). Then every rank has
  /// every rank's rows of `results` (full layout). Ranks that share memory
  /// write their rows straight into the others' results; elsewhere it is
  /// the reduce_scatter, `finish`, then the all_gather, through scratch
  /// (scatterRowsBytes). Every element is summed as reduceScatterSum sums
  /// it: the bits of the unfused ops.
  Status reduceScatterRows(const Tensor &partial, Tensor &reduced, int64_t rows,
                           int64_t outer, const RowsFinish &finish,
                           const std::vector<Tensor> &results);
  /// The scratch reduceScatterRows needs for `partial` and `results` (the
  /// larger of their slices, and a full one to unpack when `outer` > 1);
  /// 0 on a backend that does not pack.
  size_t scatterRowsBytes(const std::vector<Tensor> &tensors,
                          int64_t outer) const;

  /// The scratch allGather (of `local` into `full`) or reduceScatterSum (of
  /// `full` into `local`) along `axis` needs to pack blocks: 0 when `axis`
  /// is outermost or the backend does not pack, else `full`'s bytes.
  size_t packingBytes(const Tensor &local, const Tensor &full,
                      int64_t axis) const;
  /// Whether collectives along an inner axis pack blocks through scratch
  /// (MPI moves contiguous bytes); one that writes the layout directly
  /// (ranks sharing memory) does not.
  virtual bool packsBlocks() const { return true; }
  /// Packs through `bytes` at `ptr` (memory of the kind this communicator
  /// works on, not owned, valid while it is used) instead of scratch of its
  /// own: an executable lends the block it sized at load, so collectives
  /// allocate nothing while a program runs. A collective needing more than
  /// the lent block is an error.
  void lendScratch(void *ptr, size_t bytes);

  /// Point-to-point (pipeline stage boundaries): blocking send of `t`'s
  /// bytes to rank `peer` of this communicator, and the matching receive.
  virtual Status send(const Tensor &t, int peer) = 0;
  virtual Status recv(Tensor &t, int peer) = 0;
  /// A send that returns at once (a pipeline schedule's: a stage goes on
  /// while its output travels); `t` must stay valid until it completes.
  /// Backends without one send before returning.
  virtual Status postSend(const Tensor &t, int peer) {
    ++sendsPostedHere;
    return send(t, peer);
  }
  /// How many posted sends, counted from this communicator's first, have
  /// completed with every one before them: their buffers may be reused.
  virtual Status completedSends(int64_t &count);
  /// Completes every posted send.
  virtual Status waitSends() { return Status::success(); }
  /// The communicator of the ranks that passed the same `color` (ordered by
  /// `key`); a rank passing a negative color takes part and gets null.
  /// Every rank of this communicator calls it.
  virtual Status splitByColor(int color, int key,
                              std::unique_ptr<Communicator> &out);

  /// The communicator of the ranks that differ from this one only along
  /// `axis` of a grid of shape `gridShape` (ranks laid out row-major), e.g.
  /// the tensor-parallel group of a (data, pipeline, tensor) grid.
  virtual Status split(const std::vector<int64_t> &gridShape, int64_t axis,
                       std::unique_ptr<Communicator> &out) = 0;

protected:
  /// In-place sum of `count` elements over all ranks.
  virtual Status allReduceRaw(void *data, int64_t count, DType dtype) = 0;
  /// allReduceRows on checked operands; by default the all_reduce, then
  /// `finish` over every row.
  virtual Status allReduceRowsRaw(const Tensor &partial, Tensor &reduced,
                                  int64_t rows, const RowsFinish &finish,
                                  const std::vector<Tensor> &results);
  /// reduceScatterRows on checked operands; by default the reduce_scatter,
  /// `finish`, then the all_gather.
  virtual Status reduceScatterRowsRaw(const Tensor &partial, Tensor &reduced,
                                      int64_t rows, int64_t outer,
                                      const RowsFinish &finish,
                                      const std::vector<Tensor> &results);
  /// Gathers `bytes` from every rank into `out` (rank-major).
  virtual Status allGatherRaw(const void *in, void *out, size_t bytes) = 0;
  /// Sums rank-major blocks of `count` elements; rank r keeps block r.
  virtual Status reduceScatterRaw(const void *in, void *out, int64_t count,
                                  DType dtype) = 0;
  /// out[o][r] = rank r's in[o], `outer` blocks of `block` bytes (an
  /// all_gather along an axis with `outer` elements before it). By default
  /// allGatherRaw, packing through scratch when `outer` > 1.
  virtual Status allGatherBlocks(const void *in, void *out, int64_t outer,
                                 size_t block);
  /// out[o] = the sum over ranks of in[o][this rank], blocks of `block`
  /// bytes of `dtype`. By default reduceScatterRaw, packing as above.
  virtual Status reduceScatterBlocks(const void *in, void *out, int64_t outer,
                                     size_t block, DType dtype);
  /// Copies `height` rows of `width` bytes between pitched layouts, in the
  /// memory the backend works on (host by default).
  virtual Status copy2D(void *dst, size_t dstPitch, const void *src,
                        size_t srcPitch, size_t width, size_t height);
  /// Scratch of its own of at least `bytes`, valid until the next call
  /// (used when none is lent; host memory by default).
  virtual Status ownScratch(size_t bytes, void *&ptr);

private:
  /// The lent scratch, or ownScratch when none is lent.
  Status scratch(size_t bytes, void *&ptr);
  /// dst block (c, r) = src block (r, c) of a rows x cols grid of blocks.
  Status transposeBlocks(const void *src, void *dst, int64_t rows, int64_t cols,
                         size_t block);
  std::vector<uint8_t> hostScratch;
  int64_t sendsPostedHere = 0; // postSend's, when they send at once
  bool scratchLent = false;
  void *lentScratch = nullptr;
  size_t lentScratchBytes = 0;
};

/// This rank's coordinates in a row-major grid of `gridShape`.
std::vector<int64_t> gridCoordinates(const std::vector<int64_t> &gridShape,
                                     int rank);

/// Ranks with the same color differ only in coordinate `axis` (the group a
/// split along `axis` gives); their key is that coordinate.
int64_t gridColor(const std::vector<int64_t> &gridShape, int rank,
                  int64_t axis);

/// One process: collectives are copies.
std::unique_ptr<Communicator> makeSingleProcessCommunicator();

/// A communicator over device memory (NCCL) with the ranks of `host`,
/// bootstrapped through it. Each rank uses GPU (its index among the ranks of
/// its host) % (the GPUs it sees), so per-rank binding (CUDA_VISIBLE_DEVICES)
/// works too; two ranks on one GPU, or a rank that cannot set up its GPU,
/// is the same error on every rank. An error when the runtime was built
/// without CUDA/NCCL.
Status makeDeviceCommunicator(Communicator &host,
                              std::unique_ptr<Communicator> &out);

/// Whether this mp-run was built with MPI.
bool haveMPI();
/// Starts MPI when launched by mpirun (or always with `force`), else gives
/// the single-process communicator.
Status initCommunication(int *argc, char ***argv,
                         std::unique_ptr<Communicator> &out);
/// Ends MPI cleanly (all ranks), or kills every rank after an error that
/// other ranks cannot see (they would wait in a collective forever).
void finalizeCommunication();
[[noreturn]] void abortCommunication(int code);
/// Whether any rank failed (an OR over every rank of the job, whatever
/// `comm`, which must span them all); every rank must call it at the same
/// point.
bool anyRankFailed(Communicator &comm, bool failed);
/// Every rank's `local` string, in rank order, on every rank of the job
/// (each truncated to 4 KiB); every rank must call it at the same point.
/// (This and anyRankFailed stop every rank, saying why, when a rank never
/// arrives: see setCollectiveTimeout.)
std::vector<std::string> allGatherStrings(Communicator &world,
                                          const std::string &local);
/// Copies `bytes` at `data` on rank `root` to every rank of the job.
Status broadcastBytes(Communicator &world, void *data, size_t bytes, int root);
/// MPI counts elements in an int: collectives and broadcasts over more than
/// `elements` (at most 2^31 - 1, the default) go in pieces of that many.
/// Tests lower it to run the pieces on small buffers.
void setMPIMessageLimit(int64_t elements);

/// Seconds a collective waits for every rank before it fails with an error
/// naming the ranks that never arrived (a stopped or dead peer, an
/// unreachable node) instead of waiting forever; 0 waits forever. The
/// default is 600 s, PyTorch's NCCL default. NCCL collectives cannot name
/// the missing rank: on a GPU, the host's wait for the device gives up
/// after this long with NCCL work outstanding, aborting the NCCL
/// communicators (the value a device communicator is made with counts).
void setCollectiveTimeout(double seconds);
double collectiveTimeout();

} // namespace mp::rt

#endif // MP_RUNTIME_COMM_H
