//===- FuseReducedNorms.cpp - an all-reduce and the norm after it as one --===//
//
// mp-fuse-reduced-norms: a row-parallel linear's partial sums (or a
// vocab-parallel embedding's) are all-reduced, its bias added, the residual
// added and the next norm taken
// (mp.add_layer_norm, after mp-fuse-residual-norms). Each tensor-parallel
// rank then adds and normalizes every row itself, the same work n times.
// Fused into one mp.all_reduce_add_layer_norm (or _rms_norm), ranks that
// share memory each sum, add and normalize 1/n of the rows and write them
// into every rank's results: the norm is divided like sequence
// parallelism divides it, without its layout, and the separate passes over
// the sum for the bias and the residual go. It runs last, on inference
// programs, before the memory plan (a train step is left as it is, as
// mp-fuse-residual-norms leaves it).
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Analysis/RankLocal.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mp {
#define GEN_PASS_DEF_MPFUSEREDUCEDNORMS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// An all_reduce, the bias add after it (if any), and the add-and-norm
/// that reads them.
struct ReducedNorm {
  shard::AllReduceOp reduce;
  AddOp biasAdd; // null without a bias
  Value addend;  // the bias, or null
  Operation *addNorm;
  Value residual;
};

/// The other operand of the binary op `op` when `value` is one of them.
Value otherOperand(Operation *op, Value value) {
  if (op->getOperand(0) == value)
    return op->getOperand(1);
  if (op->getOperand(1) == value)
    return op->getOperand(0);
  return {};
}

/// `value`'s one reader in its block, if it has exactly one.
Operation *soleReader(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  Operation *user = *value.getUsers().begin();
  Operation *def = value.getDefiningOp();
  return def && user->getBlock() == def->getBlock() ? user : nullptr;
}

/// The pattern rooted at `reduce`, if the whole of it is there: a sum over
/// one grid axis of f32 read once, by a bias add of one value per feature
/// read once or directly, by an add-and-norm whose other operand is the
/// residual; all in one pipeline chunk, and the residual, bias and the
/// norm's scale and bias the same on every rank (not in `rankLocal`): the
/// fused op sends one rank's rows to all.
std::optional<ReducedNorm> match(shard::AllReduceOp reduce,
                                 const DenseSet<Value> &rankLocal) {
  auto type = dyn_cast<RankedTensorType>(reduce.getResult().getType());
  if (reduce.getReduction() != shard::ReductionKind::Sum ||
      reduce.getGridAxes().size() != 1 || !type ||
      !type.getElementType().isF32() || type.getRank() == 0 ||
      reduce.getInput().getType() != type)
    return std::nullopt;
  ReducedNorm m{reduce, {}, {}, nullptr, {}};
  Value reduced = reduce.getResult();
  Operation *reader = soleReader(reduced);
  if (auto add = dyn_cast_or_null<AddOp>(reader)) {
    Value addend = otherOperand(add, reduced);
    auto addendType = dyn_cast<RankedTensorType>(addend.getType());
    if (add.getType() != type || !addendType || addendType.getRank() != 1 ||
        addendType.getDimSize(0) != type.getShape().back() ||
        !addendType.getElementType().isF32())
      return std::nullopt;
    m.biasAdd = add;
    m.addend = addend;
    reduced = add.getResult();
    reader = soleReader(reduced);
  }
  if (!isa_and_nonnull<AddLayerNormOp, AddRMSNormOp>(reader))
    return std::nullopt;
  m.residual = otherOperand(reader, reduced);
  if (!m.residual || m.residual == reduced)
    return std::nullopt;
  auto local = [&](Value v) { return v && rankLocal.contains(v); };
  if (local(m.residual) || local(m.addend) ||
      llvm::any_of(reader->getOperands().drop_front(2), local))
    return std::nullopt;
  StringRef stage = MPDialect::getStageAttrName();
  if (reader->getAttr(stage) != reduce->getAttr(stage) ||
      (m.biasAdd && m.biasAdd->getAttr(stage) != reduce->getAttr(stage)))
    return std::nullopt;
  m.addNorm = reader;
  return m;
}

/// Replaces the matched ops by one fused op at the add-and-norm's place,
/// where every operand is defined.
void fuse(ReducedNorm m) {
  Operation *addNorm = m.addNorm;
  OpBuilder b(addNorm);
  Type type = m.reduce.getResult().getType();
  auto grid = m.reduce.getGridAttr();
  IntegerAttr axis = b.getI64IntegerAttr(m.reduce.getGridAxes().front());
  Value partial = m.reduce.getInput();
  Operation *fused;
  if (auto layer = dyn_cast<AddLayerNormOp>(addNorm))
    fused = AllReduceAddLayerNormOp::create(
        b, addNorm->getLoc(), type, type, partial, m.residual, layer.getScale(),
        layer.getBias(), m.addend, grid, axis, layer.getAxisAttr(),
        layer.getEpsilonAttr());
  else
    fused = AllReduceAddRMSNormOp::create(
        b, addNorm->getLoc(), type, type, partial, m.residual,
        cast<AddRMSNormOp>(addNorm).getScale(), m.addend, grid, axis,
        cast<AddRMSNormOp>(addNorm).getEpsilonAttr());
  fused->setDiscardableAttrs(addNorm->getDiscardableAttrDictionary());
  addNorm->replaceAllUsesWith(fused->getResults());
  addNorm->erase();
  if (m.biasAdd)
    m.biasAdd->erase();
  m.reduce->erase();
}

struct FuseReducedNormsPass
    : public mp::impl::MPFuseReducedNormsBase<FuseReducedNormsPass> {
  using MPFuseReducedNormsBase::MPFuseReducedNormsBase;

  void runOnOperation() override {
    if (isTrainStep(getOperation()))
      return;
    if (failed(MemoryPlan::refuseIfPlanned(getOperation(), getArgument())))
      return signalPassFailure();
    SymbolTableCollection symbols;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // (Rank-local values as the program stands: a fused op's results,
      // new, are the same on every rank, as the sums they replace were.
      // Matched one at a time: a fusion replaces the residual a later one
      // reads.)
      DenseSet<Value> rankLocal =
          rankLocalValues(func.getBody().front(), symbols);
      SmallVector<shard::AllReduceOp> reduces;
      func.walk([&](shard::AllReduceOp reduce) { reduces.push_back(reduce); });
      for (shard::AllReduceOp reduce : reduces)
        if (std::optional<ReducedNorm> m = match(reduce, rankLocal))
          fuse(*m);
    }
  }
};

} // namespace
