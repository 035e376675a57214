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
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
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

/// Whether `v` is the same on every rank: computed only from values that
/// are (function inputs, constants, parameters not sharded, the results of
/// all-reduces and all-gathers), never from a rank's block, a partial sum
/// or a rank's own random draw.
bool sameOnEveryRank(Value v, SymbolTableCollection &symbols) {
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
    if (isa<shard::AllReduceOp, shard::AllGatherOp>(def))
      continue;
    if (isa<shard::ShardDialect>(def->getDialect()) || isa<DropoutOp>(def))
      return false;
    if (auto get = dyn_cast<GetParamOp>(def)) {
      auto param =
          symbols.lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
      if (!param || param.getShardAxisAttr())
        return false;
      continue;
    }
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return true;
}

/// A sum over ranks scaled by values the same on every rank (an expert's
/// gate, and its routing mask): all_reduce(p) * g1 * g2 ..., each product
/// read only by the next.
struct ScaledSum {
  shard::AllReduceOp sum;
  SmallVector<MulOp> chain; // the outermost product first
};

/// `leaf` as a scaled sum of the tree's type, if it is one.
std::optional<ScaledSum> scaledSum(Value leaf, AddOp root,
                                   SymbolTableCollection &symbols) {
  auto mul = leaf.getDefiningOp<MulOp>();
  if (!mul || !leaf.hasOneUse() || mul.getType() != root.getType() ||
      !inSameStage(mul, root))
    return std::nullopt;
  for (unsigned i = 0; i < 2; ++i) {
    Value inner = mul->getOperand(i);
    if (!sameOnEveryRank(mul->getOperand(1 - i), symbols))
      continue;
    auto sum = inner.getDefiningOp<shard::AllReduceOp>();
    if (sum && sum->hasOneUse() &&
        sum.getReduction() == shard::ReductionKind::Sum &&
        sum.getType() == mul.getType() &&
        sum.getInput().getType() == sum.getType() && inSameStage(sum, mul))
      return ScaledSum{sum, {mul}};
    if (std::optional<ScaledSum> deeper = scaledSum(inner, root, symbols)) {
      deeper->chain.insert(deeper->chain.begin(), mul);
      return deeper;
    }
  }
  return std::nullopt;
}

/// Moves the scalings before the sum: all_reduce(p * g1 * g2 ...).
void sinkScaling(ScaledSum scaled) {
  MulOp outer = scaled.chain.front();
  OpBuilder b(outer);
  Value product = scaled.sum.getInput(), inner = scaled.sum.getResult();
  for (MulOp mul : llvm::reverse(scaled.chain)) {
    Value scale = mul->getOperand(mul->getOperand(0) == inner ? 1 : 0);
    auto next = MulOp::create(b, mul.getLoc(), mul.getType(), product, scale);
    next->setDiscardableAttrs(mul->getDiscardableAttrDictionary());
    product = next;
    inner = mul.getResult();
  }
  Operation *moved = b.clone(*scaled.sum);
  moved->setOperand(0, product);
  outer.getResult().replaceAllUsesWith(moved->getResult(0));
  for (MulOp mul : scaled.chain)
    mul->erase();
  scaled.sum->erase();
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
        else if (std::optional<ScaledSum> s = scaledSum(leaf, root, symbols))
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
