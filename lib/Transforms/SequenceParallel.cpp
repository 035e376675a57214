//===- SequenceParallel.cpp - Megatron sequence parallelism ---------------===//
//
// Walks the tensor-parallel program in order, turning each all-reduce into a
// reduce-scatter over the sequence and carrying the sequence split forward
// through every op whose split rule (SplitOpInterface) lets it run on the
// local block (elementwise ops, norms over the hidden dimension, ...). Any
// other use gets the whole sequence back through one all-gather per value.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/RankLocal.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

#define DEBUG_TYPE "mp-sequence-parallel"

namespace mp {
#define GEN_PASS_DEF_MPSEQUENCEPARALLEL
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

struct SequenceParallelPass
    : public mp::impl::MPSequenceParallelBase<SequenceParallelPass> {
  using MPSequenceParallelBase::MPSequenceParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<shard::GridOp> grid = findGrid(module);
    FailureOr<func::FuncOp> func = getEntryFunction(module);
    if (failed(grid) || failed(func))
      return signalPassFailure();
    ranks = 1;
    for (int64_t d : grid->getShape())
      ranks *= d;
    if (ranks == 1)
      return;
    gridRef = FlatSymbolRefAttr::get(*grid);
    SymbolTableCollection symbols;
    rankLocal = rankLocalValues(func->getBody().front(), symbols);
    SmallVector<Operation *> ops;
    for (Operation &op : func->getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops)
      if (failed(visit(op)))
        return signalPassFailure();
  }

  FailureOr<shard::GridOp> findGrid(ModuleOp module);
  std::optional<int64_t> splitDim(shard::AllReduceOp reduce) const;
  LogicalResult visit(Operation *op);
  std::optional<SplitMapping> carry(Operation *op);
  LogicalResult scatter(shard::AllReduceOp reduce);
  Value gathered(Value v, Operation *user);
  Value sliced(Value whole, int64_t dim, Operation *user);
  void markLocal(Value v, int64_t dim);

  int64_t ranks = 1;
  FlatSymbolRefAttr gridRef;
  llvm::DenseMap<Value, int64_t> seqDim; // value -> split (sequence) dim
  llvm::DenseMap<Value, Value> wholeOf;  // split value -> all-gathered
  // Values that differ between the tensor-parallel ranks (found before
  // this pass rewrites): a sequence cut of one would mix the ranks' data.
  llvm::DenseSet<Value> rankLocal;
};

/// The tensor-parallel grid: the one named by the `grid` option, else the
/// module's only shard.grid.
FailureOr<shard::GridOp> SequenceParallelPass::findGrid(ModuleOp module) {
  auto grids = llvm::to_vector(module.getOps<shard::GridOp>());
  if (grids.empty())
    return emitError(module.getLoc())
           << "sequence parallelism needs tensor parallelism (tp > 1) first: "
              "the module has no shard.grid";
  if (!gridName.empty()) {
    if (auto grid = module.lookupSymbol<shard::GridOp>(gridName))
      return grid;
    return emitError(module.getLoc())
           << "mp-sequence-parallel: no shard.grid named '" << gridName << "'";
  }
  if (grids.size() == 1)
    return grids.front();
  return emitError(module.getLoc())
         << "mp-sequence-parallel: the module has " << grids.size()
         << " shard.grid ops; name the tensor-parallel one (grid=NAME)";
}

void SequenceParallelPass::markLocal(Value v, int64_t dim) {
  RankedTensorType t = tensorType(v);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] /= ranks;
  v.setType(RankedTensorType::get(shape, t.getElementType()));
  seqDim[v] = dim;
}

/// The all-reduces of residual-stream activations, which become
/// reduce-scatters.
static bool scatters(Operation *op) {
  auto reduce = dyn_cast<shard::AllReduceOp>(op);
  return reduce && !reduce->hasAttr(MPDialect::getNormStatisticsAttrName()) &&
         cast<RankedTensorType>(reduce.getType()).getRank() >= 2;
}

