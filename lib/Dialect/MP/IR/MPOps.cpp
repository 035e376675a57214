//===- MPOps.cpp - mp dialect ops -----------------------------------------===//
//
// Each op's shape rule is the one in mp/Support/Shape.h (shared with the
// importer and the runtime): result-type inference applies it, verifiers
// check the result against it. How a split passes through each op is its
// SplitOpInterface rule, below.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"
#include "mp/Support/OpContract.h"
#include "mp/Support/Shape.h"

#include "OpHelpers.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mp;
using mp::detail::checkRule;
using mp::detail::shapeOf;
using mp::detail::tensorType;

#include "mp/Dialect/MP/IR/MPEnums.cpp.inc"
#include "mp/Dialect/MP/IR/MPInterfaces.cpp.inc"

// The artifact carries these enums as integers: the runtime reads them with
// the op contract's enums, which must have the same values.
namespace {
template <class Ods, class Contract>
constexpr bool sameValue(Ods ods, Contract contract) {
  return static_cast<int64_t>(ods) == static_cast<int64_t>(contract);
}
namespace c = contract;
static_assert(sameValue(ReduceKind::sum, c::ReduceKind::Sum) &&
              sameValue(ReduceKind::mean, c::ReduceKind::Mean) &&
              sameValue(ReduceKind::max, c::ReduceKind::Max) &&
              sameValue(ReduceKind::min, c::ReduceKind::Min) &&
              getMaxEnumValForReduceKind() + 1 ==
                  c::enumCount<c::ReduceKind>());
static_assert(sameValue(ComparePredicate::eq, c::ComparePredicate::Eq) &&
              sameValue(ComparePredicate::ne, c::ComparePredicate::Ne) &&
              sameValue(ComparePredicate::lt, c::ComparePredicate::Lt) &&
              sameValue(ComparePredicate::le, c::ComparePredicate::Le) &&
              sameValue(ComparePredicate::gt, c::ComparePredicate::Gt) &&
              sameValue(ComparePredicate::ge, c::ComparePredicate::Ge) &&
              getMaxEnumValForComparePredicate() + 1 ==
                  c::enumCount<c::ComparePredicate>());
static_assert(sameValue(LinearActivation::none, c::LinearActivation::None) &&
              sameValue(LinearActivation::gelu, c::LinearActivation::Gelu) &&
              sameValue(LinearActivation::gelu_tanh,
                        c::LinearActivation::GeluTanh) &&
              sameValue(LinearActivation::silu, c::LinearActivation::Silu) &&
              getMaxEnumValForLinearActivation() + 1 ==
                  c::enumCount<c::LinearActivation>());
static_assert(sameValue(GeluApproximation::none, c::GeluApproximation::None) &&
              sameValue(GeluApproximation::tanh, c::GeluApproximation::Tanh) &&
              getMaxEnumValForGeluApproximation() + 1 ==
                  c::enumCount<c::GeluApproximation>());
} // namespace

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::vector<Shape> shapesOf(ValueRange values) {
  std::vector<Shape> shapes;
  for (Value v : values)
    shapes.push_back(shapeOf(v));
  return shapes;
}

