//===- MPIComm.cpp - collectives over MPI ---------------------------------===//
#include "mp/Runtime/Comm.h"

#include "../SharedMemory.h"
#include "SharedMemoryGroup.h"
#include "Waiting.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <thread>

namespace mp::rt {

namespace {
/// MPI counts are ints: a collective over more elements than this runs in
/// pieces of at most this many.
int64_t messageLimit = std::numeric_limits<int>::max();
} // namespace

void setMPIMessageLimit(int64_t elements) {
  messageLimit =
      std::clamp<int64_t>(elements, 1, std::numeric_limits<int>::max());
}

namespace mpi {

Status check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return Status::success();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::error(std::string(what) +
                       " failed: " + std::string(text, len));
}

/// The tag of roll-call messages: a rank whose collective timed out sends
/// one to every rank; ranks that are waiting too answer, so the silent ones
/// are those that never arrived.
constexpr int kRollCallTag = 0x5eed;

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void answerRollCalls() {
  static std::vector<bool> answered;
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  answered.resize(world, false);
  for (;;) {
    int pending = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, MPI_COMM_WORLD, &pending, &status);
    if (!pending)
      return;
    char token;
    MPI_Recv(&token, 1, MPI_BYTE, status.MPI_SOURCE, kRollCallTag,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!answered[status.MPI_SOURCE]) {
      answered[status.MPI_SOURCE] = true;
      MPI_Request request;
      MPI_Isend(&token, 1, MPI_BYTE, status.MPI_SOURCE, kRollCallTag,
                MPI_COMM_WORLD, &request);
      MPI_Request_free(&request);
    }
  }
}

/// Calls every other rank and lists those that do not answer within a few
/// seconds (a rank stopped, dead or cut off never answers).
static std::string silentRanks() {
  int me = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  static char token = 1;
  for (int r = 0; r < world; ++r)
    if (r != me) {
      MPI_Request request;
      MPI_Isend(&token, 1, MPI_BYTE, r, kRollCallTag, MPI_COMM_WORLD, &request);
      MPI_Request_free(&request);
    }
  std::vector<bool> heard(world, false);
  heard[me] = true;
  Clock::time_point start = Clock::now();
  while (secondsSince(start) < 3.0 &&
         std::count(heard.begin(), heard.end(), false) > 0) {
    int pending = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kRollCallTag, MPI_COMM_WORLD, &pending, &status);
    if (!pending) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    char reply;
    MPI_Recv(&reply, 1, MPI_BYTE, status.MPI_SOURCE, kRollCallTag,
             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    heard[status.MPI_SOURCE] = true;
  }
  std::string silent;
  int count = 0;
  for (int r = 0; r < world; ++r)
    if (!heard[r]) {
      silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      ++count;
    }
  if (count == 0)
    return "every rank answered, so they wait in different collectives (do "
           "they run the same artifact and options?)";
  return (count == 1 ? "rank " : "ranks ") + silent +
         (count == 1 ? " never arrived" : " never arrived") +
         " (stopped, dead or unreachable)";
}

Status timedOut(const char *what) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", collectiveTimeout());
  return Status::error(std::string(what) + " did not complete within " +
                       seconds + " s (--collective-timeout): " + silentRanks());
}

Status waitFor(MPI_Request &request, const char *what, MPI_Status *status) {
  const double timeout = collectiveTimeout();
  Clock::time_point start = Clock::now();
  for (uint64_t spins = 0;; ++spins) {
    int done = 0;
    if (Status s = check(MPI_Test(&request, &done, status), what); !s)
      return s;
    if (done)
      return Status::success();
    if (spins % 4096 != 4095)
      continue;
    answerRollCalls();
    if (timeout > 0 && secondsSince(start) > timeout)
      return timedOut(what);
  }
}

} // namespace mpi

using namespace mpi;

