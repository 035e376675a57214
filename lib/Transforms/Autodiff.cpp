//===- Autodiff.cpp - reverse-mode differentiation of the entry function --===//
//
// Appends the backward pass to the entry function: adjoints flow from the
// loss back through every active op (one that depends on a parameter and
// that the loss depends on), each op building its operands' adjoints by its
// own rule (AutodiffOpInterface). The pass knows no op but mp.get_param
// (where adjoints become gradients) and the shard collectives, which decide
// what each rank holds.
//
// In a partitioned program (one per rank), a value is replicated (every
// rank holds the same) or rank-local (a shard, or a partial sum). A rank's
// adjoint of a replicated value has two parts: contributions every rank
// computes alike (from ops whose results are replicated), and contributions
// from rank-local consumers (a column-parallel linear's input gradient),
// which only sum to the true adjoint over the group. The second part is
// reduced where the value is defined: all-reduced (Megatron's f), or
// reduce-scattered when the value is an all-gather's result (sequence
// parallelism); a view, or the slices a value is cut into, pass it on
// unreduced, so that the slices of one value are reduced once, together;
// a replicated parameter's
// gradient likewise (norm weights under sequence parallelism, as Megatron's
// finalize_model_grads). The collectives' own rules are the conjugates:
// all_reduce <-> identity, reduce_scatter <-> all_gather, all_slice <->
// all_gather.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Analysis/RankLocal.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mp {
#define GEN_PASS_DEF_MPAUTODIFF
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// `sum` + `term`, where either may be missing (null).
Value addTerms(OpBuilder &b, Location loc, Value sum, Value term) {
  if (!sum || !term)
    return sum ? sum : term;
  return AddOp::create(b, loc, sum, term);
}

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

bool isCollective(Operation *op) {
  return isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
             shard::AllSliceOp>(op);
}

/// The element count of a ranked tensor value.
int64_t elementsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// Whether a replicated data-movement op passes a partial adjoint on to its
/// operand unreduced, for one all-reduce where it would be reduced
/// anyway, no bigger: views (as many elements), broadcasts (fewer), and the
/// slices of a value cut only into slices covering it (one collective for
/// all, the same bytes). Not a slice of a bigger value read otherwise (the
/// last token's: the partial would be padded to the whole), a
/// concatenation (a collective per part) or a cast (another width).
bool passesPartialOn(Operation *op) {
  if (isa<ReshapeOp, TransposeOp, ExpandOp>(op))
    return true;
  if (!isa<SliceOp, SplitOp>(op))
    return false;
  Value whole = op->getOperand(0);
  int64_t covered = 0;
  for (Operation *user : whole.getUsers()) {
    if (!isa<SliceOp, SplitOp>(user))
      return false;
    for (Value part : user->getResults())
      covered += elementsOf(part);
  }
  return covered >= elementsOf(whole);
}

