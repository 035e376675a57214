//===- RaiseAttention.cpp - raise decomposed attention ------------------===//
//
// softmax(q·kᵀ·scale [masked]) · v back to mp.attention, whatever order the
// export masked and scaled in: a constant causal pattern becomes the causal
// attribute, any other masks (a sliding window, padding, boolean or
// additive, an ALiBi bias next to a causal mask) the one mask operand; the
// head repeat of grouped-query attention is undone. A mask computed from
// parameters (T5's learned relative position bias, a table lookup) leaves
// the attention decomposed: mp.attention has no derivative for its mask,
// and the decomposed ops train.
//
//===----------------------------------------------------------------------===//
#include "RaisePatterns.h"

#include "llvm/ADT/STLExtras.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace mp;

/// The key/value heads grouped-query attention repeats:
/// reshape(expand(x: [B,Hkv,1,S,D]) -> [B,H,S,D]), x usually a reshape of
/// [B,Hkv,S,D] (HF's repeat_kv) or a transpose of the heads with a unit
/// dim (ChatGLM repeats them sequence first). Without a repeat, v itself.
struct HeadRepeat {
  Value heads;      // [B,Hkv,S,D], or null when x must be reshaped to it
  Value unsqueezed; // x
  Shape shape;      // [B,Hkv,S,D]
  /// The heads, x reshaped when it is not a reshape of them.
  Value materialize(PatternRewriter &rewriter, Location loc) const {
    if (heads)
      return heads;
    auto type =
        RankedTensorType::get(shape, tensorType(unsqueezed).getElementType());
    return ReshapeOp::create(rewriter, loc, type, unsqueezed);
  }
};

static HeadRepeat stripHeadRepeat(Value v) {
  HeadRepeat none{v, Value(), shapeOf(v)};
  // One key/value head expanded to every query head (multi-query attention
  // written as Falcon's expand of [.., 1, d]).
  if (auto broadcast = v.getDefiningOp<ExpandOp>()) {
    Shape x = shapeOf(broadcast.getInput()), out = shapeOf(v);
    if (x.size() == 4 && out.size() == 4 && x[1] == 1 && out[1] > 1 &&
        x[0] == out[0] && x[2] == out[2] && x[3] == out[3])
      return {broadcast.getInput(), Value(), x};
  }
  auto outer = v.getDefiningOp<ReshapeOp>();
  auto expand = outer ? outer.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
  if (!expand)
    return none;
  ArrayRef<int64_t> unsq = tensorType(expand.getInput()).getShape();
  ArrayRef<int64_t> exp = tensorType(expand.getResult()).getShape();
  ArrayRef<int64_t> out = tensorType(outer.getResult()).getShape();
  if (unsq.size() != 5 || exp.size() != 5 || out.size() != 4 || unsq[2] != 1)
    return none;
  Shape x = {unsq[0], unsq[1], unsq[3], unsq[4]};
  bool repeat = exp[0] == x[0] && exp[1] == x[1] && exp[3] == x[2] &&
                exp[4] == x[3] &&
                out == ArrayRef<int64_t>{x[0], x[1] * exp[2], x[2], x[3]};
  if (!repeat)
    return none;
  auto inner = expand.getInput().getDefiningOp<ReshapeOp>();
  if (inner && shapeOf(inner.getInput()) == x)
    return {inner.getInput(), Value(), x};
  return {Value(), expand.getInput(), x};
}

/// True when `attr` (broadcastable to [..., Sq, Sk]) masks exactly the keys
/// after each query: `allowed(i, j)` says how to read an element.
static bool
isCausalPattern(DenseElementsAttr attr, int64_t sq, int64_t sk,
                llvm::function_ref<std::optional<bool>(int64_t)> allowedAt) {
  ArrayRef<int64_t> shape = cast<ShapedType>(attr.getType()).getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != sq || shape.back() != sk)
    return false;
  int64_t n = attr.getNumElements();
  for (int64_t idx = 0; idx < n; ++idx) {
    int64_t j = idx % sk, i = (idx / sk) % sq;
    std::optional<bool> allowed = allowedAt(idx);
    if (!allowed || *allowed != (j <= i + (sk - sq)))
      return false;
  }
  return true;
}

/// A constant causal mask of booleans: true where a key is allowed, or
/// with `masked`, true where it is masked (masked_fill's condition).
static bool isCausalBoolMask(Value mask, int64_t sq, int64_t sk,
                             bool masked = false) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)) ||
      !attr.getElementType().isInteger(1))
    return false;
  SmallVector<bool> values(attr.getValues<bool>());
  return isCausalPattern(attr, sq, sk, [&](int64_t i) -> std::optional<bool> {
    return values[i] != masked;
  });
}

