//===- Importer.cpp - ONNX model -> mp dialect ----------------------------===//
//
// Walks the ONNX graph in order. Every value is either a parameter (a float
// initializer), a constant known at import (integer initializers, Constant
// nodes, and everything folded from them and from static shapes), or an SSA
// value of the emitted function. Nodes whose inputs are all constants are
// folded on the host (HostTensor.cpp); the rest become mp ops whose result
// shapes are computed here, so the IR is fully static.
//
//===----------------------------------------------------------------------===//
#include "mp/Import/ONNXImporter.h"

#include "HostTensor.h"
#include "ModelLoader.h"

#include "mp/Support/Einsum.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <functional>
#include <optional>

using namespace mlir;
using namespace mp;
using namespace mp::onnx_import;

namespace {

using Shape = std::vector<int64_t>;

/// The op types the importer handles (ONNX default domain).
const llvm::StringSet<> &supportedOps() {
  static const llvm::StringSet<> ops = {"MatMul",
                                        "Gemm",
                                        "Add",
                                        "Sub",
                                        "Mul",
                                        "Div",
                                        "Pow",
                                        "Sqrt",
                                        "Reciprocal",
                                        "Neg",
                                        "Exp",
                                        "Log",
                                        "Erf",
                                        "Tanh",
                                        "Sigmoid",
                                        "Relu",
                                        "Softmax",
                                        "LayerNormalization",
                                        "ReduceMean",
                                        "ReduceSum",
                                        "ReduceMax",
                                        "Reshape",
                                        "Transpose",
                                        "Split",
                                        "Concat",
                                        "Slice",
                                        "Gather",
                                        "Unsqueeze",
                                        "Squeeze",
                                        "Expand",
                                        "Where",
                                        "Equal",
                                        "Less",
                                        "Cast",
                                        "Trilu",
                                        "Constant",
                                        "ConstantOfShape",
                                        "Shape",
                                        "Identity",
                                        "Einsum",
                                        "Cos",
                                        "Sin",
                                        "Range"};
  return ops;
}

/// What the importer knows about one ONNX value.
struct Entry {
  Value value;                        // emitted SSA value (may be null)
  std::optional<HostTensor> constant; // known at import
  std::string param;                  // parameter symbol, if a parameter
  RankedTensorType type;
};

struct Importer {
  Importer(MLIRContext *ctx, LoadedModel &model, const ImportOptions &options)
      : ctx(ctx), builder(ctx), model(model), options(options) {}

  OwningOpRef<ModuleOp> run();

  // Types and attributes.
  FailureOr<Type> elementType(int32_t onnxType, Location loc,
                              const std::string &what);
  DenseElementsAttr toAttr(const HostTensor &t, RankedTensorType type);
  RankedTensorType typeOf(const HostTensor &t);

  // Module structure.
  LogicalResult checkSupportedOps();
  LogicalResult declareInitializers();
  LogicalResult declareParam(const onnx::TensorProto &init, Type elemType);
  LogicalResult createFunction();
  LogicalResult finishFunction();
  LogicalResult bindInput(const onnx::ValueInfoProto &input,
                          const std::string &file, Location loc);

  // Nodes.
  LogicalResult importNode(const onnx::NodeProto &node, int index);
  Value materialize(const std::string &name, Location loc);

  MLIRContext *ctx;
  OpBuilder builder;
  LoadedModel &model;
  const ImportOptions &options;
  ModuleOp module;
  func::FuncOp func;
  llvm::StringMap<Entry> values;
};

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::elementType(int32_t onnxType, Location loc,
                                      const std::string &what) {
  switch (static_cast<DType>(onnxType)) {
  case DType::Float:
    return builder.getF32Type();
  case DType::Float16:
    return builder.getF16Type();
  case DType::BFloat16:
    return builder.getBF16Type();
  case DType::Double:
    return builder.getF64Type();
  case DType::Int64:
    return builder.getI64Type();
  case DType::Int32:
    return builder.getI32Type();
  case DType::Int8:
    return builder.getI8Type();
  case DType::Bool:
    return builder.getI1Type();
  }
  return emitError(loc) << what << " has unsupported element type "
                        << dtypeName(onnxType);
}

RankedTensorType Importer::typeOf(const HostTensor &t) {
  Type elem = *elementType(static_cast<int32_t>(t.dtype), UnknownLoc::get(ctx),
                           "constant");
  return RankedTensorType::get(t.shape, elem);
}

DenseElementsAttr Importer::toAttr(const HostTensor &t, RankedTensorType type) {
  int64_t n = t.numElements();
  bool splat = n > 0;
  for (int64_t i = 1; i < n && splat; ++i)
    splat = t.getDouble(i) == t.getDouble(0) &&
            (t.isFloat() || t.ints[i] == t.ints[0]);
  Type elem = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elem)) {
    auto toAPFloat = [&](double v) {
      APFloat f(v);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                &lost);
      return f;
    };
    if (splat)
      return DenseElementsAttr::get(type, toAPFloat(t.floats[0]));
    SmallVector<APFloat> vals;
    vals.reserve(n);
    for (double v : t.floats)
      vals.push_back(toAPFloat(v));
    return DenseElementsAttr::get(type, vals);
  }
  unsigned width = elem.getIntOrFloatBitWidth();
  if (splat)
    return DenseElementsAttr::get(
        type, APInt(width, static_cast<uint64_t>(t.ints[0]), /*isSigned=*/true,
                    /*implicitTrunc=*/true));
  SmallVector<APInt> vals;
  vals.reserve(n);
  for (int64_t v : t.ints)
    vals.push_back(APInt(width, static_cast<uint64_t>(v), /*isSigned=*/true,
                         /*implicitTrunc=*/true));
  return DenseElementsAttr::get(type, vals);
}

