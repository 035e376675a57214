//===- ImportSelect.cpp - selections by indices computed at run time ------===//
//
// TopK, OneHot, ScatterElements, and GatherElements whose indices are
// computed at run time: a mixture-of-experts router's top-k experts, their
// gates scattered into a dense [tokens, experts] table or gathered from the
// router's probabilities. TopK, OneHot and ScatterElements are imported as
// compares of the indices against the positions along the axis, selects
// and reductions, as ArgMax is (ImportTransformer.cpp); GatherElements as a
// Gather at flat positions computed from the indices. No new op kind: every
// layout the passes know, and a derivative for free (the gradient reaches
// the elements picked, as PyTorch's does; with duplicate scatter indices
// only the update that wins gets one, where PyTorch gives each the winning
// position's). TopK and ScatterElements cost the axis length times the
// picks, small where they are used (a router's experts, the classes of a
// one-hot); GatherElements its output's size.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include <limits>

using namespace mlir;

namespace mp::onnx_import {

/// The positions 0..n-1 along `axis` of a rank-`rank` i64 tensor whose other
/// dims are 1 (broadcasting against any shape with n along `axis`).
static Value positions(NodeEmitter &e, int64_t n, int64_t rank, int64_t axis) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<int64_t> values(n);
  for (int64_t i = 0; i < n; ++i)
    values[i] = i;
  return ConstantOp::create(
      e.b(), e.loc,
      DenseElementsAttr::get(RankedTensorType::get(shape, e.b().getI64Type()),
                             ArrayRef<int64_t>(values)));
}

/// Indices as i64, the negative ones counted back from `n` (ONNX allows
/// [-n, n)). Indices out of that range select nothing: they cannot be
/// checked before run time.
static Value normalizedIndices(NodeEmitter &e, Value indices, int64_t n) {
  auto type = cast<RankedTensorType>(indices.getType());
  Type i64 = e.b().getI64Type();
  if (type.getElementType() != i64)
    indices = CastOp::create(
        e.b(), e.loc, RankedTensorType::get(type.getShape(), i64), indices);
  Value negative = CompareOp::create(e.b(), e.loc, ComparePredicate::lt,
                                     indices, scalarConstant(e, i64, 0));
  Value wrapped =
      AddOp::create(e.b(), e.loc, indices, scalarConstant(e, i64, n));
  return WhereOp::create(e.b(), e.loc, negative, wrapped, indices);
}

/// A scalar of `elem` that no element passes in the direction TopK looks
/// for: -inf (the lowest integer) when `largest`, +inf (the highest) else.
static Value beyondAll(NodeEmitter &e, Type elem, bool largest) {
  if (isa<FloatType>(elem))
    return scalarConstant(e, elem,
                          largest ? -std::numeric_limits<double>::infinity()
                                  : std::numeric_limits<double>::infinity());
  unsigned width = elem.getIntOrFloatBitWidth();
  APInt bound = largest ? APInt::getSignedMinValue(width)
                        : APInt::getSignedMaxValue(width);
  return ConstantOp::create(
      e.b(), e.loc,
      DenseElementsAttr::get(RankedTensorType::get({}, elem),
                             e.b().getIntegerAttr(elem, bound)));
}

