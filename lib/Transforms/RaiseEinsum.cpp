//===- RaiseEinsum.cpp - einsums that are linears or matmuls, for mp-raise
//-===//
//
// Codebases ported from Flax/T5X or written mesh-tensorflow style spell
// their layers as einsums: projections against [d, heads, head_dim] and
// [heads, head_dim, d] weights (`DenseGeneral`), attention's scores and
// mixing as batched contractions. Tensor parallelism and the attention
// raising know linears and matmuls, so these patterns rewrite such einsums
// into them, with the transposes and reshapes that give the einsum's
// result:
//
//   einsum("bsd,dhk->bhsk", x, W: [d, h, k]) ->
//       transpose(reshape(linear(x, reshape(W) : [d, h*k]) : [b, s, h, k]))
//   einsum("bhqk,bhtk->bhqt", q, k) -> matmul(q, transpose(k))
//
// A parameter viewed with another shape is a reshape of its mp.get_param;
// tensor parallelism shards the parameter along the dim the view's split
// dim starts with (SplitAnalysis.h, paramAxis), and the memory plan makes
// the reshape of a parameter a view of its bytes (no arena slot, no copy).
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"

#include "RaisePatterns.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

using namespace mlir;
using namespace mp;

/// The labels of `labels` that `keep` accepts, in their order.
template <typename Pred>
static std::string labelsWhere(const std::string &labels, Pred keep) {
  std::string out;
  for (char c : labels)
    if (keep(c))
      out.push_back(c);
  return out;
}

static bool has(const std::string &labels, char c) {
  return labels.find(c) != std::string::npos;
}

static bool distinct(const std::string &labels) {
  return llvm::all_of(labels,
                      [&](char c) { return llvm::count(labels, c) == 1; });
}

/// The permutation that reorders `from` into `to` (the same labels), for
/// mp.transpose: to[i] = from[perm[i]].
static SmallVector<int64_t> permutationTo(const std::string &from,
                                          const std::string &to) {
  SmallVector<int64_t> perm;
  for (char c : to)
    perm.push_back(static_cast<int64_t>(from.find(c)));
  return perm;
}

/// `v`, whose dims carry `from`'s labels, with its dims in `to`'s order.
static Value reordered(PatternRewriter &rewriter, Location loc, Value v,
                       const std::string &from, const std::string &to) {
  if (from == to)
    return v;
  return transposed(rewriter, loc, v, permutationTo(from, to));
}

static int64_t product(const std::string &labels,
                       const std::map<char, int64_t> &sizes) {
  int64_t n = 1;
  for (char c : labels)
    n *= sizes.at(c);
  return n;
}

static SmallVector<int64_t> sizesOf(const std::string &labels,
                                    const std::map<char, int64_t> &sizes) {
  SmallVector<int64_t> shape;
  for (char c : labels)
    shape.push_back(sizes.at(c));
  return shape;
}

