//===- Shards.cpp - tensors split over the ranks of a grid ----------------===//
#include "mp/Runtime/Shards.h"

#include <algorithm>

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
  // Past the end: zeros (a vocabulary padded to divide by the ranks).
  const int64_t stored =
      std::clamp<int64_t>(wholeShape[axis] - start, 0, size) * inner;
  std::string out;
  out.reserve(outer * size * inner);
  for (int64_t o = 0; o < outer; ++o) {
    out.append(whole.substr(o * stride + start * inner, stored));
    out.append(size * inner - stored, '\0');
  }
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

bool joinParts(std::vector<PartBytes> parts,
               const std::vector<int64_t> &wholeShape, int64_t elemBytes,
               int64_t axis, std::string &whole, std::string &error) {
  if (axis < 0 || axis >= static_cast<int64_t>(wholeShape.size())) {
    error = "part axis " + std::to_string(axis) + " is out of range";
    return false;
  }
  // Bytes of one index along the axis, over all the other dims.
  int64_t across = elemBytes;
  for (size_t d = 0; d < wholeShape.size(); ++d)
    if (static_cast<int64_t>(d) != axis)
      across *= wholeShape[d];
  std::sort(
      parts.begin(), parts.end(),
      [](const PartBytes &a, const PartBytes &b) { return a.start < b.start; });
  const int64_t dim = wholeShape[axis];
  whole.assign(static_cast<size_t>(across * dim), '\0');
  int64_t covered = 0;
  for (const PartBytes &part : parts) {
    const int64_t bytes = static_cast<int64_t>(part.bytes.size());
    const int64_t size = across ? bytes / across : 0;
    if (part.start != covered || size < 1 || size * across != bytes ||
        (size > dim - covered && &part != &parts.back())) {
      error = "the part at " + std::to_string(part.start) + " (" +
              std::to_string(size) + " along dim " + std::to_string(axis) +
              ") does not continue the parts before it, which cover [0, " +
              std::to_string(covered) + ") of " + std::to_string(dim);
      return false;
    }
    if (size > dim - covered) {
      // The last part may run past the end: its padding is dropped.
      std::vector<int64_t> shape = wholeShape;
      shape[axis] = size;
      placeBlock(
          whole, wholeShape, elemBytes, axis, part.start,
          blockAlong(part.bytes, shape, elemBytes, axis, 0, dim - covered));
      covered = dim;
      continue;
    }
    placeBlock(whole, wholeShape, elemBytes, axis, part.start, part.bytes);
    covered += size;
  }
  if (covered != dim) {
    error = "the parts cover [0, " + std::to_string(covered) + ") of " +
            std::to_string(dim) + " along dim " + std::to_string(axis);
    return false;
  }
  return true;
}

} // namespace mp::rt
