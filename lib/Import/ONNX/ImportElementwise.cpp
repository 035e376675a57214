//===- ImportElementwise.cpp - elementwise ONNX ops -> mp -----------------===//
//
// The emit functions of ONNX's elementwise ops with numpy broadcasting (Add,
// Sub, Mul, Div, Pow, Equal, Less, Where) and of Cast. Unary ops need only
// their op class (emitUnary in Importer.h); the broadcasting ones check
// mp::shape::broadcast before the mp op infers its result type.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "mp/Support/Shape.h"

using namespace mlir;

namespace mp::onnx_import {

/// Input i converted to `elem`: constants are re-typed, values cast.
static Value convertTo(NodeEmitter &e, int i, Type elem) {
  Entry *en = e.entry(i);
  if (en->type.getElementType() == elem)
    return e.value(i);
  if (en->constant) {
    HostTensor t = *en->constant;
    HostTensor converted;
    converted.shape = t.shape;
    auto dtypeOf = [&](Type ty) {
      if (ty.isF32())
        return DType::Float;
      if (ty.isF16())
        return DType::Float16;
      if (ty.isBF16())
        return DType::BFloat16;
      if (ty.isF64())
        return DType::Double;
      if (ty.isInteger(64))
        return DType::Int64;
      if (ty.isInteger(32))
        return DType::Int32;
      if (ty.isInteger(8))
        return DType::Int8;
      return DType::Bool;
    };
    converted.dtype = dtypeOf(elem);
    std::string unused; // `t` is held, so its shape is within the limits
    converted.allocate(unused);
    for (int64_t k = 0; k < t.numElements(); ++k)
      converted.set(k, t.getDouble(k));
    auto type = RankedTensorType::get(t.shape, elem);
    return ConstantOp::create(e.b(), e.loc, e.imp.toAttr(converted, type));
  }
  Value v = e.value(i);
  return CastOp::create(e.b(), e.loc,
                        RankedTensorType::get(en->type.getShape(), elem), v);
}

/// When sizes fail to broadcast where a size --mp-shape gave meets another:
/// the likely cause, a table the model holds (positions, rotary angles)
/// shorter than the sequence asked for.
static std::string pinnedSizeHint(NodeEmitter &e,
                                  const std::vector<Shape> &operands) {
  for (const auto &[input, dims] : e.imp.options.inputShapes)
    for (auto [d, size] : llvm::enumerate(dims)) {
      if (size <= 1)
        continue;
      for (const Shape &a : operands)
        for (const Shape &b : operands)
          for (size_t k = 1; k <= std::min(a.size(), b.size()); ++k) {
            int64_t other = b[b.size() - k];
            if (a[a.size() - k] == size && other != 1 && other != size)
              return "; --mp-shape makes input '" + input + "' dimension " +
                     std::to_string(d) + " " + std::to_string(size) +
                     ", and the model may hold a table of only " +
                     std::to_string(other) +
                     " (positions, rotary angles): give a size it covers";
          }
    }
  return "";
}

/// Checks that the inputs broadcast (numpy rules), as the op's result type
/// inference will.
static LogicalResult checkBroadcast(NodeEmitter &e,
                                    const std::vector<Shape> &operands) {
  Shape shape;
  std::string error;
  if (!shape::broadcast(operands, shape, error))
    return e.error() << error << pinnedSizeHint(e, operands);
  return success();
}

LogicalResult emitBinary(NodeEmitter &e, BinaryBuilder build, bool convertRhs) {
  Type elem = e.type(0).getElementType();
  Value lhs = e.value(0);
  Value rhs = convertRhs ? convertTo(e, 1, elem) : e.value(1);
  if (!lhs || !rhs)
    return failure();
  Type rhsElem = cast<RankedTensorType>(rhs.getType()).getElementType();
  if (rhsElem != elem)
    return e.error() << "operand element types differ: " << elem << " and "
                     << rhsElem;
  if (failed(checkBroadcast(e, {e.shape(0), e.shape(1)})))
    return failure();
  e.setOutput(0, build(e.b(), e.loc, lhs, rhs));
  return success();
}

LogicalResult emitCompare(NodeEmitter &e, ComparePredicate predicate) {
  Value lhs = e.value(0), rhs = e.value(1);
  if (!lhs || !rhs)
    return failure();
  if (failed(checkBroadcast(e, {e.shape(0), e.shape(1)})))
    return failure();
  e.setOutput(0, CompareOp::create(e.b(), e.loc, predicate, lhs, rhs));
  return success();
}

LogicalResult emitWhere(NodeEmitter &e) {
  Value c = e.value(0), x = e.value(1), y = e.value(2);
  if (!c || !x || !y)
    return failure();
  if (failed(checkBroadcast(e, {e.shape(0), e.shape(1), e.shape(2)})))
    return failure();
  e.setOutput(0, WhereOp::create(e.b(), e.loc, c, x, y));
  return success();
}

/// `a` where `a < b` (or `b < a` with `takeSmaller`), else `b`: a bound
/// written as the comparison and select mp already runs and differentiates
/// (the gradient goes to the value selected, as PyTorch's clamp does).
static Value select(NodeEmitter &e, Value a, Value b, bool aWhenLess) {
  Value less = CompareOp::create(e.b(), e.loc, ComparePredicate::lt,
                                 aWhenLess ? a : b, aWhenLess ? b : a);
  return WhereOp::create(e.b(), e.loc, less, a, b);
}

/// Clip(x, min?, max?): x raised to min and lowered to max where given.
LogicalResult emitClip(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  Type elem = e.type(0).getElementType();
  for (int i : {1, 2}) {
    if (!e.hasInput(i))
      continue;
    if (e.type(i).getNumElements() != 1)
      return e.error() << (i == 1 ? "min" : "max")
                       << " must be a scalar, not a tensor of shape "
                       << e.type(i);
    Value bound = convertTo(e, i, elem);
    if (!bound)
      return failure();
    // A one-element bound of shape [1] must not broadcast x to rank 1.
    if (e.type(i).getRank() != 0)
      bound = ReshapeOp::create(e.b(), e.loc, RankedTensorType::get({}, elem),
                                bound);
    // min: the bound where x < min; max: the bound where max < x.
    x = i == 1 ? select(e, bound, x, /*aWhenLess=*/false)
               : select(e, bound, x, /*aWhenLess=*/true);
  }
  e.setOutput(0, x);
  return success();
}

/// Max or Min of one or more broadcasting inputs, pairwise.
LogicalResult emitExtremum(NodeEmitter &e, bool largest) {
  Value result = e.value(0);
  if (!result)
    return failure();
  std::vector<Shape> shapes = {e.shape(0)};
  Type elem = e.type(0).getElementType();
  for (int i = 1; i < e.node.input_size(); ++i) {
    shapes.push_back(e.shape(i));
    if (failed(checkBroadcast(e, shapes)))
      return failure();
    Value next = convertTo(e, i, elem);
    if (!next)
      return failure();
    // Max: next where result < next; Min: next where next < result.
    result = select(e, next, result, /*aWhenLess=*/!largest);
  }
  e.setOutput(0, result);
  return success();
}

/// Not(x) as x == false (a boolean comparison the runtime has).
LogicalResult emitNot(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  if (!e.type(0).getElementType().isInteger(1))
    return e.error() << "input must be boolean, not " << e.type(0);
  Value no = boolConstant(e, false);
  e.setOutput(0, CompareOp::create(e.b(), e.loc, ComparePredicate::eq, x, no));
  return success();
}

/// And, Or and Xor of two broadcasting boolean inputs, as the select and
/// comparison mp runs: a and b = a ? b : false; a or b = a ? true : b;
/// a xor b = a != b.
LogicalResult emitLogical(NodeEmitter &e, LogicalKind kind) {
  Value a = e.value(0), b = e.value(1);
  if (!a || !b)
    return failure();
  for (int i : {0, 1})
    if (!e.type(i).getElementType().isInteger(1))
      return e.error() << "input " << i << " must be boolean, not "
                       << e.type(i);
  if (failed(checkBroadcast(e, {e.shape(0), e.shape(1)})))
    return failure();
  if (kind == LogicalKind::Xor) {
    e.setOutput(0, CompareOp::create(e.b(), e.loc, ComparePredicate::ne, a, b));
    return success();
  }
  Value fixed = boolConstant(e, kind == LogicalKind::Or);
  // The select's result has the broadcast shape of all three operands.
  e.setOutput(0, kind == LogicalKind::And
                     ? WhereOp::create(e.b(), e.loc, a, b, fixed)
                     : WhereOp::create(e.b(), e.loc, a, fixed, b));
  return success();
}

LogicalResult emitCast(NodeEmitter &e) {
  int64_t to = intAttr(e.node, "to", 1);
  FailureOr<Type> elem =
      e.imp.elementType(static_cast<int32_t>(to), e.loc, "Cast target");
  if (failed(elem))
    return failure();
  Value x = e.value(0);
  if (!x)
    return failure();
  if (e.type(0).getElementType() == *elem) {
    e.setOutput(0, x);
    return success();
  }
  // The target element type is the node's choice: not inferred.
  e.setOutput(
      0, CastOp::create(e.b(), e.loc, e.like(0, e.shape(0)).clone(*elem), x));
  return success();
}

} // namespace mp::onnx_import
