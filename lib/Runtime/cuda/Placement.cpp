//===- Placement.cpp - which GPU each rank uses
//----------------------------===//
#include "Placement.h"

#include <algorithm>
#include <map>

namespace mp::rt::cuda {

LocalRank localRankOf(const std::vector<std::string> &hosts, int rank) {
  LocalRank local{0, 0};
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r)
    if (hosts[r] == hosts[rank]) {
      if (r < rank)
        ++local.index;
      ++local.count;
    }
  return local;
}

namespace {
/// A record: four bytes (the lengths of host and problem, which of gpu and
/// ncclId are present, the GPU count), then each field in its fixed slot.
constexpr size_t kHostAt = 4, kGpuAt = kHostAt + kHostBytes,
                 kProblemAt = kGpuAt + kGpuBytes,
                 kNcclIdAt = kProblemAt + kProblemBytes;

/// Copies `field`, cut to `capacity` bytes, into its slot at `at`.
void put(std::vector<uint8_t> &record, size_t at, size_t capacity,
         const std::string &field) {
  size_t n = std::min(field.size(), capacity);
  std::copy(field.begin(), field.begin() + n, record.begin() + at);
}
std::string take(const uint8_t *record, size_t at, size_t n) {
  return std::string(reinterpret_cast<const char *>(record) + at, n);
}
} // namespace

std::vector<uint8_t> encodePlacement(const RankPlacement &p) {
  std::vector<uint8_t> record(kPlacementBytes, 0);
  record[0] = static_cast<uint8_t>(std::min(p.host.size(), kHostBytes));
  record[1] = static_cast<uint8_t>(std::min(p.problem.size(), kProblemBytes));
  record[2] = (p.gpu.empty() ? 0 : 1) | (p.ncclId.empty() ? 0 : 2);
  record[3] = static_cast<uint8_t>(std::clamp(p.visibleGpus, 0, 255));
  put(record, kHostAt, kHostBytes, p.host);
  put(record, kGpuAt, kGpuBytes, p.gpu);
  put(record, kProblemAt, kProblemBytes, p.problem);
  put(record, kNcclIdAt, kNcclIdBytes, p.ncclId);
  return record;
}

RankPlacement decodePlacement(const uint8_t *record) {
  RankPlacement p;
  p.host = take(record, kHostAt, record[0]);
  p.problem = take(record, kProblemAt, record[1]);
  if (record[2] & 1)
    p.gpu = take(record, kGpuAt, kGpuBytes);
  if (record[2] & 2)
    p.ncclId = take(record, kNcclIdAt, kNcclIdBytes);
  p.visibleGpus = record[3];
  return p;
}

Status checkPlacement(const std::vector<RankPlacement> &ranks) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!ranks[r].problem.empty())
      return Status::error("rank " + std::to_string(r) + " (host '" +
                           ranks[r].host +
                           "') could not set up its GPU: " + ranks[r].problem);
  if (ranks.empty() || ranks[0].ncclId.size() != kNcclIdBytes)
    return Status::error("rank 0 sent no NCCL id");
  std::map<std::pair<std::string, std::string>, size_t> firstUser;
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto [it, fresh] =
        firstUser.emplace(std::make_pair(ranks[r].host, ranks[r].gpu), r);
    const int visibleGpus = ranks[r].visibleGpus;
    if (!fresh)
      return Status::error(
          "ranks " + std::to_string(it->second) + " and " + std::to_string(r) +
          " on host '" + ranks[r].host + "' would share a GPU (each sees " +
          std::to_string(visibleGpus) +
          "), and NCCL needs one GPU per rank: start at most " +
          std::to_string(visibleGpus) +
          " ranks per node, give each rank its own GPU (CUDA_VISIBLE_DEVICES), "
          "or use --device cpu");
  }
  return Status::success();
}

} // namespace mp::rt::cuda