static bool isVeryNegative(double v) { return v <= -1e4; }

/// Whether a mask value `v`, multiplied by `scale` after it is applied,
/// still hides its key: very negative, and at most -100 once scaled (e^-100
/// is below float's smallest normal number; a -1e4 fill then divided by 8,
/// or by sqrt(d), still hides, one scaled by 1e-4 does not).
static bool hidesAfterScale(double v, double scale) {
  return isVeryNegative(v) && v * scale <= -100.0;
}

/// `scale`: what multiplies the mask after it is added (the scales applied
/// to the scores after it); a -1e4 mask scaled by 1e-4 masks nothing.
static bool isCausalAdditiveMask(Value mask, int64_t sq, int64_t sk,
                                 double scale) {
  DenseElementsAttr attr;
  if (!matchPattern(mask, m_Constant(&attr)) ||
      !isa<FloatType>(attr.getElementType()))
    return false;
  SmallVector<double> values;
  for (APFloat f : attr.getValues<APFloat>())
    values.push_back(f.convertToDouble());
  return isCausalPattern(attr, sq, sk, [&](int64_t i) -> std::optional<bool> {
    if (values[i] == 0.0)
      return true;
    if (hidesAfterScale(values[i], scale))
      return false;
    return std::nullopt;
  });
}

/// The causal checks above, once per mask constant and question: every
/// layer reads the same (uniqued) constant, and on the GPT-3 shapes reading
/// a 2048 x 2048 mask once per layer was most of mp-raise's time.
class CausalMaskMemo {
public:
  bool boolMask(Value mask, int64_t sq, int64_t sk, bool masked) {
    return lookup(mask, sq, sk, masked ? 1.0 : 0.0, /*additive=*/false,
                  [&] { return isCausalBoolMask(mask, sq, sk, masked); });
  }
  bool additiveMask(Value mask, int64_t sq, int64_t sk, double scale) {
    return lookup(mask, sq, sk, scale, /*additive=*/true,
                  [&] { return isCausalAdditiveMask(mask, sq, sk, scale); });
  }

private:
  template <class Check>
  bool lookup(Value mask, int64_t sq, int64_t sk, double arg, bool additive,
              Check check) {
    DenseElementsAttr attr;
    if (!matchPattern(mask, m_Constant(&attr)))
      return false; // (what either check says of a value not constant)
    auto key =
        std::make_tuple(attr.getAsOpaquePointer(), sq, sk, arg, additive);
    auto [it, inserted] = known.try_emplace(key, false);
    if (inserted)
      it->second = check();
    return it->second;
  }
  std::map<std::tuple<const void *, int64_t, int64_t, double, bool>, bool>
      known;
};

/// Whether `v` is computed from a parameter (a learned table looked up, as
/// T5's relative position bias), as opposed to a stored tensor read as it
/// is, through shape ops only (a mask or ALiBi bias the exporter kept as an
/// initializer), or one computed from constants and inputs alone.
static bool computedFromParameter(Value v) {
  llvm::SmallPtrSet<Operation *, 16> seen[2]; // reached read as is; computed
  SmallVector<std::pair<Value, bool>> work = {{v, false}};
  while (!work.empty()) {
    auto [value, computed] = work.pop_back_val();
    Operation *def = value.getDefiningOp();
    if (!def || !seen[computed].insert(def).second)
      continue;
    if (isa<GetParamOp>(def)) {
      if (computed)
        return true;
      continue;
    }
    bool reshapes = isa<ReshapeOp, TransposeOp, ExpandOp, SliceOp, CastOp>(def);
    for (Value operand : def->getOperands())
      work.push_back({operand, computed || !reshapes});
  }
  return false;
}

/// softmax(q·kᵀ·scale [masked]) · v -> attention(q, k, v).
namespace {

struct AttentionFromDecomposed : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  // (One pattern object per mp-raise run: the memo lives as long as the
  // constants it points at.)
  mutable CausalMaskMemo causalMasks;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    auto softmax = op.getLhs().getDefiningOp<SoftmaxOp>();
    if (!softmax || tensorType(op.getLhs()).getRank() != 4 ||
        tensorType(op.getRhs()).getRank() != 4 ||
        softmax.getNormalizedAxis() != 3)
      return failure();
    Value scores = softmax.getInput();
    int64_t sq = tensorType(scores).getDimSize(2);
    int64_t sk = tensorType(scores).getDimSize(3);

