//===- SharedMemoryGroup.cpp - collectives through each other's memory ----===//
#include "SharedMemoryGroup.h"

#include "Waiting.h"
#include "mp/Runtime/Comm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <thread>

namespace mp::rt::mpi {

namespace {
/// One flag per cache line, so that ranks polling one do not slow the
/// owner's writes of another.
struct alignas(64) Flag {
  std::atomic<uint64_t> value{0};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "flags shared between processes must be lock-free");

enum FlagIndex { kArrived, kReduced, kDone, kFlags };

/// What a rank says of the collective it entered.
struct Announcement {
  uint32_t kind = 0;
  uint32_t dtype = 0;
  uint64_t outer = 0;
  uint64_t blocks = 0; // (the row collectives': blocks of rows)
  uint64_t bytes = 0;
  SharedLocation operand;
  /// Where the others write this rank's results (allReduceRows).
  uint32_t destinationCount = 0;
  SharedLocation destinations[SharedMemoryGroup::kMaxRowResults];
};

using Clock = std::chrono::steady_clock;

inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

const char *kindName(uint32_t kind) {
  switch (kind) {
  case 1: return "all_reduce";
  case 2: return "all_gather";
  case 3: return "reduce_scatter";
  case 4: return "all_reduce (fused with the row-wise op after it)";
  case 5:
    return "reduce_scatter (fused with the row-wise op and all_gather after "
           "it)";
  default: return "an unknown collective";
  }
}

/// dst[i] = the sum over ranks, in rank order, of element i at
/// `byteOffset` of each operand (dst may be one of them).
template <typename T>
void sumInRankOrder(T *dst, const std::vector<uint8_t *> &operands,
                    uint64_t byteOffset, int64_t count) {
  constexpr int64_t kChunk = 1024;
  T acc[kChunk];
  for (int64_t c = 0; c < count; c += kChunk) {
    const int64_t m = std::min(kChunk, count - c);
    const T *first = reinterpret_cast<const T *>(operands[0] + byteOffset) + c;
    std::copy(first, first + m, acc);
    for (size_t r = 1; r < operands.size(); ++r) {
      const T *src = reinterpret_cast<const T *>(operands[r] + byteOffset) + c;
      for (int64_t i = 0; i < m; ++i)
        acc[i] += src[i];
    }
    std::memcpy(dst + c, acc, static_cast<size_t>(m) * sizeof(T));
  }
}

Status sumInto(DType dtype, void *dst, const std::vector<uint8_t *> &operands,
               uint64_t byteOffset, int64_t count, const char *what) {
  switch (dtype) {
  case DType::F32:
    sumInRankOrder(static_cast<float *>(dst), operands, byteOffset, count);
    break;
  case DType::F64:
    sumInRankOrder(static_cast<double *>(dst), operands, byteOffset, count);
    break;
  case DType::I64:
    sumInRankOrder(static_cast<int64_t *>(dst), operands, byteOffset, count);
    break;
  case DType::I32:
    sumInRankOrder(static_cast<int32_t *>(dst), operands, byteOffset, count);
    break;
  case DType::I8:
  case DType::Bool:
    sumInRankOrder(static_cast<int8_t *>(dst), operands, byteOffset, count);
    break;
  default:
    return Status::error(std::string(what) + " of " + dtypeName(dtype) +
                         " is not supported");
  }
  return Status::success();
}

bool overlaps(const void *a, uint64_t aBytes, const void *b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}
} // namespace

struct Control {
  uint64_t token = 0; // proves a peer mapped this block, not another
  Flag flags[kFlags];
  /// The sequence number of a collective this rank abandoned.
  Flag failedAt;
  Announcement announced;
};

namespace {
int ranksOnThisHost = 1;

/// How long a waiting rank spins before it yields its core: 1 ms, the
/// skew between ranks computing the same work (a syscall per poll measured
/// slower), and none when the host's ranks outnumber its CPUs (the peer may
/// be waiting for this very core).
double spinSeconds() {
  static const double seconds = [] {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 && ranksOnThisHost <= cpus ? 1e-3 : 0.0;
  }();
  return seconds;
}
} // namespace

void setRanksOnThisHost(int ranks) { ranksOnThisHost = ranks; }

bool sharedMemoryWanted() {
  const char *setting = std::getenv("MP_SHM_COLLECTIVES");
  return !(setting && std::strcmp(setting, "0") == 0);
}

Status SharedMemoryGroup::connect(MPI_Comm comm,
                                  std::unique_ptr<SharedMemoryGroup> &out) {
  out.reset();
  int me = 0, n = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  std::unique_ptr<SharedMemoryGroup> group(new SharedMemoryGroup(me, n));
  struct Card {
    char host[256];
    int32_t able;
    uint64_t token;
    SharedLocation control;
  } mine{};
  const bool wanted = n > 1 && sharedMemoryWanted();
  void *block = nullptr;
  if (wanted && gethostname(mine.host, sizeof mine.host - 1) == 0 &&
      allocateShared(sizeof(Control), &block)) {
    group->control = new (block) Control;
    std::random_device entropy;
    mine.token = (uint64_t(entropy()) << 32) ^ entropy() ^ uint64_t(getpid());
    group->control->token = mine.token;
    mine.able = locateShared(block, sizeof(Control), mine.control);
  }
  std::vector<Card> cards(n);
  MPI_Request request;
  if (Status s =
          check(MPI_Iallgather(&mine, sizeof(Card), MPI_BYTE, cards.data(),
                               sizeof(Card), MPI_BYTE, comm, &request),
                "MPI_Iallgather");
      !s)
    return s;
  if (Status s = waitFor(request, "connecting the ranks' shared memory"); !s)
    return s;
  int able = 1;
  group->controls.assign(n, nullptr);
  for (int r = 0; r < n && able; ++r) {
    if (!cards[r].able || std::strcmp(cards[r].host, mine.host) != 0) {
      able = 0;
    } else if (r == me) {
      group->controls[r] = group->control;
    } else {
      void *peer = nullptr;
      able = mapShared(cards[r].control, peer) &&
             static_cast<const Control *>(peer)->token == cards[r].token;
      group->controls[r] = static_cast<const Control *>(peer);
    }
  }
  if (Status s = check(MPI_Iallreduce(MPI_IN_PLACE, &able, 1, MPI_INT, MPI_MIN,
                                      comm, &request),
                       "MPI_Iallreduce");
      !s)
    return s;
  if (Status s = waitFor(request, "connecting the ranks' shared memory"); !s)
    return s;
  if (able)
    out = std::move(group);
  return Status::success();
}

SharedMemoryGroup::~SharedMemoryGroup() {
  releaseHost(control);
  releaseHost(staging.data);
  for (Block &b : receiving)
    releaseHost(b.data);
}

Status SharedMemoryGroup::fit(Block &block, uint64_t bytes, const char *what) {
  if (bytes <= block.bytes)
    return Status::success();
  releaseHost(block.data);
  const uint64_t grown = std::max(bytes, 2 * block.bytes);
  block = Block{};
  void *data = nullptr;
  if (Status s = allocateShared(grown, &data); !s)
    return Status::error(std::string("cannot stage a collective's ") + what +
                         ": " + s.message);
  block = Block{data, grown};
  return Status::success();
}

Status SharedMemoryGroup::stage(const void *data, uint64_t bytes,
                                const void *&staged) {
  if (Status s = fit(staging, bytes, "operand"); !s)
    return s;
  std::memcpy(staging.data, data, bytes);
  staged = staging.data;
  return Status::success();
}

Status SharedMemoryGroup::abandon(Status s) {
  control->failedAt.value.store(sequence, std::memory_order_relaxed);
  for (Flag &flag : control->flags)
    flag.value.store(sequence, std::memory_order_release);
  return s;
}

Status SharedMemoryGroup::signalAndWait(int flag, const char *what,
                                        bool checkFailures) {
  control->flags[flag].value.store(sequence, std::memory_order_release);
  const double timeout = collectiveTimeout(), spin = spinSeconds();
  const Clock::time_point start = Clock::now();
  for (int r = 0; r < ranks; ++r) {
    if (r == me)
      continue;
    const std::atomic<uint64_t> &value = controls[r]->flags[flag].value;
    for (uint64_t polls = 0; value.load(std::memory_order_acquire) < sequence;
         ++polls) {
      pause();
      if (polls % 64 != 63)
        continue;
      const double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (waited < spin)
        continue;
      if (timeout > 0 && waited > timeout)
        return abandon(timedOut(what));
      // Past the spin, give the core away (the peer may need it), then
      // sleep; answer roll calls (which lets MPI progress) meanwhile.
      if (polls % 1024 == 1023)
        answerRollCalls();
      if (waited < 0.01)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (checkFailures && failed(r))
      return abandon(peerFailed(r, what));
  }
  return Status::success();
}

bool SharedMemoryGroup::failed(int r) const {
  return controls[r]->failedAt.value.load(std::memory_order_relaxed) ==
         sequence;
}

Status SharedMemoryGroup::peerFailed(int r, const char *what) const {
  return Status::error(std::string(what) + ": rank " + std::to_string(r) +
                       " of the group failed in it (its error says why)");
}

Status SharedMemoryGroup::meet(Kind kind, DType dtype, uint64_t outer,
                               const void *operand, uint64_t bytes,
                               const void *avoid, uint64_t avoidBytes,
                               const char *what,
                               const std::vector<Destination> &destinations,
                               uint64_t blocks) {
  Announcement &mine = control->announced;
  mine = Announcement{};
  mine.kind = static_cast<uint32_t>(kind);
  mine.dtype = static_cast<uint32_t>(dtype);
  mine.outer = outer;
  mine.blocks = blocks;
  mine.bytes = bytes;
  if (bytes > 0 && (overlaps(operand, bytes, avoid, avoidBytes) ||
                    !locateShared(operand, bytes, mine.operand))) {
    if (Status s = stage(operand, bytes, operand); !s)
      return abandon(s);
    locateShared(operand, bytes, mine.operand);
  }
  mine.destinationCount = static_cast<uint32_t>(destinations.size());
  destinationStaged.assign(destinations.size(), false);
  for (size_t i = 0; i < destinations.size(); ++i) {
    const Destination &d = destinations[i];
    if (d.bytes == 0 || locateShared(d.data, d.bytes, mine.destinations[i]))
      continue;
    destinationStaged[i] = true;
    if (Status s = fit(receiving[i], d.bytes, "result"); !s)
      return abandon(s);
    locateShared(receiving[i].data, d.bytes, mine.destinations[i]);
  }
  if (Status s = signalAndWait(kArrived, what, /*checkFailures=*/false); !s)
    return s;
  operands.assign(ranks, nullptr);
  for (int r = 0; r < ranks; ++r) {
    if (r != me && failed(r))
      return abandon(peerFailed(r, what));
    // Every rank sees a disagreement itself: no need to release the others
    // (but all wait until all have seen it).
    const Announcement &theirs = controls[r]->announced;
    bool same = theirs.kind == mine.kind && theirs.dtype == mine.dtype &&
                theirs.outer == mine.outer && theirs.blocks == mine.blocks &&
                theirs.bytes == mine.bytes &&
                theirs.destinationCount == mine.destinationCount;
    for (uint32_t i = 0; same && i < mine.destinationCount; ++i)
      same = theirs.destinations[i].bytes == mine.destinations[i].bytes;
    if (!same)
      return disagreement(Status::error(
          std::string("the ranks disagree on a collective: this rank (") +
          std::to_string(me) + ") is in " + kindName(mine.kind) + " of " +
          std::to_string(mine.bytes) + " bytes of " + dtypeName(dtype) +
          ", rank " + std::to_string(r) + " in " + kindName(theirs.kind) +
          " of " + std::to_string(theirs.bytes) + " bytes of " +
          dtypeName(static_cast<DType>(theirs.dtype)) +
          " (do the ranks run one artifact with the same options?)"));
    if (r == me)
      operands[r] = static_cast<uint8_t *>(const_cast<void *>(operand));
    else if (bytes > 0) {
      void *peer = nullptr;
      // A rank that abandoned the collective may already have freed its
      // operand: say that rather than the mapping's failure.
      if (Status s = mapShared(theirs.operand, peer); !s)
        return abandon(
            failed(r)
                ? peerFailed(r, what)
                : Status::error(std::string(what) + ": cannot read rank " +
                                std::to_string(r) + "'s memory: " + s.message));
      operands[r] = static_cast<uint8_t *>(peer);
    }
  }
  return Status::success();
}

Status SharedMemoryGroup::disagreement(Status s) {
  // Every rank sees a disagreement (each compares its announcement with
  // all), so every rank waits here: none moves on to its next collective,
  // overwriting its announcement, while another still reads it (which
  // could match that one's and run a collective alone).
  signalAndWait(kReduced, "a collective the ranks disagree on",
                /*checkFailures=*/false);
  return s;
}

Status SharedMemoryGroup::mapDestinations(const char *what) {
  const uint32_t count = control->announced.destinationCount;
  peerDestinations.assign(ranks, std::vector<uint8_t *>(count, nullptr));
  for (int r = 0; r < ranks; ++r)
    for (uint32_t i = 0; i < count && r != me; ++i) { // (not this rank's)
      const SharedLocation &where = controls[r]->announced.destinations[i];
      if (where.bytes == 0)
        continue;
      void *mapped = nullptr;
      if (Status s = mapShared(where, mapped); !s)
        return abandon(
            failed(r)
                ? peerFailed(r, what)
                : Status::error(std::string(what) + ": cannot write rank " +
                                std::to_string(r) + "'s memory: " + s.message));
      peerDestinations[r][i] = static_cast<uint8_t *>(mapped);
    }
  return Status::success();
}

Status SharedMemoryGroup::allReduceSum(void *data, int64_t count, DType dtype) {
  ++sequence;
  const size_t size = dtypeSize(dtype);
  const uint64_t bytes = static_cast<uint64_t>(count) * size;
  if (Status s = meet(Kind::AllReduce, dtype, 1, data, bytes, nullptr, 0,
                      "all_reduce");
      !s)
    return s;
  // Rank r sums slice r (whole cache lines) and writes it into every
  // rank's operand (`data`, or its staging copy), so one more meeting ends
  // the collective: after it no rank touches another's memory.
  const int64_t per = ((count + ranks - 1) / ranks + 15) & ~int64_t(15);
  const int64_t begin = std::min<int64_t>(count, me * per);
  const int64_t end = std::min<int64_t>(count, (me + 1) * per);
  uint8_t *work = operands[me];
  if (end > begin) {
    if (Status s = sumInto(dtype, work + begin * size, operands, begin * size,
                           end - begin, "all_reduce");
        !s)
      return abandon(s);
    for (int r = 0; r < ranks; ++r)
      if (r != me)
        std::memcpy(operands[r] + begin * size, work + begin * size,
                    (end - begin) * size);
  }
  if (Status s = signalAndWait(kReduced, "all_reduce"); !s)
    return s;
  if (bytes > 0 && work != data)
    std::memcpy(data, work, bytes);
  return Status::success();
}

Status SharedMemoryGroup::allGather(const void *in, void *out, int64_t outer,
                                    size_t block) {
  ++sequence;
  const uint64_t bytes = static_cast<uint64_t>(outer) * block;
  if (Status s = meet(Kind::AllGather, DType::I8, outer, in, bytes, out,
                      bytes * ranks, "all_gather");
      !s)
    return s;
  auto *dst = static_cast<uint8_t *>(out);
  for (int r = 0; r < ranks && bytes > 0; ++r) {
    if (outer == 1) {
      std::memcpy(dst + r * block, operands[r], block);
      continue;
    }
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * ranks + r) * block, operands[r] + o * block,
                  block);
  }
  return signalAndWait(kDone, "all_gather");
}

