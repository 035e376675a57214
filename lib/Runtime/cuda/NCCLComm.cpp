//===- NCCLComm.cpp - collectives over NCCL on device memory --------------===//
//
// Same layout rules as the host communicator (chunks along any axis); the
// rank-major packing happens on the device with 2-D copies. Everything runs
// on the legacy default stream, so it is ordered with the kernels.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

namespace mp::rt {

namespace {

Status ncclStatus(ncclResult_t r, const char *what) {
  if (r == ncclSuccess)
    return Status::success();
  return Status::error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

Status cudaStatus(cudaError_t err, const char *what) {
  if (err == cudaSuccess)
    return Status::success();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(err));
}

bool ncclType(DType t, ncclDataType_t &out) {
  switch (t) {
  case DType::F32: out = ncclFloat32; return true;
  case DType::F64: out = ncclFloat64; return true;
  case DType::F16: out = ncclFloat16; return true;
  case DType::BF16: out = ncclBfloat16; return true;
  case DType::I64: out = ncclInt64; return true;
  case DType::I32: out = ncclInt32; return true;
  case DType::I8: case DType::Bool: out = ncclInt8; return true;
  }
  return false;
}

void around(const Tensor &t, int64_t axis, int64_t &outer, size_t &block) {
  outer = 1;
  int64_t inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= t.shape[d];
  for (size_t d = axis; d < t.shape.size(); ++d)
    inner *= t.shape[d];
  block = static_cast<size_t>(inner) * dtypeSize(t.dtype);
}

/// A scratch device buffer, grown on demand.
struct Scratch {
  void *data = nullptr;
  size_t size = 0;
  Status reserve(size_t bytes) {
    if (bytes <= size)
      return Status::success();
    cudaFree(data);
    size = bytes;
    return cudaStatus(cudaMalloc(&data, bytes), "cudaMalloc (NCCL scratch)");
  }
  ~Scratch() { cudaFree(data); }
};

class NCCLCommunicator : public Communicator {
public:
  NCCLCommunicator(ncclComm_t comm, int rank, int size)
      : comm(comm), rankId(rank), ranks(size) {}
  ~NCCLCommunicator() override { ncclCommDestroy(comm); }
  int rank() const override { return rankId; }
  int size() const override { return ranks; }
  const char *backend() const override { return "NCCL"; }
  bool deviceMemory() const override { return true; }

  Status allReduceSum(const Tensor &in, Tensor &out) override {
    ncclDataType_t type;
    if (!ncclType(in.dtype, type))
      return Status::error("all_reduce: unsupported element type");
    return ncclStatus(ncclAllReduce(in.data, out.data, in.numel(), type,
                                    ncclSum, comm, cudaStreamLegacy),
                      "ncclAllReduce");
  }

  Status allGather(const Tensor &in, Tensor &out, int64_t axis) override {
    int64_t outer;
    size_t block;
    around(in, axis, outer, block);
    if (outer == 1)
      return ncclStatus(ncclAllGather(in.data, out.data, in.bytes(), ncclInt8,
                                      comm, cudaStreamLegacy),
                        "ncclAllGather");
    if (Status s = scratch.reserve(out.bytes()); !s)
      return s;
    if (Status s = ncclStatus(ncclAllGather(in.data, scratch.data, in.bytes(),
                                            ncclInt8, comm, cudaStreamLegacy),
                              "ncclAllGather");
        !s)
      return s;
    // scratch[r][o] -> out[o][r]
    for (int r = 0; r < ranks; ++r)
      if (Status s = cudaStatus(
              cudaMemcpy2DAsync(static_cast<uint8_t *>(out.data) + r * block,
                                ranks * block,
                                static_cast<uint8_t *>(scratch.data) +
                                    r * outer * block,
                                block, block, outer, cudaMemcpyDeviceToDevice,
                                cudaStreamLegacy),
              "all_gather layout");
          !s)
        return s;
    return Status::success();
  }

