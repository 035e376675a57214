//===- Comm.cpp - tensor-level collectives and the single-process backend -===//
#include "mp/Runtime/Comm.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace mp::rt {

namespace {
/// Splits a shape around `axis`: [outer, axis, inner].
void around(const Tensor &t, int64_t axis, int64_t &outer, int64_t &inner) {
  outer = inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= t.shape[d];
  for (size_t d = axis + 1; d < t.shape.size(); ++d)
    inner *= t.shape[d];
}

Status checkAxis(const Tensor &local, const Tensor &full, int64_t axis,
                 int ranks, const char *what) {
  if (axis < 0 || axis >= static_cast<int64_t>(full.shape.size()) ||
      local.shape.size() != full.shape.size() ||
      full.shape[axis] != local.shape[axis] * ranks || local.dtype != full.dtype)
    return Status::error(std::string(what) + ": shapes " +
                         formatShape(local.shape) + " and " +
                         formatShape(full.shape) + " do not fit axis " +
                         std::to_string(axis) + " over " +
                         std::to_string(ranks) + " ranks");
  return Status::success();
}

class SingleProcess : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char *backend() const override { return "single process"; }

  Status send(const Tensor &t, int peer) override {
    if (peer != 0)
      return Status::error("send to rank " + std::to_string(peer) +
                           " of a single process");
    pending.emplace_back(static_cast<const char *>(t.data), t.bytes());
    return Status::success();
  }
  Status recv(Tensor &t, int peer) override {
    if (peer != 0 || pending.empty() || pending.front().size() != t.bytes())
      return Status::error("nothing of " + std::to_string(t.bytes()) +
                           " bytes was sent to this single process");
    std::memcpy(t.data, pending.front().data(), t.bytes());
    pending.erase(pending.begin());
    return Status::success();
  }
  Status split(const std::vector<int64_t> &gridShape, int64_t,
               std::unique_ptr<Communicator> &out) override {
    int64_t n = 1;
    for (int64_t d : gridShape)
      n *= d;
    if (n != 1)
      return Status::error("a grid of " + std::to_string(n) +
                           " ranks needs that many processes");
    out = std::make_unique<SingleProcess>();
    return Status::success();
  }

private:
  std::vector<std::string> pending;

protected:
  Status allReduceRaw(void *, int64_t, DType) override {
    return Status::success();
  }
  Status allGatherRaw(const void *in, void *out, size_t bytes) override {
    std::memmove(out, in, bytes);
    return Status::success();
  }
  Status reduceScatterRaw(const void *in, void *out, int64_t count,
                          DType dtype) override {
    std::memmove(out, in, count * dtypeSize(dtype));
    return Status::success();
  }
};
} // namespace

std::vector<int64_t> gridCoordinates(const std::vector<int64_t> &gridShape,
                                     int rank) {
  std::vector<int64_t> coords(gridShape.size());
  int64_t rest = rank;
  for (int64_t a = static_cast<int64_t>(gridShape.size()) - 1; a >= 0; --a) {
    coords[a] = rest % gridShape[a];
    rest /= gridShape[a];
  }
  return coords;
}

int64_t gridColor(const std::vector<int64_t> &gridShape, int rank,
                  int64_t axis) {
  std::vector<int64_t> coords = gridCoordinates(gridShape, rank);
  int64_t color = 0;
  for (size_t a = 0; a < gridShape.size(); ++a)
    if (static_cast<int64_t>(a) != axis)
      color = color * gridShape[a] + coords[a];
  return color;
}

std::unique_ptr<Communicator> makeSingleProcessCommunicator() {
  return std::make_unique<SingleProcess>();
}

Status Communicator::allReduceSum(const Tensor &in, Tensor &out) {
  if (in.numel() != out.numel() || in.dtype != out.dtype)
    return Status::error("all_reduce: input and result differ");
  if (in.data != out.data)
    std::memcpy(out.data, in.data, in.bytes());
  return allReduceRaw(out.data, out.numel(), out.dtype);
}

Status Communicator::allGather(const Tensor &in, Tensor &out, int64_t axis) {
  if (Status s = checkAxis(in, out, axis, size(), "all_gather"); !s)
    return s;
  int64_t outer, inner;
  around(in, axis, outer, inner);
  size_t block = in.shape[axis] * inner * dtypeSize(in.dtype);
  if (outer == 1)
    return allGatherRaw(in.data, out.data, in.bytes());
  std::vector<uint8_t> tmp(out.bytes());
  if (Status s = allGatherRaw(in.data, tmp.data(), in.bytes()); !s)
    return s;
  auto *dst = static_cast<uint8_t *>(out.data);
  for (int r = 0; r < size(); ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * size() + r) * block,
                  tmp.data() + (r * outer + o) * block, block);
  return Status::success();
}

Status Communicator::reduceScatterSum(const Tensor &in, Tensor &out,
                                      int64_t axis) {
  if (Status s = checkAxis(out, in, axis, size(), "reduce_scatter"); !s)
    return s;
  int64_t outer, inner;
  around(out, axis, outer, inner);
  size_t block = out.shape[axis] * inner * dtypeSize(in.dtype);
  if (outer == 1)
    return reduceScatterRaw(in.data, out.data, out.numel(), out.dtype);
  std::vector<uint8_t> tmp(in.bytes());
  const auto *src = static_cast<const uint8_t *>(in.data);
  for (int r = 0; r < size(); ++r)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(tmp.data() + (r * outer + o) * block,
                  src + (o * size() + r) * block, block);
  return reduceScatterRaw(tmp.data(), out.data, out.numel(), out.dtype);
}

Status Communicator::allSlice(const Tensor &in, Tensor &out, int64_t axis) {
  if (Status s = checkAxis(out, in, axis, size(), "all_slice"); !s)
    return s;
  int64_t outer, inner;
  around(out, axis, outer, inner);
  size_t block = out.shape[axis] * inner * dtypeSize(in.dtype);
  const auto *src = static_cast<const uint8_t *>(in.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * block, src + (o * size() + rank()) * block, block);
  return Status::success();
}

} // namespace mp::rt