namespace {

MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  case DType::I8:
  case DType::Bool: return MPI_INT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

/// Completes a non-blocking MPI call: `rc` is what `call` returned when
/// it posted `request`, then the wait as waitFor's.
Status complete(int rc, const char *call, MPI_Request &request,
                const char *what) {
  if (Status s = check(rc, call); !s)
    return s;
  return waitFor(request, what);
}

/// A collective on which a job-wide decision rests: a rank that never
/// arrives stops every rank, saying why, from here.
void waitOrStop(MPI_Request &request, const char *what) {
  if (Status s = waitFor(request, what); !s) {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    std::fprintf(stderr, "mp-run: error (rank %d): %s\n", me,
                 s.message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);
  }
}

class MPICommunicator : public Communicator {
public:
  /// The communicator of `comm` (freed with it when `owned`), its ranks'
  /// shared-memory collectives connected: every rank of `comm` calls this
  /// together.
  static Status create(MPI_Comm comm, bool owned,
                       std::unique_ptr<Communicator> &out) {
    std::unique_ptr<MPICommunicator> made(new MPICommunicator(comm, owned));
    if (Status s = SharedMemoryGroup::connect(comm, made->shared); !s)
      return s;
    out = std::move(made);
    return Status::success();
  }
  ~MPICommunicator() override {
    if (owned)
      MPI_Comm_free(&comm);
  }
  int rank() const override { return rankId; }
  int size() const override { return ranks; }
  const char *backend() const override { return "MPI"; }
  std::string describe() const override {
    return shared ? "MPI, shared memory" : "MPI";
  }

