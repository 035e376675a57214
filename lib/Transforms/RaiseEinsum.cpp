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
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"

#include "RaisePatterns.h"

#include "llvm/ADT/STLExtras.h"

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

/// Whether `v` is a parameter, or a transpose of one.
static bool readsParam(Value v) {
  if (auto t = v.getDefiningOp<TransposeOp>())
    v = t.getInput();
  return v.getDefiningOp<GetParamOp>() != nullptr;
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
    if (!weight.getDefiningOp<GetParamOp>() || w.size() < 2 || x.size() < 2 ||
        !isa<FloatType>(tensorType(weight).getElementType()))
      return failure();
    const std::string &out = spec.output;
    std::string contracted =
        labelsWhere(w, [&](char c) { return has(x, c) && !has(out, c); });
    std::string kept =
        labelsWhere(x, [&](char c) { return !has(contracted, c); });
    std::string features =
        labelsWhere(w, [&](char c) { return !has(contracted, c); });
    // Every label either contracted or kept from one side only: no sum
    // over a dim of one operand alone, no dim shared by both and kept.
    if (contracted.empty() || kept.empty() || features.empty() ||
        kept.size() + features.size() != out.size() ||
        llvm::any_of(kept, [&](char c) { return !has(out, c) || has(w, c); }) ||
        llvm::any_of(features, [&](char c) { return !has(out, c); }))
      return failure();
    // W's contracted dims all before (W as [K, N]) or all after ([N, K],
    // transpose_weight) its feature dims.
    bool transposeWeight;
    if (w == contracted + features)
      transposeWeight = false;
    else if (w == features + contracted)
      transposeWeight = true;
    else
      return failure();

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
