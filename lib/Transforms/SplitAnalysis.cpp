//===- SplitAnalysis.cpp - where tensor parallelism splits ----------------===//
//
// See SplitAnalysis.h and the comment at the top of TensorParallel.cpp.
//
//===----------------------------------------------------------------------===//
#include "SplitAnalysis.h"

#include "DistributedNorm.h"
#include "FusedLinear.h"
#include "mp/Analysis/MemoryPlan.h"

#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/Debug.h"

#include <optional>

#define DEBUG_TYPE "mp-tensor-parallel"

using namespace mlir;
using namespace mp;
using namespace mp::tensor_parallel;

namespace {

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

} // namespace

/// Whether `v` is an expand that broadcasts along `dim` (MLA's one rotary
/// key head expanded to every head): its block along `dim` is the same
/// broadcast, to fewer rows, which costs nothing and hides no replicated
/// computation.
bool tensor_parallel::broadcastsAlong(Value v, int64_t dim) {
  auto expand = v.getDefiningOp<ExpandOp>();
  if (!expand)
    return false;
  int64_t offset =
      expand.getType().getRank() - tensorType(expand.getInput()).getRank();
  return dim < offset ||
         tensorType(expand.getInput()).getDimSize(dim - offset) == 1;
}

int64_t tensor_parallel::paramAxis(Value v, int64_t axis, int64_t parts) {
  if (!v.getDefiningOp<ReshapeOp>())
    return axis;
  ArrayRef<int64_t> stored =
      tensorType(MemoryPlan::viewedParameter(v).getResult()).getShape();
  ArrayRef<int64_t> viewed = tensorType(v).getShape();
  int64_t before = 1;
  for (int64_t size : viewed.take_front(axis))
    before *= size;
  const int64_t through = before * viewed[axis];
  // The stored dims merged into `axis`: those after the elements `before`
  // it and up to `through`, when the view cuts none of them.
  size_t first = 0;
  int64_t elements = 1;
  while (first < stored.size() && elements < before)
    elements *= stored[first++];
  if (elements != before)
    return -1;
  while (first < stored.size() && stored[first] == 1)
    ++first;
  size_t last = first;
  while (last < stored.size() && elements < through)
    elements *= stored[last++];
  if (elements != through || last == first || stored[first] % parts)
    return -1;
  return static_cast<int64_t>(first);
}

ReshapeOp tensor_parallel::headRepeat(Value v, int64_t &dim) {
  // Through transposes (a repeated key transposed for QK^T).
  while (auto t = v.getDefiningOp<TransposeOp>()) {
    dim = t.getPermutation()[dim];
    v = t.getInput();
  }
  auto merge = v.getDefiningOp<ReshapeOp>();
  auto expand = merge ? merge.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
  if (!expand)
    return {};
  RankedTensorType in = tensorType(expand.getInput());
  ArrayRef<int64_t> wide = expand.getType().getShape();
  ArrayRef<int64_t> out = merge.getType().getShape();
  // [..., n, r, ...] -> [..., n * r, ...], the r copies broadcast.
  if (in.getRank() != expand.getType().getRank() ||
      wide.size() != out.size() + 1 || dim < 0 ||
      dim + 1 >= static_cast<int64_t>(wide.size()) ||
      in.getDimSize(dim + 1) != 1 || in.getDimSize(dim) != wide[dim] ||
      out[dim] != wide[dim] * wide[dim + 1] ||
      out.take_front(dim) != wide.take_front(dim) ||
      out.drop_front(dim + 1) != wide.drop_front(dim + 2))
    return {};
  return merge;
}

