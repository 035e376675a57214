//===- ImportTransformer.cpp - compute-heavy ONNX ops -> mp ---------------===//
//
// The emit functions of the ops a transformer spends its time in: MatMul and
// Gemm, Softmax, LayerNormalization, the reductions, Einsum and Trilu (the
// causal mask). Each checks the node against the op's shape rule
// (mp/Support/Shape.h, Einsum.h) and lets the mp op infer its result type;
// mp-raise later turns these into the named transformer ops.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "mp/Support/Einsum.h"
#include "mp/Support/Shape.h"

#include <algorithm>

#include <cmath>

using namespace mlir;

namespace mp::onnx_import {

LogicalResult emitMatMul(NodeEmitter &e) {
  Value a = e.value(0), b = e.value(1);
  if (!a || !b)
    return failure();
  Shape shape;
  std::string error;
  if (!shape::matmul(e.shape(0), e.shape(1), shape, error))
    return e.error() << error;
  e.setOutput(0, MatmulOp::create(e.b(), e.loc, a, b));
  return success();
}

static Value transpose2D(NodeEmitter &e, Value v) {
  return TransposeOp::create(e.b(), e.loc, v,
                             e.b().getDenseI64ArrayAttr({1, 0}));
}

/// Gemm: alpha·A'·B' + beta·C as transpose/matmul/mul/add (mp-raise turns
/// the weight forms into mp.linear).
LogicalResult emitGemm(NodeEmitter &e) {
  Value a = e.value(0), b = e.value(1);
  if (!a || !b)
    return failure();
  if (e.type(0).getRank() != 2 || e.type(1).getRank() != 2)
    return e.error() << "Gemm operands must have rank 2";
  if (intAttr(e.node, "transA", 0))
    a = transpose2D(e, a);
  if (intAttr(e.node, "transB", 0))
    b = transpose2D(e, b);
  Shape shape;
  std::string error;
  if (!shape::matmul(shapeOf(a), shapeOf(b), shape, error))
    return e.error() << error;
  Type elem = e.type(0).getElementType();
  // alpha and beta scale in the operands' type: integers take whole factors.
  for (const char *factor : {"alpha", "beta"})
    if (const auto *f = findAttr(e.node, factor);
        f && isa<IntegerType>(elem) && f->f() != std::trunc(f->f()))
      return e.error() << factor << " " << f->f()
                       << " is not a whole number, as integer operands need";
  Value y = MatmulOp::create(e.b(), e.loc, a, b);
  const auto *alpha = findAttr(e.node, "alpha");
  if (alpha && alpha->f() != 1.0f)
    y = MulOp::create(e.b(), e.loc, y, scalarConstant(e, elem, alpha->f()));
  if (e.hasInput(2)) {
    Value c = e.value(2);
    if (!c)
      return failure();
    // C broadcasts to the product's shape, not the other way round.
    if (!shape::expand(e.shape(2), shape, error))
      return e.error() << error;
    const auto *beta = findAttr(e.node, "beta");
    if (beta && beta->f() != 1.0f)
      c = MulOp::create(e.b(), e.loc, c, scalarConstant(e, elem, beta->f()));
    y = AddOp::create(e.b(), e.loc, y, c);
  }
  e.setOutput(0, y);
  return success();
}

LogicalResult emitSoftmax(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  FailureOr<int64_t> axis =
      e.axis(intAttr(e.node, "axis", -1), e.type(0).getRank());
  if (failed(axis))
    return failure();
  e.setOutput(
      0, SoftmaxOp::create(e.b(), e.loc, x, e.b().getI64IntegerAttr(*axis)));
  return success();
}

/// LayerNormalization's optional Mean and InvStdDev outputs, computed as
/// separate ops (the fused op does not expose them).
static void emitLayerNormStatistics(NodeEmitter &e, Value x, int64_t axis,
                                    float epsilon) {
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < e.type(0).getRank(); ++d)
    axes.push_back(d);
  auto mean = [&](Value v) {
    return ReduceOp::create(e.b(), e.loc, ReduceKind::mean, v, axes, true);
  };
  Value mu = mean(x);
  if (e.node.output_size() > 1 && !e.node.output(1).empty())
    e.setOutput(1, mu);
  if (e.node.output_size() < 3 || e.node.output(2).empty())
    return;
  Value centered = SubOp::create(e.b(), e.loc, x, mu);
  Value squared = MulOp::create(e.b(), e.loc, centered, centered);
  Value var = mean(squared);
  Value eps = scalarConstant(e, e.type(0).getElementType(), epsilon);
  Value shifted = AddOp::create(e.b(), e.loc, var, eps);
  e.setOutput(2, RsqrtOp::create(e.b(), e.loc, shifted));
}

