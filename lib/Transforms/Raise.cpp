//===- Raise.cpp - raise decomposed ONNX to named transformer ops ---------===//
//
// ONNX exporters decompose linears, norms, activations and attention into
// elementwise ops. The partitioning passes and the kernels want intent, so
// this pass pattern-matches those decompositions back into mp.linear,
// mp.layer_norm, mp.rms_norm, mp.gelu, mp.silu and mp.attention (its
// patterns in RaiseAttention.cpp; einsums in RaiseEinsum.cpp), then tags
// each op of a repeated transformer block with its layer index.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Layers.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Shape.h"
#include "mp/Transforms/Passes.h"

#include "RaisePatterns.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <map>
#include <optional>

#define DEBUG_TYPE "mp-raise"

namespace mp {
#define GEN_PASS_DEF_MPRAISE
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

//===----------------------------------------------------------------------===//
// Matching helpers
//===----------------------------------------------------------------------===//

static bool isSplat(Value v, double expected, double relTol = 1e-4) {
  std::optional<double> value = splatValue(v);
  return value && std::abs(*value - expected) <= relTol * std::abs(expected);
}

static bool isParam(Value v) {
  return v.getDefiningOp<GetParamOp>() != nullptr;
}

/// For a commutative binary op, returns the operand that is not `known`.
template <typename OpT> static Value otherOperand(OpT op, Value known) {
  if (op.getLhs() == known)
    return op.getRhs();
  if (op.getRhs() == known)
    return op.getLhs();
  return Value();
}

/// True when `op` reduces (mean) the last dim of its input with keepdims.
static bool isMeanOverLastDim(ReduceOp op) {
  int64_t rank = tensorType(op.getInput()).getRank();
  return op && op.getKind() == ReduceKind::mean && op.getKeepdims() &&
         op.getAxes().size() == 1 &&
         (op.getAxes()[0] == rank - 1 || op.getAxes()[0] == -1);
}

/// Matches x^2 (pow(x, 2) or x*x); returns x.
static Value matchSquare(Value v) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return isSplat(pow.getRhs(), 2.0) ? pow.getLhs() : Value();
  if (auto mul = v.getDefiningOp<MulOp>())
    return mul.getLhs() == mul.getRhs() ? mul.getLhs() : Value();
  return Value();
}

/// Matches mean(x^2) + eps; returns x and eps.
static Value matchMeanSquarePlusEps(Value v, float &eps) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return Value();
  for (auto [mean, epsValue] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
    auto reduce = mean.getDefiningOp<ReduceOp>();
    std::optional<double> e = splatValue(epsValue);
    if (!reduce || !e || *e <= 0 || !isMeanOverLastDim(reduce))
      continue;
    if (Value x = matchSquare(reduce.getInput())) {
      eps = static_cast<float>(*e);
      return x;
    }
  }
  return Value();
}

/// Matches sqrt(mean(x^2) + eps); returns x and eps.
static Value matchRootMeanSquarePlusEps(Value v, float &eps) {
  auto sqrt = v.getDefiningOp<SqrtOp>();
  return sqrt ? matchMeanSquarePlusEps(sqrt.getInput(), eps) : Value();
}

/// Matches 1/sqrt(mean(x^2) + eps) as reciprocal, div or rsqrt; returns x.
static Value matchInverseRMS(Value v, float &eps) {
  if (auto rsqrt = v.getDefiningOp<RsqrtOp>())
    return matchMeanSquarePlusEps(rsqrt.getInput(), eps);
  if (auto r = v.getDefiningOp<ReciprocalOp>())
    return matchRootMeanSquarePlusEps(r.getInput(), eps);
  if (auto div = v.getDefiningOp<DivOp>())
    if (isSplat(div.getLhs(), 1.0))
      return matchRootMeanSquarePlusEps(div.getRhs(), eps);
  return Value();
}

