//===- TensorParallel.cpp - Megatron tensor parallelism -------------------===//
//
// Finds Megatron's column/row-parallel structure by propagating "this value
// is split along dimension d" forward from linears: a linear is
// column-parallel when its split output reaches only ops that can run on the
// split (shape and elementwise ops, the heads of attention) before the
// contracting dimension of another linear, which is then row-parallel, or
// the function's results, gathered there (a decoder's present keys and
// values). A linear whose split output reaches anything else (a softmax
// over the features, a residual add with a whole tensor) stays whole, and the
// analysis repeats without it; an op that refuses some of its split operands
// runs on the others meanwhile, so that what they feed is not dropped with
// them. A fused linear whose split stops where its output is taken in parts
// (Falcon's QKV with one key/value head) is cut into a linear per part first
// (FusedLinear.h), so each part splits as it can. A norm over the split dim
// itself runs on each rank's block with its statistics all-reduced
// (DistributedNorm.h). Two linears with no Mixing op between them are one
// factorized linear (MLA's low-rank projections): the second splits as a column
// instead, unless it finds no split that way. The graph is then rewritten to
// local shapes with the collectives written explicitly as `shard` ops.
//
//===----------------------------------------------------------------------===//
#include "DistributedNorm.h"
#include "FusedLinear.h"
#include "KeyValueHeads.h"
#include "SplitAnalysis.h"
#include "VocabPadding.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MathExtras.h"

#include <functional>
#include <optional>

#define DEBUG_TYPE "mp-tensor-parallel"