  Status reduceScatterSum(const Tensor &in, Tensor &out, int64_t axis) override {
    ncclDataType_t type;
    if (!ncclType(in.dtype, type))
      return Status::error("reduce_scatter: unsupported element type");
    int64_t outer;
    size_t block;
    around(out, axis, outer, block);
    const void *src = in.data;
    if (outer > 1) {
      if (Status s = scratch.reserve(in.bytes()); !s)
        return s;
      // in[o][r] -> scratch[r][o]
      for (int r = 0; r < ranks; ++r)
        if (Status s = cudaStatus(
                cudaMemcpy2DAsync(static_cast<uint8_t *>(scratch.data) +
                                      r * outer * block,
                                  block,
                                  static_cast<const uint8_t *>(in.data) +
                                      r * block,
                                  ranks * block, block, outer,
                                  cudaMemcpyDeviceToDevice, cudaStreamLegacy),
                "reduce_scatter layout");
            !s)
          return s;
      src = scratch.data;
    }
    return ncclStatus(ncclReduceScatter(src, out.data, out.numel(), type,
                                        ncclSum, comm, cudaStreamLegacy),
                      "ncclReduceScatter");
  }

  Status allSlice(const Tensor &in, Tensor &out, int64_t axis) override {
    int64_t outer;
    size_t block;
    around(out, axis, outer, block);
    return cudaStatus(
        cudaMemcpy2DAsync(out.data, block,
                          static_cast<const uint8_t *>(in.data) + rankId * block,
                          ranks * block, block, outer, cudaMemcpyDeviceToDevice,
                          cudaStreamLegacy),
        "all_slice");
  }

  Status send(const Tensor &t, int peer) override {
    return ncclStatus(ncclSend(t.data, t.bytes(), ncclInt8, peer, comm,
                               cudaStreamLegacy),
                      "ncclSend");
  }
  Status recv(Tensor &t, int peer) override {
    return ncclStatus(ncclRecv(t.data, t.bytes(), ncclInt8, peer, comm,
                               cudaStreamLegacy),
                      "ncclRecv");
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
  // The tensor-level operations above are all overridden.
  Status allReduceRaw(void *, int64_t, DType) override {
    return Status::error("unused");
  }
  Status allGatherRaw(const void *, void *, size_t) override {
    return Status::error("unused");
  }
  Status reduceScatterRaw(const void *, void *, int64_t, DType) override {
    return Status::error("unused");
  }

private:
  ncclComm_t comm;
  int rankId, ranks;
  Scratch scratch;
};

int localRank() {
  for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                          "SLURM_LOCALID"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

} // namespace

Status makeDeviceCommunicator(Communicator &host,
                              std::unique_ptr<Communicator> &out) {
  int devices = 0;
  if (Status s = cudaStatus(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
      !s)
    return s;
  if (devices == 0)
    return Status::error("no GPU is visible");
  if (Status s = cudaStatus(cudaSetDevice(localRank() % devices),
                            "cudaSetDevice");
      !s)
    return s;
  // Rank 0's unique id reaches every rank through the host communicator.
  ncclUniqueId id;
  if (host.rank() == 0)
    if (Status s = ncclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s)
      return s;
  std::vector<int8_t> mine(sizeof(id)), all(sizeof(id) * host.size());
  std::memcpy(mine.data(), &id, sizeof(id));
  Tensor in{mine.data(), DType::I8, {static_cast<int64_t>(sizeof(id))}};
  Tensor gathered{all.data(), DType::I8,
                  {static_cast<int64_t>(sizeof(id)) * host.size()}};
  if (Status s = host.allGather(in, gathered, 0); !s)
    return s;
  std::memcpy(&id, all.data(), sizeof(id));
  ncclComm_t comm;
  if (Status s = ncclStatus(
          ncclCommInitRank(&comm, host.size(), id, host.rank()),
          "ncclCommInitRank");
      !s)
    return s;
  out = std::make_unique<NCCLCommunicator>(comm, host.rank(), host.size());
  return Status::success();
}

} // namespace mp::rt