/// The equation's spec and label sizes, for two operands whose shared
/// labels agree exactly (no size-1 ellipsis dim broadcast against another).
static bool readEinsum(EinsumOp op, EinsumSpec &spec,
                       std::map<char, int64_t> &sizes) {
  if (op.getInputs().size() != 2)
    return false;
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (Value input : op.getInputs()) {
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    ranks.push_back(static_cast<int64_t>(shape.size()));
    shapes.emplace_back(shape.begin(), shape.end());
  }
  std::string error;
  std::vector<int64_t> out;
  if (!parseEinsum(op.getEquation().str(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, out, error, &sizes))
    return false;
  for (auto [labels, shape] : llvm::zip(spec.inputs, shapes))
    for (auto [c, size] : llvm::zip(labels, shape))
      if (size != sizes.at(c))
        return false;
  return distinct(spec.inputs[0]) && distinct(spec.inputs[1]) &&
         distinct(spec.output);
}

/// How einsum(x, W) with the labels `x`, `w` -> `out` is a linear.
struct LinearForm {
  std::string contracted, kept, features; // contracted in W's order
  bool transposeWeight;                   // W is [features, contracted]
};

/// The linear einsum(x, W) is when it contracts some of x's labels with W's
/// leading (or trailing) labels and keeps the rest of both, once each.
static std::optional<LinearForm>
linearForm(const std::string &x, const std::string &w, const std::string &out) {
  LinearForm form;
  form.contracted =
      labelsWhere(w, [&](char c) { return has(x, c) && !has(out, c); });
  form.kept = labelsWhere(x, [&](char c) { return !has(form.contracted, c); });
  form.features =
      labelsWhere(w, [&](char c) { return !has(form.contracted, c); });
  const std::string &kept = form.kept, &features = form.features;
  // Every label either contracted or kept from one side only: no sum
  // over a dim of one operand alone, no dim shared by both and kept.
  if (form.contracted.empty() || kept.empty() || features.empty() ||
      kept.size() + features.size() != out.size() ||
      llvm::any_of(kept, [&](char c) { return !has(out, c) || has(w, c); }) ||
      llvm::any_of(features, [&](char c) { return !has(out, c); }))
    return std::nullopt;
  // W's contracted dims all before (W as [K, N]) or all after ([N, K],
  // transpose_weight) its feature dims.
  if (w == form.contracted + features)
    form.transposeWeight = false;
  else if (w == features + form.contracted)
    form.transposeWeight = true;
  else
    return std::nullopt;
  return form;
}

/// Whether `v` is a parameter (or a view of one: an expert's block of a
/// stacked weight), or a transpose of one.
static bool readsParam(Value v) {
  if (auto t = v.getDefiningOp<TransposeOp>())
    v = t.getInput();
  return MemoryPlan::viewedParameter(v) != nullptr;
}

namespace {

/// A pattern on two-operand einsums whose equation readEinsum reads.
template <typename Derived> struct EinsumPattern : OpRewritePattern<EinsumOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EinsumOp op,
                                PatternRewriter &rewriter) const override {
    EinsumSpec spec;
    std::map<char, int64_t> sizes;
    if (!readEinsum(op, spec, sizes))
      return failure();
    return static_cast<const Derived *>(this)->rewrite(op, spec, sizes,
                                                       rewriter);
  }
};

/// einsum(x, W) (or einsum(W, x)) with W a parameter (or a transpose of one)
/// that contracts some of x's dims with W's leading (or trailing:
/// transpose_weight) dims and keeps the rest of both: a linear on x with the
/// contracted dims last and merged, against W viewed 2-D, its result viewed and
/// reordered as the einsum's. "bsd,df->bsf" is the plain case (no transpose, no
/// reshape).
struct LinearFromEinsum : EinsumPattern<LinearFromEinsum> {
  // (Before MatmulFromEinsum: a parameter is a linear's weight.)
  LinearFromEinsum(MLIRContext *ctx) : EinsumPattern(ctx, /*benefit=*/2) {}

  LogicalResult rewrite(EinsumOp op, const EinsumSpec &spec,
                        const std::map<char, int64_t> &sizes,
                        PatternRewriter &rewriter) const {
    // The weight is the operand that reads a parameter (the second, as
    // usual, or the first: "df,bsd->bsf").
    unsigned which = readsParam(op.getInputs()[1]) ? 1 : 0;
    Value input = op.getInputs()[1 - which], weight = op.getInputs()[which];
    std::string x = spec.inputs[1 - which], w = spec.inputs[which];
    // A parameter read transposed (a tied head's `E.t()`) is read with its
    // own dims' labels.
    if (auto t = weight.getDefiningOp<TransposeOp>()) {
      std::string stored(w.size(), ' ');
      for (auto [i, from] : llvm::enumerate(t.getPermutation()))
        stored[from] = w[i];
      weight = t.getInput();
      w = stored;
    }
    if (!MemoryPlan::viewedParameter(weight) || w.size() < 2 || x.size() < 2 ||
        !isa<FloatType>(tensorType(weight).getElementType()))
      return failure();
    const std::string &out = spec.output;
    std::optional<LinearForm> form = linearForm(x, w, out);
    if (!form)
      return failure();
    const std::string &contracted = form->contracted, &kept = form->kept,
                      &features = form->features;
    bool transposeWeight = form->transposeWeight;

    Location loc = op.getLoc();
    int64_t depth = product(contracted, sizes);
    int64_t width = product(features, sizes);
    SmallVector<int64_t> rows = sizesOf(kept, sizes);
    Value lhs = reordered(rewriter, loc, input, x, kept + contracted);
    SmallVector<int64_t> lhsShape(rows);
    lhsShape.push_back(depth);
    lhs = reshaped(rewriter, loc, lhs, lhsShape);
    SmallVector<int64_t> weightShape{depth, width};
    if (transposeWeight)
      std::swap(weightShape[0], weightShape[1]);
    Value view = reshaped(rewriter, loc, weight, weightShape);
    SmallVector<int64_t> resultShape(rows);
    resultShape.push_back(width);
    auto linear = LinearOp::create(
        rewriter, loc,
        RankedTensorType::get(resultShape, tensorType(input).getElementType()),
        lhs, view, Value(), transposeWeight ? rewriter.getUnitAttr() : nullptr);
    linear->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    SmallVector<int64_t> unmerged(rows);
    llvm::append_range(unmerged, sizesOf(features, sizes));
    Value result = reshaped(rewriter, loc, linear, unmerged);
    rewriter.replaceOp(op,
                       reordered(rewriter, loc, result, kept + features, out));
    return success();
  }
};

