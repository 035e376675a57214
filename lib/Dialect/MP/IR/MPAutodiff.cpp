//===- MPAutodiff.cpp - the derivative rule of each mp op -----------------===//
//
// AutodiffOpInterface::buildAdjoints for every differentiable op: how the
// gradient of the loss flows from an op's results to its operands. Rules
// compose forward ops where that costs nothing extra (elementwise math,
// reductions over broadcast dims, shape ops) and build a gradient op
// (MPGradOps.cpp) where composing would be slow or store what the forward
// does not (norms, attention, embedding, cross-entropy, linear weights).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"

#include "OpHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mp;
using mp::detail::tensorType;

namespace {

/// The parameters not frozen (mp-freeze) that `v` is computed from, in the
/// order met.
SmallVector<StringRef> trainedParamsFeeding(Value v) {
  SmallVector<StringRef> names;
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (auto read = dyn_cast<GetParamOp>(def)) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          read, read.getNameAttr());
      if (param && !param->hasAttr(MPDialect::getFrozenAttrName()) &&
          !llvm::is_contained(names, param.getSymName()))
        names.push_back(param.getSymName());
      continue;
    }
    llvm::append_range(work, def->getOperands());
  }
  return names;
}

/// Builds adjoint arithmetic at one location.
struct Grad {
  OpBuilder &b;
  Location loc;

  /// A scalar (rank-0) constant of `like`'s element type.
  Value scalar(Value like, double value) {
    auto type = RankedTensorType::get({}, getElementTypeOrSelf(like));
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               FloatAttr::get(type.getElementType(), value)));
  }
  Value zerosOf(RankedTensorType type) {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type,
                               FloatAttr::get(type.getElementType(), 0.0)));
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value mul(Value x, double c) { return mul(x, scalar(x, c)); }
  Value reshape(Value x, Type type) {
    return x.getType() == type ? x : ReshapeOp::create(b, loc, type, x);
  }

  /// The gradient of an operand of type `type` that was broadcast to
  /// `grad`'s shape: `grad` summed over the broadcast dims.
  Value sumTo(Value grad, Type type) {
    auto target = cast<RankedTensorType>(type);
    ArrayRef<int64_t> from = tensorType(grad).getShape();
    ArrayRef<int64_t> to = target.getShape();
    int64_t lead = static_cast<int64_t>(from.size() - to.size());
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i)
      if (i < lead || (to[i - lead] == 1 && from[i] != 1))
        axes.push_back(i);
    if (!axes.empty())
      grad = ReduceOp::create(b, loc, ReduceKind::sum, grad, axes,
                              /*keepdims=*/true);
    return reshape(grad, target);
  }

  /// `x` permuted by `perm`, or `x` itself when `perm` is the identity.
  Value permute(Value x, ArrayRef<int64_t> perm) {
    for (auto [i, p] : llvm::enumerate(perm))
      if (p != static_cast<int64_t>(i))
        return TransposeOp::create(b, loc, x, perm);
    return x;
  }

  /// `x` with its last two dims swapped.
  Value transposeLastTwo(Value x) {
    int64_t rank = tensorType(x).getRank();
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return TransposeOp::create(b, loc, x, perm);
  }

  /// `g` (of a reduction's result) spread back over `input`'s shape.
  Value unreduce(Value g, ReduceOp op) {
    SmallVector<int64_t> kept(tensorType(op.getInput()).getShape());
    for (int64_t axis : op.getAxes())
      kept[axis < 0 ? axis + kept.size() : axis] = 1;
    auto keptType =
        RankedTensorType::get(kept, getElementTypeOrSelf(g.getType()));
    return ExpandOp::create(b, loc, op.getInput().getType(),
                            reshape(g, keptType));
  }
};

/// The rule of a one-operand elementwise op: `derivative(grad)` is the
/// operand's adjoint (it is built only when needed).
template <class Op>
LogicalResult unaryRule(Op op, OpBuilder &b, ArrayRef<Value> results,
                        ArrayRef<bool> needed, SmallVectorImpl<Value> &operands,
                        function_ref<Value(Grad &, Value)> derivative) {
  operands.assign(1, Value());
  if (!needed[0] || !results[0])
    return success();
  Grad g{b, op.getLoc()};
  operands[0] = derivative(g, results[0]);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define MP_UNARY_RULE(OP, BODY)                                                \
  LogicalResult OP::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,       \
                                  ArrayRef<bool> needed,                       \
                                  SmallVectorImpl<Value> &operands) {          \
    Value x = getInput(), y = getResult();                                     \
    (void)x;                                                                   \
    (void)y;                                                                   \
    return unaryRule(*this, b, results, needed, operands,                      \
                     [&](Grad &g, Value dy) -> Value { BODY });                \
  }

