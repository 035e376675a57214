//===- SinkLeadingMerges.cpp - unmerge batch and heads for mp-raise -------===//
//
// HF's BART, OPT, Whisper, Marian and BLOOM attention merge batch and heads
// into one dimension before their batched matmuls and split them again
// after ([B, H, S, d] -> [B*H, S, d] -> ... -> [B, H, S, d]). In that form
// attention is not recognized, and a split along the heads cannot pass the
// merge (a rank's heads are not a contiguous block of B*H). These patterns
// sink each reshape that merges leading dimensions below the ops whose
// dimension 0 is a batch dimension (LeadingDimOpInterface), rebuilding
// them with the dimensions unmerged, until it meets the reshape that
// splits them again and the two fold away.
//
//===----------------------------------------------------------------------===//
#include "RaisePatterns.h"

using namespace mlir;
using namespace mp;

/// The dims a reshape merges into its result's dimension 0 ([a0, ..., ak,
/// t...] -> [a0 * ... * ak, u...], k >= 1, the dims after regrouped or
/// not), unfolded into two: [a0, a1 * ... * ak]. Merges of one value meet
/// in one form that way: grouped-query attention's keys and values come
/// merged from [B, kv heads, repeats] and the scores from [B, heads], and
/// both unfold to [B, heads] (the values' repeat is then the reshape
/// mp-raise folds into attention).
static std::optional<SmallVector<int64_t>>
mergedLeadingDims(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  if (out.empty() || in.empty() || in[0] == out[0])
    return std::nullopt;
  // out[0] is the product of in's first dims (at least two); the dims
  // after may be regrouped too ([B, H, S, S] -> [B*H, S*S], a flattened
  // gather's), since each row of out[0] holds the same elements.
  int64_t product = in[0];
  size_t merged = 1;
  while (merged < in.size() && product < out[0])
    product *= in[merged++];
  // (Dropping unit dims, [a0, 1] -> [a0], is no merge to undo.)
  if (product != out[0] || product <= 0)
    return std::nullopt;
  // Dropping a leading unit dim ([1, H, ...] -> [H, ...], batch 1) is one
  // only where nothing else changes: with the rest regrouped as well it is
  // a view of one head's data (Baichuan's squeezed q, k and v).
  if (in[0] == 1 && in.drop_front(merged) != out.drop_front())
    return std::nullopt;
  return SmallVector<int64_t>{in[0], product / in[0]};
}

static std::optional<SmallVector<int64_t>> mergedLeadingDims(ReshapeOp op) {
  return mergedLeadingDims(tensorType(op.getInput()).getShape(),
                           tensorType(op.getResult()).getShape());
}

/// `v` with dimension 0 unfolded into `leading`: the value a merging
/// reshape read, or a reshape of `v`.
static Value unfold(PatternRewriter &rewriter, Location loc, Value v,
                    ArrayRef<int64_t> leading) {
  SmallVector<int64_t> shape(leading);
  llvm::append_range(shape, tensorType(v).getShape().drop_front());
  auto type = RankedTensorType::get(shape, tensorType(v).getElementType());
  if (auto reshape = v.getDefiningOp<ReshapeOp>();
      reshape && reshape.getInput().getType() == type)
    return reshape.getInput();
  return ReshapeOp::create(rewriter, loc, type, v);
}

/// The dims of `in` each dim of `out` collapses, when a reshape from `in`
/// to `out` only merges runs of adjacent dims (unit dims join a run).
static std::optional<SmallVector<SmallVector<int64_t>>>
collapsedGroups(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
  SmallVector<SmallVector<int64_t>> groups;
  size_t i = 0;
  for (int64_t size : out) {
    if (i == in.size() || size <= 0)
      return std::nullopt;
    SmallVector<int64_t> group = {static_cast<int64_t>(i)};
    int64_t product = in[i++];
    while (product < size && i < in.size()) {
      group.push_back(static_cast<int64_t>(i));
      product *= in[i++];
    }
    if (product != size)
      return std::nullopt;
    groups.push_back(std::move(group));
  }
  for (; i < in.size(); ++i) {
    if (in[i] != 1 || groups.empty())
      return std::nullopt;
    groups.back().push_back(static_cast<int64_t>(i));
  }
  return groups;
}

/// The coarsest shape both `a` and `b` merge runs of (their common
/// refinement: [S, B, H*d] and [S, B*H, d] give [S, B, H, d]).
static std::optional<SmallVector<int64_t>>
commonRefinement(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> shape;
  size_t i = 0, j = 0;
  int64_t x = 0, y = 0; // what is left of a[i] and b[j]
  while (true) {
    if (x == 0 && i < a.size())
      x = a[i++];
    if (y == 0 && j < b.size())
      y = b[j++];
    if (x == 0 && y == 0)
      return shape;
    if (x <= 0 || y <= 0)
      return std::nullopt;
    if (x == 1 || y == 1) { // a unit dim of either joins the refinement
      shape.push_back(1);
      (x == 1 ? x : y) = 0;
      continue;
    }
    int64_t step = std::min(x, y);
    if (std::max(x, y) % step != 0)
      return std::nullopt;
    shape.push_back(step);
    x = x == step ? 0 : x / step;
    y = y == step ? 0 : y / step;
  }
}