LogicalResult emitLayerNorm(NodeEmitter &e) {
  Value x = e.value(0), scale = e.value(1);
  Value bias = e.hasInput(2) ? e.value(2) : Value();
  if (!x || !scale || (e.hasInput(2) && !bias))
    return failure();
  FailureOr<int64_t> axis =
      e.axis(intAttr(e.node, "axis", -1), e.type(0).getRank());
  if (failed(axis))
    return failure();
  const auto *eps = findAttr(e.node, "epsilon");
  Shape in = e.shape(0);
  Shape normalized(in.begin() + *axis, in.end());
  // mp.layer_norm takes scale and bias of the normalized shape.
  auto broadcastTo = [&](int i, Value v) -> FailureOr<Value> {
    if (e.shape(i) == normalized)
      return v;
    std::string error;
    if (!shape::expand(e.shape(i), normalized, error))
      return e.error() << error;
    return ExpandOp::create(e.b(), e.loc, e.like(i, normalized), v).getResult();
  };
  FailureOr<Value> fullScale = broadcastTo(1, scale);
  if (failed(fullScale))
    return failure();
  if (bias) {
    FailureOr<Value> fullBias = broadcastTo(2, bias);
    if (failed(fullBias))
      return failure();
    bias = *fullBias;
  }
  auto op =
      LayerNormOp::create(e.b(), e.loc, x, *fullScale, bias,
                          e.b().getI64IntegerAttr(*axis - e.type(0).getRank()),
                          e.b().getF32FloatAttr(eps ? eps->f() : 1e-5f));
  e.setOutput(0, op);
  bool wantsStats = (e.node.output_size() > 1 && !e.node.output(1).empty()) ||
                    (e.node.output_size() > 2 && !e.node.output(2).empty());
  if (wantsStats)
    emitLayerNormStatistics(e, x, *axis, eps ? eps->f() : 1e-5f);
  return success();
}

