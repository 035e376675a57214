//===- FuseResidualNorms.cpp - a residual add and its norm as one op ------===//
//
// mp-fuse-residual-norms: an mp.add of two operands of its own type whose
// result a layer_norm or rms_norm reads becomes mp.add_layer_norm or
// mp.add_rms_norm, with both results (the sum, for its other readers, and
// the norm of it), so that the runtime normalizes each row of the sum while
// it is in cache rather than reading it back in a second kernel (in f32,
// bf16 or f16). Like
// mp-fuse-epilogues it runs last, on inference programs: a train step is
// left as it is (its backward reads the sum anyway, and recompute copies
// forward ops that must compute bit for bit what they copy).
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/MemoryPlan.h"
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

/// The element types the fused kernels take: f32, and bf16 or f16, whose
/// sum they round before normalizing it as the two ops would.
bool isF32OrHalf(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isF32() || element.isBF16() || element.isF16();
}

/// Whether the fused kernel for a sum of `sumType` takes a norm scale or
/// bias of `paramType`: f32 for any sum, 16-bit for a 16-bit one.
bool takesNormParam(Type sumType, Type paramType) {
  Type sum = getElementTypeOrSelf(sumType);
  Type param = getElementTypeOrSelf(paramType);
  return param.isF32() || (!sum.isF32() && (param.isBF16() || param.isF16()));
}

/// The norms in `add`'s block that normalize its result, in program order.
SmallVector<Operation *> normsReading(AddOp add) {
  SmallVector<Operation *> norms;
  for (OpOperand &use : add.getResult().getUses()) {
    Operation *user = use.getOwner();
    if (isNorm(user) && use.getOperandNumber() == 0 &&
        user->getBlock() == add->getBlock())
      norms.push_back(user);
  }
  llvm::sort(norms,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return norms;
}

/// Whether `norm`'s scale and bias can be read at `add`: each one already
/// is, or is defined by an op without operands, regions or effects (an
/// mp.get_param next to the norm), which `hoisted` collects to be moved up.
bool availableAt(Operation *norm, AddOp add, DominanceInfo &dominance,
                 SmallVectorImpl<Operation *> &hoisted) {
  for (Value value : norm->getOperands().drop_front()) {
    if (value == add.getResult())
      return false;
    if (!takesNormParam(add.getType(), value.getType()))
      return false;
    if (dominance.properlyDominates(value, add))
      continue;
    Operation *def = value.getDefiningOp();
    if (!def || def->getNumOperands() != 0 || def->getNumRegions() != 0 ||
        !isPure(def) || def->getBlock() != add->getBlock())
      return false;
    hoisted.push_back(def);
  }
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

/// Fuses `add` with the first norm reading it that can take it.
void tryFuse(AddOp add, DominanceInfo &dominance) {
  Type type = add.getType();
  // (No broadcast: the kernel adds rows of equal operands.)
  if (add.getLhs().getType() != type || add.getRhs().getType() != type ||
      !isF32OrHalf(type))
    return;
  for (Operation *norm : normsReading(add)) {
    if (!inSameStage(add, norm))
      continue; // (a pipeline boundary between them)
    SmallVector<Operation *> hoisted;
    if (!availableAt(norm, add, dominance, hoisted))
      continue;
    for (Operation *def : hoisted)
      def->moveBefore(add);
    fuse(add, norm);
    return;
  }
}

struct FuseResidualNormsPass
    : public mp::impl::MPFuseResidualNormsBase<FuseResidualNormsPass> {
  using MPFuseResidualNormsBase::MPFuseResidualNormsBase;

  void runOnOperation() override {
    if (isTrainStep(getOperation()))
      return;
    if (failed(MemoryPlan::refuseIfPlanned(getOperation(), getArgument())))
      return signalPassFailure();
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    DominanceInfo dominance(getOperation());
    for (AddOp add : adds)
      tryFuse(add, dominance);
  }
};

} // namespace
