//===- MergePartialSums.cpp - sum partial sums before reducing them -------===//
//
// mp-merge-partial-sums: a parallel-attention block (GPT-J, GPT-NeoX,
// Falcon, Phi-2: x + attn(ln(x)) + mlp(ln(x))) ends in two row-parallel
// linears, each of whose partial products tensor parallelism sums over the
// ranks on its own, and the two sums then meet in one add. A sum of
// all-reduces is the all-reduce of the sum: adding the partial products
// first needs one collective per layer instead of two (as GPT-NeoX's
// Megatron-based trainer does), with the same bytes per collective. The
// adds around them are reassociated into the form a sequential block has,
// residual + (all_reduce + bias), so that sequence parallelism and
// mp-fuse-reduced-norms see the one site they know. Only the order of the
// additions changes.
//
// A mixture of experts computed densely sums its experts' row-parallel
// outputs each scaled by its gate: sum_e all_reduce(p_e) * g_e. The gates
// are the same on every rank (the router is whole), so each scaling moves
// before its all-reduce, all_reduce(p_e * g_e), and the experts' sums then
// merge as above: one collective per layer instead of one per expert.
//
// Experts stacked in one parameter and unstacked by mp-raise concatenate
// their outputs, each all-reduced: that concatenation is one all-reduce of
// the concatenated partial products. Carried through the views, the gates'
// scaling and a bias per expert (added apart: f(all_reduce(p) + c) =
// all_reduce(f(p)) + f(c)) to the sum over the experts, it moves after that
// sum (GPT-OSS, Llama 4, tokens flattened before the experts): one
// all-reduce of the layer's output instead of one per expert.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

#include <optional>