  Status send(const Tensor &t, int peer) override {
    if (Status s = fitsOneMessage(t); !s)
      return s;
    MPI_Request request;
    return complete(MPI_Isend(t.data, static_cast<int>(t.bytes()), MPI_BYTE,
                              peer, /*tag=*/0, comm, &request),
                    "MPI_Isend", request, "send");
  }
  Status recv(Tensor &t, int peer) override {
    if (Status s = fitsOneMessage(t); !s)
      return s;
    MPI_Request request;
    MPI_Status status;
    if (Status s = check(MPI_Irecv(t.data, static_cast<int>(t.bytes()),
                                   MPI_BYTE, peer, /*tag=*/0, comm, &request),
                         "MPI_Irecv");
        !s)
      return s;
    if (Status s = waitFor(request, "recv", &status); !s)
      return s;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (static_cast<size_t>(count) != t.bytes())
      return Status::error("rank " + std::to_string(peer) + " sent " +
                           std::to_string(count) + " bytes where " +
                           std::to_string(t.bytes()) +
                           " were expected (do the ranks run one artifact?)");
    return Status::success();
  }
  Status postSend(const Tensor &t, int peer) override {
    if (Status s = fitsOneMessage(t); !s)
      return s;
    MPI_Request request;
    if (Status s = check(MPI_Isend(t.data, static_cast<int>(t.bytes()),
                                   MPI_BYTE, peer, /*tag=*/0, comm, &request),
                         "MPI_Isend");
        !s)
      return s;
    posted.push_back(request);
    return Status::success();
  }
  Status completedSends(int64_t &count) override {
    while (!posted.empty()) {
      int done = 0;
      if (Status s = check(MPI_Test(&posted.front(), &done, MPI_STATUS_IGNORE),
                           "MPI_Test");
          !s)
        return s;
      if (!done)
        break;
      posted.pop_front();
      ++sendsCompleted;
    }
    count = sendsCompleted;
    return Status::success();
  }
  Status waitSends() override {
    Status result = Status::success();
    for (MPI_Request &request : posted)
      if (Status s = waitFor(request, "send"); !s && result)
        result = s;
    sendsCompleted += static_cast<int64_t>(posted.size());
    posted.clear();
    return result;
  }
  Status splitByColor(int color, int key,
                      std::unique_ptr<Communicator> &out) override {
    MPI_Comm sub = MPI_COMM_NULL;
    if (Status s = check(
            MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &sub),
            "MPI_Comm_split");
        !s)
      return s;
    if (sub == MPI_COMM_NULL) {
      out = nullptr;
      return Status::success();
    }
    return create(sub, /*owned=*/true, out);
  }
  Status split(const std::vector<int64_t> &gridShape, int64_t axis,
               std::unique_ptr<Communicator> &out) override {
    int64_t total = 1;
    for (int64_t d : gridShape)
      total *= d;
    if (total != ranks || axis < 0 ||
        axis >= static_cast<int64_t>(gridShape.size()))
      return Status::error("cannot split " + std::to_string(ranks) +
                           " ranks along axis " + std::to_string(axis) +
                           " of a grid of " + std::to_string(total));
    std::vector<int64_t> coords = gridCoordinates(gridShape, rankId);
    int64_t color = gridColor(gridShape, rankId, axis);
    MPI_Comm sub;
    if (Status s = check(MPI_Comm_split(comm, static_cast<int>(color),
                                        static_cast<int>(coords[axis]), &sub),
                         "MPI_Comm_split");
        !s)
      return s;
    return create(sub, /*owned=*/true, out);
  }
  bool packsBlocks() const override { return !shared; }

protected:
  Status allReduceRaw(void *data, int64_t count, DType dtype) override {
    if (mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string("all_reduce of ") + dtypeName(dtype) +
                           " is not supported");
    if (shared)
      return shared->allReduceSum(data, count, dtype);
    auto *bytes = static_cast<char *>(data);
    const size_t size = dtypeSize(dtype);
    for (int64_t offset = 0; offset < count; offset += messageLimit) {
      MPI_Request request;
      int piece =
          static_cast<int>(std::min<int64_t>(messageLimit, count - offset));
      if (Status s = complete(
              MPI_Iallreduce(MPI_IN_PLACE, bytes + offset * size, piece,
                             mpiType(dtype), MPI_SUM, comm, &request),
              "MPI_Iallreduce", request, "all_reduce");
          !s)
        return s;
    }
    return Status::success();
  }
  Status allReduceRowsRaw(const Tensor &partial, Tensor &reduced, int64_t rows,
                          const RowsFinish &finish,
                          const std::vector<Tensor> &results) override {
    if (shared && mpiType(partial.dtype) != MPI_DATATYPE_NULL)
      return shared->allReduceRows(partial, reduced, rows, finish, results);
    return Communicator::allReduceRowsRaw(partial, reduced, rows, finish,
                                          results);
  }
  Status reduceScatterRowsRaw(const Tensor &partial, Tensor &reduced,
                              int64_t rows, int64_t outer,
                              const RowsFinish &finish,
                              const std::vector<Tensor> &results) override {
    if (shared && mpiType(partial.dtype) != MPI_DATATYPE_NULL)
      return shared->reduceScatterRows(partial, reduced, rows, outer, finish,
                                       results);
    return Communicator::reduceScatterRowsRaw(partial, reduced, rows, outer,
                                              finish, results);
  }
  Status allGatherRaw(const void *in, void *out, size_t bytes) override {
    if (bytes <= static_cast<size_t>(messageLimit)) {
      MPI_Request request;
      return complete(MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, out,
                                     static_cast<int>(bytes), MPI_BYTE, comm,
                                     &request),
                      "MPI_Iallgather", request, "all_gather");
    }
    // In pieces: piece k of every rank's block lands `bytes` apart, which a
    // receive type of one piece stretched to `bytes` describes.
    for (size_t offset = 0; offset < bytes; offset += messageLimit) {
      int piece = static_cast<int>(
          std::min<size_t>(static_cast<size_t>(messageLimit), bytes - offset));
      MPI_Datatype contiguous, spaced;
      MPI_Type_contiguous(piece, MPI_BYTE, &contiguous);
      MPI_Type_create_resized(contiguous, 0, static_cast<MPI_Aint>(bytes),
                              &spaced);
      MPI_Type_commit(&spaced);
      MPI_Request request;
      Status s =
          complete(MPI_Iallgather(static_cast<const char *>(in) + offset, piece,
                                  MPI_BYTE, static_cast<char *>(out) + offset,
                                  1, spaced, comm, &request),
                   "MPI_Iallgather", request, "all_gather");
      MPI_Type_free(&spaced);
      MPI_Type_free(&contiguous);
      if (!s)
        return s;
    }
    return Status::success();
  }
  Status allGatherBlocks(const void *in, void *out, int64_t outer,
                         size_t block) override {
    if (shared)
      return shared->allGather(in, out, outer, block);
    return Communicator::allGatherBlocks(in, out, outer, block);
  }
  Status reduceScatterBlocks(const void *in, void *out, int64_t outer,
                             size_t block, DType dtype) override {
    if (mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string("reduce_scatter of ") +
                           dtypeName(dtype) + " is not supported");
    if (shared)
      return shared->reduceScatterSum(
          in, out, outer, static_cast<int64_t>(block / dtypeSize(dtype)),
          dtype);
    return Communicator::reduceScatterBlocks(in, out, outer, block, dtype);
  }
  Status reduceScatterRaw(const void *in, void *out, int64_t count,
                          DType dtype) override {
    if (mpiType(dtype) == MPI_DATATYPE_NULL)
      return Status::error(std::string("reduce_scatter of ") +
                           dtypeName(dtype) + " is not supported");
    if (count <= messageLimit) {
      MPI_Request request;
      return complete(
          MPI_Ireduce_scatter_block(in, out, static_cast<int>(count),
                                    mpiType(dtype), MPI_SUM, comm, &request),
          "MPI_Ireduce_scatter_block", request, "reduce_scatter");
    }
    // In pieces: a reduction to each rank of a piece of its block (MPI's
    // predefined sums take no strided types).
    const size_t size = dtypeSize(dtype);
    for (int64_t offset = 0; offset < count; offset += messageLimit) {
      int piece =
          static_cast<int>(std::min<int64_t>(messageLimit, count - offset));
      for (int root = 0; root < ranks; ++root) {
        const char *from = static_cast<const char *>(in) +
                           (static_cast<size_t>(root) * count + offset) * size;
        MPI_Request request;
        if (Status s = complete(
                MPI_Ireduce(
                    from,
                    root == rankId ? static_cast<char *>(out) + offset * size
                                   : nullptr,
                    piece, mpiType(dtype), MPI_SUM, root, comm, &request),
                "MPI_Ireduce", request, "reduce_scatter");
            !s)
          return s;
      }
    }
    return Status::success();
  }

