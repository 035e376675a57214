//===- UnmergeHeadRows.cpp - heads merged into a matmul's rows, for mp-raise =//
//
// HF's GPT-BigCode (SantaCoder, StarCoder) computes its multi-query
// attention with the query positions and the heads merged into the rows of
// one batched matmul against the single key head: q [B, S, H*d] viewed
// [B, S*H, d] times kᵀ [B, d, S], the scores viewed [B, S, H, S] for the
// mask and softmax, then [B, S*H, S] times v [B, S, d]. In that form
// attention is not recognized, and a split by heads cannot pass the merge.
//
// HeadsInRows computes such a matmul with the merged rows unfolded and
// their inner factor (the heads) made a batch dimension, [B, H, S, d] x
// [B, 1, d, S], between a transpose and a reshape that give the old
// result. The reshapes and transposes left around the elementwise ops and
// the softmax then meet their inverses (HoistToInverse) and fold away,
// leaving attention in its [B, H, S, d] form for RaiseAttention.
//
//===----------------------------------------------------------------------===//
#include "RaisePatterns.h"

using namespace mlir;
using namespace mp;

/// The permutation of a rank-`rank` tensor swapping dims `a` and `b`.
static SmallVector<int64_t> swapping(int64_t rank, int64_t a, int64_t b) {
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[a], perm[b]);
  return perm;
}

static RankedTensorType withShape(Value v, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, tensorType(v).getElementType());
}

/// Whether `perm` swaps the last two dims and keeps the others.
static bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = static_cast<int64_t>(perm.size());
  return rank >= 2 &&
         SmallVector<int64_t>(perm) == swapping(rank, rank - 2, rank - 1);
}

/// `v`'s shape with a unit dim before its last two ([P, K, N] ->
/// [P, 1, K, N]).
static SmallVector<int64_t> shapeWithUnit(Value v) {
  SmallVector<int64_t> shape(tensorType(v).getShape());
  shape.insert(shape.end() - 2, 1);
  return shape;
}

/// `e` built again on `operands`, with result type `type`.
static Value rebuilt(PatternRewriter &rewriter, Operation *e,
                     ValueRange operands, Type type) {
  OperationState state(e->getLoc(), e->getName());
  state.addOperands(operands);
  state.addAttributes(e->getAttrs());
  state.addTypes(type);
  return rewriter.create(state)->getResult(0);
}

/// The rhs [P, K, N] of a matmul with a unit dim before its last two:
/// [P, 1, K, N]. A transposed key stays a transpose (of its source with
/// the unit dim), the form RaiseAttention reads keys from.
static Value withUnitBatch(PatternRewriter &rewriter, Location loc, Value rhs) {
  auto t = rhs.getDefiningOp<TransposeOp>();
  if (t && swapsLastTwo(t.getPermutation())) {
    Value source = t.getInput();
    int64_t rank = tensorType(source).getRank() + 1;
    return transposed(rewriter, loc,
                      reshaped(rewriter, loc, source, shapeWithUnit(source)),
                      swapping(rank, rank - 2, rank - 1));
  }
  return reshaped(rewriter, loc, rhs, shapeWithUnit(rhs));
}

/// Whether a reshape or transpose (`transpose`) can move above `e`: an
/// elementwise op, or a softmax under a transpose, used once.
static bool hoistable(Operation *e, bool transpose) {
  if (!e || e->getNumResults() != 1 || !e->getResult(0).hasOneUse())
    return false;
  if (transpose && isa<SoftmaxOp>(e))
    return true;
  return e->hasTrait<mlir::OpTrait::Elementwise>() ||
         e->hasTrait<mlir::OpTrait::ResultsBroadcastableShape>();
}