/// The result type a shape rule gave (or its error, on `op`'s location).
static LogicalResult inferred(std::optional<Location> location, StringRef op,
                              bool ruleHeld, const std::string &error,
                              const Shape &shape, Type element,
                              SmallVectorImpl<Type> &types) {
  if (!ruleHeld)
    return emitOptionalError(location, "'", op, "' op ", error);
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

/// Checks an op's result types against its inferred ones, saying which
/// shape or element type was expected.
static LogicalResult verifyInferredResults(Operation *op) {
  auto infer = cast<InferTypeOpInterface>(op);
  SmallVector<Type> expected;
  if (failed(infer.inferReturnTypes(
          op->getContext(), op->getLoc(), op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), expected)))
    return failure();
  for (auto [want, have] : llvm::zip(expected, op->getResultTypes())) {
    auto wantType = cast<RankedTensorType>(want);
    auto haveType = cast<RankedTensorType>(have);
    if (wantType.getShape() != haveType.getShape())
      return op->emitOpError() << "expected result shape "
                               << formatShape(Shape(wantType.getShape().begin(),
                                                    wantType.getShape().end()))
                               << " but found "
                               << formatShape(Shape(haveType.getShape().begin(),
                                                    haveType.getShape().end()));
    if (wantType.getElementType() != haveType.getElementType())
      return op->emitOpError()
             << "result element type " << haveType.getElementType()
             << " differs from the expected " << wantType.getElementType();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError() << "parameter shape must be static";
  if (getOffset().has_value() != getLength().has_value())
    return emitOpError() << "'offset' and 'length' must be given together";
  if (getOffset() && !getFile())
    return emitOpError() << "'offset' needs a 'file'";
  if (getOffset() && static_cast<int64_t>(*getOffset()) < 0)
    return emitOpError() << "offset " << static_cast<int64_t>(*getOffset())
                         << " is negative";
  if (getPartOf().has_value() != getPart().has_value())
    return emitOpError() << "'part_of' and 'part' must be given together";
  if (auto part = getPart()) {
    if (part->size() != 3)
      return emitOpError() << "'part' must be [axis, start, whole]";
    int64_t axis = (*part)[0], start = (*part)[1], whole = (*part)[2];
    // (It may run past the end: zeros, a padded vocabulary.)
    if (axis < 0 || axis >= type.getRank() || start < 0 || start >= whole)
      return emitOpError() << "part [" << axis << ", " << start << ", " << whole
                           << "] does not fit " << type;
  }
  RankedTensorType stored = getStoredType();
  if (getLength()) {
    int64_t bits = stored.getElementTypeBitWidth();
    int64_t expected = stored.getNumElements() * ((bits + 7) / 8);
    int64_t length = static_cast<int64_t>(*getLength());
    if (length != expected)
      return emitOpError() << "data length " << length << " does not match the "
                           << expected << " bytes of " << stored;
  }
  if (auto preview = getPreview()) {
    if (preview->getElementType() != stored.getElementType())
      return emitOpError() << "preview element type "
                           << preview->getElementType()
                           << " differs from the parameter's "
                           << stored.getElementType();
    if (preview->getNumElements() > type.getNumElements())
      return emitOpError() << "preview has more values than the parameter";
  }
  return success();
}

RankedTensorType ParamOp::getStoredType() {
  RankedTensorType type = getTensorType();
  // The data is stored in `source_type` when the parameter was narrowed.
  if (getSourceType())
    type = type.clone(*getSourceType());
  if (auto part = getPart(); part && part->size() == 3) {
    SmallVector<int64_t> shape(type.getShape());
    shape[(*part)[0]] = (*part)[2];
    type = type.clone(shape);
  }
  return type;
}

std::string ParamOp::getPartName(int64_t axis, int64_t start, int64_t size) {
  std::string name = getSymName().str() + "[";
  for (int64_t d = 0; d < axis; ++d)
    name += ":, ";
  return name + std::to_string(start) + ":" + std::to_string(start + size) +
         "]";
}

ParamOp ParamOp::clonePart(int64_t axis, int64_t start, int64_t size) {
  std::string name = getPartName(axis, start, size);
  RankedTensorType type = getTensorType();
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = size;
  OpBuilder b(*this);
  auto part = cast<ParamOp>(b.clone(*getOperation()));
  part.setSymName(name);
  part.setType(type.clone(shape));
  part.removePreviewAttr();
  // The data stays where the user's parameter's is.
  if (getFile() && !getOffset() && !getInitializer())
    part.setInitializer(getSymName());
  part.setPartOf(getSymName());
  int64_t block[] = {axis, start, type.getDimSize(axis)};
  part.setPart(ArrayRef<int64_t>(block));
  return part;
}

FailureOr<RankedTensorType>
ParamOp::getLocalType(SymbolTableCollection &symbolTable, bool emitErrors) {
  RankedTensorType type = getTensorType();
  if (!getGrid())
    return type;
  auto emitOpError = [&]() -> InFlightDiagnostic {
    InFlightDiagnostic diag = this->emitOpError();
    if (!emitErrors)
      diag.abandon();
    return diag;
  };
  auto grid =
      symbolTable.lookupNearestSymbolFrom<shard::GridOp>(*this, getGridAttr());
  if (!grid)
    return emitOpError() << "grid '" << *getGrid() << "' is not a shard.grid";
  int64_t ranks = 1;
  for (int64_t d : grid.getShape())
    ranks *= d;
  int64_t axis = getShardAxis() ? static_cast<int64_t>(*getShardAxis()) : 0;
  int64_t groups =
      getShardGroups() ? static_cast<int64_t>(*getShardGroups()) : 1;
  if (axis < 0 || axis >= type.getRank() || groups < 1)
    return emitOpError() << "invalid shard_axis " << axis << " or shard_groups "
                         << groups;
  if (type.getDimSize(axis) % (ranks * groups) != 0)
    return emitOpError() << "dimension " << axis << " ("
                         << type.getDimSize(axis) << ") is not divisible by "
                         << groups << " group(s) x " << ranks << " ranks";
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] /= ranks;
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return getLocalType(symbolTable);
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError() << "'@" << getName()
                         << "' does not reference an mp.param";
  // The parameter's own verifier explains a bad sharding; this is only
  // reached first when the reader comes before the declaration.
  FailureOr<RankedTensorType> local =
      param.getLocalType(symbolTable, /*emitErrors=*/false);
  if (failed(local))
    return emitOpError() << "parameter '@" << getName()
                         << "' has an invalid sharding";
  if (*local != getType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type " << *local
                         << " of parameter '@" << getName() << "'"
                         << (param.getGrid() ? " (local shard)" : "");
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Result types
//===----------------------------------------------------------------------===//

#define MP_INFER(OP)                                                           \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &types)

static LogicalResult inferBroadcast(std::optional<Location> loc, StringRef op,
                                    ValueRange operands, Type element,
                                    SmallVectorImpl<Type> &types) {
  Shape shape;
  std::string error;
  bool ok = shape::broadcast(shapesOf(operands), shape, error);
  return inferred(loc, op, ok, error, shape, element, types);
}

#define MP_INFER_BINARY(OP)                                                    \
  MP_INFER(OP) {                                                               \
    return inferBroadcast(loc, getOperationName(), adaptor.getOperands(),      \
                          getElementTypeOrSelf(adaptor.getLhs()), types);      \
  }
MP_INFER_BINARY(AddOp)
MP_INFER_BINARY(SubOp)
MP_INFER_BINARY(MulOp)
MP_INFER_BINARY(DivOp)
MP_INFER_BINARY(PowOp)
#undef MP_INFER_BINARY

MP_INFER(CompareOp) {
  return inferBroadcast(loc, getOperationName(), adaptor.getOperands(),
                        IntegerType::get(adaptor.getLhs().getContext(), 1),
                        types);
}

MP_INFER(WhereOp) {
  return inferBroadcast(loc, getOperationName(), adaptor.getOperands(),
                        getElementTypeOrSelf(adaptor.getOnTrue()), types);
}

MP_INFER(MatmulOp) {
  Shape shape;
  std::string error;
  bool ok = shape::matmul(shapeOf(adaptor.getLhs()), shapeOf(adaptor.getRhs()),
                          shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getLhs()), types);
}

MP_INFER(LinearOp) {
  Shape shape, bias;
  if (adaptor.getBias())
    bias = shapeOf(adaptor.getBias());
  std::string error;
  bool ok =
      shape::linear(shapeOf(adaptor.getInput()), shapeOf(adaptor.getWeight()),
                    adaptor.getBias() ? &bias : nullptr,
                    adaptor.getTransposeWeight(), shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(LayerNormOp) {
  Shape shape, bias;
  if (adaptor.getBias())
    bias = shapeOf(adaptor.getBias());
  std::string error;
  bool ok = shape::layerNorm(shapeOf(adaptor.getInput()),
                             static_cast<int64_t>(adaptor.getAxis()),
                             shapeOf(adaptor.getScale()),
                             adaptor.getBias() ? &bias : nullptr, shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(RMSNormOp) {
  Shape shape;
  std::string error;
  bool ok = shape::rmsNorm(shapeOf(adaptor.getInput()),
                           shapeOf(adaptor.getScale()), shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(ReduceOp) {
  Shape shape;
  std::string error;
  ArrayRef<int64_t> axes = adaptor.getAxes();
  bool ok = shape::reduce(shapeOf(adaptor.getInput()),
                          std::vector<int64_t>(axes.begin(), axes.end()),
                          adaptor.getKeepdims(), shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(AttentionOp) {
  Shape shape, mask;
  if (adaptor.getMask())
    mask = shapeOf(adaptor.getMask());
  std::string error;
  bool ok =
      shape::attention(shapeOf(adaptor.getQuery()), shapeOf(adaptor.getKey()),
                       shapeOf(adaptor.getValue()),
                       adaptor.getMask() ? &mask : nullptr, shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getQuery()), types);
}

MP_INFER(EmbeddingOp) {
  Shape shape;
  std::string error;
  bool ok = shape::embedding(shapeOf(adaptor.getTable()),
                             shapeOf(adaptor.getIndices()), shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getTable()), types);
}

MP_INFER(GatherOp) {
  Shape shape;
  std::string error;
  bool ok =
      shape::gather(shapeOf(adaptor.getInput()), shapeOf(adaptor.getIndices()),
                    static_cast<int64_t>(adaptor.getAxis()), shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(EinsumOp) {
  std::vector<Shape> shapes = shapesOf(adaptor.getInputs());
  std::vector<int64_t> ranks;
  for (const Shape &s : shapes)
    ranks.push_back(static_cast<int64_t>(s.size()));
  EinsumSpec spec;
  std::string error;
  Shape shape;
  bool ok = !adaptor.getInputs().empty() &&
            parseEinsum(adaptor.getEquation().str(), ranks, spec, error) &&
            inferEinsumShape(spec, shapes, shape, error);
  if (adaptor.getInputs().empty())
    error = "needs at least one input";
  return inferred(
      loc, getOperationName(), ok, error, shape,
      ok ? getElementTypeOrSelf(adaptor.getInputs().front()) : Type(), types);
}

MP_INFER(TransposeOp) {
  Shape shape;
  std::string error;
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  bool ok = shape::transpose(shapeOf(adaptor.getInput()),
                             std::vector<int64_t>(perm.begin(), perm.end()),
                             shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

MP_INFER(SliceOp) {
  Shape shape;
  std::string error;
  auto vec = [](ArrayRef<int64_t> a) {
    return std::vector<int64_t>(a.begin(), a.end());
  };
  bool ok = shape::slice(shapeOf(adaptor.getInput()), vec(adaptor.getStarts()),
                         vec(adaptor.getLimits()), vec(adaptor.getStrides()),
                         shape, error);
  return inferred(loc, getOperationName(), ok, error, shape,
                  getElementTypeOrSelf(adaptor.getInput()), types);
}

void SliceOp::build(OpBuilder &builder, OperationState &state, Value input,
                    int64_t axis, int64_t start, int64_t limit) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), strides(type.getRank(), 1);
  SmallVector<int64_t> limits(type.getShape()), shape(type.getShape());
  starts[axis] = start;
  limits[axis] = limit;
  shape[axis] = limit - start;
  build(builder, state, type.clone(shape), input, starts, limits, strides);
}

MP_INFER(ConcatOp) {
  Shape shape;
  std::string error;
  bool ok =
      shape::concat(shapesOf(adaptor.getInputs()),
                    static_cast<int64_t>(adaptor.getAxis()), shape, error);
  return inferred(
      loc, getOperationName(), ok, error, shape,
      ok ? getElementTypeOrSelf(adaptor.getInputs().front()) : Type(), types);
}
#undef MP_INFER

//===----------------------------------------------------------------------===//
// Verifiers: what inference does not check
//===----------------------------------------------------------------------===//

#define MP_VERIFY_INFERRED(OP)                                                 \
  LogicalResult OP::verify() { return verifyInferredResults(*this); }
MP_VERIFY_INFERRED(AddOp)
MP_VERIFY_INFERRED(SubOp)
MP_VERIFY_INFERRED(MulOp)
MP_VERIFY_INFERRED(DivOp)
MP_VERIFY_INFERRED(PowOp)
MP_VERIFY_INFERRED(CompareOp)
MP_VERIFY_INFERRED(WhereOp)
MP_VERIFY_INFERRED(MatmulOp)
MP_VERIFY_INFERRED(LinearOp)
MP_VERIFY_INFERRED(ReduceOp)
MP_VERIFY_INFERRED(EmbeddingOp)
MP_VERIFY_INFERRED(GatherOp)
MP_VERIFY_INFERRED(EinsumOp)
MP_VERIFY_INFERRED(TransposeOp)
MP_VERIFY_INFERRED(SliceOp)
#undef MP_VERIFY_INFERRED

LogicalResult LayerNormOp::verify() {
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  return verifyInferredResults(*this);
}

LogicalResult RMSNormOp::verify() {
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  return verifyInferredResults(*this);
}

/// A fused norm's `sum` must be what its norm rule accepts (the result has
/// sum's type: AllTypesMatch).
static LogicalResult verifyNormRule(Operation *op, float epsilon, bool ruleHeld,
                                    const std::string &error) {
  if (epsilon <= 0.0f)
    return op->emitOpError() << "epsilon must be positive";
  if (!ruleHeld)
    return op->emitOpError() << error;
  return success();
}

/// A fused norm of `sum`: the layer_norm's rule (with `bias` when set) or
/// the rms_norm's (`axis` unset), and a positive epsilon.
static LogicalResult verifyFusedNorm(Operation *op, Value sum, Value scale,
                                     Value bias, std::optional<int64_t> axis,
                                     APFloat epsilon) {
  Shape result, biasShape;
  if (bias)
    biasShape = shapeOf(bias);
  std::string error;
  bool ok = axis ? shape::layerNorm(shapeOf(sum), *axis, shapeOf(scale),
                                    bias ? &biasShape : nullptr, result, error)
                 : shape::rmsNorm(shapeOf(sum), shapeOf(scale), result, error);
  return verifyNormRule(op, epsilon.convertToFloat(), ok, error);
}

/// An f32 sum's norm takes an f32 scale and bias (the kernels widen only a
/// 16-bit sum's parameters).
static LogicalResult verifyNormParamTypes(Operation *op, Value sum,
                                          ValueRange params) {
  if (!getElementTypeOrSelf(sum).isF32())
    return success();
  for (Value param : params)
    if (param && !getElementTypeOrSelf(param).isF32())
      return op->emitOpError() << "an f32 sum's norm takes f32 parameters, not "
                               << param.getType();
  return success();
}

LogicalResult AddLayerNormOp::verify() {
  if (failed(verifyNormParamTypes(*this, getSum(), {getScale(), getBias()})))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), getBias(), getAxis(),
                         getEpsilon());
}

LogicalResult AddRMSNormOp::verify() {
  if (failed(verifyNormParamTypes(*this, getSum(), {getScale()})))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), {}, std::nullopt,
                         getEpsilon());
}

LogicalResult RotaryOp::verify() {
  Shape result;
  std::string error;
  if (!shape::rotary(shapeOf(getInput()), shapeOf(getCos()), getRotaryDim(),
                     result, error))
    return emitOpError() << error;
  return success();
}

/// The collective part of the fused all-reduce norms: a grid axis that
/// exists (its size in `ranks`, if asked), an addend that is one value per
/// feature.
static LogicalResult verifyReducedNorm(Operation *op, FlatSymbolRefAttr grid,
                                       int64_t gridAxis, Value partial,
                                       Value addend, int64_t *ranks = nullptr) {
  auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, grid);
  if (!gridOp)
    return op->emitOpError() << "grid " << grid << " is not a shard.grid";
  if (gridAxis < 0 || gridAxis >= gridOp.getRank())
    return op->emitOpError()
           << "grid_axis " << gridAxis << " is not an axis of " << grid;
  if (ranks)
    *ranks = gridOp.getShape()[gridAxis];
  if (addend) {
    Shape features = shapeOf(partial);
    Shape expected{features.empty() ? 1 : features.back()};
    if (shapeOf(addend) != expected)
      return op->emitOpError()
             << "expected addend shape " << formatShape(expected)
             << " (one value per feature) but found "
             << formatShape(shapeOf(addend));
  }
  return success();
}

LogicalResult AllReduceAddLayerNormOp::verify() {
  if (failed(verifyReducedNorm(*this, getGridAttr(), getGridAxis(),
                               getPartial(), getAddend())))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), getBias(), getAxis(),
                         getEpsilon());
}

LogicalResult AllReduceAddRMSNormOp::verify() {
  if (failed(verifyReducedNorm(*this, getGridAttr(), getGridAxis(),
                               getPartial(), getAddend())))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), {}, std::nullopt,
                         getEpsilon());
}

