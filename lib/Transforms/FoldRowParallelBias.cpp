//===- FoldRowParallelBias.cpp - a reduced linear's bias into its GEMM ----===//
//
// mp-fold-row-parallel-bias: Megatron's row-parallel linear sums its ranks'
// partial products (all_reduce, or reduce_scatter under sequence
// parallelism) and then adds the bias, a separate pass over the whole
// output. Each of t ranks adding b/t inside its GEMM (a free epilogue)
// gives the same sum: with t a power of two, b/t is exact and only the
// order of the additions changes. It runs on inference programs, named
// (--artifact does not run it by default: on the CPU it measured no faster);
// a train step is left as it is (recompute copies forward ops that must
// compute bit for bit what they copy).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/bit.h"

namespace mp {
#define GEN_PASS_DEF_MPFOLDROWPARALLELBIAS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// A row-parallel linear's reduction and the bias add that follows it.
struct RowBias {
  LinearOp linear;
  Operation *reduction; // shard.all_reduce or shard.reduce_scatter (sum)
  AddOp add;
  Value bias;
  int64_t ranks;
};

/// The ranks a sum over `axes` of `gridName` spans (0 if unknown).
int64_t ranksOf(Operation *op, FlatSymbolRefAttr gridName,
                ArrayRef<int16_t> axes, SymbolTableCollection &symbols) {
  shard::GridOp grid = shard::getGridOrNull(op, gridName, symbols);
  if (!grid)
    return 0;
  return shard::collectiveProcessGroupSize(axes, grid);
}

/// `add` as a reduced linear plus its bias, if it is one that folds.
std::optional<RowBias> match(AddOp add, SymbolTableCollection &symbols) {
  for (unsigned side : {0u, 1u}) {
    Value reduced = add->getOperand(side), bias = add->getOperand(1 - side);
    Operation *reduction = reduced.getDefiningOp();
    if (!reduction || !reduced.hasOneUse() ||
        reduced.getType() != add.getType())
      continue;
    int64_t ranks = 0;
    Value partial;
    if (auto all = dyn_cast<shard::AllReduceOp>(reduction)) {
      if (all.getReduction() != shard::ReductionKind::Sum)
        continue;
      ranks = ranksOf(all, all.getGridAttr(), all.getGridAxes(), symbols);
      partial = all.getInput();
    } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(reduction)) {
      if (scatter.getReduction() != shard::ReductionKind::Sum)
        continue;
      ranks = ranksOf(scatter, scatter.getGridAttr(), scatter.getGridAxes(),
                      symbols);
      partial = scatter.getInput();
    } else {
      continue;
    }
    auto linear = partial.getDefiningOp<LinearOp>();
    auto biasType = dyn_cast<RankedTensorType>(bias.getType());
    auto outType = dyn_cast<RankedTensorType>(partial.getType());
    if (!linear || linear.getBias() || !partial.hasOneUse() ||
        linear.getActivation() != LinearActivation::none || !biasType ||
        !outType || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != outType.getShape().back() ||
        biasType.getElementType() != outType.getElementType() || ranks < 2 ||
        !llvm::has_single_bit(static_cast<uint64_t>(ranks)))
      continue;
    // The bias must be available at the linear: a parameter read with no
    // operands (moved up) or a value defined before it.
    Operation *biasDef = bias.getDefiningOp();
    if (biasDef && !isa<GetParamOp>(biasDef) &&
        !(biasDef->getBlock() == linear->getBlock() &&
          biasDef->isBeforeInBlock(linear)))
      continue;
    if (!biasDef && bias.getParentBlock() != linear->getBlock())
      continue;
    return RowBias{linear, reduction, add, bias, ranks};
  }
  return std::nullopt;
}

/// Gives `fold.linear` the bias b/t and drops the add after the reduction.
void apply(RowBias fold) {
  OpBuilder b(fold.linear);
  Location loc = fold.add.getLoc();
  if (Operation *biasDef = fold.bias.getDefiningOp();
      biasDef && !biasDef->isBeforeInBlock(fold.linear))
    biasDef->moveBefore(fold.linear);
  auto biasType = cast<RankedTensorType>(fold.bias.getType());
  auto scalar = RankedTensorType::get({}, biasType.getElementType());
  Value share = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          scalar, FloatAttr::get(biasType.getElementType(),
                                 1.0 / static_cast<double>(fold.ranks))));
  Value scaled = MulOp::create(b, loc, biasType, fold.bias, share);
  for (Operation *op : {share.getDefiningOp(), scaled.getDefiningOp()})
    op->setDiscardableAttrs(fold.linear->getDiscardableAttrDictionary());
  fold.linear.getBiasMutable().assign(scaled);
  fold.add.getResult().replaceAllUsesWith(fold.reduction->getResult(0));
  fold.add->erase();
}

struct FoldRowParallelBiasPass
    : public mp::impl::MPFoldRowParallelBiasBase<FoldRowParallelBiasPass> {
  using MPFoldRowParallelBiasBase::MPFoldRowParallelBiasBase;

  void runOnOperation() override {
    if (isTrainStep(getOperation()))
      return;
    SymbolTableCollection symbols;
    SmallVector<RowBias> folds;
    getOperation().walk([&](AddOp add) {
      if (std::optional<RowBias> fold = match(add, symbols))
        folds.push_back(*fold);
    });
    for (const RowBias &fold : folds)
      apply(fold);
  }
};

} // namespace