//===----------------------------------------------------------------------===//
// Module structure
//===----------------------------------------------------------------------===//

static std::string nodeName(const onnx::NodeProto &node, int index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index)
                             : node.name();
}

LogicalResult Importer::checkSupportedOps() {
  std::vector<std::pair<std::string, std::string>> unsupported;
  llvm::StringSet<> seenTypes;
  const auto &graph = model.model.graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
    std::string type =
        defaultDomain ? node.op_type() : node.domain() + "." + node.op_type();
    if (!defaultDomain || !supportedOps().contains(node.op_type()))
      if (seenTypes.insert(type).second)
        unsupported.push_back({type, nodeName(node, i)});
  }
  if (unsupported.empty())
    return success();
  InFlightDiagnostic diag =
      emitError(FileLineColLoc::get(ctx, model.path, 0, 0))
      << "unsupported ONNX op type" << (unsupported.size() > 1 ? "s" : "")
      << ": ";
  bool first = true;
  for (auto &[type, name] : unsupported) {
    diag << (first ? "" : ", ") << type << " (e.g. node '" << name << "')";
    first = false;
  }
  return diag;
}

LogicalResult Importer::declareParam(const onnx::TensorProto &init,
                                     Type elemType) {
  Location loc = NameLoc::get(builder.getStringAttr(init.name()));
  auto type = RankedTensorType::get(
      Shape(init.dims().begin(), init.dims().end()), elemType);
  auto param = ParamOp::create(builder, loc, init.name(), type, nullptr,
                               nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, nullptr);
  values[init.name()] = Entry{Value(), std::nullopt, init.name(), type};
  if (options.shapeOnly)
    return success();

  std::string external, error;
  if (isExternal(init)) {
    ExternalLocation where;
    if (!getExternalLocation(init, model.directory, where, error))
      return emitError(loc) << error;
    int64_t bytes =
        type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    if (where.length < 0)
      where.length = bytes;
    param.setFileAttr(builder.getStringAttr(where.file));
    param.setOffsetAttr(builder.getI64IntegerAttr(where.offset));
    param.setLengthAttr(builder.getI64IntegerAttr(where.length));
    if (options.paramPreview > 0 && !readFileSlice(where, external, error))
      return emitError(loc) << error;
  } else {
    param.setFileAttr(builder.getStringAttr(model.path));
  }
  if (options.paramPreview <= 0)
    return success();
  HostTensor data;
  if (!decodeTensor(init, isExternal(init) ? &external : nullptr, data, error))
    return emitError(loc) << error;
  int64_t count = std::min<int64_t>(options.paramPreview, data.numElements());
  HostTensor preview = data;
  preview.shape = {count};
  preview.floats.resize(count);
  param.setPreviewAttr(
      toAttr(preview, RankedTensorType::get({count}, elemType)));
  return success();
}

LogicalResult Importer::declareInitializers() {
  builder.setInsertionPointToEnd(module.getBody());
  for (const auto &init : model.model.graph().initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(init.name()));
    FailureOr<Type> elem =
        elementType(init.data_type(), loc, "initializer '" + init.name() + "'");
    if (failed(elem))
      return failure();
    int64_t numElements = 1;
    for (int64_t d : init.dims())
      numElements *= d;
    // Float tensors are weights; integers and float scalars are constants.
    if (isa<FloatType>(*elem) && numElements > 1) {
      if (failed(declareParam(init, *elem)))
        return failure();
      continue;
    }
    std::string external, error;
    if (isExternal(init)) {
      ExternalLocation where;
      if (!getExternalLocation(init, model.directory, where, error) ||
          !readFileSlice(where, external, error))
        return emitError(loc)
               << "constant initializer needs its data: " << error;
    }
    HostTensor t;
    if (!decodeTensor(init, isExternal(init) ? &external : nullptr, t, error))
      return emitError(loc) << error;
    values[init.name()] = Entry{Value(), std::move(t), "", RankedTensorType()};
    values[init.name()].type = typeOf(*values[init.name()].constant);
  }
  return success();
}

LogicalResult Importer::createFunction() {
  const auto &graph = model.model.graph();
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());

  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &input : graph.input()) {
    if (initializers.contains(input.name()))
      continue;
    Location loc = NameLoc::get(builder.getStringAttr(input.name()));
    auto bound = options.boundInputs.find(input.name());
    if (bound != options.boundInputs.end()) {
      if (failed(bindInput(input, bound->second, loc)))
        return failure();
      continue;
    }
    const auto &tt = input.type().tensor_type();
    FailureOr<Type> elem =
        elementType(tt.elem_type(), loc, "graph input '" + input.name() + "'");
    if (failed(elem))
      return failure();
    Shape shape;
    for (const auto &d : tt.shape().dim())
      shape.push_back(d.dim_value());
    argTypes.push_back(RankedTensorType::get(shape, *elem));
    argNames.push_back(input.name());
  }
  SmallVector<Type> resultTypes; // fixed up in finishFunction
  auto fnType = builder.getFunctionType(argTypes, resultTypes);
  builder.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(
      builder, FileLineColLoc::get(ctx, model.path, 0, 0), "main", fnType);
  Block *entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    func.setArgAttr(i, MPDialect::getNameAttrName(),
                    builder.getStringAttr(name));
    values[name] = Entry{entry->getArgument(i), std::nullopt, "",
                         cast<RankedTensorType>(argTypes[i])};
  }
  builder.setInsertionPointToEnd(entry);
  return success();
}