MP_UNARY_RULE(NegOp, return g.neg(dy);)
MP_UNARY_RULE(ExpOp, return g.mul(dy, y);)
MP_UNARY_RULE(LogOp, return g.div(dy, x);)
// d sqrt(x) = 1 / (2 sqrt(x))
MP_UNARY_RULE(SqrtOp, return g.div(g.mul(dy, 0.5), y);)
// d x^-1/2 = -x^-3/2 / 2 = -y³ / 2
MP_UNARY_RULE(RsqrtOp, return g.mul(g.mul(dy, g.mul(y, g.mul(y, y))), -0.5);)
MP_UNARY_RULE(ReciprocalOp, return g.neg(g.mul(dy, g.mul(y, y)));)
MP_UNARY_RULE(TanhOp, return g.mul(dy, g.sub(g.scalar(y, 1.0), g.mul(y, y)));)
// d erf(x) = 2/√π · exp(-x²)
MP_UNARY_RULE(ErfOp, {
  Value e = ExpOp::create(g.b, g.loc, g.neg(g.mul(x, x)));
  return g.mul(g.mul(dy, e), 2.0 / std::sqrt(M_PI));
})
MP_UNARY_RULE(SigmoidOp,
              return g.mul(dy, g.mul(y, g.sub(g.scalar(y, 1.0), y)));)
MP_UNARY_RULE(ReluOp, {
  Value positive =
      CompareOp::create(g.b, g.loc, ComparePredicate::gt, y, g.scalar(y, 0.0));
  return WhereOp::create(g.b, g.loc, positive, dy, g.scalar(dy, 0.0));
})
// d x·σ(x) = σ(x) · (1 + x · (1 − σ(x)))
MP_UNARY_RULE(SiluOp, {
  Value s = SigmoidOp::create(g.b, g.loc, x);
  Value inner = g.add(g.scalar(x, 1.0), g.mul(x, g.sub(g.scalar(s, 1.0), s)));
  return g.mul(dy, g.mul(s, inner));
})
MP_UNARY_RULE(CosOp,
              return g.neg(g.mul(dy,
                                 SinOp::create(g.b, g.loc, x).getResult()));)
MP_UNARY_RULE(SinOp,
              return g.mul(dy, CosOp::create(g.b, g.loc, x).getResult());)
MP_UNARY_RULE(GeluOp,
              return GeluGradOp::create(g.b, g.loc, x, dy, getApproximate());)
// An active dropout's gradient is the same mask (the same stream) applied to
// the result's gradient; an inactive one is the identity.
MP_UNARY_RULE(DropoutOp, {
  if (!getSeedId())
    return dy;
  return DropoutOp::create(g.b, g.loc, dy.getType(), dy, getRatioAttr(),
                           getSeedIdAttr(), getRankStreamAttr());
})
MP_UNARY_RULE(CastOp, return CastOp::create(g.b, g.loc, x.getType(), dy);)
#undef MP_UNARY_RULE

/// The rule of a broadcasting binary op: `lhsGrad` and `rhsGrad` give the
/// adjoints in the result's shape, summed back to each operand's.
template <class Op>
static LogicalResult binaryRule(Op op, OpBuilder &b, ArrayRef<Value> results,
                                ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &operands,
                                function_ref<Value(Grad &, Value)> lhsGrad,
                                function_ref<Value(Grad &, Value)> rhsGrad) {
  operands.assign(2, Value());
  if (!results[0])
    return success();
  Grad g{b, op.getLoc()};
  if (needed[0])
    operands[0] = g.sumTo(lhsGrad(g, results[0]), op.getLhs().getType());
  if (needed[1])
    operands[1] = g.sumTo(rhsGrad(g, results[0]), op.getRhs().getType());
  return success();
}

#define MP_BINARY_RULE(OP, LHS, RHS)                                           \
  LogicalResult OP::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,       \
                                  ArrayRef<bool> needed,                       \
                                  SmallVectorImpl<Value> &operands) {          \
    Value x = getLhs(), w = getRhs(), y = getResult();                         \
    (void)x;                                                                   \
    (void)w;                                                                   \
    (void)y;                                                                   \
    return binaryRule(                                                         \
        *this, b, results, needed, operands,                                   \
        [&](Grad &g, Value dy) -> Value { LHS }, /**/                          \
        [&](Grad &g, Value dy) -> Value { RHS });                              \
  }

