//===- Comm.cpp - tensor-level collectives and the single-process backend -===//
#include "mp/Runtime/Comm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mp::rt {

namespace {
/// A rank's part of a tensor split along `axis` is, in row-major order,
/// `outer` blocks of `block` bytes (the local tensor `local`).
void blocksOf(const Tensor &local, int64_t axis, int64_t &outer,
              size_t &block) {
  outer = 1;
  int64_t inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= local.shape[d];
  for (size_t d = axis; d < local.shape.size(); ++d)
    inner *= local.shape[d];
  block = static_cast<size_t>(inner) * dtypeSize(local.dtype);
}

Status checkAxis(const Tensor &local, const Tensor &full, int64_t axis,
                 int ranks, const char *what) {
  if (axis < 0 || axis >= static_cast<int64_t>(full.shape.size()) ||
      local.shape.size() != full.shape.size() ||
      full.shape[axis] != local.shape[axis] * ranks ||
      local.dtype != full.dtype)
    return Status::error(
        std::string(what) + ": shapes " + formatShape(local.shape) + " and " +
        formatShape(full.shape) + " do not fit axis " + std::to_string(axis) +
        " over " + std::to_string(ranks) + " ranks");
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
  Status splitByColor(int color, int,
                      std::unique_ptr<Communicator> &out) override {
    out = color < 0 ? nullptr : std::make_unique<SingleProcess>();
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

static double timeoutSeconds = 600;

void setCollectiveTimeout(double seconds) { timeoutSeconds = seconds; }

double collectiveTimeout() { return timeoutSeconds; }

std::unique_ptr<Communicator> makeSingleProcessCommunicator() {
  return std::make_unique<SingleProcess>();
}

Status Communicator::copy2D(void *dst, size_t dstPitch, const void *src,
                            size_t srcPitch, size_t width, size_t height) {
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<uint8_t *>(dst) + row * dstPitch,
                 static_cast<const uint8_t *>(src) + row * srcPitch, width);
  return Status::success();
}

Status Communicator::ownScratch(size_t bytes, void *&ptr) {
  hostScratch.resize(bytes);
  ptr = hostScratch.data();
  return Status::success();
}

void Communicator::lendScratch(void *ptr, size_t bytes) {
  scratchLent = true;
  lentScratch = ptr;
  lentScratchBytes = bytes;
}

Status Communicator::scratch(size_t bytes, void *&ptr) {
  if (!scratchLent)
    return ownScratch(bytes, ptr);
  if (bytes > lentScratchBytes)
    return Status::error(std::string(backend()) +
                         " communicator: packing needs " +
                         std::to_string(bytes) +
                         " bytes of scratch but the executable reserved " +
                         std::to_string(lentScratchBytes) + " at load");
  ptr = lentScratch;
  return Status::success();
}

size_t Communicator::packingBytes(const Tensor &local, const Tensor &full,
                                  int64_t axis) const {
  int64_t outer;
  size_t block;
  blocksOf(local, axis, outer, block);
  return outer == 1 || !packsBlocks() ? 0 : full.bytes();
}

Status Communicator::transposeBlocks(const void *src, void *dst, int64_t rows,
                                     int64_t cols, size_t block) {
  for (int64_t r = 0; r < rows; ++r)
    if (Status s = copy2D(static_cast<uint8_t *>(dst) + r * block, rows * block,
                          static_cast<const uint8_t *>(src) + r * cols * block,
                          block, block, cols);
        !s)
      return s;
  return Status::success();
}

Status Communicator::completedSends(int64_t &count) {
  count = sendsPostedHere;
  return Status::success();
}

Status Communicator::splitByColor(int, int, std::unique_ptr<Communicator> &) {
  return Status::error(std::string("the ") + backend() +
                       " backend cannot split a group by color");
}

Status Communicator::allReduceSum(const Tensor &in, Tensor &out) {
  if (in.numel() != out.numel() || in.dtype != out.dtype)
    return Status::error("all_reduce: input and result differ");
  if (in.data != out.data)
    if (Status s = copy2D(out.data, 0, in.data, 0, in.bytes(), 1); !s)
      return s;
  return allReduceRaw(out.data, out.numel(), out.dtype);
}

namespace {
/// The operands of allReduceRows and reduceScatterRows: sums the size of
/// the partial sums, which are `rows` whole rows, as is each result.
Status checkRows(const char *what, const Tensor &partial, const Tensor &reduced,
                 int64_t rows, const std::vector<Tensor> &results) {
  if (partial.numel() != reduced.numel() || partial.dtype != reduced.dtype)
    return Status::error(std::string(what) + ": input and sums differ");
  auto wholeRows = [rows](const Tensor &t) {
    return rows > 0 ? t.numel() % rows == 0 : t.numel() == 0;
  };
  if (!wholeRows(partial))
    return Status::error(std::string(what) + ": " +
                         std::to_string(partial.numel()) +
                         " elements are not " + std::to_string(rows) + " rows");
  for (const Tensor &result : results)
    if (!wholeRows(result))
      return Status::error(std::string(what) + ": a result of " +
                           std::to_string(result.numel()) +
                           " elements is not " + std::to_string(rows) +
                           " rows");
  return Status::success();
}
} // namespace

Status Communicator::allReduceRows(const Tensor &partial, Tensor &reduced,
                                   int64_t rows, const RowsFinish &finish,
                                   const std::vector<Tensor> &results) {
  if (Status s = checkRows("all_reduce", partial, reduced, rows, results); !s)
    return s;
  return allReduceRowsRaw(partial, reduced, rows, finish, results);
}

Status Communicator::allReduceRowsRaw(const Tensor &partial, Tensor &reduced,
                                      int64_t rows, const RowsFinish &finish,
                                      const std::vector<Tensor> &) {
  if (Status s = allReduceSum(partial, reduced); !s)
    return s;
  return finish(0, rows);
}

Status Communicator::reduceScatterRows(const Tensor &partial, Tensor &reduced,
                                       int64_t rows, int64_t outer,
                                       const RowsFinish &finish,
                                       const std::vector<Tensor> &results) {
  if (Status s = checkRows("reduce_scatter", partial, reduced, rows, results);
      !s)
    return s;
  if (rows == 0)
    return Status::success(); // (nothing to sum, finish or gather)
  if (rows < 0 || outer <= 0 || rows % (outer * size()) != 0)
    return Status::error("reduce_scatter: " + std::to_string(rows) +
                         " rows are not " + std::to_string(outer) +
                         " blocks of " + std::to_string(size()) +
                         " equal slices");
  return reduceScatterRowsRaw(partial, reduced, rows, outer, finish, results);
}

namespace {
size_t largestBytes(const std::vector<Tensor> &tensors) {
  size_t bytes = 0;
  for (const Tensor &t : tensors)
    bytes = std::max(bytes, t.bytes());
  return bytes;
}
} // namespace

size_t Communicator::scatterRowsBytes(const std::vector<Tensor> &tensors,
                                      int64_t outer) const {
  if (!packsBlocks() || size() <= 0)
    return 0;
  const size_t full = largestBytes(tensors);
  return full / static_cast<size_t>(size()) + (outer > 1 ? full : 0);
}

Status Communicator::reduceScatterRowsRaw(const Tensor &partial,
                                          Tensor &reduced, int64_t rows,
                                          int64_t outer,
                                          const RowsFinish &finish,
                                          const std::vector<Tensor> &results) {
  const int64_t n = size(), sliceRows = rows / outer / n;
  std::vector<Tensor> all{partial};
  all.insert(all.end(), results.begin(), results.end());
  // This rank's slices, packed, after the block the collectives' own
  // packing takes (both come out of one scratch).
  const size_t packing = outer > 1 ? largestBytes(all) : 0;
  void *base;
  if (Status s = scratch(scatterRowsBytes(all, outer), base); !s)
    return s;
  uint8_t *slices = static_cast<uint8_t *>(base) + packing;
  // The sums: this rank's slice of every block, unpacked into `reduced`.
  const size_t block = partial.bytes() / rows * sliceRows;
  if (Status s = reduceScatterBlocks(partial.data, slices, outer, block,
                                     partial.dtype);
      !s)
    return s;
  if (Status s = copy2D(static_cast<uint8_t *>(reduced.data) + rank() * block,
                        n * block, slices, block, block, outer);
      !s)
    return s;
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t begin = (o * n + rank()) * sliceRows;
    if (Status s = finish(begin, begin + sliceRows); !s)
      return s;
  }
  // Each result's rows from every rank.
  for (const Tensor &result : results) {
    const size_t resultBlock = result.bytes() / rows * sliceRows;
    auto *data = static_cast<uint8_t *>(result.data);
    if (Status s = copy2D(slices, resultBlock, data + rank() * resultBlock,
                          n * resultBlock, resultBlock, outer);
        !s)
      return s;
    if (Status s = allGatherBlocks(slices, data, outer, resultBlock); !s)
      return s;
  }
  return Status::success();
}

Status Communicator::allGather(const Tensor &in, Tensor &out, int64_t axis) {
  if (Status s = checkAxis(in, out, axis, size(), "all_gather"); !s)
    return s;
  int64_t outer;
  size_t block;
  blocksOf(in, axis, outer, block);
  return allGatherBlocks(in.data, out.data, outer, block);
}

Status Communicator::allGatherBlocks(const void *in, void *out, int64_t outer,
                                     size_t block) {
  if (outer == 1)
    return allGatherRaw(in, out, block);
  void *tmp;
  if (Status s = scratch(outer * block * size(), tmp); !s)
    return s;
  if (Status s = allGatherRaw(in, tmp, outer * block); !s)
    return s;
  return transposeBlocks(tmp, out, size(), outer, block); // [r][o] -> [o][r]
}

Status Communicator::reduceScatterSum(const Tensor &in, Tensor &out,
                                      int64_t axis) {
  if (Status s = checkAxis(out, in, axis, size(), "reduce_scatter"); !s)
    return s;
  int64_t outer;
  size_t block;
  blocksOf(out, axis, outer, block);
  return reduceScatterBlocks(in.data, out.data, outer, block, out.dtype);
}

Status Communicator::reduceScatterBlocks(const void *in, void *out,
                                         int64_t outer, size_t block,
                                         DType dtype) {
  const int64_t count = static_cast<int64_t>(outer * block / dtypeSize(dtype));
  if (outer == 1)
    return reduceScatterRaw(in, out, count, dtype);
  void *tmp;
  if (Status s = scratch(outer * block * size(), tmp); !s)
    return s;
  if (Status s = transposeBlocks(in, tmp, outer, size(), block); !s)
    return s; // [o][r] -> [r][o]
  return reduceScatterRaw(tmp, out, count, dtype);
}

Status Communicator::allSlice(const Tensor &in, Tensor &out, int64_t axis) {
  if (Status s = checkAxis(out, in, axis, size(), "all_slice"); !s)
    return s;
  int64_t outer;
  size_t block;
  blocksOf(out, axis, outer, block);
  return copy2D(out.data, block,
                static_cast<const uint8_t *>(in.data) + rank() * block,
                size() * block, block, outer);
}

} // namespace mp::rt
