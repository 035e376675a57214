//===- Shards.h - tensors split over the ranks of a grid ------------*- C++
//-*-===//
//
// How a sharded parameter's whole value and its ranks' shards relate:
// dimension `axis` is viewed as `groups` equal blocks, each split evenly
// over the ranks (a fused QKV weight: groups = 3). Row-major bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_SHARDS_H
#define MP_RUNTIME_SHARDS_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mp::rt {

/// The whole tensor from every rank's shard, in rank order; `localShape` is
/// a shard's shape, `axis` -1 for a replicated tensor (shard 0 is it).
std::string assembleShards(const std::vector<std::string_view> &shards,
                           const std::vector<int64_t> &localShape, int64_t axis,
                           int64_t groups);

/// Rank `rank`'s shard (of `ranks`) of the whole tensor `whole` of shape
/// `wholeShape`; `axis` -1: the whole.
std::string shardOf(std::string_view whole,
                    const std::vector<int64_t> &wholeShape, int64_t axis,
                    int64_t groups, int64_t ranks, int64_t rank);

/// Elements [start, start + size) along `axis` of the row-major `whole` of
/// shape `wholeShape` and `elemBytes`-byte elements (a part of a cut fused
/// weight; zeros past the end of `axis`: a padded vocabulary), and its
/// inverse: `block` written there.
std::string blockAlong(std::string_view whole,
                       const std::vector<int64_t> &wholeShape,
                       int64_t elemBytes, int64_t axis, int64_t start,
                       int64_t size);
void placeBlock(std::string &whole, const std::vector<int64_t> &wholeShape,
                int64_t elemBytes, int64_t axis, int64_t start,
                std::string_view block);

/// One part of a tensor cut along an axis: its bytes, from `start`.
struct PartBytes {
  int64_t start;
  std::string_view bytes;
};

/// The whole tensor of shape `wholeShape` from `parts` along `axis` (each
/// part's extent follows from its bytes); false, with `error`, unless they
/// tile it exactly (no gap, no overlap, sizes that fit; only the last may
/// run past the end, a padding that is dropped).
bool joinParts(std::vector<PartBytes> parts,
               const std::vector<int64_t> &wholeShape, int64_t elemBytes,
               int64_t axis, std::string &whole, std::string &error);

} // namespace mp::rt

#endif // MP_RUNTIME_SHARDS_H