/// The dim `reduce`'s reduce-scatter splits. Megatron splits the sequence,
/// the dim before the hidden size in [batch, sequence, hidden]. A reduce
/// whose sum meets a value split already (the residual stream, within a few
/// ops that keep its shape) takes that value's dim, so that a
/// sequence-first [S, B, H] layer matches its embedding's split
/// (sequence-first after a transpose). Never the hidden size.
/// Otherwise the dim before the hidden size, else any other that divides by
/// the ranks: everything between a reduce-scatter and its all-gather works
/// position by position.
std::optional<int64_t>
SequenceParallelPass::splitDim(shard::AllReduceOp reduce) const {
  RankedTensorType t = tensorType(reduce.getResult());
  auto divides = [&](int64_t d) {
    return d < t.getRank() - 1 && t.getDimSize(d) % ranks == 0;
  };
  SmallVector<Value> frontier = {reduce.getResult()};
  for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
    SmallVector<Value> next;
    for (Value v : frontier)
      for (Operation *user : v.getUsers())
        for (Value operand : user->getOperands()) {
          auto it = seqDim.find(operand);
          if (it != seqDim.end() &&
              tensorType(operand).getRank() == t.getRank() &&
              divides(it->second))
            return it->second;
          if (operand == v)
            for (Value result : user->getResults())
              if (auto type = dyn_cast<RankedTensorType>(result.getType());
                  type && type.getShape() == t.getShape())
                next.push_back(result);
        }
    frontier = std::move(next);
  }
  for (int64_t d = t.getRank() - 2; d >= 0; --d)
    if (divides(d))
      return d;
  return std::nullopt;
}

LogicalResult SequenceParallelPass::scatter(shard::AllReduceOp reduce) {
  RankedTensorType t = cast<RankedTensorType>(reduce.getType());
  std::optional<int64_t> found = splitDim(reduce);
  // Outside the layers (a classifier's MLP on pooled [B, C] vectors, a
  // diffusion transformer's timestep MLP) a sum with no dim to scatter
  // stays an all-reduce, its result whole as without sp.
  if (!found && !reduce->hasAttr(MPDialect::getLayerAttrName()))
    return success();
  if (!found) {
    int64_t before = t.getRank() - 2;
    InFlightDiagnostic error = reduce.emitError();
    error << "sequence length (" << t.getDimSize(before)
          << ") is not divisible by the tensor-parallel size " << ranks
          << ", which sequence parallelism splits it by (it splits dimension "
          << before << " of the activations " << t
          << ", the one before the hidden size";
    if (t.getRank() > 2)
      error << ", or else another that divides: none does";
    return error << ")";
  }
  int64_t dim = *found;
  OpBuilder b(reduce);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] /= ranks;
  auto rs = shard::ReduceScatterOp::create(
      b, reduce.getLoc(), RankedTensorType::get(shape, t.getElementType()),
      gridRef, b.getDenseI16ArrayAttr({0}), reduce.getInput(),
      shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
      b.getIndexAttr(dim));
  if (Attribute layer = reduce->getAttr(MPDialect::getLayerAttrName()))
    rs->setAttr(MPDialect::getLayerAttrName(), layer);
  reduce.getResult().replaceAllUsesWith(rs.getResult());
  reduce.erase();
  seqDim[rs.getResult()] = dim;
  return success();
}

Value SequenceParallelPass::gathered(Value v, Operation *user) {
  Value &whole = wholeOf[v];
  if (whole)
    return whole;
  OpBuilder b(user);
  if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(v.getParentBlock());
  RankedTensorType t = tensorType(v);
  int64_t dim = seqDim.lookup(v);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] *= ranks;
  auto gather = shard::AllGatherOp::create(
      b, v.getLoc(), RankedTensorType::get(shape, t.getElementType()), gridRef,
      b.getDenseI16ArrayAttr({0}), v, b.getIndexAttr(dim));
  if (Attribute layer = user->getAttr(MPDialect::getLayerAttrName()))
    gather->setAttr(MPDialect::getLayerAttrName(), layer);
  whole = gather.getResult();
  return whole;
}