/// Values that depend on a parameter (not a frozen one: mp-freeze) and that
/// the loss depends on.
DenseSet<Value> activeValues(Block &body, Value loss,
                             const DenseSet<StringAttr> &frozen) {
  DenseSet<Value> varied, useful, active;
  for (Operation &op : body.without_terminator()) {
    auto read = dyn_cast<GetParamOp>(op);
    bool fromParam = (read && !frozen.contains(read.getNameAttr().getAttr())) ||
                     llvm::any_of(op.getOperands(),
                                  [&](Value v) { return varied.contains(v); });
    if (fromParam)
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          varied.insert(r);
  }
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        useful.insert(v);
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

struct AutodiffPass : public mp::impl::MPAutodiffBase<AutodiffPass> {
  void runOnOperation() override;

private:
  /// Adds `adjoint` to `value`'s adjoint: to its partial part when it comes
  /// from a rank-local consumer of a replicated value.
  void accumulate(OpBuilder &b, Value value, Value adjoint, bool isPartial) {
    Value &slot = isPartial ? partial[value] : full[value];
    slot = addTerms(b, adjoint.getLoc(), slot, adjoint);
  }
  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return shard::AllReduceOp::create(b, loc, v, grid.getValue(),
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  }
  /// The whole adjoint of `value` (null: none): its full part plus its
  /// partial part all-reduced over the group.
  Value adjointOf(OpBuilder &b, Value value);
  /// Builds the adjoints of `op`'s active operands.
  LogicalResult differentiate(OpBuilder &b, Operation *op);
  /// The conjugate of a collective.
  void differentiateCollective(OpBuilder &b, Operation *op);
  /// The function's new results: the loss, then one gradient per
  /// parameter in declaration order.
  /// The partial parts of the replicated parameters' gradients, summed
  /// over the group in one all-reduce per element type (a bucket, as
  /// Megatron's), by parameter.
  DenseMap<StringAttr, Value> reducePartialGradients(OpBuilder &b);
  /// All-reduces `parts` (of element type `element`) as one bucket.
  void reduceBucket(OpBuilder &b, Location loc, Type element,
                    ArrayRef<std::pair<StringAttr, Value>> parts,
                    DenseMap<StringAttr, Value> &reduced);
  LogicalResult returnGradients(OpBuilder &b, func::FuncOp func,
                                func::ReturnOp ret,
                                SymbolTableCollection &symbols);

  DenseSet<Value> active, local;
  DenseMap<Value, Value> full, partial;
  /// Per parameter: its gradient's full and partial parts.
  llvm::MapVector<StringAttr, std::pair<Value, Value>> gradients;
  FlatSymbolRefAttr grid; // the module's shard.grid, when partitioned
};

Value AutodiffPass::adjointOf(OpBuilder &b, Value value) {
  Value whole = full.lookup(value), part = partial.lookup(value);
  if (!part)
    return whole;
  return addTerms(b, value.getLoc(), whole, allReduce(b, value.getLoc(), part));
}

void AutodiffPass::differentiateCollective(OpBuilder &b, Operation *op) {
  Value input = op->getOperand(0), result = op->getResult(0);
  if (!active.contains(input))
    return;
  Location loc = op->getLoc();
  Type inputType = input.getType();
  auto add = [&](Value adjoint) { accumulate(b, input, adjoint, false); };
  auto gather = [&](Value dy, int64_t axis) {
    return shard::AllGatherOp::create(b, loc, inputType, grid,
                                      b.getDenseI16ArrayAttr({0}), dy,
                                      b.getIndexAttr(axis))
        .getResult();
  };
  if (auto gatherOp = dyn_cast<shard::AllGatherOp>(op)) {
    // The replicated result's partial adjoint is reduce-scattered back to
    // the shards; its full part only needs this rank's slice.
    int64_t axis = gatherOp.getGatherAxis().getSExtValue();
    if (Value part = partial.lookup(result))
      add(shard::ReduceScatterOp::create(
          b, loc, inputType, grid, b.getDenseI16ArrayAttr({0}), part,
          shard::ReductionKindAttr::get(b.getContext(),
                                        shard::ReductionKind::Sum),
          b.getIndexAttr(axis)));
    if (Value whole = full.lookup(result))
      add(shard::AllSliceOp::create(b, loc, inputType, whole, grid.getValue(),
                                    ArrayRef<shard::GridAxis>{0}, axis)
              .getResult());
    return;
  }
  Value dy = adjointOf(b, result);
  if (!dy)
    return;
  if (isa<shard::AllReduceOp>(op))
    add(dy);
  else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op))
    add(gather(dy, scatter.getScatterAxis().getSExtValue()));
  else if (auto slice = dyn_cast<shard::AllSliceOp>(op))
    add(gather(dy, slice.getSliceAxis().getSExtValue()));
}

/// The collectives whose conjugates the pass knows: sums over axis 0 of a
/// one-axis grid, of rank-local values where they reduce or gather.
static LogicalResult checkCollective(Operation *op,
                                     const DenseSet<Value> &local) {
  ArrayRef<shard::GridAxis> axes;
  llvm::TypeSwitch<Operation *>(op)
      .Case<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
            shard::AllSliceOp>([&](auto c) { axes = c.getGridAxes(); });
  if (axes.size() != 1 || axes[0] != 0)
    return op->emitOpError()
           << "mp-autodiff differentiates collectives over grid axis 0 only";
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    if (reduce.getReduction() != shard::ReductionKind::Sum)
      return op->emitOpError() << "mp-autodiff differentiates sum all-reduces "
                                  "only";
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp>(op) &&
      !local.contains(op->getOperand(0)))
    return op->emitOpError() << "has no derivative rule for a replicated "
                                "operand (a reduction or gather of the same "
                                "value on every rank)";
  return success();
}