/// The collective part of the fused reduce-scatter norms: the grid axis
/// and addend as above, `sum` this rank's slice of `result` along
/// `scatterAxis`, and the norm's rows (from `normAxis` on) inside a slice.
static LogicalResult verifyScatteredNorm(Operation *op, FlatSymbolRefAttr grid,
                                         int64_t gridAxis, int64_t scatterAxis,
                                         int64_t normAxis, Value partial,
                                         Value sum, Value addend) {
  int64_t ranks = 0;
  if (failed(verifyReducedNorm(op, grid, gridAxis, partial, addend, &ranks)))
    return failure();
  Shape full = shapeOf(partial), local = shapeOf(sum);
  const int64_t rank = static_cast<int64_t>(full.size());
  if (scatterAxis < 0 || scatterAxis >= rank || scatterAxis >= normAxis)
    return op->emitOpError()
           << "scatter_axis " << scatterAxis
           << " must be a dim before the norm's axis " << normAxis;
  if (ranks <= 0 || full[scatterAxis] % ranks != 0)
    return op->emitOpError()
           << "dim " << scatterAxis << " of " << formatShape(full)
           << " does not divide over " << ranks << " ranks";
  Shape expected = full;
  expected[scatterAxis] = full[scatterAxis] / ranks;
  if (local != expected)
    return op->emitOpError()
           << "expected sum shape " << formatShape(expected) << " (a slice of "
           << formatShape(full) << " along dim " << scatterAxis << " over "
           << ranks << " ranks) but found " << formatShape(local);
  return success();
}

