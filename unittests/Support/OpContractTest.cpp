//===- OpContractTest.cpp - the op contract table -------------------------===//
#include "mp/Support/OpContract.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace mp::contract;

namespace {

std::vector<OpKind> allKinds() {
  std::vector<OpKind> kinds;
#define MP_OP(KIND, NAME, OPERANDS, FIRST_OPTIONAL, RESULTS)                   \
  kinds.push_back(OpKind::KIND);
#include "mp/Support/OpContract.def"
  return kinds;
}

TEST(OpContract, NamesAreUniqueAndFoundBack) {
  std::set<std::string> names;
  for (OpKind kind : allKinds()) {
    const OpInfo &op = info(kind);
    EXPECT_TRUE(names.insert(op.name).second) << op.name << " twice";
    ASSERT_TRUE(opKindFromName(op.name).has_value()) << op.name;
    EXPECT_EQ(*opKindFromName(op.name), kind);
  }
  EXPECT_FALSE(opKindFromName("no_such_op").has_value());
  EXPECT_FALSE(opKindFromName("").has_value());
}

TEST(OpContract, OptionalOperandsAreTrailingPositions) {
  for (OpKind kind : allKinds()) {
    const OpInfo &op = info(kind);
    if (op.firstOptional < 0)
      continue;
    EXPECT_FALSE(op.variadicOperands()) << op.name;
    EXPECT_GT(op.firstOptional, 0) << op.name;
    EXPECT_LT(op.firstOptional, op.operands) << op.name;
    EXPECT_EQ(op.requiredOperands(), op.firstOptional) << op.name;
    EXPECT_TRUE(op.isOptional(op.operands - 1)) << op.name;
    EXPECT_FALSE(op.isOptional(op.firstOptional - 1)) << op.name;
  }
  // The positions the writer and the binder name.
  EXPECT_EQ(info(OpKind::Linear).firstOptional, linear::Bias);
  EXPECT_EQ(info(OpKind::LayerNorm).firstOptional, layer_norm::Bias);
  EXPECT_EQ(info(OpKind::Attention).firstOptional, attention::Mask);
  EXPECT_EQ(info(OpKind::Attention).operands, attention::Mask + 1);
}

TEST(OpContract, AttributesAreListedOncePerOp) {
  for (OpKind kind : allKinds()) {
    std::set<std::string> names;
    for (const AttrInfo &a : info(kind).attributes)
      EXPECT_TRUE(names.insert(attrName(a.name)).second)
          << info(kind).name << "." << attrName(a.name);
  }
  ASSERT_EQ(info(OpKind::LayerNorm).attributes.size(), 2u);
  EXPECT_STREQ(attrName(info(OpKind::LayerNorm).attributes[0].name), "axis");
  EXPECT_EQ(info(OpKind::LayerNorm).attributes[1].type, AttrType::Float);
  EXPECT_TRUE(info(OpKind::Add).attributes.empty());
}

TEST(OpContract, EnumValuesOutsideTheirRangeAreRefused) {
  EXPECT_EQ(enumFromInt<ReduceKind>(3), ReduceKind::Min);
  EXPECT_FALSE(enumFromInt<ReduceKind>(4).has_value());
  EXPECT_FALSE(enumFromInt<ComparePredicate>(-1).has_value());
  EXPECT_EQ(enumFromInt<GeluApproximation>(1), GeluApproximation::Tanh);
  EXPECT_FALSE(enumFromInt<GeluApproximation>(2).has_value());
}

} // namespace
