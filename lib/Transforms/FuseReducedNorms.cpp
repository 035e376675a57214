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
// Under sequence parallelism the same chain is a reduce_scatter, the bias,
// the add-and-norm of this rank's slice and an all_gather of the norm: it
// becomes one mp.reduce_scatter_add_layer_norm (or _rms_norm), whose ranks
// write their norms straight into every rank's gathered result, one
// meeting instead of two collectives.
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

/// A collective summing partial sums (an all_reduce, or a reduce_scatter
/// whose norm is all-gathered), the bias add after it (if any), and the
/// add-and-norm that reads them.
struct ReducedNorm {
  Operation *reduce;
  AddOp biasAdd; // null without a bias
  Value addend;  // the bias, or null
  Operation *addNorm;
  Value residual;
  shard::AllGatherOp gather; // a reduce_scatter's, of the norm
};

/// `value`'s one reader in its block, if it has exactly one.
Operation *soleReader(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  Operation *user = *value.getUsers().begin();
  Operation *def = value.getDefiningOp();
  return def && user->getBlock() == def->getBlock() ? user : nullptr;
}

/// The chain after `reduced`, the f32 sum a collective made: read once, by
/// a bias add of one value per feature read once or directly, by an
/// add-and-norm whose other operand is the residual, in the same pipeline
/// chunk.
std::optional<ReducedNorm> matchAfterSum(Operation *reduce, Value reduced) {
  auto type = dyn_cast<RankedTensorType>(reduced.getType());
  if (!type || !type.getElementType().isF32() || type.getRank() == 0)
    return std::nullopt;
  ReducedNorm m{reduce, {}, {}, nullptr, {}, {}};
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
  if (!m.residual || m.residual == reduced || !inSameStage(reduce, reader) ||
      (m.biasAdd && !inSameStage(reduce, m.biasAdd)))
    return std::nullopt;
  m.addNorm = reader;
  return m;
}

/// The pattern rooted at an all_reduce: a sum over one grid axis, and the
/// residual, bias and the norm's scale and bias the same on every rank (not
/// in `rankLocal`): the fused op sends one rank's rows to all.
std::optional<ReducedNorm> match(shard::AllReduceOp reduce,
                                 const DenseSet<Value> &rankLocal) {
  if (reduce.getReduction() != shard::ReductionKind::Sum ||
      reduce.getGridAxes().size() != 1 ||
      reduce.getInput().getType() != reduce.getResult().getType())
    return std::nullopt;
  std::optional<ReducedNorm> m = matchAfterSum(reduce, reduce.getResult());
  auto local = [&](Value v) { return v && rankLocal.contains(v); };
  if (!m || local(m->residual) || local(m->addend) ||
      llvm::any_of(m->addNorm->getOperands().drop_front(2), local))
    return std::nullopt;
  return m;
}

/// The norm's axis of an add-and-norm.
int64_t normAxis(Operation *addNorm) {
  if (auto layer = dyn_cast<AddLayerNormOp>(addNorm))
    return layer.getNormalizedAxis();
  return cast<RankedTensorType>(addNorm->getResult(0).getType()).getRank() - 1;
}

/// The pattern rooted at a reduce_scatter: a sum over one grid axis along
/// a dim before the norm's, whose norm an all_gather along the same dim
/// takes back to the partial sums' type. The norm's other readers (a
/// post-norm model's next residual), all in its block, get this rank's
/// slice of the gathered norm. (Each rank computes its own rows with its
/// own operands, as the unfused ops do: rank-local ones are fine.)
std::optional<ReducedNorm> match(shard::ReduceScatterOp scatter) {
  if (scatter.getReduction() != shard::ReductionKind::Sum ||
      scatter.getGridAxes().size() != 1)
    return std::nullopt;
  std::optional<ReducedNorm> m = matchAfterSum(scatter, scatter.getResult());
  const int64_t axis = scatter.getScatterAxis().getSExtValue();
  if (!m || axis >= normAxis(m->addNorm))
    return std::nullopt;
  auto gathers = [&](Operation *user) {
    auto gather = dyn_cast<shard::AllGatherOp>(user);
    return gather && gather.getGridAttr() == scatter.getGridAttr() &&
           gather.getGridAxes() == scatter.getGridAxes() &&
           gather.getGatherAxis().getSExtValue() == axis &&
           gather.getResult().getType() == scatter.getInput().getType() &&
           inSameStage(scatter, gather);
  };
  Value norm = m->addNorm->getResult(1);
  for (Operation *user : norm.getUsers()) {
    if (user->getBlock() != m->addNorm->getBlock())
      return std::nullopt;
    if (!m->gather && gathers(user))
      m->gather = cast<shard::AllGatherOp>(user);
  }
  if (!m->gather)
    return std::nullopt;
  return m;
}