MP_BINARY_RULE(AddOp, return dy;, return dy;)
MP_BINARY_RULE(SubOp, return dy;, return g.neg(dy);)
MP_BINARY_RULE(MulOp, return g.mul(dy, w);, return g.mul(dy, x);)
// d(x / w)/dw = -x / w² = -y / w
MP_BINARY_RULE(DivOp, return g.div(dy, w);
               , return g.neg(g.div(g.mul(dy, y), w));)
// d x^w/dx = w·x^(w-1), d x^w/dw = y·log(x)
MP_BINARY_RULE(
    PowOp,
    {
      Value lower = PowOp::create(g.b, g.loc, x, g.sub(w, g.scalar(w, 1.0)));
      return g.mul(dy, g.mul(w, lower));
    },
    return g.mul(dy, g.mul(y, LogOp::create(g.b, g.loc, x).getResult()));)
#undef MP_BINARY_RULE

LogicalResult WhereOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &operands) {
  operands.assign(3, Value());
  if (!results[0])
    return success();
  Grad g{b, getLoc()};
  Value zero = g.scalar(results[0], 0.0);
  if (needed[1])
    operands[1] =
        g.sumTo(WhereOp::create(b, getLoc(), getCondition(), results[0], zero),
                getOnTrue().getType());
  if (needed[2])
    operands[2] =
        g.sumTo(WhereOp::create(b, getLoc(), getCondition(), zero, results[0]),
                getOnFalse().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (!results[0])
    return success();
  if (tensorType(getLhs()).getRank() < 2 || tensorType(getRhs()).getRank() < 2)
    return emitOpError() << "has no derivative rule for rank-1 operands";
  Grad g{b, getLoc()};
  // C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC, summed over broadcast batch dims.
  if (needed[0])
    operands[0] = g.sumTo(
        MatmulOp::create(b, getLoc(), results[0], g.transposeLastTwo(getRhs())),
        getLhs().getType());
  if (needed[1])
    operands[1] = g.sumTo(
        MatmulOp::create(b, getLoc(), g.transposeLastTwo(getLhs()), results[0]),
        getRhs().getType());
  return success();
}

namespace {
/// An einsum equation spelled with letters only: the parsed spec's labels
/// (ellipsis dims are the digits '0'..'9') each mapped to a letter; `ok`
/// is false when the equation leaves too few letters unused.
struct EinsumSpelling {
  std::map<char, char> letterOf;
  bool ok = true;

  explicit EinsumSpelling(const EinsumSpec &spec) {
    std::string used = spec.output;
    for (const std::string &term : spec.inputs)
      used += term;
    std::string spare;
    for (char c = 'a'; c <= 'z'; ++c)
      spare += c;
    for (char c = 'A'; c <= 'Z'; ++c)
      spare += c;
    llvm::erase_if(spare, [&](char c) { return used.find(c) != used.npos; });
    size_t nextSpare = 0;
    for (char c : used) {
      if (letterOf.count(c))
        continue;
      if (std::isalpha(static_cast<unsigned char>(c)))
        letterOf[c] = c;
      else if (nextSpare < spare.size())
        letterOf[c] = spare[nextSpare++];
      else
        ok = false;
    }
  }
  std::string spell(const std::string &labels) const {
    std::string out;
    for (char c : labels)
      out += letterOf.at(c);
    return out;
  }
};

/// Whether some label of `spec` has two sizes (an ellipsis dim of size 1
/// broadcast against n), given the operands' shapes and the result's:
/// spelled with letters, every dim of a label must have one size.
bool einsumBroadcasts(const EinsumSpec &spec, const std::vector<Shape> &shapes,
                      const Shape &result) {
  std::map<char, int64_t> sizes;
  auto sameSizes = [&](const std::string &labels, const Shape &shape) {
    for (size_t d = 0; d < labels.size(); ++d)
      if (sizes.emplace(labels[d], shape[d]).first->second != shape[d])
        return false;
    return true;
  };
  bool same = sameSizes(spec.output, result);
  for (size_t k = 0; k < spec.inputs.size() && same; ++k)
    same = sameSizes(spec.inputs[k], shapes[k]);
  return !same;
}

/// Why operand `j` of `spec` has no einsum for its gradient, or "".
std::string einsumGradBlocker(const EinsumSpec &spec, size_t j) {
  const std::string &mine = spec.inputs[j];
  for (size_t d = 0; d < mine.size(); ++d) {
    char label = mine[d];
    if (mine.find(label) != d)
      return "a label repeats in operand " + std::to_string(j) +
             " (a diagonal)";
    bool elsewhere = spec.output.find(label) != std::string::npos;
    for (size_t k = 0; k < spec.inputs.size(); ++k)
      elsewhere = elsewhere ||
                  (k != j && spec.inputs[k].find(label) != std::string::npos);
    if (!elsewhere)
      return "operand " + std::to_string(j) +
             " has a dim that only it holds, summed over";
  }
  return "";
}
} // namespace

LogicalResult EinsumOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (!results[0])
    return success();
  std::vector<Shape> shapes;
  std::vector<int64_t> ranks;
  for (Value input : getInputs()) {
    shapes.push_back(tensorType(input).getShape().vec());
    ranks.push_back(tensorType(input).getRank());
  }
  EinsumSpec spec;
  std::string error;
  if (!parseEinsum(getEquation().str(), ranks, spec, error))
    return emitOpError() << error;
  EinsumSpelling spelling(spec);
  if (!spelling.ok)
    return emitOpError() << "has no derivative rule for '" << getEquation()
                         << "': too many labels to spell its ellipsis dims "
                            "with letters";
  const bool broadcasts =
      einsumBroadcasts(spec, shapes, tensorType(getResult()).getShape().vec());
  // An operand's gradient is the einsum of the result's gradient with the
  // other operands, onto the operand's labels: each of its labels is in
  // the result or another operand, and no dim is broadcast.
  for (size_t j = 0; j < spec.inputs.size(); ++j) {
    if (!needed[j])
      continue;
    std::string blocker = einsumGradBlocker(spec, j);
    if (blocker.empty() && broadcasts)
      blocker = "an ellipsis dim is broadcast (size 1 against another)";
    if (!blocker.empty())
      return emitOpError() << "has no derivative rule for '" << getEquation()
                           << "': " << blocker;
    SmallVector<Value> inputs{results[0]};
    std::string equation = spelling.spell(spec.output);
    for (size_t k = 0; k < spec.inputs.size(); ++k)
      if (k != j) {
        inputs.push_back(getInputs()[k]);
        equation += "," + spelling.spell(spec.inputs[k]);
      }
    equation += "->" + spelling.spell(spec.inputs[j]);
    operands[j] =
        EinsumOp::create(b, getLoc(), inputs, b.getStringAttr(equation));
  }
  return success();
}