Value SequenceParallelPass::sliced(Value whole, int64_t dim, Operation *user) {
  OpBuilder b(user);
  RankedTensorType t = tensorType(whole);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] /= ranks;
  return shard::AllSliceOp::create(
             b, user->getLoc(),
             RankedTensorType::get(shape, t.getElementType()), whole,
             gridRef.getValue(), ArrayRef<shard::GridAxis>{0}, dim)
      .getResult();
}

/// The op's split rule for its sequence-split operands, when every result
/// comes out split along a dim that divides by the ranks; nullopt when the
/// op needs the whole sequence.
std::optional<SplitMapping> SequenceParallelPass::carry(Operation *op) {
  // A slice's rule compares its bounds with its input's size, which is
  // local here: a slice passes the sequence split where it takes the whole
  // (global) sequence, its other dims as it likes.
  if (auto slice = dyn_cast<SliceOp>(op)) {
    int64_t d = seqDim.lookup(slice.getInput());
    bool whole = slice.getStarts()[d] == 0 && slice.getStrides()[d] == 1 &&
                 slice.getLimits()[d] ==
                     tensorType(slice.getInput()).getDimSize(d) * ranks;
    if (!whole)
      return std::nullopt;
    return SplitMapping{{d}, {d}};
  }
  auto rule = dyn_cast<SplitOpInterface>(op);
  if (!rule)
    return std::nullopt;
  SmallVector<int64_t> dims;
  for (Value v : op->getOperands())
    dims.push_back(seqDim.count(v) ? seqDim.lookup(v) : -1);
  FailureOr<SplitMapping> mapping = rule.propagateSplit(dims);
  if (failed(mapping))
    return std::nullopt;
  for (auto [result, d] : llvm::zip(op->getResults(), mapping->results))
    if (d < 0 || tensorType(result).getDimSize(d) % ranks)
      return std::nullopt;
  for (auto [given, needed, operand] :
       llvm::zip(dims, mapping->operands, op->getOperands())) {
    if (given >= 0 && given != needed)
      return std::nullopt;
    // Only a value every rank holds whole may be cut to the local sequence
    // block (a head-split query gated by a residual-stream value is not).
    if (given < 0 && needed >= 0 && rankLocal.contains(operand))
      return std::nullopt;
  }
  return *mapping;
}

LogicalResult SequenceParallelPass::visit(Operation *op) {
  // (A distributed norm's statistics stay all-reduced: they are not
  // activations of the residual stream.)
  if (scatters(op))
    return scatter(cast<shard::AllReduceOp>(op));
  bool anySplit =
      llvm::any_of(op->getOperands(), [&](Value v) { return seqDim.count(v); });
  if (!anySplit)
    return success();
  if (std::optional<SplitMapping> mapping = carry(op)) {
    // Whole operands that span the split (a position table) are cut to the
    // local block.
    for (auto [operand, needed] :
         llvm::zip(op->getOpOperands(), mapping->operands))
      if (needed >= 0 && !seqDim.count(operand.get()))
        operand.set(sliced(operand.get(), needed, op));
    for (auto [result, d] : llvm::zip(op->getResults(), mapping->results))
      markLocal(result, d);
    if (auto slice = dyn_cast<SliceOp>(op)) {
      int64_t d = mapping->results[0];
      SmallVector<int64_t> limits(slice.getLimits());
      limits[d] = tensorType(slice.getResult()).getDimSize(d);
      slice.setLimits(limits);
    }
    return success();
  }
  // Anything else needs the whole sequence.
  for (OpOperand &operand : op->getOpOperands())
    if (seqDim.count(operand.get()))
      operand.set(gathered(operand.get(), op));
  return success();
}

} // namespace