namespace mp {
#define GEN_PASS_DEF_MPMERGEPARTIALSUMS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// A tree of mp.add ops of one result type, read only by each other, and
/// the values it sums (each broadcast to that type).
struct SumTree {
  AddOp root;
  SmallVector<AddOp> adds; // root first, then each before its operands
  SmallVector<Value> leaves;
};

/// Whether `value` is summed inside the tree rooted at `root`: an add of the
/// root's type read only by another add of the tree.
bool isInnerAdd(Value value, AddOp root) {
  auto add = value.getDefiningOp<AddOp>();
  return add && value.hasOneUse() && add.getType() == root.getType() &&
         add->getBlock() == root->getBlock() && inSameStage(add, root);
}

/// Whether `add` is the root of its tree: not itself an inner add of the
/// add that reads it.
bool isRoot(AddOp add) {
  if (!add->hasOneUse())
    return true;
  auto user = dyn_cast<AddOp>(*add->getUsers().begin());
  return !user || !isInnerAdd(add.getResult(), user);
}

/// Adds `add`'s operands to `tree`, left to right: inner adds (after
/// `add`) and their operands in turn, or leaves.
void collect(AddOp add, SumTree &tree) {
  tree.adds.push_back(add);
  for (Value operand : add->getOperands()) {
    if (isInnerAdd(operand, tree.root))
      collect(operand.getDefiningOp<AddOp>(), tree);
    else
      tree.leaves.push_back(operand);
  }
}

SumTree sumTree(AddOp root) {
  SumTree tree{root, {}, {}};
  collect(root, tree);
  return tree;
}

/// Whether `v` is the same on every rank that `sum` sums over: computed
/// only from values that are (function inputs, constants, parameters not
/// sharded, the results of all-reduces and all-gathers over those ranks),
/// never from a rank's block, a partial sum or a rank's own random draw
/// (more cautious than RankLocal.h, whose programs have one grid and no
/// sharded inputs).
bool sameOnEveryRank(Value v, shard::AllReduceOp sum,
                     SymbolTableCollection &symbols) {
  SmallVector<Value> work{v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    Operation *def = value.getDefiningOp();
    if (!def) {
      // A function input, unless each rank is given its block of it
      // (mp-shard-inputs' key/value caches).
      auto arg = cast<BlockArgument>(value);
      auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      if (!func || func.getArgAttr(arg.getArgNumber(),
                                   MPDialect::getShardAxisAttrName()))
        return false;
      continue;
    }
    if (auto reduce = dyn_cast<shard::AllReduceOp>(def)) {
      if (reduce.getGridAttr() != sum.getGridAttr() ||
          reduce.getGridAxes() != sum.getGridAxes())
        return false;
      continue;
    }
    if (auto gather = dyn_cast<shard::AllGatherOp>(def)) {
      if (gather.getGridAttr() != sum.getGridAttr() ||
          gather.getGridAxes() != sum.getGridAxes())
        return false;
      continue;
    }
    if (isa<shard::ShardDialect>(def->getDialect()) ||
        isa<DropoutOp, ReduceScatterAddLayerNormOp, ReduceScatterAddRMSNormOp>(
            def))
      return false;
    if (auto embedding = dyn_cast<EmbeddingOp>(def);
        embedding && embedding.getGrid()) // (a vocab-parallel lookup)
      return false;
    if (auto get = dyn_cast<GetParamOp>(def)) {
      auto param =
          symbols.lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
      if (!param || param.getGrid())
        return false;
      continue;
    }
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return true;
}

/// Whether `op` is linear in its operand `i` (the others held): a product
/// or quotient by it, a contraction with it, a view of it.
bool linearIn(Operation *op, unsigned i) {
  if (isa<MulOp, ReshapeOp, TransposeOp, NegOp>(op))
    return true;
  if (auto reduce = dyn_cast<ReduceOp>(op))
    return reduce.getKind() == ReduceKind::sum;
  if (isa<DivOp>(op))
    return i == 0;
  if (auto einsum = dyn_cast<EinsumOp>(op))
    return einsum.getInputs().size() == 2;
  return false;
}

/// Whether `op` adds another value to its operand `i` without broadcasting
/// it (an expert's bias after its all-reduce, GPT-OSS's): f(x) = x + c.
bool affineIn(Operation *op, unsigned i) {
  return isa<AddOp>(op) &&
         op->getResult(0).getType() == op->getOperand(i).getType();
}

/// A sum over ranks carried through ops linear (or affine) in it whose
/// other operands are the same on every rank (an expert's gate and its
/// routing mask, a contraction with the gates, a view, a bias added):
/// f(all_reduce(p)), each op read only by the next.
/// f(all_reduce(p)) = all_reduce(f(p)), or, where the chain adds values c
/// on its way, all_reduce(f_linear(p)) + f(c)s.
struct ScaledSum {
  shard::AllReduceOp sum;
  SmallVector<std::pair<Operation *, unsigned>> chain; // (op, operand it is
                                                       // linear in), the
                                                       // outermost first
};

/// Whether `sum` is a sum over ranks that may move past the ops reading it:
/// of its input's type, in `at`'s pipeline stage, not a norm's statistics
/// (which are not activations: they stay where they are).
bool movableSum(shard::AllReduceOp sum, Operation *at) {
  return sum.getReduction() == shard::ReductionKind::Sum &&
         sum.getInput().getType() == sum.getType() && inSameStage(sum, at) &&
         !sum->hasAttr(MPDialect::getNormStatisticsAttrName());
}

/// The ops linear in a sum over ranks from `leaf` down to the sum, each
/// read only by the one before, if there are.
std::optional<ScaledSum> linearChain(Value leaf, Operation *root) {
  Operation *op = leaf.getDefiningOp();
  if (!op || op->getNumResults() != 1 || !leaf.hasOneUse() ||
      !inSameStage(op, root))
    return std::nullopt;
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    if (!linearIn(op, i) && !affineIn(op, i))
      continue;
    Value inner = op->getOperand(i);
    auto sum = inner.getDefiningOp<shard::AllReduceOp>();
    if (sum && sum->hasOneUse() && movableSum(sum, op))
      return ScaledSum{sum, {{op, i}}};
    if (std::optional<ScaledSum> deeper = linearChain(inner, root)) {
      deeper->chain.insert(deeper->chain.begin(), {op, i});
      return deeper;
    }
  }
  return std::nullopt;
}

/// `leaf` as a scaled sum: a linear chain whose other operands are the same
/// on every rank the sum sums over.
std::optional<ScaledSum> scaledSum(Value leaf, Operation *root,
                                   SymbolTableCollection &symbols) {
  std::optional<ScaledSum> scaled = linearChain(leaf, root);
  if (!scaled)
    return std::nullopt;
  for (auto [op, along] : scaled->chain)
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (i != along && !sameOnEveryRank(operand, scaled->sum, symbols))
        return std::nullopt;
  return scaled;
}

/// The chain of `scaled` applied to the sum's partial input, and apart to
/// the values it adds (null where none), built at `b`: f_linear(p) and
/// f(c), of which all_reduce(f_linear(p)) + f(c) is the chain's result.
std::pair<Value, Value> carryThrough(ScaledSum &scaled, OpBuilder &b) {
  Value carried = scaled.sum.getInput(), added;
  for (auto [op, operand] : llvm::reverse(scaled.chain)) {
    if (isa<AddOp>(op)) {
      Value other = op->getOperand(1 - operand);
      if (added) {
        Operation *sum = b.clone(*op);
        sum->setOperand(operand, added);
        added = sum->getResult(0);
      } else {
        added = other.getType() == op->getResult(0).getType()
                    ? other
                    : ExpandOp::create(b, op->getLoc(),
                                       op->getResult(0).getType(), other)
                          .getResult();
      }
      continue;
    }
    Operation *moved = b.clone(*op);
    moved->setOperand(operand, carried);
    carried = moved->getResult(0);
    if (added) {
      Operation *again = b.clone(*op);
      again->setOperand(operand, added);
      added = again->getResult(0);
    }
  }
  return {carried, added};
}

/// Erases the chain of `scaled` and its sum, no longer read.
void eraseChain(ScaledSum &scaled) {
  for (auto [op, operand] : scaled.chain)
    op->erase();
  scaled.sum->erase();
}

/// Moves the sum after the ops: all_reduce(f(p)); the values the chain
/// adds are carried apart through the ops after them and added to the sum
/// (every rank computes them alike).
void sinkScaling(ScaledSum scaled) {
  Operation *outer = scaled.chain.front().first;
  OpBuilder b(outer);
  auto [carried, added] = carryThrough(scaled, b);
  Operation *sum = b.clone(*scaled.sum);
  sum->setOperand(0, carried);
  sum->getResult(0).setType(carried.getType());
  // (Where the sum now is: past a pooling, outside the layers.)
  sum->setDiscardableAttrs(outer->getDiscardableAttrDictionary());
  Value result = sum->getResult(0);
  if (added) {
    auto total =
        AddOp::create(b, outer->getLoc(), result.getType(), result, added);
    total->setDiscardableAttrs(outer->getDiscardableAttrDictionary());
    result = total;
  }
  outer->getResult(0).replaceAllUsesWith(result);
  eraseChain(scaled);
}

/// `part` as a sum over ranks, possibly scaled: an all-reduce read only
/// there (an empty chain) or a scaled sum.
std::optional<ScaledSum> sumOrScaledSum(Value part, Operation *root,
                                        SymbolTableCollection &symbols) {
  auto sum = part.getDefiningOp<shard::AllReduceOp>();
  if (sum && part.hasOneUse() && movableSum(sum, root))
    return ScaledSum{sum, {}};
  return scaledSum(part, root, symbols);
}

/// A concatenation of sums over the same ranks is the sum of the
/// concatenation: one collective of the same bytes instead of one per
/// part (experts stacked in one parameter, unstacked by mp-raise, their
/// outputs concatenated back: GPT-OSS's, or any whose tokens are flattened
/// before the gates combine them).
///   concat(all_reduce(p_0), all_reduce(p_1)) = all_reduce(concat(p_0, p_1))
void mergeConcatenatedSums(ModuleOp module, SymbolTableCollection &symbols) {
  SmallVector<ConcatOp> concats;
  module.walk([&](ConcatOp concat) { concats.push_back(concat); });
  for (ConcatOp concat : concats) {
    if (concat.getInputs().size() < 2)
      continue;
    SmallVector<ScaledSum> parts;
    for (Value part : concat.getInputs()) {
      std::optional<ScaledSum> sum = sumOrScaledSum(part, concat, symbols);
      if (!sum || (!parts.empty() &&
                   (sum->sum.getGridAttr() != parts[0].sum.getGridAttr() ||
                    sum->sum.getGridAxes() != parts[0].sum.getGridAxes())))
        break;
      parts.push_back(*sum);
    }
    auto adds = [](const ScaledSum &part) {
      return llvm::any_of(part.chain,
                          [](auto link) { return isa<AddOp>(link.first); });
    };
    // (Each part adding a value on its way, or none.)
    if (parts.size() != concat.getInputs().size() ||
        llvm::any_of(parts, adds) != llvm::all_of(parts, adds))
      continue;
    // Each part's chain applied to its partial products (and apart to
    // what it adds), concatenated alike, then summed once.
    OpBuilder b(concat);
    SmallVector<Value> partials, added;
    for (ScaledSum &part : parts) {
      auto [partial, extra] = carryThrough(part, b);
      partials.push_back(partial);
      added.push_back(extra);
    }
    auto inner = cast<ConcatOp>(b.clone(*concat));
    inner->setOperands(partials);
    Operation *sum = b.clone(*parts.front().sum);
    sum->setOperand(0, inner);
    sum->getResult(0).setType(inner.getType());
    Value result = sum->getResult(0);
    if (added.front()) {
      auto addends = cast<ConcatOp>(b.clone(*concat));
      addends->setOperands(added);
      auto total =
          AddOp::create(b, concat.getLoc(), result.getType(), result, addends);
      total->setDiscardableAttrs(concat->getDiscardableAttrDictionary());
      result = total;
    }
    concat.getResult().replaceAllUsesWith(result);
    concat->erase();
    for (ScaledSum &part : parts)
      eraseChain(part);
  }
}

/// An all-reduce carried through ops linear (or affine) in it, the same
/// on every rank otherwise, to a reduction that shrinks it (a sum over the
/// experts of their gated outputs): the all-reduce moves after the
/// reduction, so it sums fewer bytes.
void sinkSumsPastReductions(ModuleOp module, SymbolTableCollection &symbols) {
  SmallVector<shard::AllReduceOp> sums;
  module.walk([&](shard::AllReduceOp sum) { sums.push_back(sum); });
  for (shard::AllReduceOp sum : sums) {
    if (!movableSum(sum, sum))
      continue;
    auto elements = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getNumElements();
    };
    // The ops reading the sum in turn, innermost first; the chain up to
    // the one of fewest elements, the first where it is smallest.
    SmallVector<std::pair<Operation *, unsigned>> chain;
    size_t best = 0;
    int64_t fewest = elements(sum.getResult());
    Value value = sum.getResult();
    while (value.hasOneUse()) {
      OpOperand &use = *value.getUses().begin();
      Operation *op = use.getOwner();
      unsigned i = use.getOperandNumber();
      if (op->getNumResults() != 1 || !inSameStage(op, sum) ||
          !(linearIn(op, i) || affineIn(op, i)) ||
          !llvm::all_of(llvm::enumerate(op->getOperands()), [&](auto o) {
            return o.index() == i || sameOnEveryRank(o.value(), sum, symbols);
          }))
        break;
      chain.push_back({op, i});
      value = op->getResult(0);
      if (elements(value) < fewest) {
        fewest = elements(value);
        best = chain.size();
      }
    }
    if (best == 0)
      continue;
    chain.resize(best);
    std::reverse(chain.begin(), chain.end());
    sinkScaling(ScaledSum{sum, chain});
  }
}