/// einsum of two operands of one rank that is a batched matrix product:
/// the same leading batch labels on both and the result, one free label in
/// each operand, one label contracted (either operand's last two dims in
/// either order, the operands in either order). Attention written as
/// einsums, "bhqk,bhtk->bhqt" and "bhqt,bhtk->bhqk", becomes matmuls that
/// RaiseAttention then reads.
struct MatmulFromEinsum : EinsumPattern<MatmulFromEinsum> {
  using EinsumPattern::EinsumPattern;

  LogicalResult rewrite(EinsumOp op, const EinsumSpec &spec,
                        const std::map<char, int64_t> &sizes,
                        PatternRewriter &rewriter) const {
    const std::string &a = spec.inputs[0], &b = spec.inputs[1];
    const std::string &out = spec.output;
    size_t rank = a.size();
    if (rank < 2 || b.size() != rank || out.size() != rank)
      return failure();
    std::string batch = a.substr(0, rank - 2);
    if (b.substr(0, rank - 2) != batch || out.substr(0, rank - 2) != batch)
      return failure();
    std::string aLast = a.substr(rank - 2), bLast = b.substr(rank - 2);
    // The contracted label: in both last pairs, not in the result.
    std::string shared =
        labelsWhere(aLast, [&](char c) { return has(bLast, c); });
    if (shared.size() != 1 || has(out, shared[0]))
      return failure();
    char k = shared[0];
    char m = aLast[0] == k ? aLast[1] : aLast[0];
    char n = bLast[0] == k ? bLast[1] : bLast[0];
    if (m == n || has(batch, m) || has(batch, n) ||
        (out.substr(rank - 2) != std::string{m, n} &&
         out.substr(rank - 2) != std::string{n, m}))
      return failure();

    Location loc = op.getLoc();
    // The operand whose free label comes first in the result is the lhs:
    // scores written "bhtk,bhqk->bhqt" (keys first) are q·kᵀ all the same.
    Value first = op.getInputs()[0], second = op.getInputs()[1];
    std::string firstLabels = a, secondLabels = b;
    if (out[rank - 2] == n) {
      std::swap(first, second);
      std::swap(firstLabels, secondLabels);
      std::swap(m, n);
    }
    Value lhs =
        reordered(rewriter, loc, first, firstLabels, batch + std::string{m, k});
    Value rhs = reordered(rewriter, loc, second, secondLabels,
                          batch + std::string{k, n});
    auto product = MatmulOp::create(rewriter, loc, lhs, rhs);
    product->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, product);
    return success();
  }
};

} // namespace

void mp::populateRaiseEinsumPatterns(RewritePatternSet &patterns) {
  patterns.add<LinearFromEinsum, MatmulFromEinsum>(patterns.getContext());
}

//===----------------------------------------------------------------------===//
// Stacked experts
//===----------------------------------------------------------------------===//