/// TopK: k times, the first position of the extreme among the positions
/// not yet taken (ties go to the lower index, as ONNX orders them, where
/// PyTorch's CPU topk takes the higher; a NaN counts as the largest, as in
/// PyTorch: the first picks of the largest, the last of the smallest),
/// its value picked out of the input by a one-hot select. The picks are
/// concatenated in order, so the result is sorted whatever `sorted` asks.
LogicalResult emitTopK(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  RankedTensorType type = e.type(0);
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  FailureOr<std::vector<int64_t>> kValues = e.constInts(1, "k");
  if (failed(kValues))
    return failure();
  if (kValues->size() != 1)
    return e.error() << "k must hold one value, not " << kValues->size();
  const int64_t k = kValues->front(), n = type.getDimSize(*axis);
  if (k < 1 || k > n)
    return e.error() << "k = " << k << " is not in [1, " << n
                     << "], the size of axis " << *axis;
  const bool largest = intAttr(e.node, "largest", 1) != 0;
  Type elem = type.getElementType();
  if (elem.isInteger(1))
    return e.error() << "TopK of booleans is not supported";
  Value iota = positions(e, n, type.getRank(), *axis);
  Value beyond = beyondAll(e, elem, largest);
  Value none = scalarConstant(e, e.b().getI64Type(), double(n));
  Value zero = scalarConstant(e, elem, 0);
  Value taken; // positions picked so far (null before the first)
  // The smallest: a NaN is above everything, so it is looked at as +inf
  // (after a real +inf, unless it comes first).
  Value scores = x;
  Value nan;
  if (isa<FloatType>(elem)) {
    nan = CompareOp::create(e.b(), e.loc, ComparePredicate::ne, x, x);
    if (!largest)
      scores = WhereOp::create(e.b(), e.loc, nan, beyond, x);
  }
  SmallVector<Value> values, indices;
  for (int64_t j = 0; j < k; ++j) {
    Value left =
        taken ? WhereOp::create(e.b(), e.loc, taken, beyond, scores) : scores;
    Value extreme = ReduceOp::create(
        e.b(), e.loc, largest ? ReduceKind::max : ReduceKind::min, left,
        ArrayRef<int64_t>{*axis}, true);
    Value hit =
        CompareOp::create(e.b(), e.loc, ComparePredicate::eq, left, extreme);
    if (largest && nan)
      hit = WhereOp::create(e.b(), e.loc, nan, boolConstant(e, true), hit);
    if (taken)
      hit = WhereOp::create(e.b(), e.loc, taken, boolConstant(e, false), hit);
    Value candidates = WhereOp::create(e.b(), e.loc, hit, iota, none);
    Value index = ReduceOp::create(e.b(), e.loc, ReduceKind::min, candidates,
                                   ArrayRef<int64_t>{*axis}, true);
    Value picked =
        CompareOp::create(e.b(), e.loc, ComparePredicate::eq, iota, index);
    values.push_back(
        ReduceOp::create(e.b(), e.loc, ReduceKind::sum,
                         WhereOp::create(e.b(), e.loc, picked, x, zero),
                         ArrayRef<int64_t>{*axis}, true));
    indices.push_back(index);
    taken = taken ? WhereOp::create(e.b(), e.loc, picked, boolConstant(e, true),
                                    taken)
                  : picked;
  }
  auto concat = [&](ArrayRef<Value> parts) {
    return parts.size() == 1
               ? parts.front()
               : Value(ConcatOp::create(e.b(), e.loc, parts,
                                        e.b().getI64IntegerAttr(*axis)));
  };
  e.setOutput(0, concat(values));
  if (e.node.output_size() > 1)
    e.setOutput(1, concat(indices));
  return success();
}

/// OneHot: `on` where the position along the new axis equals the index,
/// `off` elsewhere.
LogicalResult emitOneHot(NodeEmitter &e) {
  // (Depth may be of any numeric type; ONNX's reference truncates it.)
  Entry *depthEntry = e.entry(1);
  if (!depthEntry || !depthEntry->constant)
    return e.error() << "depth (input 1, '" << e.node.input(1)
                     << "') must be known at import: it is the size of the "
                        "output's new axis";
  if (depthEntry->constant->numElements() != 1 ||
      depthEntry->constant->getDouble(0) < 1)
    return e.error() << "depth must be one value of at least 1";
  const auto depth = static_cast<int64_t>(depthEntry->constant->getDouble(0));
  Value indices = e.value(0), onOff = e.value(2);
  if (!indices || !onOff)
    return failure();
  if (e.shape(2) != Shape{2})
    return e.error() << "values (input 2) must hold 2 elements, [off, on]";
  Shape in = e.shape(0);
  const int64_t rank = in.size() + 1;
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", -1), rank);
  if (failed(axis))
    return failure();
  if (!isa<IntegerType>(e.type(0).getElementType()))
    indices = CastOp::create(
        e.b(), e.loc, RankedTensorType::get(in, e.b().getI64Type()), indices);
  Shape inserted = in;
  inserted.insert(inserted.begin() + *axis, 1);
  Value index = reshapeValue(e, normalizedIndices(e, indices, depth), inserted);
  Value hit = CompareOp::create(e.b(), e.loc, ComparePredicate::eq, index,
                                positions(e, depth, rank, *axis));
  e.setOutput(0,
              WhereOp::create(e.b(), e.loc, hit, sliceAxis(e, onOff, 0, 1, 2),
                              sliceAxis(e, onOff, 0, 0, 1)));
  return success();
}

/// Checks that input `i` (indices or updates) has the data's rank and its
/// sizes on every dim but `axis` (`atMost`: no more than the data's).
static LogicalResult matchesData(NodeEmitter &e, int i, int64_t axis,
                                 bool atMost) {
  Shape data = e.shape(0), other = e.shape(i);
  if (other.size() != data.size())
    return e.error() << "input " << i << " ('" << e.node.input(i)
                     << "') has rank " << other.size() << ", the data "
                     << data.size();
  for (size_t d = 0; d < data.size(); ++d)
    if (int64_t(d) != axis &&
        (atMost ? other[d] > data[d] : other[d] != data[d]))
      return e.error() << "input " << i << " ('" << e.node.input(i) << "') is "
                       << other[d] << " along dim " << d
                       << " where the data is " << data[d]
                       << (atMost ? "" : " (only whole dims are supported)");
  return success();
}