LogicalResult Importer::bindInput(const onnx::ValueInfoProto &input,
                                  const std::string &file, Location loc) {
  onnx::TensorProto proto;
  std::string error;
  HostTensor value;
  if (!readTensorFile(file, proto, error) ||
      !decodeTensor(proto, nullptr, value, error))
    return emitError(loc) << "--mp-bind-input " << input.name() << ": "
                          << error;
  const auto &tt = input.type().tensor_type();
  if (tt.elem_type() != static_cast<int32_t>(value.dtype))
    return emitError(loc) << "--mp-bind-input " << input.name() << ": '" << file
                          << "' holds " << dtypeName(proto.data_type())
                          << " but the input is " << dtypeName(tt.elem_type());
  if (tt.has_shape()) {
    bool matches = tt.shape().dim_size() == (int)value.shape.size();
    for (int i = 0; matches && i < tt.shape().dim_size(); ++i)
      matches = !tt.shape().dim(i).has_dim_value() ||
                tt.shape().dim(i).dim_value() == value.shape[i];
    if (!matches)
      return emitError(loc)
             << "--mp-bind-input " << input.name() << ": '" << file
             << "' has shape " << formatShape(value.shape)
             << ", which the input's declared shape rejects";
  }
  RankedTensorType type = typeOf(value);
  values[input.name()] = Entry{Value(), std::move(value), "", type};
  return success();
}

LogicalResult Importer::finishFunction() {
  SmallVector<Value> results;
  SmallVector<std::string> names;
  for (const auto &output : model.model.graph().output()) {
    Location loc = NameLoc::get(builder.getStringAttr(output.name()));
    Value v = materialize(output.name(), loc);
    if (!v)
      return failure();
    results.push_back(v);
    names.push_back(output.name());
  }
  func::ReturnOp::create(builder, func.getLoc(), results);
  func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(),
                                               ValueRange(results).getTypes()));
  for (auto [i, name] : llvm::enumerate(names))
    func.setResultAttr(i, MPDialect::getNameAttrName(),
                       builder.getStringAttr(name));
  return success();
}

Value Importer::materialize(const std::string &name, Location loc) {
  auto it = values.find(name);
  if (it == values.end()) {
    emitError(loc) << "value '" << name
                   << "' is not available (an optional output the importer "
                      "does not produce)";
    return Value();
  }
  Entry &e = it->second;
  if (e.value)
    return e.value;
  if (!e.param.empty()) {
    // Read once, at the first use (the body is one block).
    e.value = GetParamOp::create(
        builder, NameLoc::get(builder.getStringAttr(name)), e.type, name);
    return e.value;
  }
  e.value = ConstantOp::create(builder, loc, toAttr(*e.constant, e.type));
  return e.value;
}

OwningOpRef<ModuleOp> Importer::run() {
  Location fileLoc = FileLineColLoc::get(ctx, model.path, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc);
  module = *owned;
  module->setAttr("mp.source", builder.getStringAttr(model.path));
  module->setAttr("mp.opset", builder.getI64IntegerAttr(model.originalOpset));
  if (failed(checkSupportedOps()) || failed(declareInitializers()) ||
      failed(createFunction()))
    return nullptr;
  const auto &graph = model.model.graph();
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(importNode(graph.node(i), i)))
      return nullptr;
  if (failed(finishFunction()))
    return nullptr;
  if (failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// Emission of one node: gives access to inputs and reports errors located at
/// the node.
struct NodeEmitter {
  Importer &imp;
  const onnx::NodeProto &node;
  Location loc;
  std::string name; // the node's name, or OpType_index when it has none

  OpBuilder &b() { return imp.builder; }
  MLIRContext *ctx() { return imp.ctx; }

  InFlightDiagnostic error() {
    return emitError(loc) << "node '" << name << "' (" << node.op_type()
                          << "): ";
  }
  bool hasInput(int i) {
    return i < node.input_size() && !node.input(i).empty();
  }
  Entry *entry(int i) {
    auto it = imp.values.find(node.input(i));
    return it == imp.values.end() ? nullptr : &it->second;
  }
  RankedTensorType type(int i) { return entry(i)->type; }
  Shape shape(int i) {
    ArrayRef<int64_t> s = type(i).getShape();
    return Shape(s.begin(), s.end());
  }
  Value value(int i) { return imp.materialize(node.input(i), loc); }
  /// An input that must be known at import (shapes, axes, indices...).
  FailureOr<std::vector<int64_t>> constInts(int i, const char *what) {
    Entry *e = entry(i);
    if (!e || !e->constant) {
      error() << what << " (input " << i << ", '" << node.input(i)
              << "') must be known at import: a constant or computed from "
                 "static shapes";
      return failure();
    }
    std::vector<int64_t> v(e->constant->numElements());
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = e->constant->getInt(k);
    return v;
  }
  void setOutput(int i, Value v) {
    imp.values[node.output(i)] =
        Entry{v, std::nullopt, "", cast<RankedTensorType>(v.getType())};
  }
  RankedTensorType like(int i, const Shape &shape) {
    return RankedTensorType::get(shape, type(i).getElementType());
  }
  FailureOr<int64_t> axis(int64_t a, int64_t rank) {
    if (a < -rank || a >= rank) {
      error() << "axis " << a << " is out of range for rank " << rank;
      return failure();
    }
    return a < 0 ? a + rank : a;
  }
};

using EmitFn = std::function<LogicalResult(NodeEmitter &)>;

template <typename OpT> EmitFn unary() {
  return [](NodeEmitter &e) -> LogicalResult {
    Value x = e.value(0);
    if (!x)
      return failure();
    e.setOutput(0, OpT::create(e.b(), e.loc, x.getType(), x));
    return success();
  };
}

FailureOr<Shape> broadcast(NodeEmitter &e, const Shape &a, const Shape &b) {
  Shape out;
  if (!broadcastShapes(a, b, out)) {
    e.error() << "shapes " << formatShape(a) << " and " << formatShape(b)
              << " are not broadcastable";
    return failure();
  }
  return out;
}

/// Converts `v` (input `i`) to `elem`: constants are re-typed, values cast.
Value convertTo(NodeEmitter &e, int i, Type elem) {
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
    converted.allocate();
    for (int64_t k = 0; k < t.numElements(); ++k)
      converted.set(k, t.getDouble(k));
    auto type = RankedTensorType::get(t.shape, elem);
    return ConstantOp::create(e.b(), e.loc, e.imp.toAttr(converted, type));
  }
  Value v = e.value(i);
  return CastOp::create(e.b(), e.loc,
                        RankedTensorType::get(en->type.getShape(), elem), v);
}