LogicalResult LinearOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value dy = results[0];
  if (!dy)
    return success();
  if (getActivation() != LinearActivation::none)
    return emitOpError("has a fused activation (mp-fuse-epilogues runs after "
                       "mp-autodiff, not before)");
  Grad g{b, getLoc()};
  // y = x·W: dx = dy·Wᵀ (a linear reading W the other way round).
  if (needed[0])
    operands[0] = LinearOp::create(b, getLoc(), dy, getWeight(), Value(),
                                   !getTransposeWeight());
  if (needed[1])
    operands[1] =
        LinearWeightGradOp::create(b, getLoc(), getWeight().getType(),
                                   getInput(), dy, getTransposeWeight());
  if (getBias() && needed[2])
    operands[2] = g.sumTo(dy, getBias().getType());
  return success();
}

LogicalResult LayerNormOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                         ArrayRef<bool> needed,
                                         SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  Value dy = results[0];
  if (!dy)
    return success();
  if (needed[0] || needed[1]) {
    auto grad = LayerNormGradOp::create(
        b, getLoc(), getInput(), getScale(), dy,
        b.getI64IntegerAttr(getNormalizedAxis()), getEpsilonAttr());
    operands[0] = needed[0] ? grad.getInputGrad() : Value();
    operands[1] = needed[1] ? grad.getScaleGrad() : Value();
  }
  if (getBias() && needed[2])
    operands[2] = Grad{b, getLoc()}.sumTo(dy, getBias().getType());
  return success();
}