FailureOr<ReduceAxes> reduceAxes(NodeEmitter &e) {
  ReduceAxes r;
  int64_t rank = e.type(0).getRank();
  std::vector<int64_t> axes;
  if (const auto *a = findAttr(e.node, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  else if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  r.keep = intAttr(e.node, "keepdims", 1) != 0;
  if (axes.empty() && intAttr(e.node, "noop_with_empty_axes", 0)) {
    r.none = true;
    return r;
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  Shape shape;
  std::string error;
  if (!shape::reduce(e.shape(0), axes, r.keep, shape, error)) {
    e.error() << error;
    return failure();
  }
  for (int64_t &a : axes)
    a = *normalizeAxis(a, rank);
  std::sort(axes.begin(), axes.end());
  r.axes.assign(axes.begin(), axes.end());
  return r;
}

LogicalResult emitReduce(NodeEmitter &e, ReduceKind kind) {
  Value x = e.value(0);
  if (!x)
    return failure();
  FailureOr<ReduceAxes> r = reduceAxes(e);
  if (failed(r))
    return failure();
  e.setOutput(0, r->none
                     ? x
                     : ReduceOp::create(e.b(), e.loc, kind, x, r->axes, r->keep)
                           .getResult());
  return success();
}

/// InstanceNormalization (GroupNorm as PyTorch exports it: wav2vec 2's
/// feature encoder) as a layer norm over the spatial dims, with unit scale,
/// then the per-channel scale and bias.
LogicalResult emitInstanceNorm(NodeEmitter &e) {
  Value x = e.value(0), scale = e.value(1), bias = e.value(2);
  if (!x || !scale || !bias)
    return failure();
  Shape in = e.shape(0);
  if (in.size() < 3)
    return e.error() << "input " << formatShape(in)
                     << " must be [N, C, spatial...]";
  for (int i : {1, 2})
    if (e.shape(i) != Shape{in[1]} ||
        e.type(i).getElementType() != e.type(0).getElementType())
      return e.error() << (i == 1 ? "scale " : "bias ") << e.type(i)
                       << " must be [" << in[1] << "] of the input's type";
  Type elem = e.type(0).getElementType();
  Shape spatial(in.begin() + 2, in.end()), perChannel(in.size() - 1, 1);
  perChannel[0] = in[1];
  auto ones = RankedTensorType::get(spatial, elem);
  Value unit = ConstantOp::create(
      e.b(), e.loc, DenseElementsAttr::get(ones, e.b().getFloatAttr(elem, 1)));
  const auto *eps = findAttr(e.node, "epsilon");
  Value y = LayerNormOp::create(e.b(), e.loc, x, unit, Value(),
                                e.b().getI64IntegerAttr(2 - int64_t(in.size())),
                                e.b().getF32FloatAttr(eps ? eps->f() : 1e-5f));
  auto column = RankedTensorType::get(perChannel, elem);
  y = MulOp::create(e.b(), e.loc, y,
                    ReshapeOp::create(e.b(), e.loc, column, scale));
  y = AddOp::create(e.b(), e.loc, y,
                    ReshapeOp::create(e.b(), e.loc, column, bias));
  e.setOutput(0, y);
  return success();
}

/// ArgMax/ArgMin as a reduction and a comparison mp runs: the extreme
/// value m along the axis, then the least (or with select_last_index the
/// greatest) position i where x_i == m, or x_i is NaN (as NumPy: a NaN is
/// the extreme).
LogicalResult emitArgExtremum(NodeEmitter &e, bool largest) {
  Value x = e.value(0);
  if (!x)
    return failure();
  RankedTensorType type = e.type(0);
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  bool keep = intAttr(e.node, "keepdims", 1) != 0;
  bool last = intAttr(e.node, "select_last_index", 0) != 0;
  int64_t n = type.getDimSize(*axis);
  if (n == 0)
    return e.error() << "axis " << *axis << " is empty";
  Value extreme = ReduceOp::create(e.b(), e.loc,
                                   largest ? ReduceKind::max : ReduceKind::min,
                                   x, ArrayRef<int64_t>{*axis}, true);
  Value hit = CompareOp::create(e.b(), e.loc, ComparePredicate::eq, x, extreme);
  if (isa<FloatType>(type.getElementType())) {
    Value nan = CompareOp::create(e.b(), e.loc, ComparePredicate::ne, x, x);
    hit = WhereOp::create(e.b(), e.loc, nan, boolConstant(e, true), hit);
  }
  // Positions along the axis, broadcast over the other dims.
  Type i64 = e.b().getI64Type();
  SmallVector<int64_t> iotaShape(type.getRank(), 1);
  iotaShape[*axis] = n;
  SmallVector<int64_t> positions(n);
  for (int64_t i = 0; i < n; ++i)
    positions[i] = i;
  Value iota = ConstantOp::create(
      e.b(), e.loc,
      DenseElementsAttr::get(RankedTensorType::get(iotaShape, i64),
                             ArrayRef<int64_t>(positions)));
  Value missing = scalarConstant(e, i64, last ? -1 : n);
  Value candidates = WhereOp::create(e.b(), e.loc, hit, iota, missing);
  e.setOutput(0, ReduceOp::create(e.b(), e.loc,
                                  last ? ReduceKind::max : ReduceKind::min,
                                  candidates, ArrayRef<int64_t>{*axis}, keep));
  return success();
}

LogicalResult emitTrilu(NodeEmitter &e) {
  int64_t k = 0;
  if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "k");
    if (failed(v))
      return failure();
    k = v->empty() ? 0 : (*v)[0];
  }
  Value x = e.value(0);
  if (!x)
    return failure();
  Shape shape;
  std::string error;
  if (!shape::trilu(e.shape(0), shape, error))
    return e.error() << error;
  bool upper = intAttr(e.node, "upper", 1) != 0;
  e.setOutput(0, TriluOp::create(e.b(), e.loc, x,
                                 upper ? e.b().getUnitAttr() : nullptr,
                                 e.b().getI64IntegerAttr(k)));
  return success();
}

/// CumSum(x, axis) as a product with a constant triangle of ones:
/// y[..., i] = sum_j x[..., j] T[j, i] over the axis moved last, in f32 for
/// integers (exact while partial sums stay below 2^24: position ids from a
/// padding mask, RoBERTa's), marked to stay f32 under bf16/f16 storage.
/// The triangle is n x n, so the axis is capped.
LogicalResult emitCumSum(NodeEmitter &e) {
  FailureOr<std::vector<int64_t>> axisValue = e.constInts(1, "axis");
  if (failed(axisValue))
    return failure();
  if (axisValue->size() != 1)
    return e.error() << "axis must be one integer";
  int64_t rank = e.type(0).getRank();
  FailureOr<int64_t> axis = e.axis((*axisValue)[0], rank);
  if (failed(axis))
    return failure();
  Value x = e.value(0);
  if (!x)
    return failure();
  constexpr int64_t kMaxLength = 4096;
  int64_t n = e.shape(0)[*axis];
  if (n > kMaxLength)
    return e.error() << "a cumulative sum over " << n
                     << " elements: mp computes CumSum as a product with an "
                        "n x n triangle of ones, up to n = "
                     << kMaxLength;
  bool exclusive = intAttr(e.node, "exclusive", 0) != 0;
  bool reverse = intAttr(e.node, "reverse", 0) != 0;
  Type elem = e.type(0).getElementType();
  Type f32 = e.b().getF32Type();
  OpBuilder &b = e.b();
  bool integer = isa<IntegerType>(elem);
  // Integer sums must not be rounded to bf16 by mp-convert-precision.
  auto exact = [&](Value v) {
    if (integer)
      v.getDefiningOp()->setAttr(MPDialect::getExactF32AttrName(),
                                 b.getUnitAttr());
    return v;
  };
  if (elem != f32)
    x = exact(CastOp::create(b, e.loc, e.like(0, e.shape(0)).clone(f32), x));
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  bool moved = *axis != rank - 1;
  if (moved)
    x = exact(TransposeOp::create(b, e.loc, x, b.getDenseI64ArrayAttr(perm)));
  std::vector<float> ones(static_cast<size_t>(n * n), 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < n; ++i) {
      bool adds =
          reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
      ones[static_cast<size_t>(j * n + i)] = adds ? 1.0f : 0.0f;
    }
  auto triangleType = RankedTensorType::get({n, n}, f32);
  Value triangle = exact(ConstantOp::create(
      b, e.loc, DenseElementsAttr::get(triangleType, ArrayRef<float>(ones))));
  Value y = exact(MatmulOp::create(b, e.loc, x, triangle));
  if (moved) {
    SmallVector<int64_t> inverse(rank);
    for (int64_t d = 0; d < rank; ++d)
      inverse[perm[d]] = d;
    y = exact(
        TransposeOp::create(b, e.loc, y, b.getDenseI64ArrayAttr(inverse)));
  }
  if (elem != f32)
    y = CastOp::create(b, e.loc, e.like(0, e.shape(0)), y);
  e.setOutput(0, y);
  return success();
}

LogicalResult emitEinsum(NodeEmitter &e) {
  const auto *eq = findAttr(e.node, "equation");
  if (!eq)
    return e.error() << "missing 'equation' attribute";
  SmallVector<Value> inputs;
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (int i = 0; i < e.node.input_size(); ++i) {
    Value v = e.value(i);
    if (!v)
      return failure();
    inputs.push_back(v);
    ranks.push_back(e.type(i).getRank());
    shapes.push_back(e.shape(i));
  }
  EinsumSpec spec;
  std::string error;
  Shape shape;
  if (!parseEinsum(eq->s(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, shape, error))
    return e.error() << error;
  e.setOutput(
      0, EinsumOp::create(e.b(), e.loc, inputs, e.b().getStringAttr(eq->s())));
  return success();
}

} // namespace mp::onnx_import