/// The sum over ranks of `concat`'s first part where each part is a scaled
/// sum over the same ranks (views and scalings the same on every rank of
/// a sum), to merge; null where not.
shard::AllReduceOp partsAreSums(ConcatOp concat, Operation *reader,
                                SymbolTableCollection &symbols) {
  shard::AllReduceOp first;
  for (Value part : concat.getInputs()) {
    std::optional<ScaledSum> scaled = scaledSum(part, reader, symbols);
    if (!scaled)
      return {};
    if (!first)
      first = scaled->sum;
    else if (scaled->sum.getGridAttr() != first.getGridAttr() ||
             scaled->sum.getGridAxes() != first.getGridAxes())
      return {};
  }
  return first;
}

/// The dim of `op`'s operand `i` that `op` sums over and that is the
/// concatenated dim of `concat` (its operand `i`), with the dim of the
/// other operand that goes with it (-1: none), if `op` sums over it: an
/// einsum that contracts it, a sum reduction along it.
std::optional<int64_t> summedWith(Operation *op, unsigned i, ConcatOp concat) {
  const int64_t axis = concat.getAxis();
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    int64_t rank = cast<RankedTensorType>(concat.getType()).getRank();
    bool along = llvm::any_of(reduce.getAxes(), [&](int64_t a) {
      return (a < 0 ? a + rank : a) == axis;
    });
    if (reduce.getKind() != ReduceKind::sum || !along)
      return std::nullopt;
    return -1;
  }
  auto einsum = dyn_cast<EinsumOp>(op);
  if (!einsum || einsum.getInputs().size() != 2)
    return std::nullopt;
  std::vector<int64_t> ranks;
  for (Value input : einsum.getInputs())
    ranks.push_back(cast<RankedTensorType>(input.getType()).getRank());
  EinsumSpec spec;
  std::string error;
  if (!parseEinsum(einsum.getEquation().str(), ranks, spec, error))
    return std::nullopt;
  const char label = spec.inputs[i][axis];
  const size_t other = spec.inputs[1 - i].find(label);
  if (spec.output.find(label) != std::string::npos ||
      llvm::count(spec.inputs[i], label) != 1 ||
      llvm::count(spec.inputs[1 - i], label) > 1)
    return std::nullopt;
  return other == std::string::npos ? -1 : static_cast<int64_t>(other);
}

