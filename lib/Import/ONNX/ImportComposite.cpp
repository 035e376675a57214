//===- ImportComposite.cpp - ONNX ops imported as several mp ops ----------===//
//
// ONNX ops an export uses now and then, each written as a few mp ops that
// the runtime runs, tensor parallelism splits and autodiff differentiates
// already: Abs and Sign as selects, Softplus, LogSoftmax and
// ReduceLogSumExp in their overflow-safe forms, ReduceL2 and
// ReduceSumSquare through a product, Tile as a broadcast, Pad (constant
// mode) as concatenations and slices.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "mp/Support/Shape.h"

using namespace mlir;

namespace mp::onnx_import {

namespace {

Value scalar(NodeEmitter &e, Value like, double v) {
  return scalarConstant(
      e, cast<RankedTensorType>(like.getType()).getElementType(), v);
}

Value compare(NodeEmitter &e, ComparePredicate p, Value a, Value b) {
  return CompareOp::create(e.b(), e.loc, p, a, b);
}

/// `x` reduced by `kind` over `axes`, dims kept.
Value reduceKept(NodeEmitter &e, ReduceKind kind, Value x,
                 ArrayRef<int64_t> axes) {
  return ReduceOp::create(e.b(), e.loc, kind, x, axes, /*keepdims=*/true);
}

/// log(sum(exp(x))) over `axes`, dims kept, shifted by the maximum so that
/// exp cannot overflow.
Value logSumExp(NodeEmitter &e, Value x, ArrayRef<int64_t> axes) {
  Value top = reduceKept(e, ReduceKind::max, x, axes);
  Value shifted = SubOp::create(e.b(), e.loc, x, top);
  Value sum = reduceKept(e, ReduceKind::sum,
                         ExpOp::create(e.b(), e.loc, shifted), axes);
  return AddOp::create(e.b(), e.loc, LogOp::create(e.b(), e.loc, sum), top);
}

LogicalResult requireFloat(NodeEmitter &e) {
  if (!isa<FloatType>(e.type(0).getElementType()))
    return e.error() << "input must be floating point, not " << e.type(0);
  return success();
}

} // namespace

LogicalResult emitAbs(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  Value negative = compare(e, ComparePredicate::lt, x, scalar(e, x, 0));
  e.setOutput(0, WhereOp::create(e.b(), e.loc, negative,
                                 NegOp::create(e.b(), e.loc, x), x));
  return success();
}

LogicalResult emitSign(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  Value zero = scalar(e, x, 0);
  Value belowOrZero =
      WhereOp::create(e.b(), e.loc, compare(e, ComparePredicate::lt, x, zero),
                      scalar(e, x, -1), zero);
  e.setOutput(0, WhereOp::create(e.b(), e.loc,
                                 compare(e, ComparePredicate::gt, x, zero),
                                 scalar(e, x, 1), belowOrZero));
  return success();
}

/// log(1 + exp(x)), and x itself where exp(x) would round 1 + exp(x) to
/// exp(x) (x > 20 in fp32) or overflow.
LogicalResult emitSoftplus(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x || failed(requireFloat(e)))
    return failure();
  Value soft =
      LogOp::create(e.b(), e.loc,
                    AddOp::create(e.b(), e.loc, ExpOp::create(e.b(), e.loc, x),
                                  scalar(e, x, 1)));
  Value large = compare(e, ComparePredicate::gt, x, scalar(e, x, 20));
  e.setOutput(0, WhereOp::create(e.b(), e.loc, large, x, soft));
  return success();
}

LogicalResult emitLogSoftmax(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x || failed(requireFloat(e)))
    return failure();
  FailureOr<int64_t> axis =
      e.axis(intAttr(e.node, "axis", -1), e.type(0).getRank());
  if (failed(axis))
    return failure();
  e.setOutput(0, SubOp::create(e.b(), e.loc, x, logSumExp(e, x, {*axis})));
  return success();
}

