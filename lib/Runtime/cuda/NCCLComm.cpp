//===- NCCLComm.cpp - collectives over NCCL on device memory --------------===//
//
// Same layout rules as the host communicator (chunks along any axis); the
// rank-major packing happens on the device with 2-D copies. Collectives and
// copies run on the communication stream, ordered with the compute stream's
// kernels by events (cuda/Streams.h): each waits for the kernels queued
// before it, and the kernels queued after it wait for it.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/CudaKernels.h"

#include "Placement.h"
#include "Streams.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace mp::rt {

namespace {

Status ncclStatus(ncclResult_t r, const char *what) {
  if (r == ncclSuccess)
    return Status::success();
  return Status::error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

using cuda::cudaStatus;

/// Runs `enqueue` (work on the communication stream) between the compute
/// stream's earlier and later work.
template <typename Enqueue> Status onCommStream(Enqueue enqueue) {
  if (Status s = cuda::commWaitsForCompute(); !s)
    return s;
  cuda::collectivesQueued();
  if (Status s = enqueue(cuda::commStream()); !s)
    return s;
  return cuda::computeWaitsForComm();
}

/// The live communicators, which a timed-out wait aborts
/// (cuda::abortCollectives); an aborted one is not destroyed again.
struct LiveComms {
  std::mutex mutex;
  std::vector<std::pair<ncclComm_t, bool *>> comms; // comm, its aborted flag
};
LiveComms &liveComms() {
  static LiveComms live;
  return live;
}

bool ncclType(DType t, ncclDataType_t &out) {
  switch (t) {
  case DType::F32: out = ncclFloat32; return true;
  case DType::F64: out = ncclFloat64; return true;
  case DType::F16: out = ncclFloat16; return true;
  case DType::BF16: out = ncclBfloat16; return true;
  case DType::I64: out = ncclInt64; return true;
  case DType::I32: out = ncclInt32; return true;
  case DType::I8:
  case DType::Bool: out = ncclInt8; return true;
  }
  return false;
}

class NCCLCommunicator : public Communicator {
public:
  NCCLCommunicator(ncclComm_t comm, int rank, int size)
      : comm(comm), rankId(rank), ranks(size) {
    LiveComms &live = liveComms();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.comms.push_back({comm, &aborted});
  }
  ~NCCLCommunicator() override {
    {
      LiveComms &live = liveComms();
      std::lock_guard<std::mutex> lock(live.mutex);
      live.comms.erase(
          std::remove_if(live.comms.begin(), live.comms.end(),
                         [&](const auto &c) { return c.first == comm; }),
          live.comms.end());
    }
    if (!aborted)
      ncclCommDestroy(comm);
  }
  int rank() const override { return rankId; }
  int size() const override { return ranks; }
  const char *backend() const override { return "NCCL"; }
  bool deviceMemory() const override { return true; }

  Status send(const Tensor &t, int peer) override {
    return onCommStream([&](cudaStream_t stream) {
      return ncclStatus(
          ncclSend(t.data, t.bytes(), ncclInt8, peer, comm, stream),
          "ncclSend");
    });
  }
  Status recv(Tensor &t, int peer) override {
    return onCommStream([&](cudaStream_t stream) {
      return ncclStatus(
          ncclRecv(t.data, t.bytes(), ncclInt8, peer, comm, stream),
          "ncclRecv");
    });
  }

  Status split(const std::vector<int64_t> &gridShape, int64_t axis,
               std::unique_ptr<Communicator> &out) override {
    std::vector<int64_t> coords = gridCoordinates(gridShape, rankId);
    int64_t color = gridColor(gridShape, rankId, axis);
    ncclComm_t sub;
    if (Status s = ncclStatus(ncclCommSplit(comm, static_cast<int>(color),
                                            static_cast<int>(coords[axis]),
                                            &sub, nullptr),
                              "ncclCommSplit");
        !s)
      return s;
    int subRank = 0, subSize = 1;
    ncclCommUserRank(sub, &subRank);
    ncclCommCount(sub, &subSize);
    out = std::make_unique<NCCLCommunicator>(sub, subRank, subSize);
    return Status::success();
  }

protected:
  Status allReduceRaw(void *data, int64_t count, DType dtype) override {
    ncclDataType_t type;
    if (!ncclType(dtype, type))
      return Status::error("all_reduce: unsupported element type");
    return onCommStream([&](cudaStream_t stream) {
      return ncclStatus(
          ncclAllReduce(data, data, count, type, ncclSum, comm, stream),
          "ncclAllReduce");
    });
  }
  Status allGatherRaw(const void *in, void *out, size_t bytes) override {
    return onCommStream([&](cudaStream_t stream) {
      return ncclStatus(ncclAllGather(in, out, bytes, ncclInt8, comm, stream),
                        "ncclAllGather");
    });
  }
  Status reduceScatterRaw(const void *in, void *out, int64_t count,
                          DType dtype) override {
    ncclDataType_t type;
    if (!ncclType(dtype, type))
      return Status::error("reduce_scatter: unsupported element type");
    return onCommStream([&](cudaStream_t stream) {
      return ncclStatus(
          ncclReduceScatter(in, out, count, type, ncclSum, comm, stream),
          "ncclReduceScatter");
    });
  }
  /// One contiguous copy when the rows are back to back, a 2-D copy when
  /// the pitches fit cudaMemcpy2D (below 2 GiB), else a copy per row.
  Status copy2D(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                size_t width, size_t height) override {
    constexpr size_t kMaxPitch = (size_t(1) << 31) - 1;
    return onCommStream([&](cudaStream_t stream) {
      auto *d = static_cast<uint8_t *>(dst);
      const auto *s = static_cast<const uint8_t *>(src);
      if (height == 1 || (dstPitch == width && srcPitch == width))
        return cudaStatus(cudaMemcpyAsync(d, s, width * height,
                                          cudaMemcpyDeviceToDevice, stream),
                          "device copy");
      if (dstPitch <= kMaxPitch && srcPitch <= kMaxPitch)
        return cudaStatus(cudaMemcpy2DAsync(d, dstPitch, s, srcPitch, width,
                                            height, cudaMemcpyDeviceToDevice,
                                            stream),
                          "device copy");
      for (size_t r = 0; r < height; ++r)
        if (Status st = cudaStatus(
                cudaMemcpyAsync(d + r * dstPitch, s + r * srcPitch, width,
                                cudaMemcpyDeviceToDevice, stream),
                "device copy");
            !st)
          return st;
      return Status::success();
    });
  }
  Status ownScratch(size_t bytes, void *&ptr) override {
    if (Status s = deviceScratch.reserve(bytes); !s)
      return s;
    ptr = deviceScratch.get();
    return Status::success();
  }

private:
  ncclComm_t comm;
  bool aborted = false;
  int rankId, ranks;
  cuda::DeviceScratch deviceScratch{"NCCL scratch"};
};

/// Every rank's `bytes`-byte record (`mine`, zero-padded), in rank order.
Status exchange(Communicator &host, std::vector<uint8_t> mine, size_t bytes,
                std::vector<uint8_t> &all) {
  mine.resize(bytes, 0);
  all.assign(bytes * host.size(), 0);
  Tensor in{mine.data(), DType::I8, {static_cast<int64_t>(bytes)}};
  Tensor out{
      all.data(), DType::I8, {static_cast<int64_t>(bytes) * host.size()}};
  return host.allGather(in, out, 0);
}

std::string hostName() {
  char name[cuda::kHostBytes + 1] = {};
  gethostname(name, cuda::kHostBytes);
  return name;
}

/// This rank's GPU: its index among its host's ranks, modulo the GPUs it
/// sees (one each when the launcher gives every rank its own).
Status pickGpu(const cuda::LocalRank &local, int &devices, std::string &uuid) {
  if (Status s = cudaStatus(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
      !s)
    return s;
  if (devices == 0)
    return Status::error("no GPU is visible");
  const int device = local.index % devices;
  if (Status s = cudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s)
    return s;
  cudaDeviceProp prop;
  if (Status s = cudaStatus(cudaGetDeviceProperties(&prop, device),
                            "cudaGetDeviceProperties");
      !s)
    return s;
  uuid.assign(prop.uuid.bytes, sizeof(prop.uuid.bytes));
  return Status::success();
}

} // namespace

Status cuda::collectivesFailed() {
  LiveComms &live = liveComms();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const auto &[comm, aborted] : live.comms) {
    ncclResult_t state = ncclSuccess;
    if (!*aborted && ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
        state != ncclSuccess && state != ncclInProgress)
      return ncclStatus(state, "an NCCL collective");
  }
  return Status::success();
}

void cuda::abortCollectives() {
  LiveComms &live = liveComms();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (const auto &[comm, aborted] : live.comms)
    if (!*aborted) {
      ncclCommAbort(comm);
      *aborted = true;
    }
}

Status cuda::makeNcclCommunicator(Communicator &host,
                                  std::unique_ptr<Communicator> &out) {
  static_assert(sizeof(ncclUniqueId) == cuda::kNcclIdBytes);
  // Every rank takes part in both exchanges whatever happens to it, so all
  // reach the same verdict (Placement.h) and none waits for one that quit
  // before NCCL starts. (A rank that fails inside ncclCommInitRank or
  // ncclCommSplit can still leave the others waiting in NCCL.)
  const std::string me = hostName();
  std::vector<uint8_t> names;
  if (Status s =
          exchange(host, {me.begin(), me.end()}, cuda::kHostBytes, names);
      !s)
    return s;
  std::vector<std::string> hosts;
  for (int r = 0; r < host.size(); ++r) {
    const char *name =
        reinterpret_cast<const char *>(&names[r * cuda::kHostBytes]);
    hosts.emplace_back(name, strnlen(name, cuda::kHostBytes));
  }
  cuda::RankPlacement mine;
  mine.host = me;
  int devices = 0;
  Status picked =
      pickGpu(cuda::localRankOf(hosts, host.rank()), devices, mine.gpu);
  mine.visibleGpus = devices;
  if (!picked)
    mine.problem = picked.message;
  else if (host.rank() == 0) {
    ncclUniqueId id;
    if (Status s = ncclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s)
      mine.problem = s.message;
    else
      mine.ncclId.assign(reinterpret_cast<const char *>(&id), sizeof(id));
  }
  std::vector<uint8_t> records;
  if (Status s = exchange(host, cuda::encodePlacement(mine),
                          cuda::kPlacementBytes, records);
      !s)
    return s;
  std::vector<cuda::RankPlacement> ranks;
  for (int r = 0; r < host.size(); ++r)
    ranks.push_back(cuda::decodePlacement(&records[r * cuda::kPlacementBytes]));
  if (Status s = cuda::checkPlacement(ranks); !s)
    return s;
  ncclUniqueId id;
  std::memcpy(&id, ranks[0].ncclId.data(), sizeof(id));
  ncclComm_t comm;
  if (Status s =
          ncclStatus(ncclCommInitRank(&comm, host.size(), id, host.rank()),
                     "ncclCommInitRank");
      !s)
    return s;
  out = std::make_unique<NCCLCommunicator>(comm, host.rank(), host.size());
  return Status::success();
}

} // namespace mp::rt