namespace {

/// A linear's output taken in equal contiguous blocks along its features.
struct EqualParts {
  LinearOp linear;
  int64_t count;                       // blocks
  SmallVector<Operation *, 4> readers; // the slices, and the view they read
};

/// The linear `slice` takes one of its equal parts of, along dim `d` (split)
/// of its input: the linear's output, or a view of it that keeps its
/// features last (an expert's output with its unit experts dim), every
/// reader of which is a slice of one contiguous block along `d`, whole
/// elsewhere, the blocks equal and tiling `d`. Only for a linear that cannot
/// be cut into a linear per part (FusedLinear.h: its weight is a part of
/// stacked experts' weights already); one that can is cut instead.
std::optional<EqualParts> equalParts(SliceOp slice, int64_t d) {
  Value in = slice.getInput();
  auto type = cast<RankedTensorType>(in.getType());
  EqualParts parts;
  parts.linear = in.getDefiningOp<LinearOp>();
  auto view = in.getDefiningOp<ReshapeOp>();
  if (view && view.getInput().hasOneUse()) {
    parts.linear = view.getInput().getDefiningOp<LinearOp>();
    parts.readers.push_back(view);
  }
  if (!parts.linear || d != type.getRank() - 1 ||
      type.getDimSize(d) != parts.linear.getType().getShape().back() ||
      isCuttableFusedLinear(parts.linear))
    return std::nullopt;
  const int64_t size = slice.getType().getDimSize(d),
                whole = type.getDimSize(d);
  if (whole % size != 0 || whole / size < 2)
    return std::nullopt;
  parts.count = whole / size;
  llvm::SmallBitVector taken(parts.count);
  for (Operation *user : in.getUsers()) {
    std::optional<std::pair<int64_t, int64_t>> block = blockRead(user, d);
    if (!block || block->first % size != 0 ||
        block->second != block->first + size)
      return std::nullopt;
    taken.set(block->first / size);
    parts.readers.push_back(user);
  }
  if (!taken.all())
    return std::nullopt;
  return parts;
}

const char *kReturnedOnly =
    "through data movement alone (a split that the program also computes "
    "on, as a decoder's present keys and values, is gathered there "
    "instead)";

/// Whether operand `i` of `op` is an attention's additive mask: cut by
/// heads whatever it is computed from (an ALiBi bias plus a padding mask
/// read from an input), since it never carries the activations whose
/// replication a cut would hide.
bool isAttentionMask(Operation *op, unsigned i) {
  return isa<AttentionOp>(op) && i == 3; // query, key, value, mask
}

/// Whether `v` repeats heads along `dim` (headRepeat): its block along
/// `dim` is a block of the copies, which hides no more computation than
/// the repeat itself.
bool repeatsAlong(Value v, int64_t dim) {
  return static_cast<bool>(headRepeat(v, dim));
}

/// Whether operand `i` of `op` is the key or value of an attention whose
/// key/value heads are replicated (kReplicateKeyValueAttr).
bool isReplicatedKeyValue(Operation *op, unsigned i) {
  return isa<AttentionOp>(op) && (i == 1 || i == 2) &&
         op->hasAttr(kReplicateKeyValueAttr);
}

/// Whether `v` is one of the function's inputs (a decoder's cached keys
/// and values from earlier steps, concatenated with this step's) or a view
/// of one, moved or converted by one-operand data movement (cast to bf16
/// by mp-convert-precision; GPT-2's stacked cache indexed `past[0]`, a
/// slice and a reshape): each rank reads it whole, so its block costs a
/// local copy (or nothing, once mp-shard-inputs hands each rank its block
/// of an input read only through casts) and hides no computation, as
/// Megatron's inference keeps each rank's heads' cache.
bool isFunctionInput(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!def->hasTrait<mp::OpTrait::MovesData>() || def->getNumOperands() != 1)
      return false;
    v = def->getOperand(0);
  }
  return isa<func::FuncOp>(v.getParentRegion()->getParentOp());
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
          isReplicatedKeyValue(op, static_cast<unsigned>(i)) ||
          broadcastsAlong(op->getOperand(i), d) ||
          repeatsAlong(op->getOperand(i), d) ||
          isFunctionInput(op->getOperand(i)) || (*cuttable)(op->getOperand(i))))
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

/// Whether `op` mixes the features of its split operands nonlinearly (by
/// its Mixing trait, or as a product of two split values).
bool mixes(Operation *op, const Dims &dims) {
  if (op->hasTrait<mp::OpTrait::Mixing>())
    return true;
  // A product of two split values (a bilinear GLU; decomposed attention's
  // scores, linear attention) mixes them too.
  return isa<MulOp, MatmulOp>(op) &&
         llvm::all_of(dims, [](int64_t d) { return d >= 0; });
}

} // namespace