/// The fused op for `m`, built by `b` at the add-and-norm's place.
Operation *buildFused(OpBuilder &b, ReducedNorm m) {
  Operation *addNorm = m.addNorm;
  Location loc = addNorm->getLoc();
  Type sum = addNorm->getResult(0).getType();
  auto layer = dyn_cast<AddLayerNormOp>(addNorm);
  auto rms = dyn_cast<AddRMSNormOp>(addNorm);
  if (auto reduce = dyn_cast<shard::AllReduceOp>(m.reduce)) {
    IntegerAttr gridAxis = b.getI64IntegerAttr(reduce.getGridAxes().front());
    Value partial = reduce.getInput();
    if (layer)
      return AllReduceAddLayerNormOp::create(
          b, loc, sum, sum, partial, m.residual, layer.getScale(),
          layer.getBias(), m.addend, reduce.getGridAttr(), gridAxis,
          layer.getAxisAttr(), layer.getEpsilonAttr());
    return AllReduceAddRMSNormOp::create(
        b, loc, sum, sum, partial, m.residual, rms.getScale(), m.addend,
        reduce.getGridAttr(), gridAxis, rms.getEpsilonAttr());
  }
  auto scatter = cast<shard::ReduceScatterOp>(m.reduce);
  IntegerAttr gridAxis = b.getI64IntegerAttr(scatter.getGridAxes().front());
  IntegerAttr scatterAxis =
      b.getI64IntegerAttr(scatter.getScatterAxis().getSExtValue());
  Value partial = scatter.getInput();
  Type gathered = m.gather.getResult().getType();
  if (layer)
    return ReduceScatterAddLayerNormOp::create(
        b, loc, sum, gathered, partial, m.residual, layer.getScale(),
        layer.getBias(), m.addend, scatter.getGridAttr(), gridAxis, scatterAxis,
        layer.getAxisAttr(), layer.getEpsilonAttr());
  return ReduceScatterAddRMSNormOp::create(
      b, loc, sum, gathered, partial, m.residual, rms.getScale(), m.addend,
      scatter.getGridAttr(), gridAxis, scatterAxis, rms.getEpsilonAttr());
}

/// Replaces the matched ops by one fused op at the add-and-norm's place,
/// where every operand is defined (the all_gather, if any, comes later),
/// keeping `rankLocal` true of the program.
void fuse(ReducedNorm m, DenseSet<Value> &rankLocal) {
  Operation *addNorm = m.addNorm;
  OpBuilder b(addNorm);
  Operation *fused = buildFused(b, m);
  fused->setDiscardableAttrs(addNorm->getDiscardableAttrDictionary());
  addNorm->getResult(0).replaceAllUsesWith(fused->getResult(0));
  if (m.gather) {
    Value norm = addNorm->getResult(1);
    if (!norm.hasOneUse()) { // (this rank's slice of the gathered norm)
      b.setInsertionPointAfter(fused);
      auto slice = shard::AllSliceOp::create(
          b, addNorm->getLoc(), norm.getType(), m.gather.getGridAttr(),
          m.gather.getGridAxesAttr(), fused->getResult(1),
          m.gather.getGatherAxisAttr());
      slice->setDiscardableAttrs(addNorm->getDiscardableAttrDictionary());
      norm.replaceUsesWithIf(slice.getResult(), [&](OpOperand &use) {
        return use.getOwner() != m.gather.getOperation();
      });
      rankLocal.insert(slice.getResult());
    }
    m.gather.getResult().replaceAllUsesWith(fused->getResult(1));
    rankLocal.insert(fused->getResult(0)); // (this rank's slice of the sum)
  } else {
    addNorm->getResult(1).replaceAllUsesWith(fused->getResult(1));
  }
  // (The erased ops' values leave the set: new ones may take their place.)
  for (Operation *op :
       {m.gather.getOperation(), addNorm, m.biasAdd.getOperation(), m.reduce})
    if (op) {
      for (Value v : op->getResults())
        rankLocal.erase(v);
      op->erase();
    }
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
      // (Rank-local values as the program stands, kept so by fuse: an
      // all-reduce fusion's results are the same on every rank, as the
      // sums they replace were; a reduce_scatter fusion's sum is this
      // rank's slice. Matched one at a time: a fusion replaces the residual
      // a later one reads.)
      DenseSet<Value> rankLocal =
          rankLocalValues(func.getBody().front(), symbols);
      SmallVector<Operation *> reduces;
      func.walk([&](Operation *op) {
        if (isa<shard::AllReduceOp, shard::ReduceScatterOp>(op))
          reduces.push_back(op);
      });
      for (Operation *reduce : reduces) {
        std::optional<ReducedNorm> m =
            isa<shard::AllReduceOp>(reduce)
                ? match(cast<shard::AllReduceOp>(reduce), rankLocal)
                : match(cast<shard::ReduceScatterOp>(reduce));
        if (m)
          fuse(*m, rankLocal);
      }
    }
  }
};

} // namespace
