//===- TensorParallel.cpp - Megatron tensor parallelism -------------------===//
//
// Finds Megatron's column/row-parallel structure by propagating "this value
// is split along dimension d" forward from linears: a linear is
// column-parallel when its split output reaches only ops that can run on the
// split (shape and elementwise ops, the heads of attention) before the
// contracting dimension of another linear, which is then row-parallel. A
// linear whose split output reaches anything else (a norm, a residual add
// with a whole tensor, the function's result) stays whole, and the analysis
// repeats without it. A fused linear whose split stops where its output is
// taken in parts (Falcon's QKV with one key/value head) is cut into a linear
// per part first (FusedLinear.h), so each part splits as it can. A norm
// over the split dim itself runs on each rank's block with its statistics
// all-reduced (DistributedNorm.h). The graph
// is then rewritten to local shapes with the collectives written explicitly
// as `shard` ops.
//
//===----------------------------------------------------------------------===//
#include "DistributedNorm.h"
#include "FusedLinear.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Debug.h"

#include <functional>
#include <optional>

#define DEBUG_TYPE "mp-tensor-parallel"

namespace mp {
#define GEN_PASS_DEF_MPTENSORPARALLEL
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool inLayer(Operation *op) {
  return op->hasAttr(MPDialect::getLayerAttrName());
}

/// A whole operand that an op's split rule needs split (a bias added to
/// per-head scores): each rank takes its block of it with shard.all_slice.
struct Cut {
  Operation *op;
  unsigned operand;
  int64_t dim;
};

/// The result of propagating splits through the function.
struct Split {
  llvm::MapVector<Value, int64_t> dim;           // value -> split dimension
  llvm::DenseMap<Value, llvm::BitVector> origin; // seeding linears
  SmallVector<LinearOp> columns, rows;
  llvm::DenseMap<Operation *, int64_t> groups; // column linear -> parts
  SmallVector<Cut> cuts;
  SmallVector<Operation *> norms; // norms over a split dim (distributed)
};

/// A split dimension seen by an op: operand i is split along dims[i] (-1:
/// whole).
using Dims = SmallVector<int64_t>;

/// Whether a value is computed from constants and parameters alone, not
/// from the function's inputs: an ALiBi slope table, a learned relative
/// position bias, a bias added apart from its linear. Tensor parallelism
/// cuts such a value where a split needs it cut (every rank holds it whole,
/// so its block costs no communication); a whole activation spanning a
/// split stays a stop, since cutting it would hide a replicated
/// computation of the activation.
class InputFree {
public:
  bool operator()(Value root) {
    // Depth first with an explicit stack: chains can be long.
    SmallVector<std::pair<Value, bool>> stack = {{root, false}};
    while (!stack.empty()) {
      auto [v, expanded] = stack.back();
      Operation *def = v.getDefiningOp();
      if (known.count(v) || !def) {
        known.try_emplace(v, false); // a block argument: an input
        stack.pop_back();
        continue;
      }
      if (!expanded) {
        stack.back().second = true;
        for (Value x : def->getOperands())
          if (!known.count(x))
            stack.push_back({x, false});
        continue;
      }
      known[v] = llvm::all_of(def->getOperands(),
                              [&](Value x) { return known.lookup(x); });
      stack.pop_back();
    }
    return known.lookup(root);
  }

private:
  llvm::DenseMap<Value, bool> known;
};

/// Whether operand `i` of `op` is an attention's additive mask: cut by
/// heads whatever it is computed from (an ALiBi bias plus a padding mask
/// read from an input), since it never carries the activations whose
/// replication a cut would hide.
bool isAttentionMask(Operation *op, unsigned i) {
  return isa<AttentionOp>(op) && i == 3; // query, key, value, mask
}

/// The split dimension of `op`'s results given its operands', by the op's
/// split rule (SplitOpInterface); nullopt when the op cannot run on these
/// splits. A whole operand the rule needs split is cut (recorded in
/// `cuts`) when `cuttable` says it may be; otherwise the split stops.
std::optional<Dims> propagate(Operation *op, const Dims &in,
                              InputFree *cuttable = nullptr,
                              SmallVectorImpl<Cut> *cuts = nullptr) {
  auto rule = dyn_cast<SplitOpInterface>(op);
  if (!rule)
    return std::nullopt;
  FailureOr<SplitMapping> mapping = rule.propagateSplit(in);
  if (failed(mapping))
    return std::nullopt;
  SmallVector<Cut> needed;
  for (auto [i, d] : llvm::enumerate(mapping->operands)) {
    if (d == in[i])
      continue;
    if (in[i] >= 0 || !cuttable ||
        !(isAttentionMask(op, static_cast<unsigned>(i)) ||
          (*cuttable)(op->getOperand(i))))
      return std::nullopt;
    needed.push_back({op, static_cast<unsigned>(i), d});
  }
  if (cuts)
    cuts->append(needed.begin(), needed.end());
  return Dims(mapping->results);
}

/// For a norm over the split dim: records the cuts of its scale and bias
/// (vectors of the normalized dim's size, by the norms' verifiers) to each
/// rank's block and the norm as distributed, when they are values a cut
/// may take (computed from constants and parameters).
bool cutsNormParams(Operation &norm, InputFree &cuttable, Split &split) {
  SmallVector<Cut> needed;
  for (unsigned i = 1; i < norm.getNumOperands(); ++i) {
    if (!cuttable(norm.getOperand(i)))
      return false;
    needed.push_back({&norm, i, 0});
  }
  split.cuts.append(needed.begin(), needed.end());
  split.norms.push_back(&norm);
  return true;
}

/// The operands of `op` whose splits it cannot take: the fewest that, kept
/// whole, let its split rule accept the others (multi-query attention takes
/// split query heads with its one key/value head whole), else every split
/// operand.
SmallVector<unsigned> refusedOperands(Operation *op, const Dims &dims,
                                      InputFree &cuttable) {
  SmallVector<unsigned> splitOperands;
  for (auto [i, d] : llvm::enumerate(dims))
    if (d >= 0)
      splitOperands.push_back(i);
  unsigned n = splitOperands.size();
  if (n > 1 && n <= 8)
    for (unsigned count = 1; count < n; ++count)
      for (unsigned mask = 1; mask < (1u << n) - 1; ++mask) {
        if (static_cast<unsigned>(llvm::popcount(mask)) != count)
          continue;
        Dims kept = dims;
        SmallVector<unsigned> refused;
        for (unsigned b = 0; b < n; ++b)
          if (mask & (1u << b)) {
            kept[splitOperands[b]] = -1;
            refused.push_back(splitOperands[b]);
          }
        if (propagate(op, kept, &cuttable))
          return refused;
      }
  return splitOperands;
}

/// Where the split of a linear that stays whole stopped, for telling the
/// user: the op that could not take it and the dim it came split along.
struct Stop {
  Operation *op;
  Dims dims;          // the split of each of its operands (-1: whole)
  const char *reason; // why, where the op's split rule does not say
};

/// Propagates splits from every linear in `allowed`; returns the linears to
/// drop (those whose split reaches an op that cannot take it), or an empty
/// vector when the split is consistent. The first stop of each linear
/// dropped is recorded in `stops`.
llvm::BitVector analyze(func::FuncOp func, ArrayRef<LinearOp> linears,
                        const llvm::BitVector &allowed, Split &split,
                        llvm::DenseMap<unsigned, Stop> &stops) {
  split = Split();
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [i, l] : llvm::enumerate(linears))
    indexOf[l] = i;
  llvm::BitVector conflict(linears.size());
  InputFree cuttable;
  auto markResult = [&](Value v, int64_t d, const llvm::BitVector &from) {
    split.dim[v] = d;
    split.origin[v] = from;
  };
  auto stopAt = [&](Operation *op, const Dims &dims,
                    const llvm::BitVector &from, const char *reason = nullptr) {
    for (unsigned i : from.set_bits())
      stops.try_emplace(i, Stop{op, dims, reason});
    conflict |= from;
  };