LogicalResult AutodiffPass::differentiate(OpBuilder &b, Operation *op) {
  if (auto read = dyn_cast<GetParamOp>(op)) {
    auto &[whole, part] = gradients[read.getNameAttr().getAttr()];
    whole = addTerms(b, read.getLoc(), whole, full.lookup(read.getResult()));
    part = addTerms(b, read.getLoc(), part, partial.lookup(read.getResult()));
    return success();
  }
  if (isCollective(op)) {
    if (!active.contains(op->getOperand(0)))
      return success();
    if (failed(checkCollective(op, local)))
      return failure();
    differentiateCollective(b, op);
    return success();
  }
  bool anyResultAdjoint = llvm::any_of(op->getResults(), [&](Value r) {
    return full.count(r) || partial.count(r);
  });
  SmallVector<bool> needed;
  for (Value v : op->getOperands())
    needed.push_back(active.contains(v));
  if (!anyResultAdjoint || llvm::none_of(needed, [](bool n) { return n; }))
    return success();
  auto rule = dyn_cast<AutodiffOpInterface>(op);
  if (!rule && op->hasTrait<mp::OpTrait::Fused>())
    return op->emitOpError() << "is a fusion: " << fusionPassOf(op)
                             << " runs after mp-autodiff, not before";
  if (!rule)
    return op->emitOpError()
           << "has no derivative rule, but lies between a parameter and the "
              "loss";
  bool localOp = llvm::any_of(op->getResults(),
                              [&](Value r) { return local.contains(r); });
  // A replicated op that only moves data passes the partial part of its
  // results' adjoints on unreduced where that costs no more bytes (see
  // passesPartialOn): the all-reduce waits for the value the data came
  // from, one where several slices of it meet (an expert's gate each, of
  // one gates table).
  bool anyPartial =
      llvm::any_of(op->getResults(), [&](Value r) { return partial.count(r); });
  if (!localOp && anyPartial && passesPartialOn(op)) {
    for (bool isPartial : {false, true}) {
      SmallVector<Value> parts, adjoints;
      for (Value r : op->getResults())
        parts.push_back(isPartial ? partial.lookup(r) : full.lookup(r));
      if (llvm::none_of(parts, [](Value v) { return v != nullptr; }))
        continue;
      if (failed(rule.buildAdjoints(b, parts, needed, adjoints)))
        return failure();
      for (auto [operand, adjoint, need] :
           llvm::zip(op->getOperands(), adjoints, needed))
        if (need && adjoint)
          accumulate(b, operand, adjoint, isPartial);
    }
    return success();
  }
  SmallVector<Value> resultAdjoints;
  for (Value r : op->getResults())
    resultAdjoints.push_back(adjointOf(b, r));
  SmallVector<Value> operandAdjoints;
  if (failed(rule.buildAdjoints(b, resultAdjoints, needed, operandAdjoints)))
    return failure();
  // A rank-local op's adjoint of a replicated operand is this rank's part.
  for (auto [operand, adjoint, need] :
       llvm::zip(op->getOperands(), operandAdjoints, needed))
    if (need && adjoint)
      accumulate(b, operand, adjoint, localOp && !local.contains(operand));
  return success();
}

/// The pipeline chunk (mp.stage) computing `v`, or -1.
static int64_t stageOf(Value v) {
  Operation *def = v.getDefiningOp();
  auto stage =
      def ? def->getAttrOfType<IntegerAttr>(MPDialect::getStageAttrName())
          : IntegerAttr();
  return stage ? stage.getInt() : -1;
}

DenseMap<StringAttr, Value> AutodiffPass::reducePartialGradients(OpBuilder &b) {
  // By element type and pipeline chunk (each chunk reduces its own: a
  // bucket across chunks would carry one chunk's gradients to another), the
  // parameters whose gradient has a partial part.
  llvm::MapVector<std::pair<Type, int64_t>,
                  SmallVector<std::pair<StringAttr, Value>>>
      buckets;
  for (auto &[name, parts] : gradients)
    if (Value part = parts.second)
      buckets[{getElementTypeOrSelf(part), stageOf(part)}].push_back(
          {name, part});
  DenseMap<StringAttr, Value> reduced;
  Location loc = NameLoc::get(StringAttr::get(b.getContext(), "grads"));
  for (auto &[key, parts] : buckets) {
    auto [element, stage] = key;
    Block *block = b.getInsertionBlock();
    const bool atStart = b.getInsertionPoint() == block->begin();
    Block::iterator before =
        atStart ? block->end() : std::prev(b.getInsertionPoint());
    reduceBucket(b, loc, element, parts, reduced);
    if (stage < 0)
      continue;
    // The bucket's ops run in the chunk of its gradients.
    for (auto it = atStart ? block->begin() : std::next(before);
         it != b.getInsertionPoint(); ++it)
      it->setAttr(MPDialect::getStageAttrName(), b.getI64IntegerAttr(stage));
  }
  return reduced;
}