/// An einsum that contracts (a reduction that sums over) the dim along
/// which an operand is a concatenation of sums over ranks, each scaled by
/// values the same on every rank, is the sum of the einsums (reductions)
/// of the parts, whose sums then merge as the leaves of one tree.
/// Experts stacked in one parameter, unstacked by mp-raise and combined by
/// their gates ("bsed,bse->bsd"), or experts' outputs stacked and summed
/// (torch.stack(...).sum(0)):
///   einsum(concat(y_0, y_1), g) = einsum(y_0, g_0) + einsum(y_1, g_1).
void splitSumsOverConcats(ModuleOp module, SymbolTableCollection &symbols) {
  SmallVector<Operation *> readers;
  module.walk([&](Operation *op) {
    if (isa<EinsumOp, ReduceOp>(op))
      readers.push_back(op);
  });
  for (Operation *op : readers) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      auto concat = op->getOperand(i).getDefiningOp<ConcatOp>();
      if (!concat || !concat->hasOneUse() || !inSameStage(concat, op) ||
          concat.getInputs().size() < 2)
        continue;
      std::optional<int64_t> otherAxis = summedWith(op, i, concat);
      shard::AllReduceOp sum =
          otherAxis ? partsAreSums(concat, op, symbols) : shard::AllReduceOp();
      Value other = op->getNumOperands() == 2 ? op->getOperand(1 - i) : Value();
      if (!sum || (other && !sameOnEveryRank(other, sum, symbols)))
        continue;
      OpBuilder b(op);
      Value total;
      int64_t offset = 0;
      for (Value part : concat.getInputs()) {
        int64_t size =
            cast<RankedTensorType>(part.getType()).getDimSize(concat.getAxis());
        Value slice;
        if (*otherAxis >= 0) {
          auto cut = SliceOp::create(b, op->getLoc(), other, *otherAxis, offset,
                                     offset + size);
          cut->setDiscardableAttrs(op->getDiscardableAttrDictionary());
          slice = cut;
        }
        Operation *piece = b.clone(*op);
        piece->setOperand(i, part);
        if (slice)
          piece->setOperand(1 - i, slice);
        if (!total) {
          total = piece->getResult(0);
        } else {
          auto add = AddOp::create(b, op->getLoc(), op->getResult(0).getType(),
                                   total, piece->getResult(0));
          add->setDiscardableAttrs(op->getDiscardableAttrDictionary());
          total = add;
        }
        offset += size;
      }
      op->getResult(0).replaceAllUsesWith(total);
      op->erase();
      concat.erase();
      break;
    }
  }
}