namespace {

/// matmul(reshape(x: [P, A, ...]) -> [P, A*H, K], y: [P', K, N]) ->
/// reshape(transpose(matmul(transpose(x as [P, A, H, K]), y as
/// [P', 1, K, N]))): the rows' inner factor H becomes a batch dim.
struct HeadsInRows : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto merge = op.getLhs().getDefiningOp<ReshapeOp>();
    RankedTensorType lhs = tensorType(op.getLhs());
    int64_t rank = lhs.getRank();
    // Two activations of one rank (a linear's weight has rank 2).
    if (!merge || rank < 3 || tensorType(op.getRhs()).getRank() != rank)
      return failure();
    ArrayRef<int64_t> in = tensorType(merge.getInput()).getShape();
    ArrayRef<int64_t> batch = lhs.getShape().drop_back(2);
    int64_t rows = lhs.getDimSize(rank - 2), depth = lhs.getDimSize(rank - 1);
    if (static_cast<int64_t>(in.size()) < rank ||
        in.take_front(rank - 2) != batch)
      return failure();
    // (outer 1: one query position, a decode step's [B, 1, H*d] viewed
    // [B, H, d].)
    int64_t outer = in[rank - 2];
    if (outer < 1 || outer >= rows || rows % outer != 0)
      return failure();
    int64_t inner = rows / outer;

    Location loc = op.getLoc();
    SmallVector<int64_t> unfolded(batch);
    llvm::append_range(unfolded, ArrayRef<int64_t>{outer, inner, depth});
    SmallVector<int64_t> perm = swapping(rank + 1, rank - 2, rank - 1);
    Value x =
        transposed(rewriter, loc,
                   reshaped(rewriter, loc, merge.getInput(), unfolded), perm);
    Value y = withUnitBatch(rewriter, loc, op.getRhs());
    auto product = MatmulOp::create(rewriter, loc, x, y);
    product->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    Value back = transposed(rewriter, loc, product, perm);
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), back);
    return success();
  }
};

/// Single-head attention on [B, S, d] (a model written with one module
/// per head, Karpathy's: q·kᵀ, scaled and masked, softmax, times v) is
/// rebuilt with a unit head dim, [B, 1, S, d], the scales, masks and
/// softmax between the matmuls included, then reshaped back: the
/// [B, H, S, d] form (H = 1) that RaiseAttention reads. Batch dims that
/// are merges already (HF's BART [B*H, S, d]) are left to SinkLeadingMerge.
struct SingleHeadAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static bool isMerge(Value v) { return v.getDefiningOp<ReshapeOp>(); }

  /// The ops from q·kᵀ (first) to the softmax's input (last), each with
  /// the operand the scores come in: scales and masks, each used once,
  /// their other operands of rank 3 at most (a mask [B, S, S] or [B, 1, S]).
  using Chain = SmallVector<std::pair<Operation *, unsigned>>;
  static bool scoresChain(Value scores, Chain &chain, int depth = 0) {
    Operation *def = scores.getDefiningOp();
    if (!def || depth > 8 || !def->getResult(0).hasOneUse())
      return false;
    if (isa<MatmulOp>(def)) {
      chain.push_back({def, 0});
      return true;
    }
    if (!isa<MulOp, DivOp, AddOp, SubOp, WhereOp>(def))
      return false;
    for (Value operand : def->getOperands())
      if (auto t = dyn_cast<RankedTensorType>(operand.getType());
          !t || t.getRank() > 3)
        return false;
    for (OpOperand &operand : def->getOpOperands()) {
      if (operand.get().getType() != scores.getType())
        continue;
      size_t size = chain.size();
      if (scoresChain(operand.get(), chain, depth + 1)) {
        chain.push_back({def, operand.getOperandNumber()});
        return true;
      }
      chain.resize(size);
    }
    return false;
  }

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto softmax = op.getLhs().getDefiningOp<SoftmaxOp>();
    Value v = op.getRhs();
    if (!softmax || tensorType(op.getLhs()).getRank() != 3 ||
        tensorType(v).getRank() != 3 || softmax.getNormalizedAxis() != 2 ||
        !softmax->hasOneUse() || isMerge(v))
      return failure();
    Chain chain;
    if (!scoresChain(softmax.getInput(), chain))
      return failure();
    auto qk = cast<MatmulOp>(chain.front().first);
    auto keyT = qk.getRhs().getDefiningOp<TransposeOp>();
    if (tensorType(qk.getLhs()).getRank() != 3 ||
        tensorType(qk.getRhs()).getRank() != 3 || isMerge(qk.getLhs()) ||
        isMerge(keyT ? keyT.getInput() : qk.getRhs()))
      return failure();

    Location loc = op.getLoc();
    Value scores = MatmulOp::create(
        rewriter, qk.getLoc(),
        reshaped(rewriter, loc, qk.getLhs(), shapeWithUnit(qk.getLhs())),
        withUnitBatch(rewriter, loc, qk.getRhs()));
    scores.getDefiningOp()->setDiscardableAttrs(
        qk->getDiscardableAttrDictionary());
    // Scalars and masks of rank 2 or less broadcast as they did; masks of
    // rank 3 take the unit head dim too.
    for (auto [e, scoresOperand] : ArrayRef(chain).drop_front()) {
      SmallVector<Value> operands;
      for (OpOperand &operand : e->getOpOperands()) {
        Value x = operand.get();
        if (operand.getOperandNumber() == scoresOperand)
          x = scores;
        else if (tensorType(x).getRank() == 3)
          x = reshaped(rewriter, loc, x, shapeWithUnit(x));
        operands.push_back(x);
      }
      scores = rebuilt(rewriter, e, operands, scores.getType());
    }
    auto probabilities = SoftmaxOp::create(rewriter, softmax.getLoc(), scores,
                                           rewriter.getI64IntegerAttr(3));
    probabilities->setDiscardableAttrs(softmax->getDiscardableAttrDictionary());
    auto out = MatmulOp::create(rewriter, loc, probabilities,
                                reshaped(rewriter, loc, v, shapeWithUnit(v)));
    out->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), out);
    return success();
  }
};