private:
  MPICommunicator(MPI_Comm comm, bool owned) : comm(comm), owned(owned) {
    MPI_Comm_rank(comm, &rankId);
    MPI_Comm_size(comm, &ranks);
  }
  /// Point-to-point messages carry an int count of bytes.
  static Status fitsOneMessage(const Tensor &t) {
    if (t.bytes() <= static_cast<size_t>(std::numeric_limits<int>::max()))
      return Status::success();
    return Status::error("a point-to-point transfer of " +
                         std::to_string(t.bytes()) +
                         " bytes: more than one MPI message carries (2 GiB); "
                         "use more micro-batches or tensor parallelism");
  }
  MPI_Comm comm;
  std::deque<MPI_Request> posted; // postSend's, oldest first
  int64_t sendsCompleted = 0;
  bool owned = false;
  int rankId = 0, ranks = 1;
  /// The ranks' shared-memory collectives; null where they cannot share
  /// memory.
  std::unique_ptr<SharedMemoryGroup> shared;
};

bool started = false;

/// Launched by mpirun (Open MPI, MPICH/PMI or Slurm)?
bool underLauncher() {
  for (const char *var :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"})
    if (std::getenv(var))
      return true;
  return false;
}

} // namespace

bool haveMPI() { return true; }

Status initCommunication(int *argc, char ***argv,
                         std::unique_ptr<Communicator> &out) {
  if (!underLauncher()) {
    out = makeSingleProcessCommunicator();
    return Status::success();
  }
  if (Status s = check(MPI_Init(argc, argv), "MPI_Init"); !s)
    return s;
  started = true;
  // Buffers allocated from now on can be read by the ranks of this host.
  MPI_Comm host;
  int onHost = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &host) == MPI_SUCCESS) {
    MPI_Comm_size(host, &onHost);
    MPI_Comm_free(&host);
  }
  setRanksOnThisHost(onHost);
  shareHostAllocations(onHost > 1 && sharedMemoryWanted());
  return MPICommunicator::create(MPI_COMM_WORLD, /*owned=*/false, out);
}

void finalizeCommunication() {
  if (started)
    MPI_Finalize();
  started = false;
}

void abortCommunication(int code) {
  if (started)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

bool anyRankFailed(Communicator &comm, bool failed) {
  if (!started || comm.size() == 1)
    return failed;
  int local = failed ? 1 : 0, any = 0;
  MPI_Request request;
  MPI_Iallreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &request);
  waitOrStop(request, "the agreement on errors");
  return any != 0;
}

std::vector<std::string> allGatherStrings(Communicator &comm,
                                          const std::string &local) {
  if (!started || comm.size() == 1)
    return {local};
  constexpr size_t kRecord = 4096;
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<char> mine(kRecord, '\0'), all(kRecord * world, '\0');
  std::memcpy(mine.data(), local.data(), std::min(local.size(), kRecord - 1));
  MPI_Request request;
  MPI_Iallgather(mine.data(), kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR,
                 MPI_COMM_WORLD, &request);
  waitOrStop(request, "the exchange of rank states");
  std::vector<std::string> strings;
  for (int r = 0; r < world; ++r)
    strings.emplace_back(all.data() + r * kRecord);
  return strings;
}

Status broadcastBytes(Communicator &comm, void *data, size_t bytes, int root) {
  if (!started || comm.size() == 1)
    return Status::success();
  auto *p = static_cast<char *>(data);
  const size_t chunk = static_cast<size_t>(messageLimit);
  for (size_t offset = 0; offset < bytes; offset += chunk) {
    MPI_Request request;
    int count = static_cast<int>(std::min(chunk, bytes - offset));
    if (Status s = complete(MPI_Ibcast(p + offset, count, MPI_BYTE, root,
                                       MPI_COMM_WORLD, &request),
                            "MPI_Ibcast", request, "broadcast");
        !s)
      return s;
  }
  return Status::success();
}

} // namespace mp::rt