void AutodiffPass::reduceBucket(OpBuilder &b, Location loc, Type element,
                                ArrayRef<std::pair<StringAttr, Value>> parts,
                                DenseMap<StringAttr, Value> &reduced) {
  if (parts.size() == 1) {
    reduced[parts[0].first] = allReduce(b, loc, parts[0].second);
    return;
  }
  // One bucket: the parts flattened side by side, reduced at once.
  SmallVector<Value> flat;
  SmallVector<Type> pieces;
  int64_t total = 0;
  for (auto &[name, part] : parts) {
    auto type = cast<RankedTensorType>(part.getType());
    auto piece = RankedTensorType::get({type.getNumElements()}, element);
    flat.push_back(type == piece ? part
                                 : ReshapeOp::create(b, loc, piece, part));
    pieces.push_back(piece);
    total += type.getNumElements();
  }
  auto bucketType = RankedTensorType::get({total}, element);
  Value bucket =
      ConcatOp::create(b, loc, bucketType, flat, b.getI64IntegerAttr(0));
  Value sum = allReduce(b, loc, bucket);
  auto split = SplitOp::create(b, loc, pieces, sum, b.getI64IntegerAttr(0));
  for (auto [i, entry] : llvm::enumerate(parts)) {
    Value piece = split->getResult(i);
    reduced[entry.first] =
        piece.getType() == entry.second.getType()
            ? piece
            : ReshapeOp::create(b, loc, entry.second.getType(), piece);
  }
}