/// A reshape or a transpose, and how it maps a shape.
struct ShapeMap {
  Operation *op;
  bool isTranspose() const { return isa<TransposeOp>(op); }
  ArrayRef<int64_t> perm() const {
    return cast<TransposeOp>(op).getPermutation();
  }
  RankedTensorType inputType() const { return tensorType(op->getOperand(0)); }
  RankedTensorType resultType() const { return tensorType(op->getResult(0)); }
  /// Whether `other`, of the same kind, applied before this one gives its
  /// input back.
  bool undoes(Operation *other) const {
    if (!other || other->getName() != op->getName())
      return false;
    if (!isTranspose())
      return other->getOperand(0).getType() == op->getResult(0).getType();
    ArrayRef<int64_t> first = cast<TransposeOp>(other).getPermutation();
    if (first.size() != perm().size())
      return false;
    for (auto [i, p] : llvm::enumerate(perm()))
      if (first[p] != static_cast<int64_t>(i))
        return false;
    return true;
  }
};

/// Whether a reshape merges leading dims ([a0, .., ak, t..] -> [a0*..*ak,
/// t..]): SinkLeadingMerge sinks those, hoisting them back would cycle.
static bool mergesLeadingDims(const ShapeMap &map) {
  ArrayRef<int64_t> in = map.inputType().getShape();
  ArrayRef<int64_t> out = map.resultType().getShape();
  if (out.empty() || in.size() <= out.size())
    return false;
  size_t merged = in.size() - out.size() + 1;
  return in.drop_front(merged) == out.drop_front();
}

/// op2(e(..., op1(x), ...)) -> e'(..., x, ...) where op1 and op2 are
/// reshapes, or transposes, that undo each other and e is a chain of
/// elementwise ops (and, for transposes, softmaxes) used once: op2 moves
/// one op up at a time until it meets op1 and both fold away. The other
/// operands of e take op2 too (scalars and splats stay as they are).
template <typename ShapeOpT>
struct HoistToInverse : OpRewritePattern<ShapeOpT> {
  using OpRewritePattern<ShapeOpT>::OpRewritePattern;

  static bool reachesInverse(const ShapeMap &map, Operation *e, int depth) {
    for (Value v : e->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (map.undoes(def))
        return true;
      if (depth < 6 && hoistable(def, map.isTranspose()) &&
          reachesInverse(map, def, depth + 1))
        return true;
    }
    return false;
  }