template <typename OpT> EmitFn binary() {
  return [](NodeEmitter &e) -> LogicalResult {
    Type elem = e.type(0).getElementType();
    Value lhs = e.value(0);
    Value rhs = std::is_same_v<OpT, PowOp> ? convertTo(e, 1, elem) : e.value(1);
    if (!lhs || !rhs)
      return failure();
    if (cast<RankedTensorType>(rhs.getType()).getElementType() != elem)
      return e.error()
             << "operand element types differ: " << elem << " and "
             << cast<RankedTensorType>(rhs.getType()).getElementType();
    FailureOr<Shape> shape = broadcast(e, e.shape(0), e.shape(1));
    if (failed(shape))
      return failure();
    e.setOutput(0, OpT::create(e.b(), e.loc, e.like(0, *shape), lhs, rhs));
    return success();
  };
}

EmitFn compare(ComparePredicate pred) {
  return [pred](NodeEmitter &e) -> LogicalResult {
    Value lhs = e.value(0), rhs = e.value(1);
    if (!lhs || !rhs)
      return failure();
    FailureOr<Shape> shape = broadcast(e, e.shape(0), e.shape(1));
    if (failed(shape))
      return failure();
    auto type = RankedTensorType::get(*shape, e.b().getI1Type());
    e.setOutput(0, CompareOp::create(e.b(), e.loc, type, pred, lhs, rhs));
    return success();
  };
}

LogicalResult emitWhere(NodeEmitter &e) {
  Value c = e.value(0), x = e.value(1), y = e.value(2);
  if (!c || !x || !y)
    return failure();
  FailureOr<Shape> s1 = broadcast(e, e.shape(0), e.shape(1));
  if (failed(s1))
    return failure();
  FailureOr<Shape> shape = broadcast(e, *s1, e.shape(2));
  if (failed(shape))
    return failure();
  e.setOutput(0, WhereOp::create(e.b(), e.loc, e.like(1, *shape), c, x, y));
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
  e.setOutput(
      0, CastOp::create(e.b(), e.loc, e.like(0, e.shape(0)).clone(*elem), x));
  return success();
}

FailureOr<Shape> matmulShape(NodeEmitter &e, Shape a, Shape b) {
  if (a.empty() || b.empty()) {
    e.error() << "MatMul operands must have rank >= 1";
    return failure();
  }
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA)
    a.insert(a.begin(), 1);
  if (vecB)
    b.push_back(1);
  if (a.back() != b[b.size() - 2]) {
    e.error() << "MatMul contracting dimensions differ: " << a.back() << " and "
              << b[b.size() - 2];
    return failure();
  }
  FailureOr<Shape> batch = broadcast(e, Shape(a.begin(), a.end() - 2),
                                     Shape(b.begin(), b.end() - 2));
  if (failed(batch))
    return failure();
  Shape out = *batch;
  if (!vecA)
    out.push_back(a[a.size() - 2]);
  if (!vecB)
    out.push_back(b.back());
  return out;
}

LogicalResult emitMatMul(NodeEmitter &e) {
  Value a = e.value(0), b = e.value(1);
  if (!a || !b)
    return failure();
  FailureOr<Shape> shape = matmulShape(e, e.shape(0), e.shape(1));
  if (failed(shape))
    return failure();
  e.setOutput(0, MatmulOp::create(e.b(), e.loc, e.like(0, *shape), a, b));
  return success();
}

Value transpose2D(NodeEmitter &e, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  auto type = RankedTensorType::get({t.getDimSize(1), t.getDimSize(0)},
                                    t.getElementType());
  return TransposeOp::create(e.b(), e.loc, type, v,
                             e.b().getDenseI64ArrayAttr({1, 0}));
}

