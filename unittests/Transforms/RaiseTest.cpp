//===- RaiseTest.cpp - mp-raise on IR built in the test -------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class RaiseTest : public ::testing::Test {
protected:
  RaiseTest() { context.loadDialect<mp::MPDialect, func::FuncDialect>(); }

  OwningOpRef<ModuleOp> raise(const char *ir) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(ir, &context);
    EXPECT_TRUE(module);
    PassManager pm(&context);
    pm.addPass(mp::createMPRaise());
    EXPECT_TRUE(succeeded(pm.run(*module)));
    return module;
  }

  template <typename OpT> int64_t count(ModuleOp module) {
    int64_t n = 0;
    module.walk([&](OpT) { ++n; });
    return n;
  }

  MLIRContext context;
};

/// A bias that is not a parameter (an activation) must not be folded into
/// the linear: the partitioner treats linear biases as weights.
TEST_F(RaiseTest, BiasMustBeAParameter) {
  OwningOpRef<ModuleOp> module = raise(R"mlir(
    mp.param @w : tensor<8x4xf32>
    func.func @f(%x: tensor<2x8xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
      %w = mp.get_param @w : tensor<8x4xf32>
      %0 = mp.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %1 = mp.add %0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      return %1 : tensor<2x4xf32>
    })mlir");
  EXPECT_EQ(count<mp::LinearOp>(*module), 1);
  EXPECT_EQ(count<mp::AddOp>(*module), 1);
  module->walk([](mp::LinearOp op) { EXPECT_FALSE(op.getBias()); });
}

/// A matmul whose result has two users keeps its bias add separate.
TEST_F(RaiseTest, SharedMatmulResultKeepsItsAdd) {
  OwningOpRef<ModuleOp> module = raise(R"mlir(
    mp.param @w : tensor<8x4xf32>
    mp.param @b : tensor<4xf32>
    func.func @f(%x: tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      %w = mp.get_param @w : tensor<8x4xf32>
      %b = mp.get_param @b : tensor<4xf32>
      %0 = mp.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %1 = mp.add %0, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
      return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
    })mlir");
  EXPECT_EQ(count<mp::LinearOp>(*module), 1);
  EXPECT_EQ(count<mp::AddOp>(*module), 1);
}

/// The attention scale is read from the divisor: 1 / 4 here.
TEST_F(RaiseTest, AttentionScaleComesFromTheDivisor) {
  OwningOpRef<ModuleOp> module = raise(R"mlir(
    func.func @f(%q: tensor<1x2x3x16xf32>, %kt: tensor<1x2x16x3xf32>, %v: tensor<1x2x3x16xf32>) -> tensor<1x2x3x16xf32> {
      %s = mp.matmul %q, %kt : (tensor<1x2x3x16xf32>, tensor<1x2x16x3xf32>) -> tensor<1x2x3x3xf32>
      %c = mp.constant dense<4.0> : tensor<f32>
      %d = mp.div %s, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
      %p = mp.softmax %d {axis = 3 : i64} : tensor<1x2x3x3xf32>
      %o = mp.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x16xf32>) -> tensor<1x2x3x16xf32>
      return %o : tensor<1x2x3x16xf32>
    })mlir");
  int64_t found = 0;
  module->walk([&](mp::AttentionOp op) {
    ++found;
    EXPECT_FLOAT_EQ(op.getScale().convertToFloat(), 0.25f);
    EXPECT_FALSE(op.getCausal());
    EXPECT_FALSE(op.getMask());
  });
  EXPECT_EQ(found, 1);
}

} // namespace