/// ScatterElements with indices computed at run time: for each index along
/// the axis in turn, the data where the position equals it is replaced by
/// (or combined with, per `reduction`) the matching update. A later
/// duplicate wins, as PyTorch's CPU scatter does (ONNX leaves it open).
LogicalResult emitScatterElements(NodeEmitter &e) {
  Value data = e.value(0), indicesIn = e.value(1), updates = e.value(2);
  if (!data || !indicesIn || !updates)
    return failure();
  Shape shape = e.shape(0);
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), shape.size());
  if (failed(axis) || failed(integerIndices(e, 1)) ||
      failed(matchesData(e, 1, *axis, false)))
    return failure();
  if (e.shape(2) != e.shape(1))
    return e.error() << "updates and indices differ in shape";
  if (e.type(2).getElementType() != e.type(0).getElementType())
    return e.error() << "updates and data differ in element type";
  std::string reduction = "none";
  if (const auto *attr = findAttr(e.node, "reduction"))
    reduction = attr->s();
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return e.error() << "reduction '" << reduction << "' is not supported";
  const int64_t n = shape[*axis];
  Value indices = normalizedIndices(e, indicesIn, n);
  Value iota = positions(e, n, shape.size(), *axis);
  Value out = data;
  for (int64_t j = 0, count = e.shape(1)[*axis]; j < count; ++j) {
    Value hit = CompareOp::create(e.b(), e.loc, ComparePredicate::eq, iota,
                                  sliceAxis(e, indices, *axis, j, j + 1));
    Value update = sliceAxis(e, updates, *axis, j, j + 1);
    if (reduction == "add")
      update = AddOp::create(e.b(), e.loc, out, update);
    else if (reduction == "mul")
      update = MulOp::create(e.b(), e.loc, out, update);
    else if (reduction == "max" || reduction == "min") {
      // (A NaN on either side wins, as in np.maximum: a NaN `out` is kept
      // by the comparison failing, a NaN update taken by its own test.)
      Value wins = CompareOp::create(e.b(), e.loc,
                                     reduction == "max" ? ComparePredicate::gt
                                                        : ComparePredicate::lt,
                                     update, out);
      if (isa<FloatType>(e.type(0).getElementType()))
        wins = WhereOp::create(e.b(), e.loc,
                               CompareOp::create(e.b(), e.loc,
                                                 ComparePredicate::ne, update,
                                                 update),
                               boolConstant(e, true), wins);
      update = WhereOp::create(e.b(), e.loc, wins, update, out);
    }
    out = WhereOp::create(e.b(), e.loc, hit, update, out);
  }
  e.setOutput(0, out);
  return success();
}

/// GatherElements with indices computed at run time: a Gather of the data
/// flattened, at each output element's flat position in it, which is a
/// constant (its coordinates on the other dims) plus its index times the
/// axis's stride. Its cost is the output's size, and its gradient the
/// Gather's, a scatter-add.
LogicalResult emitGatherElementsAtRunTime(NodeEmitter &e) {
  Value data = e.value(0), indicesIn = e.value(1);
  if (!data || !indicesIn)
    return failure();
  Shape shape = e.shape(0), indexShape = e.shape(1);
  const int64_t rank = shape.size();
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), rank);
  if (failed(axis) || failed(integerIndices(e, 1)) ||
      failed(matchesData(e, 1, *axis, true)))
    return failure();
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  int64_t count = 1, total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    count *= indexShape[d];
    total *= shape[d];
  }
  // The flat position of each output element with its index taken as 0.
  SmallVector<int64_t> base(count);
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = k, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (d != *axis)
        offset += (rest % indexShape[d]) * strides[d];
      rest /= indexShape[d];
    }
    base[k] = offset;
  }
  Type i64 = e.b().getI64Type();
  Value offsets = ConstantOp::create(
      e.b(), e.loc,
      DenseElementsAttr::get(RankedTensorType::get(indexShape, i64),
                             ArrayRef<int64_t>(base)));
  Value along =
      MulOp::create(e.b(), e.loc, normalizedIndices(e, indicesIn, shape[*axis]),
                    scalarConstant(e, i64, double(strides[*axis])));
  Value flat =
      reshapeValue(e, AddOp::create(e.b(), e.loc, offsets, along), {count});
  Value gathered =
      GatherOp::create(e.b(), e.loc, reshapeValue(e, data, {total}), flat,
                       e.b().getI64IntegerAttr(0));
  e.setOutput(0, reshapeValue(e, gathered, indexShape));
  return success();
}

} // namespace mp::onnx_import