LogicalResult ReduceScatterAddLayerNormOp::verify() {
  if (failed(verifyScatteredNorm(*this, getGridAttr(), getGridAxis(),
                                 getScatterAxis(), getNormalizedAxis(),
                                 getPartial(), getSum(), getAddend())))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), getBias(), getAxis(),
                         getEpsilon());
}

LogicalResult ReduceScatterAddRMSNormOp::verify() {
  if (failed(verifyScatteredNorm(*this, getGridAttr(), getGridAxis(),
                                 getScatterAxis(),
                                 detail::nonNegativeAxis(-1, getPartial()),
                                 getPartial(), getSum(), getAddend())))
    return failure();
  return verifyFusedNorm(*this, getSum(), getScale(), {}, std::nullopt,
                         getEpsilon());
}

LogicalResult AttentionOp::verify() {
  if (getScale().convertToFloat() <= 0.0f)
    return emitOpError() << "scale must be positive";
  return verifyInferredResults(*this);
}

LogicalResult SoftmaxOp::verify() {
  Shape shape;
  std::string error;
  return checkRule(*this,
                   shape::softmax(shapeOf(getInput()),
                                  static_cast<int64_t>(getAxis()), shape,
                                  error),
                   error);
}

LogicalResult ConcatOp::verify() {
  for (Value v : getInputs())
    if (getElementTypeOrSelf(v) != getElementTypeOrSelf(getInputs().front()))
      return emitOpError() << "inputs must share element type and rank";
  return verifyInferredResults(*this);
}