  /// `v`, an operand of the op below `map`, with `map` applied; null when
  /// it cannot take it (a reshape of a broadcast operand).
  static Value mapped(PatternRewriter &rewriter, Location loc,
                      const ShapeMap &map, Value v) {
    RankedTensorType type = tensorType(v);
    int64_t rank = map.inputType().getRank();
    if (type.getRank() == 0)
      return v;
    if (map.undoes(v.getDefiningOp()))
      return v.getDefiningOp()->getOperand(0);
    if (splatValue(v)) {
      DenseElementsAttr attr;
      matchPattern(v, m_Constant(&attr));
      SmallVector<int64_t> shape;
      if (type.getShape() == map.inputType().getShape()) {
        llvm::append_range(shape, map.resultType().getShape());
      } else if (map.isTranspose()) {
        SmallVector<int64_t> full(rank - type.getRank(), 1);
        llvm::append_range(full, type.getShape());
        for (int64_t p : map.perm())
          shape.push_back(full[p]);
      } // else: a reshape's broadcast splat becomes a scalar
      return ConstantOp::create(
          rewriter, loc,
          DenseElementsAttr::get(withShape(v, shape),
                                 attr.getSplatValue<Attribute>()));
    }
    if (!map.isTranspose())
      return type.getShape() == map.inputType().getShape()
                 ? reshaped(rewriter, loc, v, map.resultType().getShape())
                 : Value();
    // Broadcast operands of lower rank gain leading unit dims first.
    SmallVector<int64_t> full(rank - type.getRank(), 1);
    llvm::append_range(full, type.getShape());
    return transposed(rewriter, loc, reshaped(rewriter, loc, v, full),
                      map.perm());
  }

  LogicalResult matchAndRewrite(ShapeOpT op,
                                PatternRewriter &rewriter) const override {
    ShapeMap map{op.getOperation()};
    if (!map.isTranspose() && mergesLeadingDims(map))
      return failure();
    Operation *e = op->getOperand(0).getDefiningOp();
    if (!hoistable(e, map.isTranspose()) || !reachesInverse(map, e, 0))
      return failure();
    // Check every operand can take the map before creating any op.
    if (!map.isTranspose())
      for (Value v : e->getOperands())
        if (tensorType(v).getRank() != 0 && !splatValue(v) &&
            !map.undoes(v.getDefiningOp()) &&
            tensorType(v).getShape() != map.inputType().getShape())
          return failure();
    Location loc = e->getLoc();
    SmallVector<Value> operands;
    for (Value v : e->getOperands())
      operands.push_back(mapped(rewriter, loc, map, v));
    Operation *hoisted =
        rebuilt(rewriter, e, operands,
                withShape(e->getResult(0), map.resultType().getShape()))
            .getDefiningOp();
    if (auto softmax = dyn_cast<SoftmaxOp>(hoisted)) {
      int64_t axis = cast<SoftmaxOp>(e).getNormalizedAxis();
      softmax.setAxis(llvm::find(map.perm(), axis) - map.perm().begin());
    }
    rewriter.replaceOp(op, hoisted->getResults());
    return success();
  }
};

/// x + 0 -> x (a baddbmm's zero-filled input, on which the scores would
/// look masked).
struct AddZero : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, zero] : {std::pair(op.getLhs(), op.getRhs()),
                           std::pair(op.getRhs(), op.getLhs())}) {
      std::optional<double> splat = splatValue(zero);
      if (splat && *splat == 0.0 && x.getType() == op.getType()) {
        rewriter.replaceOp(op, x);
        return success();
      }
    }
    return failure();
  }
};

} // namespace

void mp::populateUnmergeHeadRowsPatterns(RewritePatternSet &patterns) {
  patterns.add<HeadsInRows, SingleHeadAttention, HoistToInverse<ReshapeOp>,
               HoistToInverse<TransposeOp>, AddZero>(patterns.getContext());
}