namespace mp {
#define GEN_PASS_DEF_MPTENSORPARALLEL
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;
using namespace mp::tensor_parallel;

namespace {

struct TensorParallelPass
    : public mp::impl::MPTensorParallelBase<TensorParallelPass> {
  using MPTensorParallelBase::MPTensorParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      emitError(module.getLoc()) << "tensor-parallel size must be >= 1, got "
                                 << static_cast<int64_t>(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    // (A grid declared by hand is fine; parameters already split are not.)
    for (auto param : module.getOps<ParamOp>())
      if (FlatSymbolRefAttr sharded = param.getGridAttr()) {
        emitError(module.getLoc())
            << "the program is already partitioned (parameter '"
            << param.getSymName() << "' is split over @" << sharded.getValue()
            << "): mp-tensor-parallel runs once, on an unpartitioned program";
        return signalPassFailure();
      }
    FailureOr<func::FuncOp> func = getEntryFunction(module);
    if (failed(func))
      return signalPassFailure();
    grid = FlatSymbolRefAttr::get(&getContext(), gridName);
    if (failed(parallelize(module, *func)))
      signalPassFailure();
  }

  LogicalResult parallelize(ModuleOp module, func::FuncOp func);
  LogicalResult checkDivisible(const Split &split);
  LogicalResult shardParam(Value v, int64_t axis, int64_t groups,
                           Operation *user);
  LogicalResult applyParamShards(ModuleOp module);
  Value allReduce(OpBuilder &b, Location loc, Value v, Operation *like);
  Value gatherAlong(OpBuilder &b, Location loc, Value local, int64_t dim);
  void cutOperand(const Cut &cut);
  LogicalResult rewriteRow(LinearOp linear);
  void gatherResults(func::FuncOp func, const Split &split);
  LogicalResult rewriteVocabParallel(func::FuncOp func);
  LogicalResult padHead(LinearOp head, ArrayRef<Operation *> between,
                        int64_t padded);

  FlatSymbolRefAttr grid; // the grid this pass creates

  /// Parameter symbol -> (axis, groups) and the ops allowed to see its shard.
  llvm::MapVector<StringAttr, std::pair<int64_t, int64_t>> paramShards;
  llvm::DenseMap<StringAttr, llvm::SmallPtrSet<Operation *, 4>> shardUsers;
  /// Views of sharded parameters (MemoryPlan::viewedParameter) and their split
  /// dim.
  llvm::MapVector<ReshapeOp, int64_t> views;
};

LogicalResult TensorParallelPass::checkDivisible(const Split &split) {
  int64_t t = tp;
  // Attention first: its heads are what the user knows.
  for (auto [v, d] : split.dim)
    for (Operation *user : v.getUsers())
      if (auto attention = dyn_cast<AttentionOp>(user)) {
        int64_t q = tensorType(attention.getQuery()).getDimSize(1);
        int64_t kv = tensorType(attention.getKey()).getDimSize(1);
        if (q % t)
          return attention.emitError()
                 << "attention heads (" << q
                 << ") are not divisible by the tensor-parallel size " << t;
        if (split.dim.count(attention.getKey()) && kv % t)
          return attention.emitError()
                 << "key/value heads (" << kv
                 << ") are not divisible by the tensor-parallel size " << t;
      }
  for (const Cut &cut : split.cuts) {
    int64_t size =
        tensorType(cut.op->getOperand(cut.operand)).getDimSize(cut.dim);
    if (size % t && !repeatsHeads(cut))
      return cut.op->emitError()
             << "operand " << cut.operand << " would be cut along dimension "
             << cut.dim << " (size " << size
             << "), which is not divisible by the tensor-parallel size " << t;
  }
  for (auto [v, d] : split.dim) {
    int64_t size = tensorType(v).getDimSize(d);
    if (size % t)
      return v.getDefiningOp()->emitError()
             << "dimension " << d << " (size " << size
             << ") of this result is not divisible by the tensor-parallel "
                "size "
             << t;
  }
  return success();
}

LogicalResult TensorParallelPass::shardParam(Value v, int64_t axis,
                                             int64_t groups, Operation *user) {
  GetParamOp get = MemoryPlan::viewedParameter(v);
  if (!get)
    return user->emitError()
           << "a tensor-parallel weight must be a parameter (mp.get_param)";
  if (auto view = v.getDefiningOp<ReshapeOp>()) {
    // (unsplittableViews dropped the linears this would fail for.)
    int64_t stored = paramAxis(v, axis, groups * tp);
    if (stored < 0)
      return user->emitError()
             << "no dim of parameter '" << get.getName() << "' splits like dim "
             << axis << " of its view";
    views.insert({view, axis});
    user = view;
    axis = stored;
  }
  StringAttr name = get.getNameAttr().getAttr();
  auto [it, inserted] = paramShards.insert({name, {axis, groups}});
  if (!inserted && it->second != std::make_pair(axis, groups))
    return user->emitError() << "parameter '" << name.getValue()
                             << "' is needed with two different shardings";
  shardUsers[name].insert(user);
  return success();
}

/// Records the sharding on each parameter and gives its readers the local
/// type; a parameter also read whole is an error.
LogicalResult TensorParallelPass::applyParamShards(ModuleOp module) {
  SymbolTableCollection symbols;
  for (auto &entry : paramShards) {
    StringAttr name = entry.first;
    const auto &shard = entry.second;
    auto param = module.lookupSymbol<ParamOp>(name);
    OpBuilder b(param);
    param.setGridAttr(grid);
    param.setShardAxisAttr(b.getI64IntegerAttr(shard.first));
    if (shard.second != 1)
      param.setShardGroupsAttr(b.getI64IntegerAttr(shard.second));
    FailureOr<RankedTensorType> local = param.getLocalType(symbols);
    if (failed(local))
      return failure();
    WalkResult walk = module.walk([&](GetParamOp get) {
      if (get.getNameAttr().getAttr() != name)
        return WalkResult::advance();
      for (Operation *user : get->getUsers())
        if (!shardUsers[name].contains(user)) {
          user->emitError() << "parameter '" << name.getValue()
                            << "' is needed both whole and sharded";
          return WalkResult::interrupt();
        }
      get.getResult().setType(*local);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  // The views of sharded parameters, split along the dim that splits them.
  for (auto [view, axis] : views) {
    RankedTensorType t = tensorType(view.getResult());
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] /= tp;
    view.getResult().setType(t.clone(shape));
  }
  return success();
}

Value TensorParallelPass::allReduce(OpBuilder &b, Location loc, Value v,
                                    Operation *like) {
  auto op = shard::AllReduceOp::create(b, loc, v, grid.getValue(),
                                       ArrayRef<shard::GridAxis>{0},
                                       shard::ReductionKind::Sum);
  if (Attribute layer = like->getAttr(MPDialect::getLayerAttrName()))
    op->setAttr(MPDialect::getLayerAttrName(), layer);
  return op.getResult();
}

/// Gives `cut.op` this rank's block of a whole operand (no communication:
/// every rank holds the whole value).
void TensorParallelPass::cutOperand(const Cut &cut) {
  OpBuilder b(cut.op);
  Value whole = cut.op->getOperand(cut.operand);
  RankedTensorType t = tensorType(whole);
  SmallVector<int64_t> shape(t.getShape());
  shape[cut.dim] /= tp;
  if (repeatsHeads(cut)) {
    whole = repeatHeads(b, whole, tp / t.getDimSize(cut.dim), cut.op);
    shape[cut.dim] = 1;
  } else if (whole.hasOneUse() && broadcastsAlong(whole, cut.dim)) {
    // A broadcast read only here broadcasts to the block instead.
    whole.setType(t.clone(shape));
    return;
  }
  auto slice = shard::AllSliceOp::create(
      b, cut.op->getLoc(), RankedTensorType::get(shape, t.getElementType()),
      whole, grid.getValue(), ArrayRef<shard::GridAxis>{0}, cut.dim);
  if (Attribute layer = cut.op->getAttr(MPDialect::getLayerAttrName()))
    slice->setAttr(MPDialect::getLayerAttrName(), layer);
  cut.op->setOperand(cut.operand, slice.getResult());
}

/// Row-parallel: local partial product, one all-reduce, then the bias once.
LogicalResult TensorParallelPass::rewriteRow(LinearOp linear) {
  if (failed(shardParam(linear.getWeight(), linear.getTransposeWeight() ? 1 : 0,
                        1, linear)))
    return failure();
  OpBuilder b(linear);
  b.setInsertionPointAfter(linear);
  Value bias = linear.getBias();
  if (bias)
    linear.getBiasMutable().clear();
  Value reduced = allReduce(b, linear.getLoc(), linear.getResult(), linear);
  Value result = reduced;
  if (bias) {
    auto add = AddOp::create(b, linear.getLoc(), reduced, bias);
    add->setAttrs(linear->getDiscardableAttrDictionary());
    result = add;
  }
  linear.getResult().replaceAllUsesExcept(result, reduced.getDefiningOp());
  return success();
}

/// Whether `op` is the only reader of the parameter `get` reads (a
/// parameter also read whole elsewhere keeps the head whole).
static bool readOnlyHere(GetParamOp get, Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  bool alone = true;
  func.walk([&](GetParamOp other) {
    if (other.getNameAttr() != get.getNameAttr())
      return;
    for (Operation *user : other->getUsers())
      alone &= user == op;
  });
  return alone;
}

/// The parameters `op` (after an LM head) reads whole along the
/// vocabulary of its result: a logits bias apart from the head (BART's
/// final_logits_bias [1, V]), which is split with the head.
static SmallVector<OpOperand *> vocabParams(Operation *op) {
  SmallVector<OpOperand *> params;
  int64_t vocab = tensorType(op->getResult(0)).getShape().back();
  for (OpOperand &operand : op->getOpOperands()) {
    auto t = dyn_cast<RankedTensorType>(operand.get().getType());
    auto get = operand.get().getDefiningOp<GetParamOp>();
    if (t && t.getRank() > 0 && t.getShape().back() == vocab && vocab > 1 &&
        get && readOnlyHere(get, op))
      params.push_back(&operand);
  }
  return params;
}

/// The LM head whose logits `result` is: a linear, possibly followed by
/// ops that each take its vocabulary split and read nothing else split but
/// parameters (a cast back to fp32, Gemma 2's soft-capping tanh(x / c) *
/// c, BART's logits bias), every value read once; those ops, first to
/// last, in `between`.
static LinearOp findHead(Value result, SmallVectorImpl<Operation *> &between) {
  Value v = result;
  while (Operation *def = v.getDefiningOp()) {
    // (A scalar has no vocabulary dim.)
    if (!v.hasOneUse() || def->getNumResults() != 1 ||
        tensorType(v).getRank() == 0)
      return {};
    if (auto head = dyn_cast<LinearOp>(def)) {
      std::reverse(between.begin(), between.end());
      return head;
    }
    auto rule = dyn_cast<SplitOpInterface>(def);
    if (!rule)
      return {};
    int64_t last = tensorType(v).getRank() - 1;
    Value next;
    for (auto [i, operand] : llvm::enumerate(def->getOperands())) {
      // (A reshape may drop or add leading dims: ViT's [B, 1, C] -> [B, C].)
      auto t = dyn_cast<RankedTensorType>(operand.getType());
      if (!t || (t.getRank() != last + 1 && def->getNumOperands() != 1) ||
          t.getRank() == 0 ||
          t.getShape().back() != tensorType(v).getShape().back())
        continue;
      Dims dims(def->getNumOperands(), -1);
      dims[i] = t.getRank() - 1;
      for (OpOperand *param : vocabParams(def))
        if (param->getOperandNumber() != i)
          dims[param->getOperandNumber()] =
              tensorType(param->get()).getRank() - 1;
      FailureOr<SplitMapping> mapping = rule.propagateSplit(dims);
      if (succeeded(mapping) &&
          ArrayRef<int64_t>(mapping->operands) == ArrayRef(dims) &&
          mapping->results[0] == last) {
        next = operand;
        break;
      }
    }
    if (!next)
      return {};
    between.push_back(def);
    v = next;
  }
  return {};
}

/// `local`, this rank's block along `dim`, gathered whole over the grid.
Value TensorParallelPass::gatherAlong(OpBuilder &b, Location loc, Value local,
                                      int64_t dim) {
  RankedTensorType type = tensorType(local);
  SmallVector<int64_t> whole(type.getShape());
  whole[dim] *= tp;
  return shard::AllGatherOp::create(b, loc, type.clone(whole), grid,
                                    b.getDenseI16ArrayAttr({0}), local,
                                    b.getIndexAttr(dim));
}

/// A split value the function returns is gathered whole there, as by
/// Megatron's column-parallel linear with gather_output (mp-shard-outputs
/// then leaves it sharded until mp-run writes it): a decoder's present keys
/// and values, split by heads.
void TensorParallelPass::gatherResults(func::FuncOp func, const Split &split) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  OpBuilder b(ret);
  for (OpOperand &operand : ret->getOpOperands()) {
    auto it = split.dim.find(operand.get());
    if (it == split.dim.end())
      continue;
    operand.set(
        gatherAlong(b, operand.get().getLoc(), operand.get(), it->second));
  }
}

/// Vocab-parallel token embedding and LM head.
LogicalResult TensorParallelPass::rewriteVocabParallel(func::FuncOp func) {
  SmallVector<EmbeddingOp> embeddings;
  func.walk([&](EmbeddingOp e) {
    // Token embeddings read runtime ids; position tables stay whole.
    if (!e.getIndices().getDefiningOp<ConstantOp>() &&
        e.getTable().getDefiningOp<GetParamOp>())
      embeddings.push_back(e);
  });
  // Of those, only the word embedding is split, as in Megatron: BERT's
  // token types (2 rows) and positions computed from the ids (RoBERTa's)
  // stay whole, needing no all-reduce and no divisor. The word embedding is
  // the one with the LM head's vocabulary (tied or not), or without a head
  // (an encoder) the largest.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  llvm::SmallDenseSet<int64_t> headVocabs;
  llvm::SmallDenseSet<Attribute> headWeights;
  llvm::SmallPtrSet<Operation *, 2> heads;
  for (Value result : ret->getOperands()) {
    SmallVector<Operation *> between;
    LinearOp head = findHead(result, between);
    auto weight =
        head ? head.getWeight().getDefiningOp<GetParamOp>() : GetParamOp();
    if (!weight || inLayer(head))
      continue;
    headVocabs.insert(head.getType().getShape().back());
    headWeights.insert(weight.getNameAttr());
    heads.insert(head);
  }
  auto rowsOf = [](EmbeddingOp e) {
    return tensorType(e.getTable()).getDimSize(0);
  };
  auto tied = [&](EmbeddingOp e) {
    return headWeights.contains(
        e.getTable().getDefiningOp<GetParamOp>().getNameAttr());
  };
  auto headSized = [&](EmbeddingOp e) {
    return headVocabs.contains(rowsOf(e));
  };
  int64_t largest = 0;
  for (EmbeddingOp e : embeddings)
    largest = std::max(largest, rowsOf(e));
  std::function<bool(EmbeddingOp)> isWords = [&](EmbeddingOp e) {
    return rowsOf(e) == largest;
  };
  if (llvm::any_of(embeddings, tied))
    isWords = tied;
  else if (llvm::any_of(embeddings, headSized))
    isWords = headSized;
  llvm::erase_if(embeddings, [&](EmbeddingOp e) { return !isWords(e); });
  // Vocabularies padded to divide by tp: the user's size -> the padded one.
  llvm::SmallDenseMap<int64_t, int64_t> paddedVocab;
  auto readsAsTableOrHead = [&](Operation *user) {
    return isa<EmbeddingOp>(user) || heads.contains(user);
  };
  for (EmbeddingOp e : embeddings) {
    auto table = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        e, e.getTable().getDefiningOp<GetParamOp>().getNameAttr());
    int64_t vocab = table.getTensorType().getDimSize(0);
    if (vocab % tp) {
      int64_t padded = static_cast<int64_t>(llvm::alignTo(vocab, tp));
      FailureOr<ParamOp> part =
          padParameter(table, 0, padded, readsAsTableOrHead);
      if (failed(part))
        return failure();
      table = *part;
      paddedVocab[vocab] = padded; // (--mp-summary says so)
    }
    // (Padded here or for another embedding of the same table.)
    if (auto part = table.getPart();
        part && (*part)[2] < table.getTensorType().getDimSize(0))
      e.setVocabAttr(OpBuilder(e).getI64IntegerAttr((*part)[2]));
    if (failed(shardParam(e.getTable(), 0, 1, e)))
      return failure();
    e.setGridAttr(grid);
    OpBuilder b(e);
    b.setInsertionPointAfter(e);
    Value reduced = allReduce(b, e.getLoc(), e.getResult(), e);
    e.getResult().replaceAllUsesExcept(reduced, reduced.getDefiningOp());
  }

  for (OpOperand &operand : ret->getOpOperands()) {
    SmallVector<Operation *> between;
    LinearOp head = findHead(operand.get(), between);
    if (!head || inLayer(head) || !head.getWeight().getDefiningOp<GetParamOp>())
      continue;
    // Gathered before trailing widening casts (bf16 logits cast to fp32
    // move half the bytes), which keep the user's vocabulary.
    OpOperand *gatherAt = &operand;
    auto widens = [](Operation *op) {
      auto c = dyn_cast<CastOp>(op);
      return c && c.getType().getElementTypeBitWidth() >
                      tensorType(c.getInput()).getElementTypeBitWidth();
    };
    while (!between.empty() && widens(between.back())) {
      gatherAt = &between.back()->getOpOperand(0);
      between.pop_back();
    }
    RankedTensorType full = head.getType();
    int64_t vocab = full.getShape().back();
    if (vocab % tp && paddedVocab.count(vocab)) {
      if (failed(padHead(head, between, paddedVocab[vocab])))
        return failure();
      full = head.getType();
    }
    if (full.getShape().back() < tp) {
      // A value or reward head's one output: nothing to split, listed.
      head->setAttr(
          MPDialect::getReplicatedAttrName(),
          StringAttr::get(&getContext(), "a head with fewer outputs (" +
                                             std::to_string(vocab) +
                                             ") than ranks"));
      continue;
    }
    if (full.getShape().back() % tp) {
      // A classifier's few classes: the head runs whole on every rank (a
      // tied embedding of that size was refused above).
      head.emitWarning() << "this head stays whole (replicated on all "
                         << static_cast<int64_t>(tp) << " ranks): its " << vocab
                         << " outputs are not divisible by the "
                            "tensor-parallel size; pad them to a multiple "
                            "of it to split it, as Megatron pads its "
                            "vocabulary";
      continue;
    }
    if (failed(shardParam(head.getWeight(), head.getTransposeWeight() ? 0 : 1,
                          1, head)))
      return failure();
    if (head.getBias() && failed(shardParam(head.getBias(), 0, 1, head)))
      return failure();
    for (Operation *op : between)
      for (OpOperand *param : vocabParams(op))
        if (failed(shardParam(param->get(),
                              tensorType(param->get()).getRank() - 1, 1, op)))
          return failure();
    between.insert(between.begin(), head);
    for (Operation *op : between) {
      RankedTensorType t = tensorType(op->getResult(0));
      SmallVector<int64_t> local(t.getShape());
      local.back() /= tp;
      op->getResult(0).setType(
          RankedTensorType::get(local, t.getElementType()));
    }
    OpBuilder b(gatherAt->getOwner());
    Value gather = gatherAlong(b, head.getLoc(), gatherAt->get(),
                               tensorType(gatherAt->get()).getRank() - 1);
    gatherAt->set(full.getShape().back() == vocab
                      ? gather
                      : unpadLogits(b, gather, vocab));
  }
  return success();
}

/// Gives the LM head `head` (and the ops `between` it and the logits) the
/// padded vocabulary `padded`: its weight and bias padded with zeros, unless
/// tied to the embedding already padded.
LogicalResult TensorParallelPass::padHead(LinearOp head,
                                          ArrayRef<Operation *> between,
                                          int64_t padded) {
  auto only = [&](Operation *user) { return user == head.getOperation(); };
  auto pad = [&](Value v, int64_t axis) -> LogicalResult {
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        head, v.getDefiningOp<GetParamOp>().getNameAttr());
    if (param.getTensorType().getDimSize(axis) == padded)
      return success(); // (tied: padded with the embedding)
    return padParameter(param, axis, padded, only);
  };
  if (failed(pad(head.getWeight(), head.getTransposeWeight() ? 0 : 1)))
    return failure();
  if (Value bias = head.getBias()) {
    if (!bias.getDefiningOp<GetParamOp>())
      return head.emitError() << "the LM head's bias is not a parameter, "
                                 "which the vocabulary's padding needs";
    if (failed(pad(bias, 0)))
      return failure();
  }
  for (Operation *op : between)
    for (OpOperand *param : vocabParams(op)) {
      auto only = [&](Operation *user) { return user == op; };
      auto table = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          op, param->get().getDefiningOp<GetParamOp>().getNameAttr());
      if (failed(padParameter(table, tensorType(param->get()).getRank() - 1,
                              padded, only)))
        return failure();
    }
  SmallVector<Operation *> outputs(between);
  outputs.insert(outputs.begin(), head);
  for (Operation *op : outputs) {
    RankedTensorType t = tensorType(op->getResult(0));
    SmallVector<int64_t> shape(t.getShape());
    shape.back() = padded;
    op->getResult(0).setType(t.clone(shape));
  }
  return success();
}