Value scalarConstant(NodeEmitter &e, Type elem, double v) {
  auto type = RankedTensorType::get({}, elem);
  return ConstantOp::create(
      e.b(), e.loc, DenseElementsAttr::get(type, e.b().getFloatAttr(elem, v)));
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
  auto ta = cast<RankedTensorType>(a.getType());
  auto tb = cast<RankedTensorType>(b.getType());
  if (ta.getDimSize(1) != tb.getDimSize(0))
    return e.error() << "Gemm contracting dimensions differ: "
                     << ta.getDimSize(1) << " and " << tb.getDimSize(0);
  Type elem = ta.getElementType();
  auto type = RankedTensorType::get({ta.getDimSize(0), tb.getDimSize(1)}, elem);
  Value y = MatmulOp::create(e.b(), e.loc, type, a, b);
  const auto *alpha = findAttr(e.node, "alpha");
  if (alpha && alpha->f() != 1.0f)
    y = MulOp::create(e.b(), e.loc, type, y,
                      scalarConstant(e, elem, alpha->f()));
  if (e.hasInput(2)) {
    Value c = e.value(2);
    if (!c)
      return failure();
    const auto *beta = findAttr(e.node, "beta");
    if (beta && beta->f() != 1.0f)
      c = MulOp::create(e.b(), e.loc, c.getType(), c,
                        scalarConstant(e, elem, beta->f()));
    FailureOr<Shape> shape = broadcast(
        e, Shape(type.getShape().begin(), type.getShape().end()), e.shape(2));
    if (failed(shape))
      return failure();
    y = AddOp::create(e.b(), e.loc, type, y, c);
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
  e.setOutput(0, SoftmaxOp::create(e.b(), e.loc, x.getType(), x,
                                   e.b().getI64IntegerAttr(*axis)));
  return success();
}

/// LayerNormalization's optional Mean and InvStdDev outputs, computed as
/// separate ops (the fused op does not expose them).
void emitLayerNormStatistics(NodeEmitter &e, Value x, int64_t axis,
                             float epsilon) {
  Shape in = e.shape(0), reduced = in;
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < static_cast<int64_t>(in.size()); ++d) {
    axes.push_back(d);
    reduced[d] = 1;
  }
  auto statType = e.like(0, reduced);
  auto mean = [&](Value v) {
    return ReduceOp::create(e.b(), e.loc, statType, ReduceKind::mean, v, axes,
                            true);
  };
  Value mu = mean(x);
  if (e.node.output_size() > 1 && !e.node.output(1).empty())
    e.setOutput(1, mu);
  if (e.node.output_size() < 3 || e.node.output(2).empty())
    return;
  Value centered = SubOp::create(e.b(), e.loc, x.getType(), x, mu);
  Value squared = MulOp::create(e.b(), e.loc, x.getType(), centered, centered);
  Value var = mean(squared);
  Value eps = scalarConstant(e, e.type(0).getElementType(), epsilon);
  Value shifted = AddOp::create(e.b(), e.loc, statType, var, eps);
  e.setOutput(2, RsqrtOp::create(e.b(), e.loc, statType, shifted));
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
  auto broadcastTo = [&](int i, Value v) -> Value {
    if (e.shape(i) == normalized)
      return v;
    return ExpandOp::create(e.b(), e.loc, e.like(i, normalized), v);
  };
  scale = broadcastTo(1, scale);
  if (bias)
    bias = broadcastTo(2, bias);
  auto op =
      LayerNormOp::create(e.b(), e.loc, x.getType(), x, scale, bias,
                          e.b().getI64IntegerAttr(*axis - e.type(0).getRank()),
                          e.b().getF32FloatAttr(eps ? eps->f() : 1e-5f));
  e.setOutput(0, op);
  bool wantsStats = (e.node.output_size() > 1 && !e.node.output(1).empty()) ||
                    (e.node.output_size() > 2 && !e.node.output(2).empty());
  if (wantsStats)
    emitLayerNormStatistics(e, x, *axis, eps ? eps->f() : 1e-5f);
  return success();
}

EmitFn reduce(ReduceKind kind) {
  return [kind](NodeEmitter &e) -> LogicalResult {
    Value x = e.value(0);
    if (!x)
      return failure();
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
    if (axes.empty() && intAttr(e.node, "noop_with_empty_axes", 0)) {
      e.setOutput(0, x);
      return success();
    }
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i)
        axes.push_back(i);
    bool keep = intAttr(e.node, "keepdims", 1) != 0;
    std::vector<bool> reduced(rank, false);
    for (int64_t &a : axes) {
      FailureOr<int64_t> n = e.axis(a, rank);
      if (failed(n))
        return failure();
      a = *n;
      reduced[a] = true;
    }
    std::sort(axes.begin(), axes.end());
    Shape shape;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d] || keep)
        shape.push_back(reduced[d] ? 1 : e.shape(0)[d]);
    e.setOutput(0, ReduceOp::create(e.b(), e.loc, e.like(0, shape), kind, x,
                                    axes, keep));
    return success();
  };
}

LogicalResult reshapeTo(NodeEmitter &e, const Shape &shape) {
  Value x = e.value(0);
  if (!x)
    return failure();
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (n != e.type(0).getNumElements())
    return e.error() << "cannot reshape " << formatShape(e.shape(0)) << " to "
                     << formatShape(shape);
  e.setOutput(0, ReshapeOp::create(e.b(), e.loc, e.like(0, shape), x));
  return success();
}

