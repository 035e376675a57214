//===- FuseResidualNorms.cpp - a residual add and its norm as one op ------===//
//
// mp-fuse-residual-norms: an mp.add of two operands of its own type whose
// result a layer_norm or rms_norm reads becomes mp.add_layer_norm or
// mp.add_rms_norm, with both results (the sum, for its other readers, and
// the norm of it), so that the runtime normalizes each row of the sum while
// it is in cache rather than reading it back in a second kernel. Like
// mp-fuse-epilogues it runs last, on inference programs: a train step is
// left as it is (its backward reads the sum anyway, and recompute copies
// forward ops that must compute bit for bit what they copy).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/IR/Dominance.h"

namespace mp {
#define GEN_PASS_DEF_MPFUSERESIDUALNORMS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

bool isNorm(Operation *op) { return isa<LayerNormOp, RMSNormOp>(op); }

/// The first norm in `add`'s block that normalizes its result, if any.
Operation *normReading(AddOp add) {
  Operation *first = nullptr;
  for (OpOperand &use : add.getResult().getUses()) {
    Operation *user = use.getOwner();
    if (!isNorm(user) || use.getOperandNumber() != 0 ||
        user->getBlock() != add->getBlock())
      continue;
    if (!first || user->isBeforeInBlock(first))
      first = user;
  }
  return first;
}

/// Makes `value` available at `add`: true if it already is, or if its
/// definition takes no operands and has no effects (an mp.get_param or a
/// constant next to the norm), which is then moved up to just before `add`.
bool availableAt(Value value, AddOp add, DominanceInfo &dominance) {
  if (value == add.getResult())
    return false;
  if (dominance.properlyDominates(value, add))
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || def->getNumOperands() != 0 || !isPure(def) ||
      def->getBlock() != add->getBlock())
    return false;
  def->moveBefore(add);
  return true;
}

/// Replaces `add` and `norm` by their fused op, at the add's place.
void fuse(AddOp add, Operation *norm) {
  OpBuilder b(add);
  Type type = add.getType();
  Value lhs = add.getLhs(), rhs = add.getRhs();
  Operation *fused;
  if (auto layer = dyn_cast<LayerNormOp>(norm))
    fused = AddLayerNormOp::create(b, norm->getLoc(), type, type, lhs, rhs,
                                   layer.getScale(), layer.getBias(),
                                   layer.getAxisAttr(), layer.getEpsilonAttr());
  else
    fused = AddRMSNormOp::create(b, norm->getLoc(), type, type, lhs, rhs,
                                 cast<RMSNormOp>(norm).getScale(),
                                 cast<RMSNormOp>(norm).getEpsilonAttr());
  // The add's layer and pipeline chunk (the norm's chunk is the same).
  fused->setDiscardableAttrs(add->getDiscardableAttrDictionary());
  norm->getResult(0).replaceAllUsesWith(fused->getResult(1));
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  norm->erase();
  add.erase();
}

/// Fuses `add` with the norm that reads it, where they can be.
void tryFuse(AddOp add, DominanceInfo &dominance) {
  Type type = add.getType();
  if (add.getLhs().getType() != type || add.getRhs().getType() != type)
    return; // (a broadcast: the kernel reads rows of equal operands)
  Operation *norm = normReading(add);
  if (!norm)
    return;
  StringRef stage = MPDialect::getStageAttrName();
  if (add->getAttr(stage) != norm->getAttr(stage))
    return; // (a pipeline boundary between them)
  for (Value operand : norm->getOperands().drop_front())
    if (!availableAt(operand, add, dominance))
      return;
  fuse(add, norm);
}

struct FuseResidualNormsPass
    : public mp::impl::MPFuseResidualNormsBase<FuseResidualNormsPass> {
  using MPFuseResidualNormsBase::MPFuseResidualNormsBase;

  void runOnOperation() override {
    if (isTrainStep(getOperation()))
      return;
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    DominanceInfo dominance(getOperation());
    for (AddOp add : adds)
      tryFuse(add, dominance);
  }
};

} // namespace
