//===- PlacementTest.cpp - which GPU each rank uses, on the CPU -----------===//
//
// The facts ranks exchange before NCCL starts, and the verdict every rank
// draws from them (lib/Runtime/cuda/Placement.h).
//
//===----------------------------------------------------------------------===//
#include "Placement.h"

#include <gtest/gtest.h>

using namespace mp::rt;
using namespace mp::rt::cuda;

namespace {

RankPlacement placed(std::string host, char gpu, int rank, int gpus = 1) {
  RankPlacement p;
  p.host = std::move(host);
  p.visibleGpus = gpus;
  p.gpu = std::string(kGpuBytes, gpu);
  if (rank == 0)
    p.ncclId = std::string(kNcclIdBytes, '\x7f');
  return p;
}

TEST(Placement, LocalRanksCountTheRanksOfTheSameHost) {
  // Two nodes, ranks interleaved as a round-robin launcher places them.
  const std::vector<std::string> hosts = {"a", "b", "a", "b", "a"};
  EXPECT_EQ(localRankOf(hosts, 0).index, 0);
  EXPECT_EQ(localRankOf(hosts, 2).index, 1);
  EXPECT_EQ(localRankOf(hosts, 4).index, 2);
  EXPECT_EQ(localRankOf(hosts, 4).count, 3);
  EXPECT_EQ(localRankOf(hosts, 3).index, 1);
  EXPECT_EQ(localRankOf(hosts, 3).count, 2);
}

TEST(Placement, RecordsRoundTripAndCutLongFields) {
  RankPlacement p = placed("node-7", '\0', 0); // a UUID may hold zero bytes
  p.problem = "cudaSetDevice: invalid device ordinal";
  std::vector<uint8_t> record = encodePlacement(p);
  ASSERT_EQ(record.size(), kPlacementBytes);
  RankPlacement back = decodePlacement(record.data());
  EXPECT_EQ(back.host, p.host);
  EXPECT_EQ(back.gpu, p.gpu);
  EXPECT_EQ(back.problem, p.problem);
  EXPECT_EQ(back.ncclId, p.ncclId);
  EXPECT_EQ(back.visibleGpus, 1);

  RankPlacement none;
  none.host = std::string(300, 'h');
  none.problem = std::string(1000, 'x');
  back = decodePlacement(encodePlacement(none).data());
  EXPECT_EQ(back.host, std::string(kHostBytes, 'h'));
  EXPECT_EQ(back.problem.size(), kProblemBytes);
  EXPECT_TRUE(back.gpu.empty());
  EXPECT_TRUE(back.ncclId.empty());
}

TEST(Placement, DistinctGpusPass) {
  // Per-rank GPUs (each rank sees one, CUDA_VISIBLE_DEVICES): same index,
  // different UUIDs; and the same UUID on different hosts.
  EXPECT_TRUE(checkPlacement(
      {placed("a", '1', 0), placed("a", '2', 1), placed("b", '1', 2)}));
}

TEST(Placement, TwoRanksOnOneGpuAreAnErrorNamingThem) {
  // The count is the clashing host's (here 2), not the 8 of another host.
  Status s = checkPlacement(
      {placed("a", '1', 0, 2), placed("b", '2', 1, 8), placed("a", '1', 2, 2)});
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find("ranks 0 and 2 on host 'a' would share a GPU "
                           "(each sees 2)"),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("start at most 2 ranks per node"),
            std::string::npos);
}

TEST(Placement, ARankThatFailedStopsEveryRank) {
  RankPlacement broken;
  broken.host = "b";
  broken.problem = "no GPU is visible";
  Status s = checkPlacement({placed("a", '1', 0), broken});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message,
            "rank 1 (host 'b') could not set up its GPU: no GPU is visible");
  s = checkPlacement({placed("a", '1', 1), placed("a", '2', 1)});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message, "rank 0 sent no NCCL id");
}

} // namespace
