//===- OpFactsTest.cpp - what the ops say about themselves ----------------===//
//
// The facts the passes ask the ops: split rules (SplitOpInterface), result
// types (InferTypeOpInterface), traits.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class OpFactsTest : public ::testing::Test {
protected:
  OpFactsTest() { context.loadDialect<mp::MPDialect, func::FuncDialect>(); }

  /// Parses `body` as the body of a function with `args`; returns its ops.
  SmallVector<Operation *> parse(const std::string &args,
                                 const std::string &body) {
    module = parseSourceString<ModuleOp>(
        "func.func @f(" + args + ") {\n" + body + "\n  return\n}", &context);
    EXPECT_TRUE(module);
    SmallVector<Operation *> ops;
    if (!module)
      return ops;
    module->walk([&](Operation *op) {
      if (isa<mp::MPDialect>(op->getDialect()))
        ops.push_back(op);
    });
    return ops;
  }

  /// The op's split rule for `dims`: "operands -> results", or "fails".
  std::string split(Operation *op, ArrayRef<int64_t> dims) {
    auto rule = dyn_cast<mp::SplitOpInterface>(op);
    if (!rule)
      return "no rule";
    FailureOr<mp::SplitMapping> m = rule.propagateSplit(dims);
    if (failed(m))
      return "fails";
    std::string s;
    llvm::raw_string_ostream os(s);
    llvm::interleaveComma(m->operands, os);
    os << " -> ";
    llvm::interleaveComma(m->results, os);
    return s;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(OpFactsTest, ElementwiseOpsKeepTheSplit) {
  auto ops = parse("%x: tensor<2x8x16xf32>", R"mlir(
    %0 = mp.gelu %x : tensor<2x8x16xf32>
    %1 = mp.cast %x : tensor<2x8x16xf32> to tensor<2x8x16xf16>)mlir");
  EXPECT_EQ(split(ops[0], {2}), "2 -> 2");
  EXPECT_EQ(split(ops[1], {1}), "1 -> 1");
}

/// A broadcasting op aligns the split to the result's rank; a whole operand
/// spanning the split (a position table) must be cut, one broadcasting along
/// it stays whole; split operands must agree.
TEST_F(OpFactsTest, BroadcastingOpsAlignTheSplit) {
  auto ops = parse("%x: tensor<2x8x16xf32>, %pos: tensor<8x16xf32>, "
                   "%b: tensor<16xf32>, %y: tensor<2x8x16xf32>",
                   R"mlir(
    %0 = mp.add %x, %pos : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
    %1 = mp.add %x, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %2 = mp.mul %x, %y : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>)mlir");
  EXPECT_EQ(split(ops[0], {1, -1}), "1, 0 -> 1");
  EXPECT_EQ(split(ops[1], {1, -1}), "1, -1 -> 1");
  EXPECT_EQ(split(ops[1], {2, -1}), "2, 0 -> 2");
  EXPECT_EQ(split(ops[2], {1, 2}), "fails");
  EXPECT_EQ(split(ops[2], {2, 2}), "2, 2 -> 2");
}

TEST_F(OpFactsTest, ShapeOpsMoveTheSplit) {
  auto ops = parse("%x: tensor<2x8x16xf32>", R"mlir(
    %0 = mp.reshape %x : tensor<2x8x16xf32> -> tensor<2x8x4x4xf32>
    %1 = mp.transpose %0 [0, 2, 1, 3] : tensor<2x8x4x4xf32> -> tensor<2x4x8x4xf32>
    %2:2 = mp.split %x {axis = 2 : i64} : tensor<2x8x16xf32> -> tensor<2x8x8xf32>, tensor<2x8x8xf32>
    %3 = mp.slice %x {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x8x16xf32> -> tensor<2x4x16xf32>
    %4 = mp.reshape %x : tensor<2x8x16xf32> -> tensor<256xf32>)mlir");
  EXPECT_EQ(split(ops[0], {2}), "2 -> 2"); // features -> heads
  EXPECT_EQ(split(ops[0], {1}), "1 -> 1");
  EXPECT_EQ(split(ops[1], {2}), "2 -> 1");
  EXPECT_EQ(split(ops[2], {1}), "1 -> 1, 1");
  EXPECT_EQ(split(ops[2], {2}), "fails"); // along the split axis
  EXPECT_EQ(split(ops[3], {2}), "2 -> 2");
  EXPECT_EQ(split(ops[3], {1}), "fails"); // a part of the dim is taken
  EXPECT_EQ(split(ops[4], {1}), "fails"); // not contiguous blocks
}

TEST_F(OpFactsTest, NormsAndSoftmaxKeepTheirAxisWhole) {
  auto ops = parse("%x: tensor<2x8x16xf32>, %g: tensor<16xf32>", R"mlir(
    %0 = mp.layer_norm %x, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %1 = mp.rms_norm %x, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    %2 = mp.softmax %x : tensor<2x8x16xf32>)mlir");
  EXPECT_EQ(split(ops[0], {1, -1}), "1, -1 -> 1");
  EXPECT_EQ(split(ops[0], {2, -1}), "fails");
  EXPECT_EQ(split(ops[0], {1, 0}), "fails"); // a split scale
  EXPECT_EQ(split(ops[1], {1, -1}), "1, -1 -> 1");
  EXPECT_EQ(split(ops[1], {2, -1}), "fails");
  EXPECT_EQ(split(ops[2], {2}), "fails");
  EXPECT_EQ(split(ops[2], {0}), "0 -> 0");
}

TEST_F(OpFactsTest, AttentionSplitsByHeads) {
  auto ops = parse("%q: tensor<2x4x8x16xf32>, %kv: tensor<2x2x8x16xf32>, "
                   "%m: tensor<2x1x8x8xf32>, %mh: tensor<2x4x8x8xf32>",
                   R"mlir(
    %0 = mp.attention %q, %kv, %kv, %m {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x16xf32>
    %1 = mp.attention %q, %kv, %kv, %mh {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32>)mlir");
  EXPECT_EQ(split(ops[0], {1, 1, 1, -1}), "1, 1, 1, -1 -> 1");
  // A whole key and value of several heads are asked to be cut (tensor
  // parallelism cuts them only where that is free: a broadcast, values
  // computed from parameters).
  EXPECT_EQ(split(ops[0], {1, -1, -1, -1}), "1, 1, 1, -1 -> 1");
  EXPECT_EQ(split(ops[0], {2, 2, 2, -1}), "fails");
  // A mask per head (ALiBi, a relative position bias) splits with them.
  EXPECT_EQ(split(ops[1], {1, 1, 1, -1}), "1, 1, 1, 1 -> 1");
  EXPECT_EQ(split(ops[1], {1, 1, 1, 1}), "1, 1, 1, 1 -> 1");
  EXPECT_EQ(split(ops[1], {1, 1, 1, 2}), "fails");
}

/// Batch dims, rows of lhs and columns of rhs pass; the contracting dim
/// does not (partial sums). An operand spanning a split batch dim is cut.
TEST_F(OpFactsTest, MatmulSplitsBatchRowsAndColumns) {
  auto ops = parse("%a: tensor<2x4x8x16xf32>, %b: tensor<2x4x16x8xf32>, "
                   "%w: tensor<16x8xf32>",
                   R"mlir(
    %0 = mp.matmul %a, %b : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
    %1 = mp.matmul %a, %w : (tensor<2x4x8x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8x8xf32>)mlir");
  EXPECT_EQ(split(ops[0], {1, 1}), "1, 1 -> 1");   // heads
  EXPECT_EQ(split(ops[0], {1, -1}), "1, 1 -> 1");  // b spans the heads
  EXPECT_EQ(split(ops[0], {2, -1}), "2, -1 -> 2"); // rows
  EXPECT_EQ(split(ops[0], {-1, 3}), "-1, 3 -> 3"); // columns
  EXPECT_EQ(split(ops[0], {3, 2}), "fails");       // contracting
  EXPECT_EQ(split(ops[0], {2, 3}), "fails");       // rows and columns
  EXPECT_EQ(split(ops[1], {1, -1}), "1, -1 -> 1"); // w broadcasts
  EXPECT_EQ(split(ops[1], {-1, 1}), "-1, 1 -> 3");
}

/// Multi-query attention: the query heads split, the one key/value head
/// stays whole (every query head reads it); a split key/value of one head is
/// refused.
TEST_F(OpFactsTest, MultiQueryAttentionKeepsItsKeyValueHeadWhole) {
  auto ops = parse("%q: tensor<2x4x8x16xf32>, %kv: tensor<2x1x8x16xf32>",
                   R"mlir(
    %0 = mp.attention %q, %kv, %kv {scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x1x8x16xf32>, tensor<2x1x8x16xf32>) -> tensor<2x4x8x16xf32>)mlir");
  EXPECT_EQ(split(ops[0], {1, -1, -1}), "1, -1, -1 -> 1");
  EXPECT_EQ(split(ops[0], {1, 1, 1}), "1, 1, 1 -> 1");
  EXPECT_EQ(split(ops[0], {1, 3, 3}), "fails");
  EXPECT_EQ(split(ops[0], {-1, -1, 1}), "fails");
}

TEST_F(OpFactsTest, OpsWithoutARuleSayNothing) {
  auto ops = parse("%t: tensor<8x4xf32>, %i: tensor<2x3xi64>", R"mlir(
    %0 = mp.embedding %t, %i : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>)mlir");
  EXPECT_EQ(split(ops[0], {0, -1}), "no rule");
}

/// Builders infer result types: the importer and the passes pass none.
TEST_F(OpFactsTest, ResultTypesAreInferred) {
  OpBuilder b(&context);
  auto f32 = b.getF32Type();
  OwningOpRef<ModuleOp> m = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToStart(m->getBody());
  auto func = func::FuncOp::create(
      b, b.getUnknownLoc(), "f",
      b.getFunctionType({RankedTensorType::get({2, 1, 4, 3}, f32),
                         RankedTensorType::get({5, 3, 7}, f32),
                         RankedTensorType::get({7}, f32)},
                        {}));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  Location loc = b.getUnknownLoc();
  Value x = body->getArgument(0), w = body->getArgument(1),
        v = body->getArgument(2);
  auto mm = mp::MatmulOp::create(b, loc, x, w);
  EXPECT_EQ(mm.getType(), RankedTensorType::get({2, 5, 4, 7}, f32));
  auto add = mp::AddOp::create(b, loc, mm, v);
  EXPECT_EQ(add.getType(), mm.getType());
  auto cmp = mp::CompareOp::create(b, loc, mp::ComparePredicate::lt, mm, v);
  EXPECT_EQ(cmp.getType(), RankedTensorType::get({2, 5, 4, 7}, b.getI1Type()));
  auto t = mp::TransposeOp::create(b, loc, mm, ArrayRef<int64_t>{3, 2, 1, 0});
  EXPECT_EQ(t.getType(), RankedTensorType::get({7, 4, 5, 2}, f32));
  auto red = mp::ReduceOp::create(b, loc, mp::ReduceKind::sum, mm,
                                  ArrayRef<int64_t>{1, -1}, false);
  EXPECT_EQ(red.getType(), RankedTensorType::get({2, 4}, f32));
  auto e = mp::ExpOp::create(b, loc, red);
  EXPECT_EQ(e.getType(), red.getType());
}

TEST_F(OpFactsTest, TraitsWhereTheyAreTrue) {
  auto ops = parse("%x: tensor<4xf32>, %y: tensor<4xf32>", R"mlir(
    %0 = mp.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %1 = mp.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %2 = mp.exp %x : tensor<4xf32>
    %3 = mp.gelu %x : tensor<4xf32>)mlir");
  EXPECT_TRUE(ops[0]->hasTrait<OpTrait::IsCommutative>());
  EXPECT_FALSE(ops[1]->hasTrait<OpTrait::IsCommutative>());
  EXPECT_TRUE(ops[1]->hasTrait<OpTrait::ResultsBroadcastableShape>());
  EXPECT_TRUE(ops[2]->hasTrait<OpTrait::Elementwise>());
  EXPECT_FALSE(ops[2]->hasTrait<mp::OpTrait::TransformerOp>());
  EXPECT_TRUE(ops[3]->hasTrait<mp::OpTrait::TransformerOp>());
}

TEST_F(OpFactsTest, HeavyOpsCountTheirFlopsAsTheRuntimeDoes) {
  auto ops = parse(
      "%x: tensor<2x8x32xf32>, %w: tensor<32x96xf32>, "
      "%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>",
      "  %y = mp.linear %x, %w : (tensor<2x8x32xf32>, tensor<32x96xf32>) -> "
      "tensor<2x8x96xf32>\n"
      "  %a = mp.attention %q, %k, %k {scale = 0.25 : f32} : "
      "(tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) "
      "-> tensor<2x4x8x16xf32>\n"
      "  %e = mp.exp %y : tensor<2x8x96xf32>");
  ASSERT_EQ(ops.size(), 3u);
  // 2 · (2·8·96 results) · 32; 2 · B·H·Sq·Sk · (D + Dv).
  EXPECT_EQ(cast<mp::CostOpInterface>(ops[0]).getFlops(), 2.0 * 1536 * 32);
  EXPECT_EQ(cast<mp::CostOpInterface>(ops[1]).getFlops(),
            2.0 * 2 * 4 * 8 * 8 * 32);
  // Elementwise ops have no formula: the cost model counts their results.
  EXPECT_FALSE(isa<mp::CostOpInterface>(ops[2]));

  // An einsum contraction: b·i·j·k points, a multiply and an add each.
  auto einsum = parse("%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>",
                      "  %c = mp.einsum \"bij,bjk->bik\" %a, %b : "
                      "(tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> "
                      "tensor<2x3x5xf32>");
  ASSERT_EQ(einsum.size(), 1u);
  EXPECT_EQ(cast<mp::CostOpInterface>(einsum[0]).getFlops(),
            2.0 * 2 * 3 * 4 * 5);
}

} // namespace
