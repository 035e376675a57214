//===- OptimizerTest.cpp - AdamW, SGD and the learning-rate schedule ------===//
//
// Against torch.optim's update rules written out for one weight, step by
// step, in double precision.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mp::rt {
namespace {

TEST(Optimizer, AdamWMatchesTorchStepByStep) {
  const AdamWOptions o{0.9, 0.95, 1e-8};
  const double lr = 1e-2, wd = 0.1;
  float w = 0.5f, m = 0, v = 0;
  double rw = 0.5, rm = 0, rv = 0;
  const float grads[] = {0.3f, -0.2f, 0.05f};
  for (int64_t step = 1; step <= 3; ++step) {
    const double g = grads[step - 1];
    adamwStep(&w, &m, &v, &grads[step - 1], 1, step, lr, wd, o);
    rw *= 1 - lr * wd;
    rm = 0.9 * rm + 0.1 * g;
    rv = 0.95 * rv + 0.05 * g * g;
    const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.95, step);
    rw -= lr / bc1 * rm / (std::sqrt(rv) / std::sqrt(bc2) + 1e-8);
    EXPECT_NEAR(w, rw, 1e-6) << "step " << step;
    EXPECT_NEAR(m, rm, 1e-7) << "step " << step;
    EXPECT_NEAR(v, rv, 1e-8) << "step " << step;
  }
}

TEST(Optimizer, SgdAddsCoupledWeightDecay) {
  float w = 2.0f;
  const float g = 0.5f;
  sgdStep(&w, &g, 1, 0.1, 0.01);
  EXPECT_FLOAT_EQ(w, 2.0f - 0.1f * (0.5f + 0.01f * 2.0f));
}

TEST(Optimizer, GlobalNormPiecesSumSquares) {
  const float g[] = {3, 4};
  EXPECT_DOUBLE_EQ(sumOfSquares(g, 2), 25.0);
}

TEST(Optimizer, ScheduleWarmsUpThenDecays) {
  LRSchedule s;
  s.maxLr = 1.0;
  s.minLr = 0.1;
  s.warmupSteps = 4;
  s.totalSteps = 14;
  EXPECT_DOUBLE_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0); // constant
  s.decay = LRSchedule::Decay::Cosine;
  EXPECT_NEAR(s.at(9), 0.1 + 0.9 * 0.5, 1e-12); // halfway through the decay
  EXPECT_NEAR(s.at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.at(20), 0.1, 1e-12); // past the end it stays at the floor
}

} // namespace
} // namespace mp::rt
