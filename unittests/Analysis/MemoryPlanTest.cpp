//===- MemoryPlanTest.cpp - the static arena plan -------------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class MemoryPlanTest : public ::testing::Test {
protected:
  MemoryPlanTest() {
    context.loadDialect<mp::MPDialect, func::FuncDialect>();
    context.getDiagEngine().registerHandler([this](Diagnostic &d) {
      errors.push_back(d.str());
      return success();
    });
  }

  func::FuncOp parse(const char *ir) {
    module = parseSourceString<ModuleOp>(ir, &context);
    EXPECT_TRUE(module);
    return module ? *module->getOps<func::FuncOp>().begin() : func::FuncOp();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<std::string> errors;
};

TEST(PlaceFirstFit, ReusesBytesOfRangesThatEnded) {
  // [0,1] and [2,3] can share bytes; [1,2] overlaps both.
  mp::ArenaPlacement p =
      mp::placeFirstFit({{100, 0, 1}, {64, 1, 2}, {100, 2, 3}}, 64);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 128, 0}));
  EXPECT_EQ(p.peak, 192);
  EXPECT_EQ(p.unplanned, 264);
}

/// What attach writes, read gives back.
TEST_F(MemoryPlanTest, AttachedPlanReadsBack) {
  func::FuncOp f = parse(R"mlir(
    func.func @main(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
      %0 = mp.exp %x : tensor<2x64xf32>
      %1 = mp.reshape %0 : tensor<2x64xf32> -> tensor<128xf32>
      %2 = mp.reshape %1 : tensor<128xf32> -> tensor<2x64xf32>
      %3 = mp.tanh %2 : tensor<2x64xf32>
      return %3 : tensor<2x64xf32>
    })mlir");
  FailureOr<mp::MemoryPlan> plan = mp::MemoryPlan::compute(f);
  ASSERT_TRUE(succeeded(plan));
  EXPECT_FALSE(mp::MemoryPlan::isAttached(f));
  plan->attach(f);
  EXPECT_TRUE(mp::MemoryPlan::isAttached(f));
  FailureOr<mp::MemoryPlan> read = mp::MemoryPlan::read(f);
  ASSERT_TRUE(succeeded(read)) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(read->peakBytes(), plan->peakBytes());
  f.walk([&](Operation *op) {
    for (Value r : op->getResults()) {
      EXPECT_EQ(read->offset(r), plan->offset(r));
      EXPECT_EQ(read->isView(r), isa<mp::ReshapeOp>(op));
    }
  });
}

/// A hand-edited plan that puts two values live at once in the same bytes,
/// or a value past the arena, is refused.
TEST_F(MemoryPlanTest, ReadRefusesPlansThatCorruptData) {
  const char *ir = R"mlir(
    func.func @main(%x: tensor<2x64xf32> {mp.arena_offset = 512 : i64}) -> tensor<2x64xf32> attributes {mp.arena_bytes = 1024 : i64} {
      %0 = mp.exp %x {mp.arena_offsets = array<i64: 0>} : tensor<2x64xf32>
      %1 = mp.tanh %0 {mp.arena_offsets = array<i64: 0>} : tensor<2x64xf32>
      %2 = mp.add %0, %1 {mp.arena_offsets = array<i64: 512>} : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
      return %2 : tensor<2x64xf32>
    })mlir";
  EXPECT_TRUE(failed(mp::MemoryPlan::read(parse(ir))));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "the memory plan places two values live at the same "
                       "time in the same bytes (offsets 0 and 0)");
  errors.clear();
  func::FuncOp f = parse(ir);
  f->setAttr("mp.arena_bytes",
             IntegerAttr::get(IntegerType::get(&context, 64), 512));
  EXPECT_TRUE(failed(mp::MemoryPlan::read(f)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "arena offset 512 of a 512-byte value does not fit the "
                       "512-byte arena");
}

/// A view's or an in-place result's recorded offset must be its operand's:
/// an edit that moves one apart is refused rather than ignored.
TEST_F(MemoryPlanTest, ReadRefusesSharedBytesEditedApart) {
  func::FuncOp f = parse(R"mlir(
    func.func @main(%x: tensor<2x64xf32>, %s: tensor<64xf32>) -> (tensor<2x64xf32>, tensor<128xf32>) {
      %0 = mp.exp %x : tensor<2x64xf32>
      %1 = mp.tanh %x : tensor<2x64xf32>
      %sum, %norm = mp.add_rms_norm %0, %1, %s : (tensor<2x64xf32>, tensor<2x64xf32>, tensor<64xf32>) -> (tensor<2x64xf32>, tensor<2x64xf32>)
      %2 = mp.reshape %norm : tensor<2x64xf32> -> tensor<128xf32>
      return %sum, %2 : tensor<2x64xf32>, tensor<128xf32>
    })mlir");
  FailureOr<mp::MemoryPlan> plan = mp::MemoryPlan::compute(f);
  ASSERT_TRUE(succeeded(plan));
  Operation *fused = &*std::next(f.getBody().front().begin(), 2);
  // The pairs the op takes are the contract's: the sum over lhs, the norm
  // over rhs.
  EXPECT_EQ(plan->inPlaceOperand(fused->getResult(0)), fused->getOperand(0));
  EXPECT_EQ(plan->inPlaceOperand(fused->getResult(1)), fused->getOperand(1));
  plan->attach(f);
  ASSERT_TRUE(succeeded(mp::MemoryPlan::read(f)));

  auto offsets = [&](Operation *op) {
    return SmallVector<int64_t>(
        op->getAttrOfType<DenseI64ArrayAttr>("mp.arena_offsets").asArrayRef());
  };
  auto edit = [&](Operation *op, unsigned result, int64_t offset) {
    SmallVector<int64_t> edited = offsets(op);
    edited[result] = offset;
    op->setAttr("mp.arena_offsets", DenseI64ArrayAttr::get(&context, edited));
  };
  SmallVector<int64_t> planned = offsets(fused);
  int64_t elsewhere = plan->peakBytes(); // (only checked against the owner)
  edit(fused, 1, elsewhere);
  EXPECT_TRUE(failed(mp::MemoryPlan::read(f)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "result #1 has arena offset " +
                           std::to_string(elsewhere) +
                           ", but it is written in place of its operand, at "
                           "offset " +
                           std::to_string(planned[1]) +
                           " in the memory plan (run mp-plan-memory again)");
  errors.clear();
  edit(fused, 1, planned[1]);
  Operation *view = fused->getNextNode();
  edit(view, 0, elsewhere);
  EXPECT_TRUE(failed(mp::MemoryPlan::read(f)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("but it is a view, at offset"), std::string::npos)
      << errors[0];
  errors.clear();
  view->setAttr("mp.arena_offsets",
                DenseI64ArrayAttr::get(&context, {planned[1], planned[1]}));
  EXPECT_TRUE(failed(mp::MemoryPlan::read(f)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "has 2 arena offsets for 1 results (run mp-plan-memory "
                       "again)");
}

} // namespace