Status SharedMemoryGroup::reduceScatterSum(const void *in, void *out,
                                           int64_t outer, int64_t count,
                                           DType dtype) {
  ++sequence;
  const uint64_t block = static_cast<uint64_t>(count) * dtypeSize(dtype);
  const uint64_t bytes = static_cast<uint64_t>(outer) * block * ranks;
  if (Status s = meet(Kind::ReduceScatter, dtype, outer, in, bytes, out,
                      outer * block, "reduce_scatter");
      !s)
    return s;
  for (int64_t o = 0; o < outer && bytes > 0; ++o)
    if (Status s =
            sumInto(dtype, static_cast<uint8_t *>(out) + o * block, operands,
                    (o * ranks + me) * block, count, "reduce_scatter");
        !s)
      return abandon(s);
  return signalAndWait(kDone, "reduce_scatter");
}

Status SharedMemoryGroup::allReduceRows(const Tensor &partial, Tensor &reduced,
                                        int64_t rows,
                                        const Communicator::RowsFinish &finish,
                                        const std::vector<Tensor> &results) {
  // This rank's rows: the r-th 1/n.
  const int64_t per = rows > 0 ? (rows + ranks - 1) / ranks : 0;
  const int64_t begin = std::min<int64_t>(rows, me * per);
  const int64_t end = std::min<int64_t>(rows, (me + 1) * per);
  return rowsCollective(Kind::AllReduceRows, partial, reduced, rows,
                        {{begin, end}}, finish, results);
}