LogicalResult DropoutOp::verify() {
  float ratio = getRatio().convertToFloat();
  if (ratio < 0.0f || ratio >= 1.0f)
    return emitOpError() << "ratio " << ratio << " is not in [0, 1)";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  Shape shape;
  std::string error;
  return checkRule(*this,
                   shape::crossEntropy(shapeOf(getLogits()),
                                       shapeOf(getTargets()), shape, error),
                   error);
}

LogicalResult TriluOp::verify() {
  Shape shape;
  std::string error;
  return checkRule(*this, shape::trilu(shapeOf(getInput()), shape, error),
                   error);
}

LogicalResult ReshapeOp::verify() {
  std::string error;
  return checkRule(
      *this, shape::reshape(shapeOf(getInput()), shapeOf(getResult()), error),
      error);
}

LogicalResult SplitOp::verify() {
  for (Value r : getResults())
    if (getElementTypeOrSelf(r) != getElementTypeOrSelf(getInput()))
      return emitOpError() << "results must match the input's element type "
                              "and rank";
  std::string error;
  return checkRule(*this,
                   shape::split(shapeOf(getInput()),
                                static_cast<int64_t>(getAxis()),
                                shapesOf(getResults()), error),
                   error);
}

LogicalResult ExpandOp::verify() {
  std::string error;
  return checkRule(
      *this, shape::expand(shapeOf(getInput()), shapeOf(getResult()), error),
      error);
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

/// A reshape reinterprets its input's bytes (row-major): a view of them.
Value ReshapeOp::getViewSource() { return getInput(); }

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  // transpose(transpose(x)) -> one transpose of x, the permutations
  // composed (in place).
  bool composed = false;
  if (auto producer = getInput().getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> perm;
    for (int64_t p : getPermutation())
      perm.push_back(producer.getPermutation()[p]);
    getInputMutable().assign(producer.getInput());
    setPermutation(perm);
    composed = true;
  }
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return composed ? OpFoldResult(getResult()) : OpFoldResult();
  return getInput();
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

FailureOr<func::FuncOp> mp::getEntryFunction(ModuleOp module) {
  SmallVector<func::FuncOp> entries;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      entries.push_back(func);
  if (entries.size() == 1)
    return entries.front();
  if (entries.empty())
    return emitError(module.getLoc())
           << "no entry function: the module has no public function with a "
              "body";
  InFlightDiagnostic diag = emitError(module.getLoc())
                            << "more than one entry function: ";
  llvm::interleaveComma(entries, diag, [&](func::FuncOp f) {
    diag << "'" << f.getSymName() << "'";
  });
  return diag << " are public; make all but one private";
}

bool mp::inSameStage(Operation *a, Operation *b) {
  StringRef stage = MPDialect::getStageAttrName();
  return a->getAttr(stage) == b->getAttr(stage);
}

Value mp::otherOperand(Operation *op, Value value) {
  if (op->getOperand(0) == value)
    return op->getOperand(1);
  if (op->getOperand(1) == value)
    return op->getOperand(0);
  return {};
}

StringRef mp::fusionPassOf(Operation *op) {
  if (isa<AllReduceAddLayerNormOp, AllReduceAddRMSNormOp,
          ReduceScatterAddLayerNormOp, ReduceScatterAddRMSNormOp>(op))
    return "mp-fuse-reduced-norms";
  if (isa<RotaryOp>(op))
    return "mp-fuse-rotary";
  return "mp-fuse-residual-norms";
}

SmallVector<FusedCollective> mp::fusedCollectives(Operation *op) {
  return TypeSwitch<Operation *, SmallVector<FusedCollective>>(op)
      .Case<AllReduceAddLayerNormOp, AllReduceAddRMSNormOp>([](auto fused) {
        return SmallVector<FusedCollective>{
            {"all_reduce", fused.getPartial().getType()}};
      })
      .Case<ReduceScatterAddLayerNormOp, ReduceScatterAddRMSNormOp>(
          [](auto fused) {
            return SmallVector<FusedCollective>{
                {"reduce_scatter", fused.getPartial().getType()},
                {"all_gather", fused.getResult().getType()}};
          })
      .Default([](Operation *) { return SmallVector<FusedCollective>{}; });
}

bool mp::isTrainStep(ModuleOp module) {
  return module
      ->walk([](Operation *op) {
        return op->hasAttr(MPDialect::getBackwardAttrName())
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

SmallVector<func::FuncOp> mp::userFacingFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> funcs;
  if (isTrainStep(module) || module->hasAttr(MPDialect::getPipelineAttrName()))
    return funcs;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && SymbolTable::symbolKnownUseEmpty(func, module))
      funcs.push_back(func);
  return funcs;
}

//===----------------------------------------------------------------------===//
// Helpers of the op interfaces
//===----------------------------------------------------------------------===//

int64_t mp::detail::nonNegativeAxis(int64_t axis, Value v) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  return axis < 0 ? axis + rank : axis;
}

std::optional<unsigned> mp::detail::contractInPlaceOperand(Operation *op,
                                                           unsigned result) {
  std::optional<contract::OpKind> kind =
      contract::opKindFromName(op->getName().stripDialect());
  if (!kind)
    return std::nullopt;
  std::optional<int> operand =
      contract::inPlaceOperand(*kind, static_cast<int>(result));
  if (!operand)
    return std::nullopt;
  return static_cast<unsigned>(*operand);
}

#define GET_OP_CLASSES
#include "mp/Dialect/MP/IR/MPOps.cpp.inc"
