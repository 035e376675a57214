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

} // namespace mp::rt