/// `leaf` as a sum over ranks that can take another's partial products: a
/// sum all_reduce or reduce_scatter of the tree's type, read only by the
/// tree.
Operation *mergeableSum(Value leaf, AddOp root) {
  Operation *sum = leaf.getDefiningOp();
  if (!sum || !leaf.hasOneUse() || leaf.getType() != root.getType() ||
      sum->getBlock() != root->getBlock() || !inSameStage(sum, root))
    return nullptr;
  shard::ReductionKind kind;
  if (auto reduce = dyn_cast<shard::AllReduceOp>(sum))
    kind = reduce.getReduction();
  else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(sum))
    kind = scatter.getReduction();
  else
    return nullptr;
  // (A sum that widens its input would add the partials narrow.)
  if (kind != shard::ReductionKind::Sum ||
      getElementTypeOrSelf(sum->getOperand(0)) != getElementTypeOrSelf(leaf))
    return nullptr;
  return sum;
}

/// Whether `a` and `b` sum the same shape over the same ranks, and scatter
/// the same way.
bool sameGroup(Operation *a, Operation *b) {
  // A norm's statistics are sums that sequence parallelism leaves alone.
  StringRef statistics = MPDialect::getNormStatisticsAttrName();
  if (a->getName() != b->getName() ||
      a->getOperand(0).getType() != b->getOperand(0).getType() ||
      a->hasAttr(statistics) != b->hasAttr(statistics))
    return false;
  if (auto reduce = dyn_cast<shard::AllReduceOp>(a)) {
    auto other = cast<shard::AllReduceOp>(b);
    return reduce.getGridAttr() == other.getGridAttr() &&
           reduce.getGridAxes() == other.getGridAxes();
  }
  auto scatter = cast<shard::ReduceScatterOp>(a);
  auto other = cast<shard::ReduceScatterOp>(b);
  return scatter.getGridAttr() == other.getGridAttr() &&
         scatter.getGridAxes() == other.getGridAxes() &&
         scatter.getScatterAxis() == other.getScatterAxis();
}