LogicalResult TensorParallelPass::parallelize(ModuleOp module,
                                              func::FuncOp func) {
  // A row-parallel linear's activation would apply to partial sums, and a
  // fused norm has no split rule.
  WalkResult fusedFound = func.walk([&](Operation *op) {
    if (auto l = dyn_cast<LinearOp>(op);
        l && l.getActivation() != LinearActivation::none) {
      l.emitOpError("has a fused activation: mp-fuse-epilogues runs after "
                    "mp-tensor-parallel, not before");
      return WalkResult::interrupt();
    }
    if (op->hasTrait<mp::OpTrait::Fused>()) {
      op->emitOpError() << "is a fusion: " << fusionPassOf(op)
                        << " runs after mp-tensor-parallel, not before";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (fusedFound.wasInterrupted())
    return failure();
  markReplicatedKeyValues(func, tp);
  // Linears outside the repeated layers split too (a Perceiver's cross-
  // attention blocks, a block that differs from the others), but for the
  // LM heads, which the vocabulary split takes.
  llvm::SmallPtrSet<Operation *, 2> heads;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value result : ret->getOperands()) {
    SmallVector<Operation *> between;
    if (LinearOp head = findHead(result, between); head && !inLayer(head))
      heads.insert(head);
  }
  SmallVector<LinearOp> linears;
  Split split;
  llvm::DenseMap<unsigned, Stop> stops;
  // Wide factors of factorized pairs that found no split of their own: the
  // pair splits column/row after all.
  llvm::SmallPtrSet<Operation *, 8> pairable;
  for (bool again = true; again;) {
    linears.clear();
    func.walk([&](LinearOp l) {
      if (!heads.contains(l))
        linears.push_back(l);
    });
    llvm::BitVector allowed(linears.size(), true);
    stops.clear();
    llvm::SmallPtrSet<Operation *, 8> factorized;
    while (true) {
      llvm::BitVector conflict =
          analyze(func, linears, allowed, pairable, heads, split, stops);
      conflict |= indivisibleOutsideLayers(linears, split, stops, tp);
      conflict |= fewHeadSplits(func, tp, split, stops);
      conflict |= unsplittableViews(linears, split, stops, tp);
      if (conflict.none())
        conflict |= unevenlySharedParams(linears, split, stops);
      factorized.insert(split.factorized.begin(), split.factorized.end());
      conflict &= allowed; // (only these change the next round)
      if (conflict.none())
        break;
      allowed.reset(conflict);
    }
    again = false;
    llvm::SmallPtrSet<Operation *, 16> columns;
    for (LinearOp column : split.columns)
      columns.insert(column);
    for (Operation *wide : factorized)
      if (!columns.contains(wide))
        again |= pairable.insert(wide).second;
    if (again)
      continue;
    // Fused linears stopped where their parts are taken: cut (all found
    // first: a cut erases ops other stops name), start again.
    SmallVector<LinearOp> fused;
    for (auto &[i, stop] : stops)
      if (!allowed[i] && takesPartOfFusedLinear(linears[i], stop.op))
        fused.push_back(linears[i]);
    // (Cutting one also cuts the other calls of its module.)
    llvm::SmallPtrSet<Operation *, 8> cut;
    for (LinearOp linear : fused) {
      if (cut.contains(linear))
        continue;
      pairable.erase(linear);
      SmallVector<Operation *> calls;
      if (failed(cutFusedLinear(linear, calls)))
        continue;
      again = true;
      for (Operation *call : calls) {
        pairable.erase(call);
        cut.insert(call);
      }
    }
  }
  if (failed(checkDivisible(split)))
    return failure();
  reportWhole(linears, split, stops, tp);
  reportWeightsNotInLinears(func, tp);

  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  if (Operation *existing = module.lookupSymbol(grid.getAttr())) {
    auto tpGrid = dyn_cast<shard::GridOp>(existing);
    if (!tpGrid || tpGrid.getShape() != ArrayRef<int64_t>{tp})
      return existing->emitError()
             << "symbol '" << grid.getValue()
             << "' exists and is not a 1-d shard.grid of "
             << static_cast<int64_t>(tp)
             << " ranks; pass another grid name (grid=...)";
  } else {
    shard::GridOp::create(b, module.getLoc(), grid.getAttr(),
                          b.getDenseI64ArrayAttr({static_cast<int64_t>(tp)}));
  }

  for (LinearOp column : split.columns) {
    int64_t groups = split.groups.lookup(column);
    if (!groups)
      groups = 1;
    if (failed(shardParam(column.getWeight(),
                          column.getTransposeWeight() ? 0 : 1, groups, column)))
      return failure();
    if (column.getBias() &&
        failed(shardParam(column.getBias(), 0, groups, column)))
      return failure();
  }
  // Local shapes of every split value.
  for (auto [v, d] : split.dim) {
    RankedTensorType t = tensorType(v);
    SmallVector<int64_t> shape(t.getShape());
    shape[d] /= tp;
    v.setType(RankedTensorType::get(shape, t.getElementType()));
    if (auto slice = v.getDefiningOp<SliceOp>()) {
      // Taken whole, one of a grouped linear's equal parts (each rank holds
      // its block of every part), or every stride-th element of the
      // rank's block.
      SmallVector<int64_t> starts(slice.getStarts()), limits(slice.getLimits());
      if (slice.getStrides()[d] == 1) {
        starts[d] /= tp;
        limits[d] = starts[d] + shape[d];
      } else {
        limits[d] = shape[d] * slice.getStrides()[d];
      }
      slice.setStarts(starts);
      slice.setLimits(limits);
    }
  }
  for (const Cut &cut : split.cuts)
    cutOperand(cut);
  gatherResults(func, split);
  for (Operation *norm : split.norms)
    distributeNorm(norm, tp, grid);
  for (LinearOp row : split.rows)
    if (failed(rewriteRow(row)))
      return failure();
  if (failed(rewriteVocabParallel(func)) || failed(applyParamShards(module)))
    return failure();
  func.walk([](AttentionOp a) { a->removeAttr(kReplicateKeyValueAttr); });
  return success();
}

} // namespace