/// Flattens a tree of single-use multiplications rooted at `root` into its
/// factors.
static void collectFactors(Value v, bool isRoot, SmallVectorImpl<Value> &out) {
  auto mul = v.getDefiningOp<MulOp>();
  if (mul && (isRoot || mul->hasOneUse())) {
    collectFactors(mul.getLhs(), false, out);
    collectFactors(mul.getRhs(), false, out);
    return;
  }
  out.push_back(v);
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

namespace {

/// matmul(x, W) or matmul(x, transpose(W)) with W a rank-2 parameter or
/// a view of one as rank 2 (a pointwise Conv1d's weight, imported as a
/// matmul against its [out, in, 1] weight reshaped and transposed).
struct LinearFromMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    Value weight = op.getRhs();
    bool transposed = false;
    if (auto t = weight.getDefiningOp<TransposeOp>()) {
      if (t.getPermutation() != ArrayRef<int64_t>{1, 0})
        return failure();
      weight = t.getInput();
      transposed = true;
    }
    // (A view of a parameter's bytes in another shape: RaiseEinsum.cpp says
    // how it is split and run.)
    if (!MemoryPlan::viewedParameter(weight) ||
        tensorType(weight).getRank() != 2 ||
        tensorType(op.getLhs()).getRank() < 2 ||
        !isa<FloatType>(tensorType(weight).getElementType()))
      return failure();
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getLhs(), weight, Value(),
                                          transposed ? rewriter.getUnitAttr()
                                                     : nullptr);
    return success();
  }
};

/// linear(x, W) + b with b a parameter of shape [N] -> linear(x, W, b).
struct LinearBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto linear = a.getDefiningOp<LinearOp>();
      if (!linear || linear.getBias() || !linear->hasOneUse() || !isParam(b) ||
          linear.getActivation() != LinearActivation::none ||
          linear.getType() != op.getType())
        continue;
      ArrayRef<int64_t> out = linear.getType().getShape();
      if (tensorType(b).getShape() != out.take_back())
        continue;
      rewriter.replaceOpWithNewOp<LinearOp>(op, linear.getInput(),
                                            linear.getWeight(), b,
                                            linear.getTransposeWeightAttr());
      return success();
    }
    return failure();
  }
};

/// gather(W, ids, axis 0) with W a [V, H] parameter -> embedding(W, ids).
struct EmbeddingFromGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getAxis() != 0 || !isParam(op.getInput()) ||
        tensorType(op.getInput()).getRank() != 2 ||
        !isa<FloatType>(tensorType(op.getInput()).getElementType()))
      return failure();
    rewriter.replaceOpWithNewOp<EmbeddingOp>(op, op.getInput(), op.getIndices(),
                                             nullptr, nullptr);
    return success();
  }
};

/// gather(x, [i, i+1, ..., j-1] constant, axis a) -> slice(x, i:j along a),
/// and a reshape when the index is a scalar (the axis goes): list indexing
/// such as Falcon's `fused[..., [-2], :]` is a slice, which partitioning
/// and differentiation see through.
struct SliceFromGather : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    auto constant = op.getIndices().getDefiningOp<ConstantOp>();
    auto values = constant ? dyn_cast<DenseIntElementsAttr>(constant.getValue())
                           : DenseIntElementsAttr();
    if (!values || values.getType().getRank() > 1 || values.empty())
      return failure();
    RankedTensorType input = tensorType(op.getInput());
    int64_t axis = op.getNormalizedAxis(), dim = input.getDimSize(axis);
    // Rows of a [V, H] parameter are an embedding (a position table read
    // with constant ids), which EmbeddingFromGather makes.
    if (axis == 0 && isParam(op.getInput()) && input.getRank() == 2 &&
        isa<FloatType>(input.getElementType()))
      return failure();
    std::optional<int64_t> first;
    int64_t next = 0;
    for (APInt v : values.getValues<APInt>()) {
      int64_t i =
          v.getSExtValue() < 0 ? v.getSExtValue() + dim : v.getSExtValue();
      if (i < 0 || i >= dim || (first && i != next))
        return failure();
      first = first.value_or(i);
      next = i + 1;
    }
    Value slice = SliceOp::create(rewriter, op.getLoc(), op.getInput(), axis,
                                  *first, next);
    slice.getDefiningOp()->setDiscardableAttrs(
        op->getDiscardableAttrDictionary());
    if (slice.getType() != op.getType()) {
      slice = ReshapeOp::create(rewriter, op.getLoc(), op.getType(), slice);
      slice.getDefiningOp()->setDiscardableAttrs(
          op->getDiscardableAttrDictionary());
    }
    rewriter.replaceOp(op, slice);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// layer_norm and rms_norm