  for (Operation &op : func.getBody().front()) {
    Dims dims;
    llvm::BitVector from(linears.size());
    bool anySplit = false;
    for (Value operand : op.getOperands()) {
      auto it = split.dim.find(operand);
      dims.push_back(it == split.dim.end() ? -1 : it->second);
      if (it != split.dim.end()) {
        anySplit = true;
        from |= split.origin[operand];
      }
    }
    if (auto linear = dyn_cast<LinearOp>(&op)) {
      if (dims[0] >= 0) {
        if (dims[0] != tensorType(linear.getInput()).getRank() - 1) {
          stopAt(&op, dims, from);
          continue;
        }
        split.rows.push_back(linear);
        continue;
      }
      unsigned i = indexOf.lookup(linear);
      if (indexOf.count(linear) && allowed[i]) {
        llvm::BitVector self(linears.size());
        self.set(i);
        markResult(linear.getResult(), linear.getType().getRank() - 1, self);
        split.columns.push_back(linear);
      }
      continue;
    }
    if (!anySplit)
      continue;
    if (auto splitOp = dyn_cast<SplitOp>(&op);
        splitOp && splitOp.getNormalizedAxis() == dims[0]) {
      // Splitting a linear's split output along that dim: the fused QKV
      // case, sharded per part (each rank's block of every part), so each
      // part comes out split along the same dim.
      auto producer = splitOp.getInput().getDefiningOp<LinearOp>();
      bool equal = llvm::all_of(splitOp.getResults(), [&](Value r) {
        return r.getType() == splitOp.getResult(0).getType();
      });
      if (!producer || !equal || split.groups.count(producer)) {
        stopAt(&op, dims, from);
        continue;
      }
      split.groups[producer] = splitOp.getNumResults();
      for (Value r : splitOp.getResults())
        markResult(r, dims[0], from);
      continue;
    }
    if (isNormOverSplit(&op, dims) && cutsNormParams(op, cuttable, split)) {
      markResult(op.getResult(0), dims[0], from);
      continue;
    }
    std::optional<Dims> results = propagate(&op, dims, &cuttable, &split.cuts);
    if (!results) {
      LLVM_DEBUG(llvm::dbgs() << "split stops at " << op << "\n");
      llvm::BitVector refusedFrom(linears.size());
      for (unsigned i : refusedOperands(&op, dims, cuttable))
        refusedFrom |= split.origin[op.getOperand(i)];
      stopAt(&op, dims, refusedFrom);
      continue;
    }
    for (auto [r, d] : llvm::zip(op.getResults(), *results))
      if (d >= 0)
        markResult(r, d, from);
  }
  // A linear sharded per part holds each rank's block of every part: only
  // the split into those parts reads its output that way.
  for (auto &entry : split.groups) {
    Value out = entry.first->getResult(0);
    for (Operation *user : out.getUsers()) {
      if (isa<SplitOp>(user))
        continue;
      Dims dims;
      for (Value operand : user->getOperands()) {
        auto it = split.dim.find(operand);
        dims.push_back(it == split.dim.end() ? -1 : it->second);
      }
      stopAt(user, dims, split.origin[out],
             "which reads whole the output of a linear sharded per part of "
             "a fused output (each rank holds a block of every part)");
    }
  }
  return conflict;
}

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
  void reportWhole(ArrayRef<LinearOp> linears, const Split &split,
                   const llvm::DenseMap<unsigned, Stop> &stops);
  LogicalResult checkDivisible(const Split &split);
  LogicalResult shardParam(Value v, int64_t axis, int64_t groups,
                           Operation *user);
  LogicalResult applyParamShards(ModuleOp module);
  Value allReduce(OpBuilder &b, Location loc, Value v, Operation *like);
  void cutOperand(const Cut &cut);
  LogicalResult rewriteRow(LinearOp linear);
  LogicalResult rewriteVocabParallel(func::FuncOp func);

  FlatSymbolRefAttr grid; // the grid this pass creates

  /// Parameter symbol -> (axis, groups) and the ops allowed to see its shard.
  llvm::MapVector<StringAttr, std::pair<int64_t, int64_t>> paramShards;
  llvm::DenseMap<StringAttr, llvm::SmallPtrSet<Operation *, 4>> shardUsers;
};