LogicalResult RMSNormOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (!results[0] || (!needed[0] && !needed[1]))
    return success();
  auto grad = RMSNormGradOp::create(b, getLoc(), getInput(), getScale(),
                                    results[0], getEpsilonAttr());
  operands[0] = needed[0] ? grad.getInputGrad() : Value();
  operands[1] = needed[1] ? grad.getScaleGrad() : Value();
  return success();
}

// y = softmax(x): dx = y · (dy − Σ dy·y) along the axis.
LogicalResult SoftmaxOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (!results[0] || !needed[0])
    return success();
  Grad g{b, getLoc()};
  Value y = getResult();
  Value dot = ReduceOp::create(b, getLoc(), ReduceKind::sum,
                               g.mul(results[0], y), {getNormalizedAxis()},
                               /*keepdims=*/true);
  operands[0] = g.mul(y, g.sub(results[0], dot));
  return success();
}

LogicalResult ReduceOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (!results[0] || !needed[0])
    return success();
  Grad g{b, getLoc()};
  Value spread = g.unreduce(results[0], *this);
  switch (getKind()) {
  case ReduceKind::sum: operands[0] = spread; break;
  case ReduceKind::mean: {
    int64_t count = 1;
    ArrayRef<int64_t> shape = tensorType(getInput()).getShape();
    for (int64_t axis : getAxes())
      count *= shape[axis < 0 ? axis + shape.size() : axis];
    operands[0] = g.mul(spread, 1.0 / static_cast<double>(count));
    break;
  }
  case ReduceKind::max:
  case ReduceKind::min: {
    // The gradient goes to every element equal to the extreme (ties share
    // it whole, not split as PyTorch's amax does).
    Value extreme = g.unreduce(getResult(), *this);
    Value hit = CompareOp::create(b, getLoc(), ComparePredicate::eq, getInput(),
                                  extreme);
    operands[0] =
        WhereOp::create(b, getLoc(), hit, spread, g.scalar(spread, 0.0));
    break;
  }
  }
  return success();
}

LogicalResult AttentionOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                         ArrayRef<bool> needed,
                                         SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (!results[0])
    return success();
  if (getMask() && needed[3]) {
    InFlightDiagnostic diag = emitOpError()
                              << "has no derivative rule for a mask that "
                                 "depends on parameters";
    SmallVector<StringRef> params = trainedParamsFeeding(getMask());
    if (!params.empty()) {
      diag << " (";
      llvm::interleaveComma(params, diag,
                            [&](StringRef p) { diag << "'" << p << "'"; });
      diag << (params.size() == 1 ? "); if it is a buffer"
                                  : "); if they are buffers")
           << ", which PyTorch does not train (ALiBi slopes, a mask "
              "exported folded), freeze "
           << (params.size() == 1 ? "it" : "them")
           << ": --mp-freeze=\"params=" << llvm::join(params, ",") << "\"";
    }
    return diag;
  }
  if (!needed[0] && !needed[1] && !needed[2])
    return success();
  auto grad = AttentionGradOp::create(
      b, getLoc(), getQuery(), getKey(), getValue(), getResult(), results[0],
      getMask(), getScaleAttr(), getCausalAttr());
  for (int i = 0; i < 3; ++i)
    operands[i] = needed[i] ? grad->getResult(i) : Value();
  return success();
}

LogicalResult EmbeddingOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                         ArrayRef<bool> needed,
                                         SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (results[0] && needed[0])
    operands[0] =
        EmbeddingGradOp::create(b, getLoc(), getTable().getType(), getIndices(),
                                results[0], getGridAttr(), getVocabAttr());
  return success();
}