llvm::BitVector
tensor_parallel::analyze(func::FuncOp func, ArrayRef<LinearOp> linears,
                         const llvm::BitVector &allowed,
                         const llvm::SmallPtrSetImpl<Operation *> &pairable,
                         const llvm::SmallPtrSetImpl<Operation *> &heads,
                         Split &split, llvm::DenseMap<unsigned, Stop> &stops) {
  split = Split();
  llvm::DenseMap<Operation *, unsigned> indexOf;
  for (auto [i, l] : llvm::enumerate(linears))
    indexOf[l] = i;
  llvm::BitVector conflict(linears.size());
  // Linears whose split an op computes on (not only moves).
  llvm::BitVector computedOn(linears.size());
  InputFree cuttable;
  auto markResult = [&](Value v, int64_t d, const llvm::BitVector &from) {
    split.dim[v] = d;
    split.origin[v] = from;
  };
  auto stopAt = [&](Operation *op, const Dims &dims,
                    const llvm::BitVector &from, const char *reason = nullptr) {
    for (unsigned i : from.set_bits()) {
      // The dim of the operand this linear's split came through.
      int64_t dim = -1;
      for (auto [k, operand] : llvm::enumerate(op->getOperands()))
        if (auto it = split.origin.find(operand);
            dims[k] >= 0 && it != split.origin.end() && it->second.test(i))
          dim = dims[k];
      stops.try_emplace(i, Stop{op, dims, reason, dim});
    }
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
        if (heads.contains(linear)) {
          stopAt(&op, dims, from,
                 "the model's head, which splits along its vocabulary "
                 "instead");
          continue;
        }
        if (!split.mixed.contains(linear.getInput()) &&
            !pairable.contains(linear)) {
          split.factorized.insert(linear);
          stopAt(&op, dims, from, kFactorizedReason);
          // The wide factor splits already in this round (the narrow one
          // is dropped for the next), so that what it feeds is not
          // dropped for meeting it whole.
          if (auto it = indexOf.find(linear);
              it != indexOf.end() && allowed[it->second]) {
            llvm::BitVector self(linears.size());
            self.set(it->second);
            markResult(linear.getResult(), linear.getType().getRank() - 1,
                       self);
            split.columns.push_back(linear);
          }
          continue;
        }
        split.rows.push_back(linear);
        computedOn |= from;
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
    if (isa<func::ReturnOp>(op)) {
      // A split result that the program also computes on (a decoder's
      // present keys and values, which its attention reads) is gathered
      // where it is returned, as by Megatron's gather_output, or left
      // sharded for mp-run to gather once. A linear whose split reaches
      // the results through data movement alone stops there: it pairs with
      // a row-parallel one or stays whole.
      for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
        if (dims[i] < 0)
          continue;
        llvm::BitVector idle = split.origin[operand];
        idle.reset(computedOn);
        // A factorized pair's wide factor whose split would end gathered
        // here splits column/row with its narrow one after all.
        for (unsigned k : split.origin[operand].set_bits())
          if (split.factorized.contains(linears[k]))
            idle.set(k);
        Dims one(dims.size(), -1);
        one[i] = dims[i];
        if (idle.any())
          stopAt(&op, one, idle, kReturnedOnly);
      }
      continue;
    }
    if (!op.hasTrait<mp::OpTrait::MovesData>())
      computedOn |= from;
    // Whether the results (where split) are past a Mixing op.
    bool mixed = mixes(&op, dims) ||
                 llvm::any_of(op.getOperands(),
                              [&](Value v) { return split.mixed.contains(v); });
    if (mixed)
      split.mixed.insert(op.getResults().begin(), op.getResults().end());
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
    if (auto slice = dyn_cast<SliceOp>(&op); slice && dims[0] >= 0) {
      if (std::optional<EqualParts> parts = equalParts(slice, dims[0])) {
        // As the split above: a fused gate/up halved by slices, whose
        // linear cannot be cut into parts (an expert's, whose weight is a
        // part of stacked weights already).
        int64_t groups = split.groups.lookup(parts->linear);
        if (groups && groups != parts->count) {
          stopAt(&op, dims, from);
          continue;
        }
        split.groups[parts->linear] = parts->count;
        split.partReaders.insert(parts->readers.begin(), parts->readers.end());
        markResult(slice.getResult(), dims[0], from);
        continue;
      }
    }
    if (isNormOverSplit(&op, dims) && cutsNormParams(op, cuttable, split)) {
      markResult(op.getResult(0), dims[0], from);
      continue;
    }
    std::optional<Dims> results = propagate(&op, dims, &cuttable, &split.cuts);
    if (!results) {
      LLVM_DEBUG(llvm::dbgs() << "split stops at " << op << "\n");
      llvm::BitVector refusedFrom(linears.size()), keptFrom(linears.size());
      Dims kept = dims;
      for (unsigned i : refusedOperands(&op, dims, cuttable)) {
        refusedFrom |= split.origin[op.getOperand(i)];
        kept[i] = -1;
      }
      stopAt(&op, dims, refusedFrom);
      // The op runs as the next round will see it, the refused operands
      // whole (their linears are dropped), so that the splits it does take
      // go on and what they feed is not dropped with them.
      for (auto [i, d] : llvm::enumerate(kept))
        if (d >= 0)
          keptFrom |= split.origin[op.getOperand(i)];
      results = keptFrom.any() ? propagate(&op, kept, &cuttable, &split.cuts)
                               : std::nullopt;
      if (!results)
        continue;
      from = keptFrom;
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
      if (isa<SplitOp>(user) || split.partReaders.contains(user))
        continue;
      stopAt(user, split.operandDims(user), split.origin[out],
             "which reads whole the output of a linear sharded per part of "
             "a fused output (each rank holds a block of every part)");
    }
  }
  return conflict;
}