//===----------------------------------------------------------------------===//

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) -> layer_norm(x, 1, 0).
struct LayerNormFromDecomposed : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    auto centered = op.getLhs().getDefiningOp<SubOp>();
    if (!centered)
      return failure();
    Value x = centered.getLhs();
    auto mean = centered.getRhs().getDefiningOp<ReduceOp>();
    if (!mean || mean.getInput() != x || !isMeanOverLastDim(mean))
      return failure();
    float eps;
    Value squared = matchRootMeanSquarePlusEps(op.getRhs(), eps);
    if (squared != centered.getResult() || op.getType() != x.getType())
      return failure();
    auto paramType = RankedTensorType::get(tensorType(x).getShape().take_back(),
                                           tensorType(x).getElementType());
    Value one = splatConstant(rewriter, op.getLoc(), paramType, 1.0);
    Value zero = splatConstant(rewriter, op.getLoc(), paramType, 0.0);
    rewriter.replaceOpWithNewOp<LayerNormOp>(op, x, one, zero,
                                             rewriter.getI64IntegerAttr(-1),
                                             rewriter.getF32FloatAttr(eps));
    return success();
  }
};

/// x * (1 / sqrt(mean(x^2) + eps)), x * rsqrt(...), x / sqrt(...)
/// -> rms_norm(x, 1).
struct RMSNormFromDecomposed : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, scale] : {std::pair(op.getLhs(), op.getRhs()),
                            std::pair(op.getRhs(), op.getLhs())}) {
      float eps;
      if (matchInverseRMS(scale, eps) != x || op.getType() != x.getType())
        continue;
      replaceWithRMSNorm(op, x, eps, rewriter);
      return success();
    }
    return failure();
  }
  static void replaceWithRMSNorm(Operation *op, Value x, float eps,
                                 PatternRewriter &rewriter) {
    auto paramType = RankedTensorType::get(tensorType(x).getShape().take_back(),
                                           tensorType(x).getElementType());
    Value one = splatConstant(rewriter, op->getLoc(), paramType, 1.0);
    rewriter.replaceOpWithNewOp<RMSNormOp>(op, x, one,
                                           rewriter.getF32FloatAttr(eps));
  }
};

struct RMSNormFromDiv : OpRewritePattern<DivOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DivOp op,
                                PatternRewriter &rewriter) const override {
    float eps;
    Value x = op.getLhs();
    if (matchRootMeanSquarePlusEps(op.getRhs(), eps) != x ||
        op.getType() != x.getType())
      return failure();
    RMSNormFromDecomposed::replaceWithRMSNorm(op, x, eps, rewriter);
    return success();
  }
};

/// Is `v` a constant splat of `expected`, or a parameter (a norm weight)?
static bool isUnitScale(Value v) { return isSplat(v, 1.0); }
static bool isZeroBias(Value v) {
  std::optional<double> value = splatValue(v);
  return value && *value == 0.0;
}

/// norm(x, 1[, 0]) * w -> norm(x, w[, 0]) for a [H] parameter w.
struct NormScale : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, w] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      if (!isParam(w) || a.getType() != op.getType() || !a.hasOneUse())
        continue;
      ArrayRef<int64_t> hidden = tensorType(a).getShape().take_back();
      if (tensorType(w).getShape() != hidden)
        continue;
      if (auto ln = a.getDefiningOp<LayerNormOp>()) {
        if (!isUnitScale(ln.getScale()) ||
            static_cast<int64_t>(ln.getAxis()) != -1 ||
            (ln.getBias() && !isZeroBias(ln.getBias())))
          continue;
        rewriter.replaceOpWithNewOp<LayerNormOp>(op, ln.getInput(), w,
                                                 ln.getBias(), ln.getAxisAttr(),
                                                 ln.getEpsilonAttr());
        return success();
      }
      if (auto rms = a.getDefiningOp<RMSNormOp>()) {
        if (!isUnitScale(rms.getScale()))
          continue;
        rewriter.replaceOpWithNewOp<RMSNormOp>(op, rms.getInput(), w,
                                               rms.getEpsilonAttr());
        return success();
      }
    }
    return failure();
  }
};