LogicalResult emitCompositeReduce(NodeEmitter &e, CompositeReduce kind) {
  Value x = e.value(0);
  if (!x || failed(requireFloat(e)))
    return failure();
  FailureOr<ReduceAxes> r = reduceAxes(e);
  if (failed(r))
    return failure();
  if (r->none) {
    // Nothing reduced: the op's elementwise part alone.
    Value y = x;
    if (kind != CompositeReduce::LogSumExp)
      y = MulOp::create(e.b(), e.loc, x, x);
    if (kind == CompositeReduce::L2)
      y = SqrtOp::create(e.b(), e.loc, y);
    e.setOutput(0, y);
    return success();
  }
  Value y;
  if (kind == CompositeReduce::LogSumExp) {
    y = logSumExp(e, x, r->axes);
  } else {
    y = reduceKept(e, ReduceKind::sum, MulOp::create(e.b(), e.loc, x, x),
                   r->axes);
    if (kind == CompositeReduce::L2)
      y = SqrtOp::create(e.b(), e.loc, y);
  }
  if (!r->keep) {
    SmallVector<int64_t> shape;
    for (auto [d, size] : llvm::enumerate(e.shape(0)))
      if (!llvm::is_contained(r->axes, static_cast<int64_t>(d)))
        shape.push_back(size);
    y = reshapeValue(e, y, shape);
  }
  e.setOutput(0, y);
  return success();
}

/// Tile as a broadcast: x [d0, d1, ...] viewed as [1, d0, 1, d1, ...],
/// expanded to [r0, d0, r1, d1, ...] and viewed as [r0·d0, r1·d1, ...].
LogicalResult emitTile(NodeEmitter &e) {
  Value x = e.value(0);
  FailureOr<std::vector<int64_t>> repeats = e.constInts(1, "repeats");
  if (!x || failed(repeats))
    return failure();
  Shape in = e.shape(0);
  if (repeats->size() != in.size())
    return e.error() << "repeats has " << repeats->size()
                     << " entries for an input of rank " << in.size();
  Shape view, expanded, out;
  for (auto [d, r] : llvm::zip(in, *repeats)) {
    if (r < 0)
      return e.error() << "repeat " << r << " is negative";
    int64_t size;
    if (__builtin_mul_overflow(d, r, &size))
      return e.error() << "tiling " << formatShape(in)
                       << " overflows a dimension";
    view.insert(view.end(), {1, d});
    expanded.insert(expanded.end(), {r, d});
    out.push_back(size);
  }
  if (!checkedNumElements(out))
    return e.error() << "tiling " << formatShape(in)
                     << " gives more elements than int64 holds";
  Value y = reshapeValue(e, x, view);
  y = ExpandOp::create(e.b(), e.loc, e.like(0, expanded), y);
  e.setOutput(0, reshapeValue(e, y, out));
  return success();
}

/// `x` padded along `axis` with `before` and `after` elements taken from
/// itself, as numpy.pad's `mode` takes them: the edge repeated ("edge") or
/// mirrored without the edge ("reflect"). (Opset 19's "wrap" is past the
/// opsets mp reads.)
FailureOr<Value> padAxisFromItself(NodeEmitter &e, Value x, int64_t axis,
                                   int64_t before, int64_t after,
                                   StringRef mode) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t n = type.getDimSize(axis);
  const int64_t most = mode == "reflect" ? n - 1 : n;
  if ((before > 0 || after > 0) && (std::max(before, after) > most || n == 0))
    return e.error() << "'" << mode << "' padding of " << before << " and "
                     << after << " along dimension " << axis << " of size " << n
                     << " needs at most " << most << " on a side";
  auto block = [&](int64_t count, bool first) -> Value {
    if (mode == "edge") {
      Value edge = first ? sliceAxis(e, x, axis, 0, 1, 1)
                         : sliceAxis(e, x, axis, n - 1, n, 1);
      SmallVector<int64_t> shape(type.getShape());
      shape[axis] = count;
      return ExpandOp::create(e.b(), e.loc, type.clone(shape), edge);
    }
    return first ? sliceAxis(e, x, axis, count, 0, -1)
                 : sliceAxis(e, x, axis, n - 2, n - 2 - count, -1);
  };
  SmallVector<Value> parts;
  if (before > 0)
    parts.push_back(block(before, true));
  parts.push_back(x);
  if (after > 0)
    parts.push_back(block(after, false));
  if (parts.size() == 1)
    return x;
  return Value(
      ConcatOp::create(e.b(), e.loc, parts, e.b().getI64IntegerAttr(axis)));
}