/// Why a split stopped at `stop.op`, in the user's terms.
static std::string describeStop(const Stop &stop) {
  std::string why;
  llvm::raw_string_ostream os(why);
  int64_t dim = *llvm::max_element(stop.dims);
  os << "its output reaches '" << stop.op->getName() << "'";
  if (auto name = dyn_cast<NameLoc>(stop.op->getLoc()))
    os << " ('" << name.getName() << "')";
  os << " split along dim " << dim << ", ";
  if (stop.reason) {
    os << stop.reason;
    return why;
  }
  if (isa<LinearOp>(stop.op)) {
    os << "which is not that linear's input features";
    return why;
  }
  if (auto attention = dyn_cast<AttentionOp>(stop.op);
      attention && tensorType(attention.getKey()).getDimSize(1) == 1) {
    os << "and multi-query attention reads its one key/value head whole on "
          "every rank";
    return why;
  }
  if (auto rule = dyn_cast<SplitOpInterface>(stop.op);
      rule && succeeded(rule.propagateSplit(stop.dims))) {
    os << "where a whole activation spans the split (tensor parallelism "
          "cuts only values computed from constants and parameters)";
    return why;
  }
  os << "which cannot run on that split";
  return why;
}

/// A transformer-block linear that stays whole costs the parallelism the
/// user asked for: a warning says so, naming the op that stopped its split,
/// and `mp.replicated` records it for the summary.
void TensorParallelPass::reportWhole(
    ArrayRef<LinearOp> linears, const Split &split,
    const llvm::DenseMap<unsigned, Stop> &stops) {
  llvm::SmallPtrSet<Operation *, 16> splitOnes;
  for (LinearOp l : split.columns)
    splitOnes.insert(l);
  for (LinearOp l : split.rows)
    splitOnes.insert(l);
  for (auto [i, linear] : llvm::enumerate(linears)) {
    if (splitOnes.contains(linear))
      continue;
    std::string why = "no split reaches it";
    Operation *at = nullptr;
    if (auto stop = stops.find(i); stop != stops.end()) {
      at = stop->second.op;
      why = describeStop(stop->second);
    }
    linear->setAttr(MPDialect::getReplicatedAttrName(),
                    StringAttr::get(&getContext(), why));
    InFlightDiagnostic diag = linear->emitWarning()
                              << "this linear stays whole (replicated on all "
                              << static_cast<int64_t>(tp) << " ranks): " << why;
    if (at)
      diag.attachNote(at->getLoc()) << "the split stops here";
  }
}

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
    if (size % t)
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
  auto get = v.getDefiningOp<GetParamOp>();
  if (!get)
    return user->emitError()
           << "a tensor-parallel weight must be a parameter (mp.get_param)";
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