/// layer_norm(x, w, 0) + b -> layer_norm(x, w, b) for a [H] parameter b.
struct LayerNormBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [a, b] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto ln = a.getDefiningOp<LayerNormOp>();
      if (!ln || !ln->hasOneUse() || !isParam(b) ||
          ln.getType() != op.getType() ||
          static_cast<int64_t>(ln.getAxis()) != -1 ||
          (ln.getBias() && !isZeroBias(ln.getBias())))
        continue;
      if (tensorType(b).getShape() != ln.getType().getShape().take_back())
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(op, ln.getInput(), ln.getScale(),
                                               b, ln.getAxisAttr(),
                                               ln.getEpsilonAttr());
      return success();
    }
    return failure();
  }
};

/// `w` ([D]: one part's norm scale or bias) viewed as the part's block of
/// the stacked scales: size 1 but along `axis` (the part's size there) and
/// the last dim.
static Value asPartBlock(PatternRewriter &rewriter, Location loc, Value w,
                         RankedTensorType part, int64_t axis) {
  SmallVector<int64_t> unit(part.getRank(), 1);
  unit.back() = part.getShape().back();
  Value block = ReshapeOp::create(rewriter, loc, tensorType(w).clone(unit), w);
  if (part.getDimSize(axis) == 1)
    return block;
  unit[axis] = part.getDimSize(axis);
  return ExpandOp::create(rewriter, loc, tensorType(w).clone(unit), block);
}