namespace {

/// transpose(merge(x)) -> merge'(transpose'(x)) when the merge then joins
/// leading dims: ChatGLM views its [S, B, H, d] heads as [S, B*H, d] and
/// transposes them to [B*H, S, d] for bmm; moved below the transpose, the
/// merge is one SinkLeadingMerge unfolds.
struct SinkMergeBelowTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto merge = op.getInput().getDefiningOp<ReshapeOp>();
    if (!merge)
      return failure();
    // A reshape that splits some dims and merges others ([S, B, H*d] ->
    // [S, B*H, d], two views an exporter folded into one) merges the
    // dims of the shapes' common refinement.
    ArrayRef<int64_t> out = tensorType(merge.getResult()).getShape();
    std::optional<SmallVector<int64_t>> refined =
        commonRefinement(tensorType(merge.getInput()).getShape(), out);
    if (!refined)
      return failure();
    ArrayRef<int64_t> in = *refined;
    std::optional<SmallVector<SmallVector<int64_t>>> groups =
        collapsedGroups(in, out);
    if (!groups)
      return failure();
    SmallVector<int64_t> perm, shape;
    for (int64_t p : op.getPermutation())
      for (int64_t d : (*groups)[p]) {
        perm.push_back(d);
        shape.push_back(in[d]);
      }
    // Only where the merge then joins leading dims, for SinkLeadingMerge
    // (dropping a unit dim that was leading already is no merge: Baichuan
    // squeezes its q, k and v that way; a batch of 1 that the transpose
    // brings to the front is one), or where a reshape follows that it
    // folds into: PyTorch's multi_head_attention_forward views its
    // [B*H, S, d] result [S, B*H, d] then [S*B, H*d], which becomes
    // [B, H, S, d] transposed to [S, B, H, d] and viewed [S*B, H*d], where
    // a split of the heads reaches the output projection's features.
    bool reshapedAfter =
        op->hasOneUse() && isa<ReshapeOp>(*op->user_begin()) &&
        tensorType(merge.getInput()).getShape() == ArrayRef(in) &&
        mergedLeadingDims(merge); // [B, H, S, d] -> [B*H, S, d]
    if (shape.empty() || (shape[0] == 1 && perm[0] == 0) ||
        (!reshapedAfter && !mergedLeadingDims(shape, op.getType().getShape())))
      return failure();
    auto transposedType =
        RankedTensorType::get(shape, op.getType().getElementType());
    Value source = reshaped(rewriter, op.getLoc(), merge.getInput(), in);
    Value moved =
        TransposeOp::create(rewriter, op.getLoc(), transposedType, source,
                            rewriter.getDenseI64ArrayAttr(perm));
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), moved);
    return success();
  }
};

/// transpose(expand(x)) -> expand(transpose(x)) (same rank): a repeat of
/// key/value heads written sequence first (ChatGLM's, [S, B, kv, 1, d]
/// expanded) then reaches the transposes' [B, kv, 1, S, d] form that
/// mp-raise reads as grouped-query attention.
struct SinkExpandBelowTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto expand = op.getInput().getDefiningOp<ExpandOp>();
    if (!expand || !expand->hasOneUse() ||
        tensorType(expand.getInput()).getRank() != op.getType().getRank())
      return failure();
    ArrayRef<int64_t> in = tensorType(expand.getInput()).getShape();
    SmallVector<int64_t> shape;
    for (int64_t p : op.getPermutation())
      shape.push_back(in[p]);
    Value moved = TransposeOp::create(
        rewriter, op.getLoc(),
        RankedTensorType::get(shape, op.getType().getElementType()),
        expand.getInput(), op.getPermutationAttr());
    auto replacement =
        ExpandOp::create(rewriter, expand.getLoc(), op.getType(), moved);
    replacement->setDiscardableAttrs(expand->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, replacement.getResult());
    return success();
  }
};

/// op(merge(x), ...) -> merge(op'(x, ...)), op' batched over the unmerged
/// dims.
struct SinkLeadingMerge : OpInterfaceRewritePattern<LeadingDimOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(LeadingDimOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (op->getNumResults() == 0)
      return failure();
    int64_t batch = -1;
    for (Value result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getRank() == 0 ||
          (batch >= 0 && type.getDimSize(0) != batch))
        return failure();
      batch = type.getDimSize(0);
    }
    FailureOr<SmallVector<unsigned>> batched = op.getLeadingDimOperands();
    if (failed(batched))
      return failure();
    std::optional<SmallVector<int64_t>> leading;
    for (unsigned i : *batched) {
      auto merge = op->getOperand(i).getDefiningOp<ReshapeOp>();
      if (merge && (leading = mergedLeadingDims(merge)) &&
          tensorType(merge.getResult()).getDimSize(0) == batch)
        break;
      leading.reset();
    }
    if (!leading)
      return failure();
    Location loc = op->getLoc();
    SmallVector<Value> operands(op->getOperands());
    for (unsigned i : *batched)
      operands[i] = unfold(rewriter, loc, operands[i], *leading);
    Operation *unfolded = op.buildUnfolded(rewriter, operands, *leading);
    SmallVector<Value> merged;
    for (auto [result, value] :
         llvm::zip(op->getResults(), unfolded->getResults()))
      merged.push_back(
          ReshapeOp::create(rewriter, loc, result.getType(), value));
    rewriter.replaceOp(op, merged);
    return success();
  }
};

} // namespace

void mp::populateSinkLeadingMergePatterns(RewritePatternSet &patterns) {
  patterns
      .add<SinkLeadingMerge, SinkMergeBelowTranspose, SinkExpandBelowTranspose>(
          patterns.getContext());
}
