//===- NcclTest.cpp - the NCCL communicator on one GPU --------------------===//
//
// NCCL runs a communicator of one rank on one GPU, so the device
// communicator's whole path is checked on a one-GPU machine: the bootstrap
// and placement exchange over the host communicator, the collectives, their
// packing on the device through lent scratch, and splitting. (Several ranks
// need a GPU each: test/Runtime/gpu-parallel.test.) Skips without a GPU.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/CudaKernels.h"

#include <gtest/gtest.h>

using namespace mp::rt;

namespace {

/// A float tensor in device memory.
struct DeviceFloats {
  Tensor t;
  DeviceFloats(std::vector<int64_t> shape,
               const std::vector<float> &values = {}) {
    t = Tensor{nullptr, DType::F32, std::move(shape)};
    EXPECT_TRUE(cuda::allocate(t.bytes(), &t.data));
    if (!values.empty()) {
      EXPECT_TRUE(cuda::copyToDevice(t.data, values.data(), t.bytes()));
    }
  }
  ~DeviceFloats() { cuda::release(t.data); }
  std::vector<float> read() const {
    std::vector<float> v(t.numel());
    EXPECT_TRUE(cuda::synchronize());
    EXPECT_TRUE(cuda::copyToHost(v.data(), t.data, t.bytes()));
    return v;
  }
};

class CudaNccl : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (cuda::deviceCount(reason) == 0)
      GTEST_SKIP() << "GPU test skipped: " << reason;
    host = makeSingleProcessCommunicator();
    Status made = cuda::makeNcclCommunicator(*host, nccl);
    ASSERT_TRUE(made) << made.message;
  }
  std::unique_ptr<Communicator> host, nccl;
};

TEST_F(CudaNccl, OneRankCommunicatorStartsOnTheDevice) {
  EXPECT_STREQ(nccl->backend(), "NCCL");
  EXPECT_TRUE(nccl->deviceMemory());
  EXPECT_EQ(nccl->size(), 1);
  EXPECT_EQ(nccl->rank(), 0);
}

TEST_F(CudaNccl, CollectivesPackOnTheDeviceThroughLentScratch) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  DeviceFloats in({3, 1, 2}, values), out({3, 1, 2}), scratch({6});
  // Along a middle axis: packed through the lent block.
  nccl->lendScratch(scratch.t.data, 5 * sizeof(float));
  Status tooSmall = nccl->allGather(in.t, out.t, 1);
  ASSERT_FALSE(tooSmall);
  EXPECT_NE(tooSmall.message.find("NCCL communicator: packing needs 24 bytes"),
            std::string::npos)
      << tooSmall.message;
  nccl->lendScratch(scratch.t.data, 6 * sizeof(float));
  ASSERT_TRUE(nccl->allGather(in.t, out.t, 1));
  EXPECT_EQ(out.read(), values);
  EXPECT_EQ(scratch.read(), values); // the lent block held the packing
  DeviceFloats shard({3, 1, 2});
  ASSERT_TRUE(nccl->reduceScatterSum(out.t, shard.t, 1));
  EXPECT_EQ(shard.read(), values);
  DeviceFloats sum({3, 1, 2});
  ASSERT_TRUE(nccl->allReduceSum(in.t, sum.t));
  EXPECT_EQ(sum.read(), values);
  DeviceFloats slice({3, 1, 2});
  ASSERT_TRUE(nccl->allSlice(in.t, slice.t, 1));
  EXPECT_EQ(slice.read(), values);
}

TEST_F(CudaNccl, SplitsAlongAGridAxis) {
  std::unique_ptr<Communicator> axis;
  Status split = nccl->split({1, 1}, 1, axis);
  ASSERT_TRUE(split) << split.message;
  EXPECT_EQ(axis->size(), 1);
  DeviceFloats in({2}, {7, 8}), out({2});
  ASSERT_TRUE(axis->allReduceSum(in.t, out.t));
  EXPECT_EQ(out.read(), (std::vector<float>{7, 8}));
}

} // namespace