/// A norm per part of a split along some axis, each with its own scale
/// (and bias), the parts concatenated back along that axis (StableLM 2's
/// per-head query and key LayerNorms: `torch.split(x, 1, dim=1)`, an
/// nn.LayerNorm per head in a ModuleList, `torch.cat`) -> one norm of x
/// over its last dim, scaled by the scales stacked along the axis:
///   norm(x, 1) * concat(w_i) [+ concat(b_i)]
/// A value computed from parameters alone, so that tensor parallelism can
/// split the norm by heads (each rank cutting its heads' scales) where a
/// split into the per-head ops cannot be (each op reads another weight).
struct NormPerPart : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op,
                                PatternRewriter &rewriter) const override {
    const int64_t axis = op.getNormalizedAxis(), rank = op.getType().getRank();
    if (axis == rank - 1 || op.getInputs().size() < 2)
      return failure();
    SplitOp split;
    SmallVector<Operation *> norms;
    for (auto [i, part] : llvm::enumerate(op.getInputs())) {
      Operation *norm = part.getDefiningOp();
      auto ln = dyn_cast_or_null<LayerNormOp>(norm);
      auto rms = dyn_cast_or_null<RMSNormOp>(norm);
      if ((!ln && !rms) || !part.hasOneUse() ||
          (ln && ln.getNormalizedAxis() != rank - 1) ||
          (!norms.empty() &&
           (norm->getName() != norms[0]->getName() ||
            norm->getNumOperands() != norms[0]->getNumOperands() ||
            norm->getAttrDictionary() != norms[0]->getAttrDictionary())))
        return failure();
      auto result = dyn_cast<OpResult>(norm->getOperand(0));
      auto from = norm->getOperand(0).getDefiningOp<SplitOp>();
      if (!from || (split && from != split) || result.getResultNumber() != i ||
          !result.hasOneUse())
        return failure();
      split = from;
      norms.push_back(norm);
    }
    if (split.getNumResults() != norms.size() ||
        split.getNormalizedAxis() != axis ||
        split.getInput().getType() != op.getType())
      return failure();
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    auto scalarType = RankedTensorType::get(type.getShape().take_back(),
                                            type.getElementType());
    Value ones = ConstantOp::create(
        rewriter, loc,
        DenseElementsAttr::get(
            scalarType, rewriter.getFloatAttr(type.getElementType(), 1.0)));
    Value normed;
    if (auto ln = dyn_cast<LayerNormOp>(norms[0]))
      normed =
          LayerNormOp::create(rewriter, loc, split.getInput(), ones, Value(),
                              ln.getAxisAttr(), ln.getEpsilonAttr());
    else
      normed = RMSNormOp::create(rewriter, loc, split.getInput(), ones,
                                 cast<RMSNormOp>(norms[0]).getEpsilonAttr());
    // The scales (operand 1), then the biases (operand 2), stacked.
    Value result = normed;
    for (unsigned operand = 1; operand < norms[0]->getNumOperands();
         ++operand) {
      SmallVector<Value> blocks;
      for (auto [norm, part] : llvm::zip(norms, split.getResults()))
        blocks.push_back(asPartBlock(rewriter, loc, norm->getOperand(operand),
                                     tensorType(part), axis));
      Value stacked = ConcatOp::create(rewriter, loc, blocks,
                                       rewriter.getI64IntegerAttr(axis));
      result = operand == 1
                   ? Value(MulOp::create(rewriter, loc, type, result, stacked))
                   : Value(AddOp::create(rewriter, loc, type, result, stacked));
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// Removes the first factor satisfying `pred` from `factors`.
static Value takeFactor(SmallVectorImpl<Value> &factors,
                        llvm::function_ref<bool(Value)> pred) {
  for (auto *it = factors.begin(); it != factors.end(); ++it)
    if (pred(*it)) {
      Value v = *it;
      factors.erase(it);
      return v;
    }
  return Value();
}

/// Matches 1 + f where f satisfies `inner`.
static bool matchOnePlus(Value v, llvm::function_ref<bool(Value)> inner) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return false;
  return (isSplat(add.getLhs(), 1.0) && inner(add.getRhs())) ||
         (isSplat(add.getRhs(), 1.0) && inner(add.getLhs()));
}

/// A polynomial in one value x, degree -> coefficient (degrees up to 4).
using Polynomial = std::map<int, double>;

/// `v` as a polynomial in `x`, when it is one: built from x and constants by
/// add, sub, mul, div by a constant, neg and pow by a small whole number, in
/// any association (so x*x*x, x*(x*x) and pow(x, 3) are all x^3).
static std::optional<Polynomial> polynomialIn(Value v, Value x, int depth = 0) {
  if (v == x)
    return Polynomial{{1, 1.0}};
  if (std::optional<double> c = splatValue(v))
    return Polynomial{{0, *c}};
  Operation *op = v.getDefiningOp();
  if (!op || depth > 12)
    return std::nullopt;
  auto operand = [&](int i) {
    return polynomialIn(op->getOperand(i), x, depth + 1);
  };
  auto combine = [](Polynomial a, const Polynomial &b, double sign) {
    for (auto [d, c] : b)
      a[d] += sign * c;
    return a;
  };
  auto multiply = [](const Polynomial &a,
                     const Polynomial &b) -> std::optional<Polynomial> {
    Polynomial r;
    for (auto [da, ca] : a)
      for (auto [db, cb] : b) {
        if (da + db > 4)
          return std::nullopt;
        r[da + db] += ca * cb;
      }
    return r;
  };
  if (isa<AddOp, SubOp, MulOp>(op)) {
    std::optional<Polynomial> a = operand(0), b = operand(1);
    if (!a || !b)
      return std::nullopt;
    if (isa<MulOp>(op))
      return multiply(*a, *b);
    return combine(*a, *b, isa<AddOp>(op) ? 1.0 : -1.0);
  }
  if (auto div = dyn_cast<DivOp>(op)) {
    std::optional<double> c = splatValue(div.getRhs());
    std::optional<Polynomial> a = operand(0);
    if (!c || *c == 0 || !a)
      return std::nullopt;
    return combine(Polynomial(), *a, 1.0 / *c);
  }
  if (isa<NegOp>(op)) {
    std::optional<Polynomial> a = operand(0);
    return a ? std::optional(combine(Polynomial(), *a, -1.0)) : std::nullopt;
  }
  if (auto pow = dyn_cast<PowOp>(op)) {
    std::optional<double> e = splatValue(pow.getRhs());
    std::optional<Polynomial> a = operand(0);
    if (!e || !a || *e < 1 || *e > 4 || *e != std::floor(*e))
      return std::nullopt;
    Polynomial r = *a;
    for (int k = 1; k < static_cast<int>(*e); ++k) {
      std::optional<Polynomial> next = multiply(r, *a);
      if (!next)
        return std::nullopt;
      r = *next;
    }
    return r;
  }
  return std::nullopt;
}

/// Whether `p` is exactly `expected` (relative 1e-4 per coefficient).
static bool isPolynomial(const Polynomial &p, const Polynomial &expected) {
  for (int d = 0; d <= 4; ++d) {
    double want = expected.count(d) ? expected.at(d) : 0.0;
    double got = p.count(d) ? p.at(d) : 0.0;
    if (std::fabs(got - want) > 1e-4 * std::max(std::fabs(want), 1e-3))
      return false;
  }
  return true;
}

/// erf(x / sqrt 2), in any spelling of its argument.
static bool isErfOf(Value v, Value x) {
  auto erf = v.getDefiningOp<ErfOp>();
  std::optional<Polynomial> p =
      erf ? polynomialIn(erf.getInput(), x) : std::nullopt;
  return p && isPolynomial(*p, {{1, M_SQRT1_2}});
}

/// tanh(sqrt(2/pi) (x + 0.044715 x^3)), in any spelling of its argument
/// (x^3 as pow, x*x*x or x*(x*x); the constant distributed or factored
/// out, as in sqrt(2/pi) x (1 + 0.044715 x x)).
static bool isTanhOf(Value v, Value x) {
  auto tanh = v.getDefiningOp<TanhOp>();
  std::optional<Polynomial> p =
      tanh ? polynomialIn(tanh.getInput(), x) : std::nullopt;
  const double k = std::sqrt(2.0 / M_PI);
  return p && isPolynomial(*p, {{1, k}, {3, k * 0.044715}});
}

/// 0.5 * x * (1 + erf(x / sqrt 2)) and the tanh form, in any association
/// of the product and any spelling of the erf or tanh argument.
struct GeluFromDecomposed : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(op.getResult(), /*isRoot=*/true, factors);
    if (factors.size() != 3)
      return failure();
    if (!takeFactor(factors, [](Value v) { return isSplat(v, 0.5); }))
      return failure();
    for (auto [x, gate] : {std::pair(factors[0], factors[1]),
                           std::pair(factors[1], factors[0])}) {
      if (x.getType() != op.getType())
        continue;
      for (GeluApproximation form :
           {GeluApproximation::none, GeluApproximation::tanh}) {
        bool isGate = matchOnePlus(gate, [&](Value f) {
          return form == GeluApproximation::none ? isErfOf(f, x)
                                                 : isTanhOf(f, x);
        });
        if (!isGate)
          continue;
        rewriter.replaceOpWithNewOp<GeluOp>(op, x, form);
        return success();
      }
    }
    return failure();
  }
};