/// The sums among `tree`'s leaves, in groups that sum over the same ranks;
/// only groups of two or more, which merge.
SmallVector<SmallVector<Operation *>> mergeable(const SumTree &tree) {
  SmallVector<SmallVector<Operation *>> groups;
  for (Value leaf : tree.leaves) {
    Operation *sum = mergeableSum(leaf, tree.root);
    if (!sum)
      continue;
    auto group = llvm::find_if(groups, [&](ArrayRef<Operation *> g) {
      return sameGroup(g.front(), sum);
    });
    if (group == groups.end())
      groups.push_back({sum});
    else
      group->push_back(sum);
  }
  llvm::erase_if(groups, [](ArrayRef<Operation *> g) { return g.size() < 2; });
  return groups;
}

/// One collective for `sums`, of their partial products added, before `b`'s
/// insertion point; `add` builds the adds.
template <class AddFn>
Value mergeGroup(OpBuilder &b, ArrayRef<Operation *> sums, AddFn add) {
  Value partial = sums.front()->getOperand(0);
  for (Operation *sum : sums.drop_front())
    partial = add(partial, sum->getOperand(0), partial.getType());
  Operation *merged = b.clone(*sums.front());
  merged->setOperand(0, partial);
  return merged->getResult(0);
}

/// Rebuilds `tree` as residual + ... + (collective(p1 + p2 + ...) + bias),
/// a collective per group, the biases (values broadcast to the tree's
/// type) summed first where they share a type.
void merge(SumTree &tree, ArrayRef<SmallVector<Operation *>> groups) {
  AddOp root = tree.root;
  OpBuilder b(root);
  Location loc = root.getLoc();
  Type type = root.getType();
  auto add = [&](Value lhs, Value rhs, Type resultType) -> Value {
    auto sum = AddOp::create(b, loc, resultType, lhs, rhs);
    sum->setDiscardableAttrs(root->getDiscardableAttrDictionary());
    return sum;
  };

  SmallVector<Value> merged, biases, residuals;
  for (ArrayRef<Operation *> group : groups)
    merged.push_back(mergeGroup(b, group, add));
  auto inGroup = [&](Operation *op) {
    return llvm::any_of(groups, [&](ArrayRef<Operation *> group) {
      return llvm::is_contained(group, op);
    });
  };
  for (Value leaf : tree.leaves) {
    if (inGroup(leaf.getDefiningOp()))
      continue;
    (leaf.getType() == type ? residuals : biases).push_back(leaf);
  }
  // Biases of one type are summed at their own size before the broadcast.
  SmallVector<Value> addends;
  for (Value bias : biases) {
    auto same = llvm::find_if(
        addends, [&](Value v) { return v.getType() == bias.getType(); });
    if (same == addends.end())
      addends.push_back(bias);
    else
      *same = add(*same, bias, bias.getType());
  }
  Value total = merged.front();
  for (Value addend : addends)
    total = add(total, addend, type);
  for (Value other : llvm::drop_begin(merged))
    total = add(other, total, type);
  for (Value residual : residuals)
    total = add(residual, total, type);

  root.getResult().replaceAllUsesWith(total);
  for (AddOp inner : tree.adds)
    inner->erase();
  for (ArrayRef<Operation *> group : groups)
    for (Operation *sum : group)
      sum->erase();
}

