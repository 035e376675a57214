//===- SharedMemoryGroup.h - collectives through each other's memory ------===//
//
// Private to the MPI backend. When every rank of a communicator runs on one
// host, its collectives skip MPI's copies: each rank announces where its
// operand lies (in memory it allocated shareable, ../SharedMemory.h, or in a
// staging block when not), the others map that memory and read it where it
// is. An all_gather is one copy, written straight into the layout of the
// gathered axis; in an all_reduce each rank sums a 1/n slice and writes it
// into every rank's operand (two meetings, not three: no rank reads another
// after the sums), each element summed in rank order by one rank, so every
// rank gets bitwise the same result whatever the thread or rank timing.
//
// Ranks meet at flags in a small control block per rank: a sequence number
// counts the group's collectives, and each rank checks the others announced
// the same collective (kind, type, bytes), so ranks running different
// programs get an error naming both collectives instead of garbage. Waits
// spin, then yield (oversubscribed runs), then sleep, and fail with the
// ranks that never arrived after --collective-timeout, as MPI waits do.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_MPI_SHAREDMEMORYGROUP_H
#define MP_LIB_RUNTIME_MPI_SHAREDMEMORYGROUP_H

#include "../SharedMemory.h"
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Tensor.h"

#include <mpi.h>

#include <memory>
#include <vector>

namespace mp::rt::mpi {

struct Control;

/// Whether ranks of one host should read each other's memory in their
/// collectives (unless MP_SHM_COLLECTIVES=0).
bool sharedMemoryWanted();

/// How many ranks of the job run on this host (set once MPI starts): more
/// than its CPUs, and a waiting rank gives its core away at once instead of
/// spinning.
void setRanksOnThisHost(int ranks);

class SharedMemoryGroup {
public:
  /// Connects the ranks of `comm` (each calls it at the same point): `out`
  /// is null when they cannot share memory (more than one host, /proc
  /// closed to them, MP_SHM_COLLECTIVES=0), the same answer on every rank.
  static Status connect(MPI_Comm comm, std::unique_ptr<SharedMemoryGroup> &out);
  ~SharedMemoryGroup();

  /// In-place sum of `count` elements over the ranks.
  Status allReduceSum(void *data, int64_t count, DType dtype);
  /// out[o][r] = rank r's in[o], for `outer` blocks of `block` bytes.
  Status allGather(const void *in, void *out, int64_t outer, size_t block);
  /// out[o] = sum over ranks r of r's in[o][this rank], blocks of `count`
  /// elements.
  Status reduceScatterSum(const void *in, void *out, int64_t outer,
                          int64_t count, DType dtype);
  /// Communicator::allReduceRows: rank r sums and finishes the r-th 1/n of
  /// the rows and writes them into every rank's results (at most
  /// kMaxRowResults), which it maps like the operands (staged when not
  /// shareable).
  static constexpr int kMaxRowResults = 2;
  Status allReduceRows(const Tensor &partial, Tensor &reduced, int64_t rows,
                       const Communicator::RowsFinish &finish,
                       const std::vector<Tensor> &results);
  /// Communicator::reduceScatterRows: the same, rank r's rows being the
  /// r-th slice of each of `outer` blocks.
  Status reduceScatterRows(const Tensor &partial, Tensor &reduced, int64_t rows,
                           int64_t outer,
                           const Communicator::RowsFinish &finish,
                           const std::vector<Tensor> &results);

private:
  enum class Kind : uint32_t {
    AllReduce = 1,
    AllGather,
    ReduceScatter,
    AllReduceRows,
    ReduceScatterRows
  };
  /// Rows [first, second) of the full layout.
  using RowRange = std::pair<int64_t, int64_t>;
  /// allReduceRows and reduceScatterRows: this rank sums and finishes
  /// `own` rows (a range per block of rows) and writes them into every
  /// rank's results.
  Status rowsCollective(Kind kind, const Tensor &partial, Tensor &reduced,
                        int64_t rows, const std::vector<RowRange> &own,
                        const Communicator::RowsFinish &finish,
                        const std::vector<Tensor> &results);
  /// Memory the other ranks write into in a collective: this rank's
  /// `data`, or a staging block copied into it afterwards.
  struct Destination {
    void *data;
    uint64_t bytes;
  };
  SharedMemoryGroup(int rank, int size) : me(rank), ranks(size) {}

  /// Announces this rank's operand of the collective begun (staged when it
  /// is not shareable or overlaps `avoid`), waits for every rank's, checks
  /// they agree and maps theirs into `operands` (this rank's own, maybe the
  /// staging copy, is writable).
  /// With `destinations`, also announces where the others write this
  /// rank's (staged when not shareable); mapDestinations then maps theirs.
  /// `blocks`: the row collectives' blocks of rows (the ranks must agree).
  Status meet(Kind kind, DType dtype, uint64_t outer, const void *operand,
              uint64_t bytes, const void *avoid, uint64_t avoidBytes,
              const char *what,
              const std::vector<Destination> &destinations = {},
              uint64_t blocks = 1);
  /// Sets this rank's flag `flag` to the current sequence number and waits
  /// until every rank's is there; with `checkFailures`, a rank that
  /// abandoned the collective is an error.
  Status signalAndWait(int flag, const char *what, bool checkFailures = true);
  /// Marks the current collective failed on this rank and releases every
  /// wait of the others on it (they fail too, naming this rank); gives `s`.
  Status abandon(Status s);
  /// Whether rank `r` abandoned the current collective, and the error
  /// saying so.
  bool failed(int r) const;
  Status peerFailed(int r, const char *what) const;
  /// `s` (the ranks announced different collectives) once every rank has
  /// compared the announcements.
  Status disagreement(Status s);
  Status stage(const void *data, uint64_t bytes, const void *&staged);
  /// Maps the other ranks' announced destinations into peerDestinations.
  Status mapDestinations(const char *what);
  /// Shareable memory kept between collectives, grown (at least doubled)
  /// when `bytes` do not fit; `what` names its use in the error.
  struct Block {
    void *data = nullptr;
    uint64_t bytes = 0;
  };
  static Status fit(Block &block, uint64_t bytes, const char *what);

  int me, ranks;
  uint64_t sequence = 0;
  Control *control = nullptr;            // this rank's, shared
  std::vector<const Control *> controls; // every rank's, this one included
  std::vector<uint8_t *> operands;       // of the current collective
  /// [rank][destination] of the current collective (null for this rank).
  std::vector<std::vector<uint8_t *>> peerDestinations;
  /// Which of this rank's destinations the others write to staging.
  std::vector<bool> destinationStaged;
  Block staging;                   // an operand others cannot map, copied
  Block receiving[kMaxRowResults]; // where others write such a destination
};

} // namespace mp::rt::mpi

#endif // MP_LIB_RUNTIME_MPI_SHAREDMEMORYGROUP_H