    // Masks and scales, in any order (ChatGLM scales by 1/(sqrt(d) * l)
    // then by l): each mask is scaled by the scales peeled before it, which
    // were applied after it.
    bool causal = false;
    SmallVector<std::pair<Value, double>> additive; // (mask, its scale)
    BoolMask boolMask;
    double scale = 1.0;
    // A clamp of the masked scores from below (OPT's) is kept exactly by
    // clamping the mask instead, with no causal attribute: a row whose
    // every key is masked then weighs every key alike, as the clamp makes
    // it.
    std::optional<double> floor = peelFloorClamp(scores);
    for (int step = 0; step < 6; ++step) {
      Value mask;
      if (peelMask(scores, sq, sk, causal, mask, boolMask,
                   /*causalAsMask=*/floor.has_value(), scale)) {
        if (mask)
          additive.push_back({mask, scale});
        continue;
      }
      double factor = 1.0;
      if (peelScale(scores, factor)) {
        scale *= factor;
        continue;
      }
      break;
    }
    for (auto [mask, maskScale] : additive)
      if (computedFromParameter(mask))
        return rewriter.notifyMatchFailure(
            op, "a mask computed from parameters stays decomposed");
    auto qk = scores.getDefiningOp<MatmulOp>();
    if (!qk || tensorType(qk.getLhs()).getRank() != 4 ||
        tensorType(qk.getRhs()).getRank() != 4)
      return failure();
    // A scale on q or on kᵀ themselves (PyTorch's SDPA decomposition scales
    // both by sqrt(scale)) joins the attention's; it does not scale masks.
    double operandScale = 1.0;
    Value query = peelOperandScale(qk.getLhs(), operandScale);
    HeadRepeat value = stripHeadRepeat(op.getRhs());
    // Matmuls broadcast batch and heads where attention does not (queries
    // shared across the batch): such a pattern stays decomposed. Checked
    // before any op is created.
    Value keyT = peelOperandScale(qk.getRhs(), operandScale);
    // Heads repeated after the key was transposed (ChatGLM's) are stripped
    // from kᵀ; otherwise from the key.
    HeadRepeat keyTRepeat = stripHeadRepeat(keyT);
    bool repeatedKeyT = keyTRepeat.heads != keyT;
    KeySource keySource = keyFromTransposed(keyT);
    std::optional<HeadRepeat> key;
    if (!keySource.perm && !repeatedKeyT)
      key = stripHeadRepeat(keySource.source);
    Shape keyShape = key ? key->shape : keySource.shape;
    if (repeatedKeyT) {
      keyShape = keyTRepeat.shape;
      std::swap(keyShape[2], keyShape[3]);
    }
    // Keys and values of different head counts (a repeat seen on one of
    // them only) are both taken repeated.
    if (keyShape.size() == 4 && value.shape.size() == 4 &&
        keyShape[1] != value.shape[1]) {
      value = HeadRepeat{op.getRhs(), Value(), shapeOf(op.getRhs())};
      repeatedKeyT = false;
      key.reset();
      if (!keySource.perm) // kᵀ's source is the key itself
        key = HeadRepeat{keySource.source, Value(), shapeOf(keySource.source)};
      keyShape = key ? key->shape : keySource.shape;
    }
    std::vector<Shape> maskShapes;
    for (auto [mask, maskScale] : additive)
      maskShapes.push_back(shapeOf(mask));
    if (boolMask.condition)
      maskShapes.push_back(shapeOf(boolMask.condition));
    bool haveMaskOperand = !maskShapes.empty();
    Shape maskShape, expected;
    std::string error;
    if (haveMaskOperand && !shape::broadcast(maskShapes, maskShape, error))
      return rewriter.notifyMatchFailure(op, error);
    if (!shape::attention(shapeOf(query), keyShape, value.shape,
                          haveMaskOperand ? &maskShape : nullptr, expected,
                          error) ||
        expected != shapeOf(op.getResult()))
      return rewriter.notifyMatchFailure(
          op, error.empty() ? "attention shape differs" : error);
    Value keyHeads;
    if (repeatedKeyT)
      keyHeads = TransposeOp::create(
          rewriter, op.getLoc(), keyTRepeat.materialize(rewriter, op.getLoc()),
          rewriter.getDenseI64ArrayAttr({0, 1, 3, 2}));
    else if (key)
      keyHeads = key->materialize(rewriter, op.getLoc());
    else
      keyHeads =
          TransposeOp::create(rewriter, op.getLoc(), keySource.source,
                              rewriter.getDenseI64ArrayAttr(*keySource.perm));
    Value valueHeads = value.materialize(rewriter, op.getLoc());
    // attention adds its mask after scaling; one added before is scaled too.
    Value mask;
    Location loc = op.getLoc();
    for (auto [term, maskScale] : additive) {
      if (maskScale != 1.0)
        term = MulOp::create(
            rewriter, loc, term,
            splatConstant(
                rewriter, loc,
                RankedTensorType::get({}, tensorType(term).getElementType()),
                maskScale));
      mask = mask ? AddOp::create(rewriter, loc, mask, term).getResult() : term;
    }
    if (boolMask.condition) {
      Value hidden =
          boolMask.additive(rewriter, loc, tensorType(scores).getElementType());
      mask = mask ? AddOp::create(rewriter, loc, mask, hidden).getResult()
                  : hidden;
    }
    if (floor && mask) {
      // max(s + m, c) = s + max(m, c) while |s| is far below |c| (c near
      // the lowest float: s + c rounds to c).
      Value c = splatConstant(
          rewriter, loc,
          RankedTensorType::get({}, tensorType(mask).getElementType()), *floor);
      Value below =
          CompareOp::create(rewriter, loc, ComparePredicate::lt, mask, c);
      mask = WhereOp::create(rewriter, loc, below, c, mask);
    }
    rewriter.replaceOpWithNewOp<AttentionOp>(
        op, query, keyHeads, valueHeads, mask,
        rewriter.getF32FloatAttr(static_cast<float>(scale * operandScale)),
        causal ? rewriter.getUnitAttr() : nullptr);
    return success();
  }

  /// The operands a mask is applied to: the product, or it scaled.
  /// Whether `v` is the scores: a matmul, perhaps scaled and masked
  /// already (HF's GPT-2 fills the causal positions by `where`, then adds
  /// the padding mask), as opposed to a mask computed by the same ops.
  static bool isScores(Value v, int depth = 0) {
    Operation *def = v.getDefiningOp();
    if (!def || depth > 4)
      return false;
    if (isa<MatmulOp>(def))
      return true;
    if (auto where = dyn_cast<WhereOp>(def))
      return isScores(where.getOnTrue(), depth + 1) ||
             isScores(where.getOnFalse(), depth + 1);
    if (isa<DivOp>(def))
      return isScores(def->getOperand(0), depth + 1);
    if (isa<MulOp, AddOp>(def))
      return isScores(def->getOperand(0), depth + 1) ||
             isScores(def->getOperand(1), depth + 1);
    return false;
  }

  /// A boolean mask applied by `where`: `condition` true where keys are
  /// hidden (`masked`, masked_fill's spelling) or where they are allowed,
  /// with `fill` (very negative) for the hidden ones.
  struct BoolMask {
    Value condition;
    bool masked = false;
    double fill = 0;
    /// The additive mask attention takes: fill where hidden, else 0.
    Value additive(PatternRewriter &rewriter, Location loc,
                   Type elementType) const {
      auto scalar = RankedTensorType::get({}, elementType);
      Value hidden = splatConstant(rewriter, loc, scalar, fill);
      Value shown = splatConstant(rewriter, loc, scalar, 0.0);
      return WhereOp::create(rewriter, loc, condition, masked ? hidden : shown,
                             masked ? shown : hidden);
    }
  };

  /// Peels a mask off `scores`: where(allowed, scores, -inf),
  /// where(masked, -inf, scores) (masked_fill), or scores + mask. A
  /// constant causal pattern becomes the causal attribute; any other
  /// boolean mask (a sliding window, padding) `boolMask`, an additive one
  /// `mask`. Fails on a second causal pattern or boolean mask.
  /// `scale` multiplies the scores after the mask (the scales peeled so
  /// far): a fill is very negative, so masks, only once scaled.
  bool peelMask(Value &scores, int64_t sq, int64_t sk, bool &causal,
                Value &mask, BoolMask &boolMask, bool causalAsMask,
                double scale) const {
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      for (bool masked : {false, true}) {
        Value kept = masked ? where.getOnFalse() : where.getOnTrue();
        std::optional<double> fill =
            splatValue(masked ? where.getOnTrue() : where.getOnFalse());
        if (!fill || !hidesAfterScale(*fill, scale) ||
            !tensorType(where.getCondition()).getElementType().isInteger(1))
          continue;
        // A condition on the scores themselves (a clamp) is no mask.
        if (auto c = where.getCondition().getDefiningOp<CompareOp>();
            c && (c.getLhs() == kept || c.getRhs() == kept))
          return false;
        if (!causalAsMask &&
            causalMasks.boolMask(where.getCondition(), sq, sk, masked)) {
          if (causal)
            return false;
          causal = true;
        } else if (boolMask.condition) {
          return false; // one boolean mask per attention
        } else {
          boolMask = {where.getCondition(), masked, *fill * scale};
        }
        scores = kept;
        return true;
      }
      return false;
    }
    auto add = scores.getDefiningOp<AddOp>();
    if (!add)
      return false;
    for (auto [s, m] : {std::pair(add.getLhs(), add.getRhs()),
                        std::pair(add.getRhs(), add.getLhs())}) {
      if (!isScores(s))
        continue;
      if (!causalAsMask && causalMasks.additiveMask(m, sq, sk, scale)) {
        if (causal)
          return false;
        causal = true;
      } else {
        mask = m;
      }
      scores = s;
      return true;
    }
    return false;
  }

  /// Peels max(scores, c) off `scores`, c within a factor 2 of the lowest
  /// finite float: HF's OPT, BART and Whisper clamp the masked scores at
  /// the float minimum (torch.max, imported as where(s < c, c, s)); kept as
  /// a mask it would read the scores (the product computed twice). Returns
  /// c.
  static std::optional<double> peelFloorClamp(Value &scores) {
    auto where = scores.getDefiningOp<WhereOp>();
    auto compare =
        where ? where.getCondition().getDefiningOp<CompareOp>() : CompareOp();
    if (!compare)
      return std::nullopt;
    ComparePredicate pred = compare.getPredicate();
    bool below = pred == ComparePredicate::lt || pred == ComparePredicate::le;
    bool above = pred == ComparePredicate::gt || pred == ComparePredicate::ge;
    Value kept = below ? where.getOnFalse() : where.getOnTrue();
    Value floor = below ? where.getOnTrue() : where.getOnFalse();
    std::optional<double> c = splatValue(floor);
    auto type = dyn_cast<FloatType>(tensorType(scores).getElementType());
    if (!(below || above) || !c || !type || compare.getLhs() != kept ||
        splatValue(compare.getRhs()) != c || kept.getType() != scores.getType())
      return std::nullopt;
    double lowest =
        APFloat::getLargest(type.getFloatSemantics(), /*Negative=*/true)
            .convertToDouble();
    if (*c > lowest / 2)
      return std::nullopt;
    scores = kept;
    return c;
  }

  /// `v` without a positive constant factor (x * c, x / c), which
  /// multiplies into `scale`.
  static Value peelOperandScale(Value v, double &scale) {
    Value x = v;
    double s = 1.0;
    if (!peelScale(x, s) || x.getType() != v.getType())
      return v;
    scale *= s;
    return x;
  }

  /// Peels a positive constant scale off `scores` (x / c or x * c).
  static bool peelScale(Value &scores, double &scale) {
    if (auto div = scores.getDefiningOp<DivOp>()) {
      std::optional<double> c = splatValue(div.getRhs());
      if (!c || *c <= 0)
        return false;
      scale = 1.0 / *c;
      scores = div.getLhs();
      return true;
    }
    if (auto mul = scores.getDefiningOp<MulOp>())
      for (auto [s, c] : {std::pair(mul.getLhs(), mul.getRhs()),
                          std::pair(mul.getRhs(), mul.getLhs())})
        if (std::optional<double> v = splatValue(c); v && *v > 0) {
          scale = *v;
          scores = s;
          return true;
        }
    return false;
  }

  /// K given Kᵀ (the transpose of the last two dims): a value that is K,
  /// or the transpose (`perm`) of `source` that gives it, of shape `shape`.
  struct KeySource {
    Value source;
    std::optional<SmallVector<int64_t>> perm;
    Shape shape;
  };
  static KeySource keyFromTransposed(Value kt) {
    SmallVector<int64_t> perm = {0, 1, 3, 2};
    Value source = kt;
    if (auto t = kt.getDefiningOp<TransposeOp>()) {
      perm.assign(t.getPermutation().begin(), t.getPermutation().end());
      std::swap(perm[2], perm[3]);
      source = t.getInput();
    }
    if (perm == SmallVector<int64_t>{0, 1, 2, 3})
      return {source, std::nullopt, shapeOf(source)};
    Shape in = shapeOf(source), shape;
    for (int64_t p : perm)
      shape.push_back(in[p]);
    return {source, perm, shape};
  }
};

} // namespace

void mp::populateRaiseAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<AttentionFromDecomposed>(patterns.getContext());
}