namespace {

/// The row- and column-parallel linears of a split, for lookups.
struct SplitRoles {
  llvm::SmallPtrSet<Operation *, 16> rows, columns;
  explicit SplitRoles(const Split &split) {
    for (LinearOp l : split.rows)
      rows.insert(l);
    for (LinearOp l : split.columns)
      columns.insert(l);
  }
};

/// How a linear's split shards the parameter `param` it reads: (axis,
/// groups), or (-1, 1) for whole (a linear left whole; a row-parallel
/// linear's bias, added after the all-reduce).
std::pair<int64_t, int64_t> shardingOf(LinearOp linear, Value param,
                                       const Split &split,
                                       const SplitRoles &roles) {
  const std::pair<int64_t, int64_t> whole{-1, 1};
  bool transposed = linear.getTransposeWeight();
  if (roles.rows.contains(linear))
    return linear.getWeight() == param
               ? std::make_pair<int64_t, int64_t>(transposed ? 1 : 0, 1)
               : whole;
  if (!roles.columns.contains(linear))
    return whole;
  int64_t groups = std::max<int64_t>(1, split.groups.lookup(linear));
  return {linear.getWeight() == param ? (transposed ? 0 : 1) : 0, groups};
}

/// shardingOf in the dims of the parameter `param` reads (through a
/// view, paramAxis).
std::pair<int64_t, int64_t> storedSharding(LinearOp linear, Value param,
                                           const Split &split,
                                           const SplitRoles &roles) {
  std::pair<int64_t, int64_t> sharding =
      shardingOf(linear, param, split, roles);
  if (sharding.first >= 0)
    sharding.first = paramAxis(param, sharding.first, 1);
  return sharding;
}

/// The ops that read the parameter `read` reads, each with the value it
/// reads: through a reshape (a view, MemoryPlan::viewedParameter), its users.
SmallVector<std::pair<Operation *, Value>>
readersThroughViews(GetParamOp read) {
  SmallVector<std::pair<Operation *, Value>> readers;
  for (Operation *user : read->getUsers()) {
    if (auto view = dyn_cast<ReshapeOp>(user)) {
      for (Operation *viewer : view->getUsers())
        readers.push_back({viewer, view.getResult()});
      continue;
    }
    readers.push_back({user, read.getResult()});
  }
  return readers;
}

} // namespace