/// Experts beyond this many stay stacked (a linear per expert would make
/// the program that much longer).
static constexpr int64_t kMaxUnstackedExperts = 512;

/// `labels` without `c`.
static std::string without(const std::string &labels, char c) {
  return labelsWhere(labels, [&](char l) { return l != c; });
}

namespace {
/// An einsum against a stacked parameter [experts, ...] that is a linear
/// per expert: the experts' label is the weight's first, kept in the result
/// (and a batch label of the input where the input has it: the second
/// einsum of an MLP, "bsef,efd->bsed"; where it has not, "bsd,edf->bsef",
/// that second einsum must follow), and the rest a linear's form.
struct StackedEinsum {
  EinsumOp op;
  unsigned weight; // which operand
  EinsumSpec spec;
  std::map<char, int64_t> sizes;
};
} // namespace

static std::optional<StackedEinsum> stackedEinsum(EinsumOp op);

/// Whether `v` reaches, through ops of its rank (an activation, a gating
/// product, a chunk), an einsum against a stacked parameter whose input has
/// the experts' label: the second layer of the experts' MLPs. (What tells
/// experts stacked [e, d, f] from heads written [h, d, k], whose einsum has
/// the same form but whose heads go on to attention.)
static bool feedsExpertsLayer(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty() && seen.size() < 32) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (auto einsum = dyn_cast<EinsumOp>(user)) {
        std::optional<StackedEinsum> next = stackedEinsum(einsum);
        if (next && einsum.getInputs()[1 - next->weight] == value &&
            has(next->spec.inputs[1 - next->weight],
                next->spec.inputs[next->weight][0]))
          return true;
        continue;
      }
      // (A chunk of a fused gate/up projection too.)
      if (user->getNumResults() == 1 &&
          isa<RankedTensorType>(user->getResult(0).getType()) &&
          tensorType(user->getResult(0)).getRank() ==
              tensorType(value).getRank())
        work.push_back(user->getResult(0));
    }
  }
  return false;
}

static std::optional<StackedEinsum> stackedEinsum(EinsumOp op) {
  StackedEinsum stacked{op, 0, {}, {}};
  if (!readEinsum(op, stacked.spec, stacked.sizes))
    return std::nullopt;
  for (unsigned which : {1u, 0u}) {
    auto get = op.getInputs()[which].getDefiningOp<GetParamOp>();
    const std::string &w = stacked.spec.inputs[which];
    const std::string &x = stacked.spec.inputs[1 - which];
    const std::string &out = stacked.spec.output;
    // (Not an einsum of the parameter with itself.)
    if (!get || op.getInputs()[1 - which] == op.getInputs()[which] ||
        w.size() < 3 || !has(out, w[0]) ||
        !isa<FloatType>(tensorType(get).getElementType()) ||
        stacked.sizes.at(w[0]) > kMaxUnstackedExperts ||
        !linearForm(without(x, w[0]), w.substr(1), without(out, w[0])))
      continue;
    // Every token to every expert ("bsd,edf->bsef") only where the
    // experts' second layer follows: otherwise (heads written [h, d, k])
    // it stays as it is, a linear already where it is one ("bsd,efd->bsef"
    // is one against [e*f, d]).
    if (!has(x, w[0]) && !feedsExpertsLayer(op.getResult()))
      continue;
    stacked.weight = which;
    return stacked;
  }
  return std::nullopt;
}

/// `v` with its dim `axis` dropped (it has size 1) or, `insert`, a size-1
/// dim put at `axis`.
static Value withUnitDim(OpBuilder &b, Location loc, Value v, size_t axis,
                         bool insert) {
  SmallVector<int64_t> shape(tensorType(v).getShape());
  if (insert)
    shape.insert(shape.begin() + axis, 1);
  else
    shape.erase(shape.begin() + axis);
  return ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, tensorType(v).getElementType()), v);
}

/// `type` with its dim `axis` of `size`.
static RankedTensorType withDim(RankedTensorType type, int64_t axis,
                                int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  return type.clone(shape);
}

