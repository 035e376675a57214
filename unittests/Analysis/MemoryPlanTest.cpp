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

} // namespace