/// x * sigmoid(x) -> silu(x).
struct SiluFromDecomposed : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(op.getLhs(), op.getRhs()),
                        std::pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = s.getDefiningOp<SigmoidOp>();
      if (sigmoid && sigmoid.getInput() == x && x.getType() == op.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(op, x);
        return success();
      }
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct RaisePass : public mp::impl::MPRaiseBase<RaisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    patterns
        .add<LinearFromMatmul, LinearBias, EmbeddingFromGather, SliceFromGather,
             LayerNormFromDecomposed, RMSNormFromDecomposed, RMSNormFromDiv,
             NormScale, LayerNormBias, NormPerPart, GeluFromDecomposed,
             SiluFromDecomposed>(ctx);
    populateRaiseEinsumPatterns(patterns);
    populateRaiseAttentionPatterns(patterns);
    FrozenRewritePatternSet raise(std::move(patterns));
    RewritePatternSet sinkPatterns(ctx);
    populateSinkLeadingMergePatterns(sinkPatterns);
    populateUnmergeHeadRowsPatterns(sinkPatterns);
    FrozenRewritePatternSet sink(std::move(sinkPatterns));
    // Norms and linears are raised before merged batch dimensions are
    // sunk (a merge sunk through half of a decomposed norm would hide it),
    // attention after.
    // The sinking patterns move shape ops both down and up; should two of
    // them ever undo each other, a bound on the rewrites (far above what a
    // model needs: a few per op) turns the cycle into an error.
    int64_t ops = 0;
    getOperation()->walk([&](Operation *) { ++ops; });
    GreedyRewriteConfig sinkConfig;
    sinkConfig.setMaxNumRewrites(64 * ops + 1024);
    bool unmerged = false;
    unstackExpertWeights(getOperation());
    if (failed(applyPatternsGreedily(getOperation(), raise)) ||
        failed(applyPatternsGreedily(getOperation(), sink, sinkConfig,
                                     &unmerged)) ||
        (unmerged && failed(applyPatternsGreedily(getOperation(), raise)))) {
      getOperation().emitError("mp-raise did not converge");
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      tagLayers(func);
  }
};

} // namespace