/// Slices and splits of the experts' concatenated outputs along another
/// axis (a fused gate/up projection halved by `chunk` or `split`, GPT-OSS
/// style) taken of each expert's output instead, so that each expert's
/// linear is read in parts, as a fused linear that tensor parallelism cuts:
/// slice(concat(y_0, y_1)) -> concat(slice(y_0), slice(y_1)). Only where
/// every reader of the concatenation is one, taking it whole along the
/// experts.
static void cutEachExpert(ConcatOp concat, DictionaryAttr tags) {
  const int64_t axis = concat.getNormalizedAxis();
  const int64_t experts = tensorType(concat).getDimSize(axis);
  auto wholeAlongExperts = [&](Operation *user) {
    if (auto slice = dyn_cast<SliceOp>(user))
      return slice.getStarts()[axis] == 0 && slice.getStrides()[axis] == 1 &&
             slice.getLimits()[axis] == experts;
    auto split = dyn_cast<SplitOp>(user);
    return split && split.getNormalizedAxis() != axis;
  };
  if (concat->use_empty() ||
      !llvm::all_of(concat->getUsers(), wholeAlongExperts))
    return;
  SmallVector<Operation *> readers(concat->getUsers());
  for (Operation *reader : readers) {
    OpBuilder b(reader);
    Location loc = reader->getLoc();
    // Each reader's results, per expert.
    SmallVector<SmallVector<Value>> pieces(reader->getNumResults());
    for (Value part : concat.getInputs()) {
      int64_t size = tensorType(part).getDimSize(axis);
      Operation *cut = b.clone(*reader);
      cut->setOperand(0, part);
      for (OpResult result : cut->getResults())
        result.setType(withDim(tensorType(result), axis, size));
      if (auto slice = dyn_cast<SliceOp>(cut)) {
        SmallVector<int64_t> limits(slice.getLimits());
        limits[axis] = size;
        slice.setLimits(limits);
      }
      for (OpResult result : cut->getResults())
        pieces[result.getResultNumber()].push_back(result);
    }
    for (auto [result, parts] : llvm::zip(reader->getResults(), pieces)) {
      auto joined = ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis));
      joined->setDiscardableAttrs(tags);
      result.replaceAllUsesWith(joined.getResult());
    }
    reader->erase();
  }
  concat.erase();
}

/// Rewrites `stacked` as an einsum per expert against the expert's block
/// of the parameter (`parts`, one per expert), the input's block where it
/// has the experts' label, the results concatenated along the experts.
static void unstack(const StackedEinsum &stacked, ArrayRef<ParamOp> parts) {
  EinsumOp op = stacked.op; // (a handle: the einsum itself is rewritten)
  const std::string &w = stacked.spec.inputs[stacked.weight];
  const std::string &x = stacked.spec.inputs[1 - stacked.weight];
  const std::string &out = stacked.spec.output;
  const char experts = w[0];
  Value input = op.getInputs()[1 - stacked.weight];
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto tag = [&](Value v) {
    v.getDefiningOp()->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    return v;
  };
  // (An ellipsis's dims are labelled '0'..'9' by the parser: letters here.)
  std::string unused;
  for (char c = 'A'; c <= 'Z'; ++c)
    if (!has(x, c) && !has(w, c))
      unused.push_back(c);
  auto lettered = [&](std::string labels) {
    for (char &c : labels)
      if (c >= '0' && c <= '9')
        c = unused[c - '0'];
    return labels;
  };
  std::string equation = lettered(without(x, experts)) + "," +
                         lettered(w.substr(1)) + "->" +
                         lettered(without(out, experts));
  const size_t inputAxis = x.find(experts), outAxis = out.find(experts);
  SmallVector<Value> results;
  for (auto [i, constPart] : llvm::enumerate(parts)) {
    ParamOp part = constPart;
    Value block = tag(
        GetParamOp::create(b, loc, part.getTensorType(), part.getSymName()));
    block = tag(withUnitDim(b, loc, block, 0, /*insert=*/false));
    Value rows = input;
    if (inputAxis != std::string::npos) {
      const auto expert = static_cast<int64_t>(i);
      rows = tag(SliceOp::create(b, loc, input, static_cast<int64_t>(inputAxis),
                                 expert, expert + 1));
      rows = tag(withUnitDim(b, loc, rows, inputAxis, /*insert=*/false));
    }
    Value result = tag(EinsumOp::create(b, loc, ValueRange{rows, block},
                                        b.getStringAttr(equation)));
    results.push_back(tag(withUnitDim(b, loc, result, outAxis, true)));
  }
  Value all = results.size() == 1
                  ? results.front()
                  : tag(ConcatOp::create(
                        b, loc, results,
                        b.getI64IntegerAttr(static_cast<int64_t>(outAxis))));
  op.getResult().replaceAllUsesWith(all);
  DictionaryAttr tags = op->getDiscardableAttrDictionary();
  op.erase();
  if (auto concat = all.getDefiningOp<ConcatOp>())
    cutEachExpert(concat, tags);
}