llvm::BitVector
tensor_parallel::unevenlySharedParams(ArrayRef<LinearOp> linears,
                                      const Split &split,
                                      llvm::DenseMap<unsigned, Stop> &stops) {
  llvm::BitVector conflict(linears.size());
  if (linears.empty())
    return conflict;
  llvm::DenseMap<StringAttr, SmallVector<GetParamOp>> reads;
  linears[0]->getParentOfType<ModuleOp>().walk([&](GetParamOp get) {
    reads[get.getNameAttr().getAttr()].push_back(get);
  });
  SplitRoles roles(split);
  auto isRow = [&](LinearOp l) { return roles.rows.contains(l); };
  // Each split linear with a reader of one of its parameters that differs:
  // the first such reader, and whether it reads it whole.
  struct Uneven {
    unsigned index;
    Operation *other;
    bool otherWhole;
  };
  SmallVector<Uneven> rowAgainstColumn, others;
  for (auto [i, constLinear] : llvm::enumerate(linears)) {
    LinearOp linear = constLinear;
    for (Value param : {linear.getWeight(), linear.getBias()}) {
      GetParamOp get =
          param ? MemoryPlan::viewedParameter(param) : GetParamOp();
      if (!get)
        continue;
      std::pair<int64_t, int64_t> mine =
          storedSharding(linear, param, split, roles);
      if (mine.first < 0)
        continue;
      std::optional<Uneven> found;
      for (GetParamOp read : reads.lookup(get.getNameAttr().getAttr()))
        for (auto [reader, value] : readersThroughViews(read)) {
          auto readerLinear = dyn_cast<LinearOp>(reader);
          std::pair<int64_t, int64_t> theirs{-1, 1};
          if (readerLinear)
            theirs = storedSharding(readerLinear, value, split, roles);
          if (theirs == mine || found)
            continue;
          found = Uneven{static_cast<unsigned>(i), reader, theirs.first < 0};
          // (A column met by a row: the row's turn settles it.)
          if (!isRow(linear) && readerLinear && isRow(readerLinear))
            found.reset();
        }
      if (!found)
        continue;
      bool againstColumn = isRow(linear) && !found->otherWhole;
      (againstColumn ? rowAgainstColumn : others).push_back(*found);
    }
  }
  // A row-parallel call against a column-parallel one first: dropping the
  // row's sources may let both calls split alike (a whole call's linears
  // may be whole only because of it), where dropping more would not come
  // back.
  for (const Uneven &u : rowAgainstColumn.empty() ? others : rowAgainstColumn) {
    LinearOp linear = linears[u.index];
    const char *reason =
        u.otherWhole ? "reads it whole" : "splits it another way";
    stops.try_emplace(u.index,
                      Stop{u.other, Dims(), reason, -1, Stop::Shared::Reads});
    if (!isRow(linear)) {
      conflict.set(u.index);
      continue;
    }
    // A row-parallel linear is split by the linears its input comes from:
    // they are the ones to drop.
    llvm::BitVector sources = split.origin.lookup(linear.getInput());
    for (unsigned k : sources.set_bits())
      stops.try_emplace(k,
                        Stop{linear, Dims(), reason, -1, Stop::Shared::Feeds});
    conflict |= sources;
  }
  return conflict;
}

std::string tensor_parallel::describeStop(const Stop &stop) {
  if (!stop.text.empty())
    return stop.text;
  std::string why;
  llvm::raw_string_ostream os(why);
  if (stop.shared != Stop::Shared::No) {
    // A parameter shared by the calls of a module (unevenlySharedParams).
    std::string op = "'" + stop.op->getName().getStringRef().str() + "'";
    if (auto name = dyn_cast<NameLoc>(stop.op->getLoc()))
      op += " ('" + name.getName().str() + "')";
    if (stop.shared == Stop::Shared::Reads)
      os << "a parameter it reads is also read by " << op << ", which "
         << stop.reason;
    else
      os << "its output reaches " << op
         << ", which would be row-parallel, but another reader of that "
            "linear's parameters "
         << stop.reason;
    os << ", and a parameter is split one way or kept whole (the calls of "
          "one module share their weights)";
    return why;
  }
  int64_t dim = stop.dim >= 0 ? stop.dim : *llvm::max_element(stop.dims);
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
    if (tensorType(attention.getQuery()).getDimSize(1) == 1)
      os << "and that attention has one head, with nothing to split by "
            "heads (a model written with a module per head computes each "
            "head's attention apart)";
    else
      os << "and multi-query attention reads its one key/value head whole "
            "on every rank";
    return why;
  }
  if (auto rule = dyn_cast<SplitOpInterface>(stop.op);
      rule && succeeded(rule.propagateSplit(stop.dims))) {
    os << "where a whole activation spans the split (tensor parallelism "
          "cuts only values computed from constants and parameters, and "
          "the function's inputs)";
    return why;
  }
  os << "which cannot run on that split";
  return why;
}
