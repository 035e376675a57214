//===- ShapeTest.cpp - the ops' shape rules -------------------------------===//
#include "mp/Support/Shape.h"
#include "mp/Support/DType.h"

#include <gtest/gtest.h>

using namespace mp;

namespace {

TEST(ShapeRules, MatmulPromotesVectorsAndBroadcastsBatches) {
  Shape r;
  std::string e;
  ASSERT_TRUE(shape::matmul({2, 1, 4, 3}, {5, 3, 7}, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 5, 4, 7}));
  ASSERT_TRUE(shape::matmul({3}, {2, 3, 4}, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 4}));
  ASSERT_TRUE(shape::matmul({2, 3}, {3}, r, e)) << e;
  EXPECT_EQ(r, (Shape{2}));
  EXPECT_FALSE(shape::matmul({2, 3}, {4, 5}, r, e));
  EXPECT_EQ(e, "contracting dimensions differ: lhs has 3, rhs has 4");
  EXPECT_FALSE(shape::matmul({2, 2, 3}, {3, 3, 5}, r, e));
  EXPECT_EQ(e, "batch dimensions of 2x2x3 and 3x3x5 are not broadcastable");
  EXPECT_FALSE(shape::matmul({}, {3}, r, e));
}

TEST(ShapeRules, LinearWithAndWithoutTransposedWeight) {
  Shape r, bias{5};
  std::string e;
  ASSERT_TRUE(shape::linear({2, 8, 3}, {3, 5}, &bias, false, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 8, 5}));
  ASSERT_TRUE(shape::linear({2, 3}, {5, 3}, nullptr, true, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 5}));
  EXPECT_FALSE(shape::linear({2, 3}, {5, 3}, nullptr, false, r, e));
  EXPECT_EQ(e, "input feature size 3 does not match weight input size 5");
  Shape wrongBias{3};
  EXPECT_FALSE(shape::linear({2, 3}, {3, 5}, &wrongBias, false, r, e));
  EXPECT_EQ(e, "expected bias shape 5 but found 3");
}

TEST(ShapeRules, BroadcastOfSeveralOperands) {
  Shape r;
  std::string e;
  ASSERT_TRUE(shape::broadcast({{2, 1, 4}, {3, 1}, {4}}, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 3, 4}));
  EXPECT_FALSE(shape::broadcast({{2, 3}, {4}}, r, e));
  EXPECT_EQ(e, "operand shapes 2x3 and 4 are not broadcastable");
}

TEST(ShapeRules, AttentionGroupsQueryHeads) {
  Shape r, mask{1, 1, 8, 8}, badMask{7, 8};
  std::string e;
  ASSERT_TRUE(
      shape::attention({2, 8, 8, 16}, {2, 2, 8, 16}, {2, 2, 8, 4}, &mask, r, e))
      << e;
  EXPECT_EQ(r, (Shape{2, 8, 8, 4}));
  EXPECT_FALSE(shape::attention({2, 4, 8, 16}, {2, 3, 8, 16}, {2, 3, 8, 16},
                                nullptr, r, e));
  EXPECT_EQ(e, "query heads (4) must be a multiple of key/value heads (3)");
  EXPECT_FALSE(shape::attention({2, 4, 8, 8}, {2, 4, 8, 8}, {2, 4, 8, 8},
                                &badMask, r, e));
}

TEST(ShapeRules, ShapeOps) {
  Shape r;
  std::string e;
  ASSERT_TRUE(shape::transpose({2, 3, 4}, {2, 0, 1}, r, e)) << e;
  EXPECT_EQ(r, (Shape{4, 2, 3}));
  EXPECT_FALSE(shape::transpose({2, 3}, {0, 0}, r, e));
  ASSERT_TRUE(shape::slice({8, 6}, {1, 5}, {7, -1}, {2, -2}, r, e)) << e;
  EXPECT_EQ(r, (Shape{3, 3}));
  EXPECT_FALSE(shape::slice({8}, {0}, {9}, {1}, r, e));
  // Steps of any size take one element (the count once overflowed).
  ASSERT_TRUE(
      shape::slice({8, 8}, {4, 7}, {8, -1}, {INT64_MAX, INT64_MIN}, r, e))
      << e;
  EXPECT_EQ(r, (Shape{1, 1}));
  ASSERT_TRUE(shape::concat({{2, 3}, {2, 5}}, -1, r, e)) << e;
  EXPECT_EQ(r, (Shape{2, 8}));
  EXPECT_FALSE(shape::concat({{2, 3}, {3, 5}}, 1, r, e));
  EXPECT_TRUE(shape::split({6, 2}, 0, {{2, 2}, {4, 2}}, e)) << e;
  EXPECT_FALSE(shape::split({6, 2}, 0, {{2, 2}, {3, 2}}, e));
  EXPECT_EQ(e, "split sizes add up to 5 but the input dimension 0 is 6");
  EXPECT_FALSE(shape::split({6, 2}, 0, {{-1, 2}, {7, 2}}, e));
  EXPECT_EQ(e, "split size -1 is negative");
  ASSERT_TRUE(shape::gather({5, 6, 7}, {2, 3}, 1, r, e)) << e;
  EXPECT_EQ(r, (Shape{5, 2, 3, 7}));
  ASSERT_TRUE(shape::reduce({2, 3, 4}, {-1, 0}, false, r, e)) << e;
  EXPECT_EQ(r, (Shape{3}));
  EXPECT_FALSE(shape::reduce({2, 3}, {1, -1}, true, r, e));
  EXPECT_EQ(e, "axis -1 is repeated");
  EXPECT_TRUE(shape::expand({3, 1}, {2, 3, 4}, e));
  EXPECT_FALSE(shape::expand({2, 3}, {4, 3}, e));
  EXPECT_FALSE(shape::reshape({2, 8}, {3, 5}, e));
}

} // namespace

namespace {
TEST(TensorBytes, SizesWithoutOverflow) {
  int64_t bytes = 0;
  std::string why;
  ASSERT_TRUE(mp::tensorBytes({2, 3}, mp::DType::F32, bytes, why));
  EXPECT_EQ(bytes, 24);
  EXPECT_TRUE(
      mp::tensorBytes({0, int64_t(1) << 62}, mp::DType::F32, bytes, why));
  EXPECT_EQ(bytes, 0);
  EXPECT_FALSE(
      mp::tensorBytes({int64_t(1) << 40, 1 << 10}, mp::DType::F64, bytes, why));
  EXPECT_NE(why.find("more than"), std::string::npos);
  EXPECT_FALSE(mp::tensorBytes({-1, 8}, mp::DType::I8, bytes, why));
  EXPECT_EQ(why, "a negative dimension (-1)");
}
} // namespace