LogicalResult AutodiffPass::returnGradients(OpBuilder &b, func::FuncOp func,
                                            func::ReturnOp ret,
                                            SymbolTableCollection &symbols) {
  MLIRContext *ctx = &getContext();
  DenseMap<StringAttr, Value> reduced = reducePartialGradients(b);
  SmallVector<Value> results{ret.getOperand(0)};
  SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
  for (auto param : getOperation().getOps<ParamOp>()) {
    if (!isa<FloatType>(param.getTensorType().getElementType()))
      continue;
    FailureOr<RankedTensorType> localType = param.getLocalType(symbols);
    if (failed(localType))
      return failure();
    Value grad = addTerms(b, param.getLoc(),
                          gradients.lookup(param.getSymNameAttr()).first,
                          reduced.lookup(param.getSymNameAttr()));
    if (!grad)
      grad = ConstantOp::create(
          b, param.getLoc(),
          DenseElementsAttr::get(
              *localType, FloatAttr::get(localType->getElementType(), 0.0)));
    results.push_back(grad);
    // A sharded parameter's gradient is this rank's shard, sharded alike.
    SmallVector<NamedAttribute> attrs{
        NamedAttribute(MPDialect::getNameAttrName(),
                       StringAttr::get(ctx, "grads/" + param.getSymName()))};
    if (param.getGrid()) {
      attrs.push_back(NamedAttribute(
          StringAttr::get(ctx, MPDialect::getShardAxisAttrName()),
          param.getShardAxisAttr()));
      if (param.getShardGroupsAttr())
        attrs.push_back(NamedAttribute(
            StringAttr::get(ctx, MPDialect::getShardGroupsAttrName()),
            param.getShardGroupsAttr()));
    }
    resultAttrs.push_back(DictionaryAttr::get(ctx, attrs));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  func.setFunctionType(FunctionType::get(ctx, func.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<func::FuncOp> entry = getEntryFunction(module);
  if (failed(entry))
    return signalPassFailure();
  func::FuncOp func = *entry;
  auto lossType = dyn_cast<RankedTensorType>(
      func.getNumResults() == 1 ? func.getResultTypes()[0] : Type());
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType())) {
    func.emitError() << "mp-autodiff differentiates a function with one "
                        "scalar float result (the loss); @"
                     << func.getSymName() << " returns "
                     << func.getFunctionType().getResults()
                     << ": append a loss first (mp-loss, or --mp-train)";
    return signalPassFailure();
  }
  auto grids = module.getOps<shard::GridOp>();
  if (!grids.empty() && std::next(grids.begin()) != grids.end()) {
    module.emitError() << "mp-autodiff supports one shard.grid";
    return signalPassFailure();
  }
  grid = grids.empty()
             ? FlatSymbolRefAttr()
             : FlatSymbolRefAttr::get((*grids.begin()).getSymNameAttr());
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  SymbolTableCollection symbols;
  if (auto scalars = module->getAttrOfType<ArrayAttr>(
          MPDialect::getScalarConstantsAttrName())) {
    InFlightDiagnostic note = emitWarning(module.getLoc())
                              << "not trained, read as constants: the "
                                 "one-element initializers ";
    llvm::interleaveComma(scalars, note, [&](Attribute a) {
      note << "'" << cast<StringAttr>(a).getValue() << "'";
    });
    note << " (a buffer, such as a norm's eps, is right as a constant; a "
            "learned scalar, such as a ReZero alpha, trains only when named "
            "NAME.weight or NAME.bias)";
  }
  DenseSet<StringAttr> frozen;
  for (auto param : module.getOps<ParamOp>())
    if (param->hasAttr(MPDialect::getFrozenAttrName()))
      frozen.insert(param.getSymNameAttr());
  active = activeValues(body, loss, frozen);
  local = rankLocalValues(body, symbols);
  if (local.contains(loss)) {
    func.emitError() << "the loss differs between ranks: it must be "
                        "replicated (all-reduced, or computed from gathered "
                        "values)";
    return signalPassFailure();
  }

  // Dropout drops in a train step: each gets its own stream, a rank's own
  // where it acts on rank-local values (Megatron's rule).
  int64_t seedId = 0;
  for (Operation &op : body.without_terminator())
    if (auto dropout = dyn_cast<DropoutOp>(op);
        dropout && dropout.getRatio().convertToFloat() > 0) {
      dropout.setSeedIdAttr(
          IntegerAttr::get(IntegerType::get(&getContext(), 64), seedId++));
      if (local.contains(dropout.getInput()))
        dropout.setRankStream(true);
    }
  // The forward pass's own peak, for the artifact summary to set beside the
  // train step's (whose forward values live on into the backward).
  if (FailureOr<MemoryPlan> forwardPlan = MemoryPlan::compute(func);
      succeeded(forwardPlan))
    func->setAttr(MPDialect::getForwardArenaBytesAttrName(),
                  IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                   forwardPlan->peakBytes()));
  OpBuilder b(ret);
  full[loss] = ConstantOp::create(
      b, loss.getLoc(),
      DenseElementsAttr::get(lossType,
                             FloatAttr::get(lossType.getElementType(), 1.0)));
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  // Every op without a rule is reported (one per layer, say), not the
  // last one only; past a few, only counted.
  constexpr int kShownErrors = 8;
  int errors = 0;
  ScopedDiagnosticHandler limit(&getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Error)
      return failure(); // (passed on)
    return success(++errors > kShownErrors);
  });
  bool anyFailed = false;
  for (Operation *op : llvm::reverse(forward)) {
    Operation *last = ret->getPrevNode();
    if (failed(differentiate(b, op))) {
      anyFailed = true;
      continue;
    }
    // The backward of a layer's op belongs to that layer and pipeline chunk
    // (the summary, recompute and pipeline stages go by them).
    for (StringRef name :
         {MPDialect::getLayerAttrName(), MPDialect::getStageAttrName()})
      if (Attribute attr = op->getAttr(name))
        for (Operation *added = last->getNextNode();
             added != ret.getOperation(); added = added->getNextNode())
          added->setAttr(name, attr);
  }
  if (errors > kShownErrors)
    emitRemark(func.getLoc()) << errors - kShownErrors
                              << " more errors like those above are not shown";
  if (anyFailed || failed(returnGradients(b, func, ret, symbols)))
    return signalPassFailure();
  // Everything added is the backward pass (pipeline stages run it apart).
  llvm::DenseSet<Operation *> forwardOps(forward.begin(), forward.end());
  for (Operation &op : body.without_terminator())
    if (!forwardOps.contains(&op))
      op.setAttr(MPDialect::getBackwardAttrName(),
                 UnitAttr::get(&getContext()));
  full.clear();
  partial.clear();
  gradients.clear();
}

} // namespace