struct MergePartialSumsPass
    : public mp::impl::MPMergePartialSumsBase<MergePartialSumsPass> {
  using MPMergePartialSumsBase::MPMergePartialSumsBase;

  void runOnOperation() override {
    SymbolTableCollection symbols;
    splitSumsOverConcats(getOperation(), symbols);
    mergeConcatenatedSums(getOperation(), symbols);
    sinkSumsPastReductions(getOperation(), symbols);
    SmallVector<AddOp> roots;
    getOperation().walk([&](AddOp add) {
      if (isRoot(add))
        roots.push_back(add);
    });
    for (AddOp root : roots) {
      SumTree tree = sumTree(root);
      // Scaled sums move before their scaling where another sum is there
      // to merge with.
      SmallVector<ScaledSum> scaled;
      unsigned sums = 0;
      for (Value leaf : tree.leaves) {
        if (mergeableSum(leaf, root))
          ++sums;
        else if (leaf.getType() == root.getType())
          if (std::optional<ScaledSum> s = scaledSum(leaf, root, symbols))
            scaled.push_back(*s);
      }
      if (!scaled.empty() && sums + scaled.size() >= 2) {
        for (ScaledSum &s : scaled)
          sinkScaling(s);
        tree = sumTree(root);
      }
      SmallVector<SmallVector<Operation *>> groups = mergeable(tree);
      if (!groups.empty())
        merge(tree, groups);
    }
  }
};

} // namespace
