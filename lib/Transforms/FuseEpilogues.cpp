//===- FuseEpilogues.cpp - activations folded into their linear -----------===//
//
// mp-fuse-epilogues: a GELU or SiLU that reads a linear's result, where that
// is the result's only use, becomes the linear's `activation`, which the
// runtime applies as the GEMM's epilogue (a oneDNN post-op on the CPU)
// instead of another pass over memory. It runs last, on the program an
// artifact is written from: partitioning and differentiation refuse a fused
// linear. A train step is left as it is: there the gradient reads most
// linears' results anyway, and a forward op that recompute copies into the
// backward must compute bit for bit what its copy computes.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

namespace mp {
#define GEN_PASS_DEF_MPFUSEEPILOGUES
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// The activation `op` computes on its single operand, if it can be fused.
std::optional<LinearActivation> activationOf(Operation *op) {
  if (auto gelu = dyn_cast<GeluOp>(op))
    return gelu.getApproximate() == GeluApproximation::tanh
               ? LinearActivation::gelu_tanh
               : LinearActivation::gelu;
  if (isa<SiluOp>(op))
    return LinearActivation::silu;
  return std::nullopt;
}

/// Folds `op` into the linear it reads, when it is that linear's only user.
bool fuse(Operation *op) {
  std::optional<LinearActivation> activation = activationOf(op);
  if (!activation)
    return false;
  auto linear = op->getOperand(0).getDefiningOp<LinearOp>();
  if (!linear || !linear->hasOneUse() ||
      linear.getActivation() != LinearActivation::none ||
      linear.getType() != op->getResult(0).getType())
    return false;
  linear.setActivation(*activation);
  op->getResult(0).replaceAllUsesWith(linear.getResult());
  op->erase();
  return true;
}

struct FuseEpiloguesPass
    : public mp::impl::MPFuseEpiloguesBase<FuseEpiloguesPass> {
  using MPFuseEpiloguesBase::MPFuseEpiloguesBase;

  void runOnOperation() override {
    // (The whole module: a train step split into pipeline chunks has
    // forward functions without backward ops.)
    if (isTrainStep(getOperation()))
      return;
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (activationOf(op))
        candidates.push_back(op);
    });
    for (Operation *op : candidates)
      fuse(op);
  }
};

} // namespace
