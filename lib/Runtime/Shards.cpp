//===- Shards.cpp - tensors split over the ranks of a grid ----------------===//
#include "mp/Runtime/Shards.h"

namespace mp::rt {

std::string assembleShards(const std::vector<std::string_view> &shards,
                           const std::vector<int64_t> &localShape, int64_t axis,
                           int64_t groups) {
  if (shards.empty())
    return {};
  if (axis < 0)
    return std::string(shards[0]);
  // Row-major, a shard is [outer · groups] blocks of the whole's
  // [outer · groups, ranks] blocks.
  int64_t outer = groups;
  for (int64_t d = 0; d < axis; ++d)
    outer *= localShape[d];
  const size_t block = outer ? shards[0].size() / outer : 0;
  std::string whole;
  whole.reserve(shards[0].size() * shards.size());
  for (int64_t o = 0; o < outer; ++o)
    for (std::string_view shard : shards)
      whole.append(shard.substr(o * block, block));
  return whole;
}

std::string shardOf(std::string_view whole,
                    const std::vector<int64_t> &wholeShape, int64_t axis,
                    int64_t groups, int64_t ranks, int64_t rank) {
  if (axis < 0)
    return std::string(whole);
  int64_t outer = groups;
  for (int64_t d = 0; d < axis; ++d)
    outer *= wholeShape[d];
  const size_t wholeBlock = outer ? whole.size() / outer : 0;
  const size_t block = wholeBlock / ranks;
  std::string shard;
  shard.reserve(block * outer);
  for (int64_t o = 0; o < outer; ++o)
    shard.append(whole.substr(o * wholeBlock + rank * block, block));
  return shard;
}

namespace {
/// Row-major `shape` around `axis`: the product of the dims before it, and
/// the bytes of one step along it.
std::pair<int64_t, int64_t> around(const std::vector<int64_t> &shape,
                                   int64_t elemBytes, int64_t axis) {
  int64_t outer = 1, inner = elemBytes;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  return {outer, inner};
}
} // namespace

std::string blockAlong(std::string_view whole,
                       const std::vector<int64_t> &wholeShape,
                       int64_t elemBytes, int64_t axis, int64_t start,
                       int64_t size) {
  auto [outer, inner] = around(wholeShape, elemBytes, axis);
  const int64_t stride = wholeShape[axis] * inner;
  std::string out;
  out.reserve(outer * size * inner);
  for (int64_t o = 0; o < outer; ++o)
    out.append(whole.substr(o * stride + start * inner, size * inner));
  return out;
}

void placeBlock(std::string &whole, const std::vector<int64_t> &wholeShape,
                int64_t elemBytes, int64_t axis, int64_t start,
                std::string_view block) {
  auto [outer, inner] = around(wholeShape, elemBytes, axis);
  const int64_t stride = wholeShape[axis] * inner;
  const int64_t row = outer ? static_cast<int64_t>(block.size()) / outer : 0;
  for (int64_t o = 0; o < outer; ++o)
    whole.replace(o * stride + start * inner, row, block.substr(o * row, row));
}

} // namespace mp::rt