Status
SharedMemoryGroup::reduceScatterRows(const Tensor &partial, Tensor &reduced,
                                     int64_t rows, int64_t outer,
                                     const Communicator::RowsFinish &finish,
                                     const std::vector<Tensor> &results) {
  // This rank's rows: its slice of every block (the caller checked that
  // they divide).
  const int64_t sliceRows = rows / outer / ranks;
  std::vector<RowRange> own;
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t begin = (o * ranks + me) * sliceRows;
    own.emplace_back(begin, begin + sliceRows);
  }
  return rowsCollective(Kind::ReduceScatterRows, partial, reduced, rows, own,
                        finish, results);
}

Status SharedMemoryGroup::rowsCollective(Kind kind, const Tensor &partial,
                                         Tensor &reduced, int64_t rows,
                                         const std::vector<RowRange> &own,
                                         const Communicator::RowsFinish &finish,
                                         const std::vector<Tensor> &results) {
  const char *what =
      kind == Kind::AllReduceRows ? "all_reduce" : "reduce_scatter";
  if (results.size() > static_cast<size_t>(kMaxRowResults))
    return Status::error(std::string(what) + ": more than " +
                         std::to_string(kMaxRowResults) +
                         " results of the row-wise op");
  const uint64_t bytes = partial.bytes();
  // Each rank writes only its rows of `reduced`, and reads the others'
  // `partial` only at its rows: the two may share bytes row for row (the
  // memory plan's in-place sum), not at a shift.
  auto sameOrApart = [](const Tensor &a, const Tensor &b) {
    return a.data == b.data ? a.bytes() == b.bytes()
                            : !overlaps(a.data, a.bytes(), b.data, b.bytes());
  };
  const Tensor *stageIfOverlapping = nullptr;
  if (!sameOrApart(partial, reduced))
    stageIfOverlapping = &reduced;
  std::vector<Destination> destinations;
  bool overlapping = false;
  for (size_t i = 0; i < results.size(); ++i) {
    const Tensor &result = results[i];
    overlapping = overlapping || !sameOrApart(result, reduced);
    for (size_t j = 0; j < i; ++j)
      overlapping =
          overlapping || overlaps(result.data, result.bytes(), results[j].data,
                                  results[j].bytes());
    if (!sameOrApart(partial, result))
      stageIfOverlapping = &result;
    destinations.push_back(Destination{result.data, result.bytes()});
  }
  ++sequence;
  // A rank that fails here still waits until the others are done writing
  // its results (they see its failure at their last meeting, or at the
  // first), so its memory can be reused once it returns.
  auto fail = [&](Status s) {
    abandon(s);
    signalAndWait(kReduced, what, /*checkFailures=*/false);
    return s;
  };
  if (overlapping)
    return fail(Status::error(std::string(what) +
                              ": its results overlap each other or the sums"));
  if (Status s =
          meet(kind, partial.dtype, static_cast<uint64_t>(rows), partial.data,
               bytes, stageIfOverlapping ? stageIfOverlapping->data : nullptr,
               stageIfOverlapping ? stageIfOverlapping->bytes() : 0, what,
               destinations, own.size()); // (a range per block)
      !s) // (ranks that disagree on the collective write nothing)
    return failed(me) ? fail(s) : s;
  if (Status s = mapDestinations(what); !s)
    return fail(s);
  // This rank's rows: summed, finished, then written into every rank's
  // results; one more meeting and every rank has all of them.
  const uint64_t rowBytes = rows > 0 ? bytes / rows : 0;
  for (const auto &[begin, end] : own) {
    if (end <= begin)
      continue;
    if (Status s = sumInto(
            partial.dtype,
            static_cast<uint8_t *>(reduced.data) + begin * rowBytes, operands,
            begin * rowBytes, (end - begin) * (partial.numel() / rows), what);
        !s)
      return fail(s);
    if (Status s = finish(begin, end); !s)
      return fail(s);
    for (size_t i = 0; i < results.size(); ++i) {
      const uint64_t resultRow = results[i].bytes() / rows;
      const uint8_t *mine =
          static_cast<const uint8_t *>(results[i].data) + begin * resultRow;
      for (int r = 0; r < ranks; ++r)
        if (r != me && peerDestinations[r][i])
          std::memcpy(peerDestinations[r][i] + begin * resultRow, mine,
                      (end - begin) * resultRow);
    }
  }
  if (Status s = signalAndWait(kReduced, what); !s)
    return s;
  // The others' rows of a result that could not be shared came to staging:
  // every row but this rank's (`own` is in order).
  for (size_t i = 0; i < results.size(); ++i) {
    if (!destinationStaged[i])
      continue;
    const uint64_t resultRow = rows > 0 ? results[i].bytes() / rows : 0;
    auto *dst = static_cast<uint8_t *>(results[i].data);
    auto *src = static_cast<const uint8_t *>(receiving[i].data);
    int64_t next = 0;
    for (const auto &[begin, end] : own) {
      std::memcpy(dst + next * resultRow, src + next * resultRow,
                  (begin - next) * resultRow);
      next = std::max(next, end);
    }
    std::memcpy(dst + next * resultRow, src + next * resultRow,
                (rows - next) * resultRow);
  }
  return Status::success();
}

} // namespace mp::rt::mpi