/// Batched matmuls against a stacked parameter [experts, K, N] (HF's
/// GPT-OSS experts: `torch.bmm(x, gate_up_proj)` on the tokens repeated
/// once per expert) as the einsums they are, "emk,ekn->emn", to unstack as
/// those do. One left stacked is a matmul again (the einsum patterns).
static void stackedMatmulsAsEinsums(ModuleOp module) {
  SmallVector<MatmulOp> matmuls;
  module.walk([&](MatmulOp op) {
    RankedTensorType lhs = tensorType(op.getLhs()),
                     rhs = tensorType(op.getRhs());
    if (lhs.getRank() == 3 && rhs.getRank() == 3 &&
        op.getRhs().getDefiningOp<GetParamOp>() && op.getLhs() != op.getRhs() &&
        lhs.getDimSize(0) == rhs.getDimSize(0) && lhs.getDimSize(0) > 1)
      matmuls.push_back(op);
  });
  for (MatmulOp op : matmuls) {
    OpBuilder b(op);
    auto einsum =
        EinsumOp::create(b, op.getLoc(), ValueRange{op.getLhs(), op.getRhs()},
                         b.getStringAttr("emk,ekn->emn"));
    einsum->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    op.getResult().replaceAllUsesWith(einsum.getResult());
    op.erase();
  }
}

void mp::unstackExpertWeights(ModuleOp module) {
  stackedMatmulsAsEinsums(module);
  // The stacked einsums, by parameter; a parameter is unstacked only where
  // every read of it is such an einsum (it is replaced by its parts).
  llvm::MapVector<StringAttr, SmallVector<StackedEinsum>> byParam;
  llvm::DenseSet<StringAttr> readOtherwise;
  module.walk([&](GetParamOp get) {
    StringAttr name = get.getNameAttr().getAttr();
    llvm::SmallPtrSet<Operation *, 4> users(get->getUsers().begin(),
                                            get->getUsers().end());
    for (Operation *user : users) {
      auto einsum = dyn_cast<EinsumOp>(user);
      std::optional<StackedEinsum> stacked =
          einsum ? stackedEinsum(einsum) : std::nullopt;
      if (!stacked || einsum.getInputs()[stacked->weight] != get.getResult()) {
        readOtherwise.insert(name);
        continue;
      }
      byParam[name].push_back(std::move(*stacked));
    }
  });
  SymbolTable symbols(module);
  for (auto &[name, einsums] : byParam) {
    auto param = symbols.lookup<ParamOp>(name);
    if (!param || readOtherwise.contains(name) || param.getPartOf() ||
        param.getGrid())
      continue;
    int64_t count = param.getTensorType().getDimSize(0);
    SmallVector<ParamOp> parts;
    for (int64_t i = 0; i < count; ++i) {
      if (symbols.lookup(param.getPartName(0, i, 1)))
        break;
      parts.push_back(param.clonePart(0, i, 1));
    }
    if (static_cast<int64_t>(parts.size()) != count) {
      for (ParamOp part : parts)
        part.erase();
      continue;
    }
    for (ParamOp part : parts)
      symbols.insert(part);
    for (StackedEinsum &stacked : einsums) {
      Value read = stacked.op.getInputs()[stacked.weight];
      unstack(stacked, parts);
      if (read.use_empty())
        read.getDefiningOp()->erase();
    }
    symbols.erase(param);
  }
}