LogicalResult emitReshape(NodeEmitter &e) {
  FailureOr<std::vector<int64_t>> spec = e.constInts(1, "shape");
  if (failed(spec))
    return failure();
  Shape in = e.shape(0), shape;
  bool allowZero = intAttr(e.node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < spec->size(); ++i) {
    int64_t d = (*spec)[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return e.error() << "shape entry " << i << " is 0 but the input has "
                         << "rank " << in.size();
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return e.error() << "shape has more than one -1";
      infer = static_cast<int64_t>(i);
    } else if (d < 0) {
      return e.error() << "invalid shape entry " << d;
    } else {
      known *= d;
    }
    shape.push_back(d);
  }
  if (infer >= 0) {
    if (known == 0 || e.type(0).getNumElements() % known)
      return e.error() << "cannot infer the -1 entry reshaping "
                       << formatShape(in) << " to " << formatShape(shape);
    shape[infer] = e.type(0).getNumElements() / known;
  }
  return reshapeTo(e, shape);
}

LogicalResult emitUnsqueeze(NodeEmitter &e) {
  std::vector<int64_t> axes;
  if (const auto *a = findAttr(e.node, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  else {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  int64_t rank = e.type(0).getRank() + axes.size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : axes) {
    FailureOr<int64_t> n = e.axis(a, rank);
    if (failed(n))
      return failure();
    isNew[*n] = true;
  }
  Shape shape, in = e.shape(0);
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(isNew[i] ? 1 : in[j++]);
  return reshapeTo(e, shape);
}

LogicalResult emitSqueeze(NodeEmitter &e) {
  Shape in = e.shape(0), shape;
  int64_t rank = in.size();
  std::vector<bool> drop(rank, false);
  std::optional<std::vector<int64_t>> axes;
  if (const auto *a = findAttr(e.node, "axes"))
    axes = std::vector<int64_t>(a->ints().begin(), a->ints().end());
  else if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  if (axes) {
    for (int64_t a : *axes) {
      FailureOr<int64_t> n = e.axis(a, rank);
      if (failed(n))
        return failure();
      if (in[*n] != 1)
        return e.error() << "cannot squeeze dimension " << *n << " of size "
                         << in[*n];
      drop[*n] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = in[i] == 1;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      shape.push_back(in[i]);
  return reshapeTo(e, shape);
}

LogicalResult emitTranspose(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  int64_t rank = e.type(0).getRank();
  std::vector<int64_t> perm;
  if (const auto *a = findAttr(e.node, "perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return e.error() << "perm has " << perm.size() << " entries for rank "
                     << rank;
  Shape shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank)
      return e.error() << "invalid perm entry " << p;
    shape.push_back(e.shape(0)[p]);
  }
  e.setOutput(0, TransposeOp::create(e.b(), e.loc, e.like(0, shape), x,
                                     e.b().getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult emitSplit(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  int64_t rank = e.type(0).getRank();
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  int64_t dim = e.shape(0)[*axis], parts = e.node.output_size();
  std::vector<int64_t> sizes;
  if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "split");
    if (failed(v))
      return failure();
    sizes = *v;
  } else if (const auto *a = findAttr(e.node, "split")) {
    sizes.assign(a->ints().begin(), a->ints().end());
  } else {
    if (dim % parts)
      return e.error() << "dimension " << *axis << " of size " << dim
                       << " does not split evenly into " << parts << " parts";
    sizes.assign(parts, dim / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return e.error() << "split gives " << sizes.size() << " sizes for " << parts
                     << " outputs";
  SmallVector<Type> types;
  int64_t total = 0;
  for (int64_t s : sizes) {
    Shape shape = e.shape(0);
    shape[*axis] = s;
    total += s;
    types.push_back(e.like(0, shape));
  }
  if (total != dim)
    return e.error() << "split sizes add up to " << total << ", not " << dim;
  auto op =
      SplitOp::create(e.b(), e.loc, types, x, e.b().getI64IntegerAttr(*axis));
  for (int64_t i = 0; i < parts; ++i)
    if (!e.node.output(i).empty())
      e.setOutput(i, op.getResult(i));
  return success();
}

LogicalResult emitConcat(NodeEmitter &e) {
  SmallVector<Value> inputs;
  int64_t rank = e.type(0).getRank();
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  Shape shape = e.shape(0);
  shape[*axis] = 0;
  for (int i = 0; i < e.node.input_size(); ++i) {
    Value v = e.value(i);
    if (!v)
      return failure();
    if (e.type(i).getRank() != rank)
      return e.error() << "inputs have different ranks";
    shape[*axis] += e.shape(i)[*axis];
    inputs.push_back(v);
  }
  e.setOutput(0, ConcatOp::create(e.b(), e.loc, e.like(0, shape), inputs,
                                  e.b().getI64IntegerAttr(*axis)));
  return success();
}

LogicalResult emitSlice(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  Shape in = e.shape(0);
  int64_t rank = in.size();
  FailureOr<std::vector<int64_t>> starts = e.constInts(1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<std::vector<int64_t>> ends = e.constInts(2, "ends");
  if (failed(ends))
    return failure();
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (e.hasInput(3)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(3, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (e.hasInput(4)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(4, "steps");
    if (failed(v))
      return failure();
    steps = *v;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return e.error() << "starts, ends, axes and steps differ in length";
  SmallVector<int64_t> start(rank, 0), limit(in.begin(), in.end()),
      stride(rank, 1);
  Shape shape = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> a = e.axis(axes[i], rank);
    if (failed(a))
      return failure();
    int64_t st = steps[i];
    if (st == 0)
      return e.error() << "step of axis " << *a << " is zero";
    SliceRange range = normalizeSlice(in[*a], (*starts)[i], (*ends)[i], st);
    shape[*a] = range.count;
    start[*a] = range.start;
    limit[*a] = range.limit;
    stride[*a] = st;
  }
  e.setOutput(0, SliceOp::create(e.b(), e.loc, e.like(0, shape), x,
                                 e.b().getDenseI64ArrayAttr(start),
                                 e.b().getDenseI64ArrayAttr(limit),
                                 e.b().getDenseI64ArrayAttr(stride)));
  return success();
}

LogicalResult emitGather(NodeEmitter &e) {
  Shape data = e.shape(0), idx = e.shape(1);
  int64_t rank = data.size();
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  Entry *ie = e.entry(1);
  Value indices;
  if (ie->constant) {
    // Normalize negative indices while they are still known.
    HostTensor t = *ie->constant;
    int64_t dim = data[*axis];
    for (int64_t k = 0; k < t.numElements(); ++k) {
      int64_t j = t.getInt(k);
      if (j < -dim || j >= dim)
        return e.error() << "index " << j << " is out of range for axis "
                         << *axis << " of size " << dim;
      t.ints[k] = j < 0 ? j + dim : j;
    }
    indices = ConstantOp::create(e.b(), e.loc, e.imp.toAttr(t, ie->type));
  } else {
    indices = e.value(1);
  }
  Value x = e.value(0);
  if (!x || !indices)
    return failure();
  Shape shape(data.begin(), data.begin() + *axis);
  shape.insert(shape.end(), idx.begin(), idx.end());
  shape.insert(shape.end(), data.begin() + *axis + 1, data.end());
  e.setOutput(0, GatherOp::create(e.b(), e.loc, e.like(0, shape), x, indices,
                                  e.b().getI64IntegerAttr(*axis)));
  return success();
}

LogicalResult emitExpand(NodeEmitter &e) {
  FailureOr<std::vector<int64_t>> target = e.constInts(1, "shape");
  if (failed(target))
    return failure();
  FailureOr<Shape> shape = broadcast(e, e.shape(0), *target);
  if (failed(shape))
    return failure();
  Value x = e.value(0);
  if (!x)
    return failure();
  if (*shape == e.shape(0)) {
    e.setOutput(0, x);
    return success();
  }
  e.setOutput(0, ExpandOp::create(e.b(), e.loc, e.like(0, *shape), x));
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
  if (e.type(0).getRank() < 2)
    return e.error() << "input must have rank >= 2";
  bool upper = intAttr(e.node, "upper", 1) != 0;
  e.setOutput(0, TriluOp::create(e.b(), e.loc, x.getType(), x,
                                 upper ? e.b().getUnitAttr() : nullptr,
                                 e.b().getI64IntegerAttr(k)));
  return success();
}

LogicalResult emitEinsum(NodeEmitter &e) {
  const auto *eq = findAttr(e.node, "equation");
  if (!eq)
    return e.error() << "missing 'equation' attribute";
  SmallVector<Value> inputs;
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
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
  std::vector<int64_t> shape;
  if (!parseEinsum(eq->s(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, shape, error))
    return e.error() << error;
  e.setOutput(0, EinsumOp::create(e.b(), e.loc, e.like(0, shape), inputs,
                                  e.b().getStringAttr(eq->s())));
  return success();
}

LogicalResult emitIdentity(NodeEmitter &e) {
  e.imp.values[e.node.output(0)] = *e.entry(0);
  return success();
}

LogicalResult emitNeedsConstants(NodeEmitter &e) {
  for (int i = 0; i < e.node.input_size(); ++i)
    if (e.hasInput(i) && !e.entry(i)->constant)
      return e.error() << "input " << i << " ('" << e.node.input(i)
                       << "') must be known at import: the output shape "
                          "would otherwise be dynamic";
  return e.error() << "cannot evaluate this node at import";
}

const llvm::StringMap<EmitFn> &emitters() {
  static const llvm::StringMap<EmitFn> table = {
      {"MatMul", emitMatMul},
      {"Gemm", emitGemm},
      {"Add", binary<AddOp>()},
      {"Sub", binary<SubOp>()},
      {"Mul", binary<MulOp>()},
      {"Div", binary<DivOp>()},
      {"Pow", binary<PowOp>()},
      {"Sqrt", unary<SqrtOp>()},
      {"Reciprocal", unary<ReciprocalOp>()},
      {"Neg", unary<NegOp>()},
      {"Exp", unary<ExpOp>()},
      {"Log", unary<LogOp>()},
      {"Erf", unary<ErfOp>()},
      {"Tanh", unary<TanhOp>()},
      {"Sigmoid", unary<SigmoidOp>()},
      {"Relu", unary<ReluOp>()},
      {"Cos", unary<CosOp>()},
      {"Sin", unary<SinOp>()},
      {"Softmax", emitSoftmax},
      {"LayerNormalization", emitLayerNorm},
      {"ReduceMean", reduce(ReduceKind::mean)},
      {"ReduceSum", reduce(ReduceKind::sum)},
      {"ReduceMax", reduce(ReduceKind::max)},
      {"Reshape", emitReshape},
      {"Transpose", emitTranspose},
      {"Split", emitSplit},
      {"Concat", emitConcat},
      {"Slice", emitSlice},
      {"Gather", emitGather},
      {"Unsqueeze", emitUnsqueeze},
      {"Squeeze", emitSqueeze},
      {"Expand", emitExpand},
      {"Where", emitWhere},
      {"Equal", compare(ComparePredicate::eq)},
      {"Less", compare(ComparePredicate::lt)},
      {"Cast", emitCast},
      {"Trilu", emitTrilu},
      {"Identity", emitIdentity},
      {"Einsum", emitEinsum},
      {"Constant", emitNeedsConstants},
      {"ConstantOfShape", emitNeedsConstants},
      {"Shape", emitNeedsConstants},
      {"Range", emitNeedsConstants},
  };
  return table;
}

/// Value of a Constant node's attribute.
bool constantValue(const onnx::NodeProto &node, HostTensor &out,
                   std::string &error) {
  for (const auto &a : node.attribute()) {
    if (a.name() == "value")
      return decodeTensor(a.t(), nullptr, out, error);
    out = HostTensor();
    if (a.name() == "value_float" || a.name() == "value_floats") {
      out.dtype = DType::Float;
      if (a.name() == "value_float")
        out.floats = {a.f()};
      else
        out.floats.assign(a.floats().begin(), a.floats().end());
      if (a.name() == "value_floats")
        out.shape = {static_cast<int64_t>(out.floats.size())};
      return true;
    }
    if (a.name() == "value_int" || a.name() == "value_ints") {
      out.dtype = DType::Int64;
      if (a.name() == "value_int")
        out.ints = {a.i()};
      else
        out.ints.assign(a.ints().begin(), a.ints().end());
      if (a.name() == "value_ints")
        out.shape = {static_cast<int64_t>(out.ints.size())};
      return true;
    }
  }
  error = "Constant has no supported value attribute";
  return false;
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, int index) {
  std::string name = nodeName(node, index);
  Location loc = NameLoc::get(builder.getStringAttr(name));
  NodeEmitter e{*this, node, loc, name};
  std::vector<const HostTensor *> known;
  bool allKnown = true;
  for (int i = 0; i < node.input_size(); ++i) {
    if (!e.hasInput(i)) {
      known.push_back(nullptr);
      continue;
    }
    Entry *en = e.entry(i);
    if (!en)
      return emitError(loc) << "node '" << name << "' reads '" << node.input(i)
                            << "', an optional output the importer does not "
                               "produce";
    known.push_back(en->constant ? &*en->constant : nullptr);
    allKnown &= en->constant.has_value();
  }

  std::vector<HostTensor> outputs;
  std::string error;
  if (node.op_type() == "Constant") {
    outputs.emplace_back();
    if (!constantValue(node, outputs[0], error))
      return emitError(loc) << "node '" << name << "' (Constant): " << error;
  } else if (node.op_type() == "Shape") {
    Shape s = e.shape(0);
    int64_t rank = s.size();
    int64_t start = intAttr(node, "start", 0), end = intAttr(node, "end", rank);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    HostTensor t;
    t.dtype = DType::Int64;
    t.ints.assign(s.begin() + start, s.begin() + std::max(start, end));
    t.shape = {static_cast<int64_t>(t.ints.size())};
    outputs.push_back(std::move(t));
  } else if (allKnown && !foldNode(node, known, outputs, error) &&
             !error.empty()) {
    return emitError(loc) << "node '" << name << "' (" << node.op_type()
                          << "): " << error;
  }

  if (!outputs.empty()) {
    for (size_t i = 0; i < outputs.size() && i < (size_t)node.output_size();
         ++i) {
      if (node.output(i).empty())
        continue;
      if (!isSupportedDType(static_cast<int32_t>(outputs[i].dtype)))
        return emitError(loc) << "node '" << name << "' produces an "
                              << "unsupported element type";
      RankedTensorType type = typeOf(outputs[i]);
      values[node.output(i)] = Entry{Value(), std::move(outputs[i]), "", type};
    }
    return success();
  }
  return emitters().lookup(node.op_type())(e);
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::vector<std::string> mp::getSupportedONNXOps() {
  std::vector<std::string> ops;
  for (const auto &entry : supportedOps())
    ops.push_back(entry.getKey().str());
  std::sort(ops.begin(), ops.end());
  return ops;
}

bool mp::parseInputBindings(llvm::StringRef spec,
                            std::map<std::string, std::string> &bindings,
                            std::string &error) {
  SmallVector<StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, file] = item.split('=');
    if (name.trim().empty() || file.trim().empty()) {
      error = "malformed binding '" + item.str() + "': expected NAME=FILE.pb";
      return false;
    }
    bindings[name.trim().str()] = file.trim().str();
  }
  return true;
}

bool mp::parseInputShapes(llvm::StringRef spec,
                          std::map<std::string, std::vector<int64_t>> &shapes,
                          std::string &error) {
  SmallVector<StringRef> items;
  spec.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [name, dims] = item.split('=');
    name = name.trim();
    if (name.empty() || dims.empty()) {
      error = "malformed shape '" + item.str() +
              "': expected NAME=D0xD1x... (e.g. input_ids=2x16)";
      return false;
    }
    std::vector<int64_t> shape;
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef p : parts) {
      int64_t d;
      if (p.trim().getAsInteger(10, d) || d < 0) {
        error = "malformed dimension '" + p.str() + "' in shape of '" +
                name.str() + "'";
        return false;
      }
      shape.push_back(d);
    }
    shapes[name.str()] = shape;
  }
  return true;
}

OwningOpRef<ModuleOp> mp::importONNXFile(llvm::StringRef path,
                                         MLIRContext *context,
                                         const ImportOptions &options) {
  context->loadDialect<MPDialect, func::FuncDialect>();
  LoadedModel model;
  std::string error;
  if (!loadModel(path.str(), options.inputShapes, options.boundInputs,
                 !options.shapeOnly, model, error)) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << error;
    return nullptr;
  }
  Importer importer(context, model, options);
  return importer.run();
}
