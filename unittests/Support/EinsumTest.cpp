//===- EinsumTest.cpp - einsum equation parsing ---------------------------===//
#include "mp/Support/Einsum.h"

#include <gtest/gtest.h>

using namespace mp;

namespace {

std::vector<int64_t>
outputShape(const std::string &eq,
            const std::vector<std::vector<int64_t>> &shapes,
            std::string *errorOut = nullptr) {
  std::vector<int64_t> ranks;
  for (const auto &s : shapes)
    ranks.push_back(static_cast<int64_t>(s.size()));
  EinsumSpec spec;
  std::string error;
  std::vector<int64_t> out;
  if (!parseEinsum(eq, ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, out, error)) {
    if (errorOut)
      *errorOut = error;
    return {-1};
  }
  return out;
}

TEST(Einsum, OuterProductForRotaryTables) {
  EXPECT_EQ(outputShape("i,j->ij", {{8}, {4}}), (std::vector<int64_t>{8, 4}));
}

TEST(Einsum, BatchedMatmul) {
  EXPECT_EQ(outputShape("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}),
            (std::vector<int64_t>{2, 3, 5}));
}

TEST(Einsum, ImplicitOutputIsSortedSingletons) {
  // "ij,jk" sums j and keeps i, k in alphabetical order.
  EXPECT_EQ(outputShape("ij,jk", {{3, 4}, {4, 5}}),
            (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(outputShape("ba", {{3, 4}}), (std::vector<int64_t>{4, 3}));
}

TEST(Einsum, EllipsisBroadcastsAndKeepsLeadingDims) {
  EXPECT_EQ(outputShape("...ii->...i", {{2, 3, 3}}),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(outputShape("...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}),
            (std::vector<int64_t>{2, 5, 3, 6}));
}

TEST(Einsum, SpacesAreIgnored) {
  EXPECT_EQ(outputShape(" i , j -> i j ", {{2}, {3}}),
            (std::vector<int64_t>{2, 3}));
}

TEST(Einsum, ErrorsNameTheProblem) {
  std::string error;
  outputShape("ij,jk->ik", {{3, 4}, {5, 6}}, &error);
  EXPECT_EQ(error, "label 'j' has size 4 and 5");
  outputShape("ij->ij", {{3}}, &error);
  EXPECT_EQ(error, "term 'ij' does not match operand 0 of rank 1");
  outputShape("i->k", {{3}}, &error);
  EXPECT_EQ(error, "output label 'k' does not appear in any input");
  outputShape("i,j", {{3}}, &error);
  EXPECT_EQ(error,
            "equation 'i,j' has 2 input terms but 1 operands were given");
  outputShape("i2->i", {{3, 3}}, &error);
  EXPECT_EQ(error, "invalid character '2' in equation");
}

} // namespace