/// Pad: a slice where a pad is negative, then the constant (or the input's
/// own edge or mirror image) concatenated before and after each padded
/// axis.
LogicalResult emitPad(NodeEmitter &e) {
  Value x = e.value(0);
  FailureOr<std::vector<int64_t>> pads = e.constInts(1, "pads");
  if (!x || failed(pads))
    return failure();
  const auto *modeAttr = findAttr(e.node, "mode");
  std::string mode = modeAttr ? modeAttr->s() : "constant";
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return e.error() << "mode '" << mode
                     << "' is not one of constant, edge and reflect";
  Shape in = e.shape(0);
  const int64_t rank = in.size();
  std::vector<int64_t> axes;
  if (e.hasInput(3)) {
    FailureOr<std::vector<int64_t>> given = e.constInts(3, "axes");
    if (failed(given))
      return failure();
    for (int64_t a : *given) {
      FailureOr<int64_t> axis = e.axis(a, rank);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  }
  if (pads->size() != 2 * axes.size())
    return e.error() << "pads has " << pads->size() << " entries for "
                     << axes.size() << " axes";
  // The fill: a constant, or a scalar read at run time and broadcast.
  double fill = 0;
  Value fillValue;
  if (e.hasInput(2)) {
    if (e.type(2).getNumElements() != 1 ||
        e.type(2).getElementType() != e.type(0).getElementType())
      return e.error() << "constant_value " << e.type(2)
                       << " must be one element of the input's type";
    if (e.entry(2)->constant) {
      fill = e.entry(2)->constant->getDouble(0);
    } else {
      fillValue = e.value(2);
      if (!fillValue)
        return failure();
      fillValue = reshapeValue(e, fillValue, {});
    }
  }
  for (int64_t pad : *pads)
    if (pad > (int64_t(1) << 31))
      return e.error() << "pad " << pad << " is above 2^31";
  Value y = x;
  for (auto [k, axis] : llvm::enumerate(axes)) {
    int64_t before = (*pads)[k], after = (*pads)[k + axes.size()];
    SmallVector<int64_t> shape(cast<RankedTensorType>(y.getType()).getShape());
    if (before < 0 || after < 0) {
      SmallVector<int64_t> starts(rank, 0), limits(shape), steps(rank, 1);
      starts[axis] = std::max<int64_t>(0, -before);
      limits[axis] = shape[axis] - std::max<int64_t>(0, -after);
      if (starts[axis] > limits[axis])
        return e.error() << "pads " << before << " and " << after
                         << " remove more than dimension " << axis << " ("
                         << shape[axis] << ")";
      y = SliceOp::create(e.b(), e.loc, y, e.b().getDenseI64ArrayAttr(starts),
                          e.b().getDenseI64ArrayAttr(limits),
                          e.b().getDenseI64ArrayAttr(steps));
    }
    if (mode == "constant") {
      y = padAxis(e, y, axis, before, after, fill, fillValue);
      continue;
    }
    FailureOr<Value> padded =
        padAxisFromItself(e, y, axis, before, after, mode);
    if (failed(padded))
      return failure();
    y = *padded;
  }
  e.setOutput(0, y);
  return success();
}

} // namespace mp::onnx_import