LogicalResult GatherOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (!results[0] || !needed[0])
    return success();
  // A gather along `axis` is an embedding lookup in the data viewed as a
  // table [data[axis], the other dims]: its adjoint is that table's
  // gradient (rows summed by index), viewed back.
  Grad g{b, getLoc()};
  RankedTensorType data = tensorType(getInput());
  const int64_t axis = getNormalizedAxis(), rank = data.getRank();
  const int64_t idxRank = tensorType(getIndices()).getRank();
  SmallVector<int64_t> axisFirst = {axis}; // a data permutation
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      axisFirst.push_back(d);
  // The result's dims: data[:axis], indices, data[axis+1:]; the indices'
  // first, then the others in order.
  SmallVector<int64_t> indicesFirst;
  for (int64_t d = 0; d < idxRank; ++d)
    indicesFirst.push_back(axis + d);
  for (int64_t d = 0; d < axis; ++d)
    indicesFirst.push_back(d);
  for (int64_t d = axis + idxRank; d < rank - 1 + idxRank; ++d)
    indicesFirst.push_back(d);
  int64_t others = data.getNumElements() / data.getDimSize(axis);
  SmallVector<int64_t> rowsShape(tensorType(getIndices()).getShape());
  rowsShape.push_back(others);
  Value rows =
      g.reshape(g.permute(results[0], indicesFirst), data.clone(rowsShape));
  Value table = EmbeddingGradOp::create(
      b, getLoc(), data.clone({data.getDimSize(axis), others}), getIndices(),
      rows, FlatSymbolRefAttr(), IntegerAttr());
  SmallVector<int64_t> permutedShape;
  for (int64_t d : axisFirst)
    permutedShape.push_back(data.getDimSize(d));
  SmallVector<int64_t> inverse(rank);
  for (auto [i, d] : llvm::enumerate(axisFirst))
    inverse[d] = static_cast<int64_t>(i);
  operands[0] = g.permute(g.reshape(table, data.clone(permutedShape)), inverse);
  return success();
}

LogicalResult CrossEntropyOp::buildAdjoints(OpBuilder &b,
                                            ArrayRef<Value> results,
                                            ArrayRef<bool> needed,
                                            SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (!results[0] || !needed[0])
    return success();
  Value lossGrad = results[0];
  // The loss may be kept in fp32 under a bf16 program.
  if (getElementTypeOrSelf(lossGrad) != getElementTypeOrSelf(getLogits()))
    lossGrad = CastOp::create(
        b, getLoc(),
        RankedTensorType::get({}, getElementTypeOrSelf(getLogits())), lossGrad);
  operands[0] = CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                           getLogits(), getTargets(), lossGrad);
  return success();
}

// The backward reads the forward's log-sum-exp: no communication.
LogicalResult VocabParallelCrossEntropyOp::buildAdjoints(
    OpBuilder &b, ArrayRef<Value> results, ArrayRef<bool> needed,
    SmallVectorImpl<Value> &operands) {
  operands.assign(2, Value());
  if (!results[0] || !needed[0])
    return success();
  operands[0] = VocabParallelCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getTargets(),
      getLogsumexp(), results[0], getGridAttr(), getVocabAttr());
  return success();
}

LogicalResult TriluOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (results[0] && needed[0])
    operands[0] = TriluOp::create(b, getLoc(), results[0], getUpperAttr(),
                                  getDiagonalAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (results[0] && needed[0])
    operands[0] = Grad{b, getLoc()}.reshape(results[0], getInput().getType());
  return success();
}

LogicalResult TransposeOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                         ArrayRef<bool> needed,
                                         SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (!results[0] || !needed[0])
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  operands[0] = TransposeOp::create(b, getLoc(), results[0], inverse);
  return success();
}

LogicalResult SliceOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (results[0] && needed[0])
    operands[0] =
        SliceGradOp::create(b, getLoc(), getInput().getType(), results[0],
                            getStarts(), getLimits(), getStrides());
  return success();
}

// Each input's adjoint is its slice of the result's.
LogicalResult ConcatOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(getNumOperands(), Value());
  if (!results[0])
    return success();
  int64_t axis = getNormalizedAxis();
  ArrayRef<int64_t> shape = tensorType(getResult()).getShape();
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = tensorType(input).getDimSize(axis);
    if (needed[i]) {
      SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
          strides(shape.size(), 1);
      starts[axis] = offset;
      limits[axis] = offset + size;
      operands[i] =
          SliceOp::create(b, getLoc(), results[0], starts, limits, strides);
    }
    offset += size;
  }
  return success();
}

// The input's adjoint is the results' adjoints side by side (zeros for a
// result that does not reach the loss).
LogicalResult SplitOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (!needed[0])
    return success();
  Grad g{b, getLoc()};
  SmallVector<Value> parts;
  for (auto [result, adjoint] : llvm::zip(getResults(), results))
    parts.push_back(adjoint ? adjoint : g.zerosOf(tensorType(result)));
  operands[0] =
      ConcatOp::create(b, getLoc(), getInput().getType(), parts, getAxisAttr());
  return success();
}

LogicalResult ExpandOp::buildAdjoints(OpBuilder &b, ArrayRef<Value> results,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &operands) {
  operands.assign(1, Value());
  if (results[0] && needed[0])
    operands[0] = Grad{b, getLoc()}.sumTo(results[0], getInput().getType());
  return success();
}