/// The LM head whose logits `result` is: a linear, possibly followed by
/// ops that each take its vocabulary split and read nothing else split (a
/// cast back to fp32, Gemma 2's soft-capping tanh(x / c) * c), every value
/// read once; those ops, first to last, in `between`.
static LinearOp findHead(Value result, SmallVectorImpl<Operation *> &between) {
  Value v = result;
  while (Operation *def = v.getDefiningOp()) {
    if (!v.hasOneUse() || def->getNumResults() != 1)
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
      auto t = dyn_cast<RankedTensorType>(operand.getType());
      if (!t || t.getRank() != last + 1 ||
          t.getShape().back() != tensorType(v).getShape().back())
        continue;
      Dims dims(def->getNumOperands(), -1);
      dims[i] = last;
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
  for (Value result : ret->getOperands()) {
    SmallVector<Operation *> between;
    LinearOp head = findHead(result, between);
    auto weight =
        head ? head.getWeight().getDefiningOp<GetParamOp>() : GetParamOp();
    if (!weight || inLayer(head))
      continue;
    headVocabs.insert(head.getType().getShape().back());
    headWeights.insert(weight.getNameAttr());
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
  for (EmbeddingOp e : embeddings) {
    int64_t vocab = tensorType(e.getTable()).getDimSize(0);
    if (vocab % tp)
      return e.emitError() << "vocabulary (" << vocab
                           << ") is not divisible by the tensor-parallel size "
                           << static_cast<int64_t>(tp)
                           << "; pad the embedding to a multiple of it (as "
                              "Megatron does)";
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
    RankedTensorType full = head.getType();
    int64_t vocab = full.getShape().back();
    if (vocab % tp) {
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
    // Gathered before trailing widening casts (bf16 logits cast to fp32
    // move half the bytes).
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
    between.insert(between.begin(), head);
    for (Operation *op : between) {
      RankedTensorType t = tensorType(op->getResult(0));
      SmallVector<int64_t> local(t.getShape());
      local.back() /= tp;
      op->getResult(0).setType(
          RankedTensorType::get(local, t.getElementType()));
    }
    RankedTensorType local = tensorType(gatherAt->get());
    SmallVector<int64_t> whole(local.getShape());
    whole.back() *= tp;
    OpBuilder b(gatherAt->getOwner());
    auto gather = shard::AllGatherOp::create(
        b, head.getLoc(), local.clone(whole), grid, b.getDenseI16ArrayAttr({0}),
        gatherAt->get(), b.getIndexAttr(local.getRank() - 1));
    gatherAt->set(gather.getResult());
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
      op->emitOpError("is a fusion: mp-fuse-residual-norms runs after "
                      "mp-tensor-parallel, not before");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (fusedFound.wasInterrupted())
    return failure();
  SmallVector<LinearOp> linears;
  Split split;
  llvm::DenseMap<unsigned, Stop> stops;
  for (bool cut = true; cut;) {
    linears.clear();
    func.walk([&](LinearOp l) {
      if (inLayer(l))
        linears.push_back(l);
    });
    llvm::BitVector allowed(linears.size(), true);
    stops.clear();
    while (true) {
      llvm::BitVector conflict = analyze(func, linears, allowed, split, stops);
      if (conflict.none())
        break;
      allowed.reset(conflict);
    }
    // Fused linears stopped where their parts are taken: cut (all found
    // first: a cut erases ops other stops name), start again.
    SmallVector<LinearOp> fused;
    for (auto &[i, stop] : stops)
      if (!allowed[i] && takesPartOfFusedLinear(linears[i], stop.op))
        fused.push_back(linears[i]);
    cut = false;
    for (LinearOp linear : fused)
      cut |= succeeded(cutFusedLinear(linear));
  }
  if (failed(checkDivisible(split)))
    return failure();
  reportWhole(linears, split, stops);

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
      SmallVector<int64_t> limits(slice.getLimits());
      limits[d] = shape[d];
      slice.setLimits(limits);
    }
  }
  for (const Cut &cut : split.cuts)
    cutOperand(cut);
  for (Operation *norm : split.norms)
    distributeNorm(norm, tp, grid);
  for (LinearOp row : split.rows)
    if (failed(rewriteRow(row)))
      return failure();
  if (failed(rewriteVocabParallel(func)) || failed(applyParamShards(module)))
    return failure();
  return success();
}

} // namespace
