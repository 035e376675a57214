//===- ShardsTest.cpp - shards over ranks, blocks and parts ---------------===//
#include "mp/Runtime/Shards.h"

#include <gtest/gtest.h>

using namespace mp::rt;

namespace {

/// 0, 1, 2, ... as one byte each.
std::string iota(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(i);
  return s;
}

TEST(Shards, ShardsAssembleToTheWhole) {
  std::string whole = iota(24); // [4, 6], 3 groups of 2 columns
  std::vector<std::string> shards;
  for (int64_t r = 0; r < 2; ++r)
    shards.push_back(shardOf(whole, {4, 6}, 1, 3, 2, r));
  EXPECT_EQ(shards[0],
            std::string({0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22}));
  EXPECT_EQ(assembleShards({shards[0], shards[1]}, {4, 3}, 1, 3), whole);
}

TEST(Shards, BlocksAlongAnAxisJoinBack) {
  std::string whole = iota(24); // [4, 6]
  std::string a = blockAlong(whole, {4, 6}, 1, 1, 0, 4);
  std::string b = blockAlong(whole, {4, 6}, 1, 1, 4, 1);
  std::string c = blockAlong(whole, {4, 6}, 1, 1, 5, 1);
  EXPECT_EQ(b, std::string({4, 10, 16, 22}));
  std::string joined, error;
  // In any order.
  ASSERT_TRUE(joinParts({{5, c}, {0, a}, {4, b}}, {4, 6}, 1, 1, joined, error))
      << error;
  EXPECT_EQ(joined, whole);
}

TEST(Shards, APaddedBlockReadsZerosAndJoinsBackWithoutThem) {
  std::string whole = iota(6); // [3, 2], padded to 4 rows
  std::string padded = blockAlong(whole, {3, 2}, 1, 0, 0, 4);
  EXPECT_EQ(padded, std::string({0, 1, 2, 3, 4, 5, 0, 0}));
  // Past the end entirely: all zeros.
  EXPECT_EQ(blockAlong(whole, {3, 2}, 1, 0, 3, 1), std::string(2, '\0'));
  std::string joined, error;
  ASSERT_TRUE(joinParts({{0, padded}}, {3, 2}, 1, 0, joined, error)) << error;
  EXPECT_EQ(joined, whole);
  // Only the last part may run past the end.
  std::string first = blockAlong(whole, {3, 2}, 1, 0, 0, 2);
  EXPECT_FALSE(
      joinParts({{0, padded}, {4, first}}, {3, 2}, 1, 0, joined, error));
}

TEST(Shards, PartsThatDoNotTileAreErrors) {
  std::string whole = iota(24);
  std::string a = blockAlong(whole, {4, 6}, 1, 1, 0, 4);
  std::string b = blockAlong(whole, {4, 6}, 1, 1, 4, 1);
  std::string joined, error;
  // A gap (column 5 missing), an overlap, a start near INT64_MAX, a size
  // that is not whole columns, an axis out of range.
  EXPECT_FALSE(joinParts({{0, a}, {4, b}}, {4, 6}, 1, 1, joined, error));
  EXPECT_NE(error.find("cover [0, 5) of 6"), std::string::npos) << error;
  EXPECT_FALSE(
      joinParts({{0, a}, {3, b}, {5, b}}, {4, 6}, 1, 1, joined, error));
  EXPECT_NE(error.find("the part at 3"), std::string::npos) << error;
  EXPECT_FALSE(
      joinParts({{0, a}, {INT64_MAX, b}}, {4, 6}, 1, 1, joined, error));
  EXPECT_FALSE(joinParts({{0, a}, {4, std::string(3, 'x')}}, {4, 6}, 1, 1,
                         joined, error));
  EXPECT_FALSE(joinParts({{0, a}}, {4, 6}, 1, 2, joined, error));
}

} // namespace
