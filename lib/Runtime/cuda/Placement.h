//===- Placement.h - which GPU each rank uses, testable on a CPU -*- C++
//-*-===//
//
// Before NCCL starts, the ranks tell each other (over the host communicator)
// their host, the GPU each picked (its UUID) and whether they got that far,
// so that every rank reaches the same verdict from the same facts: NCCL
// starts on all of them, or every one returns the same clear error (none is
// left waiting in a collective for a rank that gave up). Plain C++, so the
// CPU unit tests check it (unittests/Runtime/PlacementTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDA_PLACEMENT_H
#define MP_RUNTIME_CUDA_PLACEMENT_H

#include "mp/Runtime/Tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mp::rt::cuda {

/// A rank's index among the ranks that share its host (in rank order), and
/// how many share it. Launchers' variables for this differ (and are absent
/// under some), so it comes from the hosts themselves.
struct LocalRank {
  int index = 0, count = 1;
};
LocalRank localRankOf(const std::vector<std::string> &hosts, int rank);

/// What a rank reports once it has picked its GPU.
struct RankPlacement {
  std::string host;
  std::string gpu;     // the GPU's UUID (16 bytes); empty when none was picked
  std::string problem; // why this rank could not set up its GPU; empty if none
  std::string ncclId;  // rank 0's NCCL unique id (other ranks: empty)
  int visibleGpus = 0; // how many GPUs this rank sees (at most 255 sent)
};

/// The fixed-size record a placement travels in (every rank sends the same
/// number of bytes); longer fields are cut to fit.
constexpr size_t kHostBytes = 64, kGpuBytes = 16, kProblemBytes = 240,
                 kNcclIdBytes = 128;
constexpr size_t kPlacementBytes =
    kHostBytes + kGpuBytes + kProblemBytes + kNcclIdBytes + 4;
std::vector<uint8_t> encodePlacement(const RankPlacement &p);
RankPlacement decodePlacement(const uint8_t *record);

/// An error when a rank could not set up its GPU, or two ranks of one host
/// use the same GPU (NCCL needs one per rank), naming the ranks, the host
/// and how many GPUs they see; success otherwise.
Status checkPlacement(const std::vector<RankPlacement> &ranks);

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDA_PLACEMENT_H
