//===- CommTest.cpp - the single-process communicator and lent scratch ----===//
//
// Collectives of one process are copies; packing along an inner axis goes
// through scratch, which an executable lends sized for its program (the MPI
// tests, under mpirun, check the same on real groups).
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"

#include <gtest/gtest.h>

using namespace mp::rt;

namespace {

Tensor view(std::vector<float> &v, std::vector<int64_t> shape) {
  return Tensor{v.data(), DType::F32, std::move(shape)};
}

TEST(SingleProcessComm, GathersAlongAnInnerAxisThroughTheLentScratch) {
  std::unique_ptr<Communicator> comm = makeSingleProcessCommunicator();
  std::vector<float> local = {1, 2, 3, 4}, full(4), lent(4, -1);
  Tensor in = view(local, {2, 1, 2}), out = view(full, {2, 1, 2});
  ASSERT_EQ(comm->packingBytes(in, out, 1), 4 * sizeof(float));
  comm->lendScratch(lent.data(), lent.size() * sizeof(float));
  ASSERT_TRUE(comm->allGather(in, out, 1));
  EXPECT_EQ(full, local);
  EXPECT_EQ(lent, local); // packed in the lent block, not in scratch of its own
  std::vector<float> shard(4);
  Tensor mine = view(shard, {2, 1, 2});
  ASSERT_TRUE(comm->reduceScatterSum(out, mine, 1));
  EXPECT_EQ(shard, local);
}

TEST(SingleProcessComm, PackingBeyondTheLentScratchIsAnError) {
  std::unique_ptr<Communicator> comm = makeSingleProcessCommunicator();
  std::vector<float> local = {1, 2, 3, 4}, full(4, 0), lent(3);
  Tensor in = view(local, {2, 1, 2}), out = view(full, {2, 1, 2});
  comm->lendScratch(lent.data(), lent.size() * sizeof(float));
  Status s = comm->allGather(in, out, 1);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find("packing needs 16 bytes of scratch but the "
                           "executable reserved 12"),
            std::string::npos)
      << s.message;
  EXPECT_EQ(full, std::vector<float>(4, 0)); // nothing written
  s = comm->reduceScatterSum(out, in, 1);
  EXPECT_FALSE(s);
}

TEST(SingleProcessComm, OutermostAxesNeedNoScratch) {
  std::unique_ptr<Communicator> comm = makeSingleProcessCommunicator();
  std::vector<float> local = {1, 2, 3, 4}, full(4);
  Tensor in = view(local, {1, 4}), out = view(full, {1, 4});
  EXPECT_EQ(comm->packingBytes(in, out, 0), 0u);
  comm->lendScratch(nullptr, 0);
  ASSERT_TRUE(comm->allGather(in, out, 0));
  EXPECT_EQ(full, local);
}

} // namespace
