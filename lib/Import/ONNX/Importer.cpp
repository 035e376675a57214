//===- Importer.cpp - ONNX model -> mp dialect ----------------------------===//
//
// Walks the ONNX graph in order. Every value is either a parameter (a float
// initializer), a constant known at import (integer initializers, Constant
// nodes, and everything folded from them and from static shapes), or an SSA
// value of the emitted function. This file builds the module (parameters,
// constants, the function and its inputs and outputs) and dispatches each
// node through the op table (ONNXOps.cpp): nodes whose inputs are known are
// folded on the host (Fold*.cpp), the rest become mp ops (Import*.cpp) whose
// result types follow from their operands, so the IR is fully static.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "BoundInputs.h"

#include "ONNXOps.h"

#include "mp/Support/Shape.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>

using namespace mlir;
using namespace mp;
using namespace mp::onnx_import;

namespace mp::onnx_import {

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::elementType(int32_t onnxType, Location loc,
                                      const std::string &what) {
  switch (static_cast<DType>(onnxType)) {
  case DType::Float: return builder.getF32Type();
  case DType::Float16: return builder.getF16Type();
  case DType::BFloat16: return builder.getBF16Type();
  case DType::Double: return builder.getF64Type();
  case DType::Int64: return builder.getI64Type();
  case DType::Int32: return builder.getI32Type();
  case DType::Int8: return builder.getI8Type();
  case DType::Bool: return builder.getI1Type();
  }
  return emitError(loc) << what << " has unsupported element type "
                        << dtypeName(onnxType);
}

RankedTensorType Importer::typeOf(const HostTensor &t) {
  Type elem = *elementType(static_cast<int32_t>(t.dtype), UnknownLoc::get(ctx),
                           "constant");
  return RankedTensorType::get(t.shape, elem);
}

/// `values` converted element by element to T, as a dense attribute of `type`
/// (whose storage detects splats).
template <typename T, typename Source, typename Convert>
static DenseElementsAttr denseFrom(RankedTensorType type,
                                   const std::vector<Source> &values,
                                   Convert convert) {
  SmallVector<T> converted;
  converted.reserve(values.size());
  for (Source v : values)
    converted.push_back(convert(v));
  return DenseElementsAttr::get(type, ArrayRef<T>(converted));
}

// Built from typed arrays rather than APInts and APFloats: a folded constant
// may hold millions of elements, and one APInt each made import slow.
DenseElementsAttr Importer::toAttr(const HostTensor &t, RankedTensorType type) {
  Type elem = type.getElementType();
  if (auto floatType = dyn_cast<FloatType>(elem)) {
    if (floatType.isF64())
      return DenseElementsAttr::get(type, ArrayRef<double>(t.floats));
    if (floatType.isF32())
      return denseFrom<float>(type, t.floats,
                              [](double v) { return static_cast<float>(v); });
    // f16 and bf16: rounded as APFloat does, stored as their bits.
    const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
    SmallVector<uint16_t> bits;
    bits.reserve(t.floats.size());
    for (double v : t.floats) {
      APFloat f(v);
      bool lost;
      f.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
      bits.push_back(static_cast<uint16_t>(f.bitcastToAPInt().getZExtValue()));
    }
    return DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                             bits.size() * sizeof(uint16_t)));
  }
  // Integers wrap to the element's width, as the runtime's arithmetic does.
  switch (elem.getIntOrFloatBitWidth()) {
  case 64: return DenseElementsAttr::get(type, ArrayRef<int64_t>(t.ints));
  case 32:
    return denseFrom<int32_t>(type, t.ints, [](int64_t v) {
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    });
  case 8:
    return denseFrom<int8_t>(type, t.ints, [](int64_t v) {
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    });
  case 1:
    return denseFrom<bool>(type, t.ints,
                           [](int64_t v) { return (v & 1) != 0; });
  }
  llvm_unreachable("the importer's element types are f16, bf16, f32, f64, "
                   "i1, i8, i32 and i64");
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
    if (!defaultDomain || !lookupONNXOp(node.op_type()))
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
  auto param = ParamOp::create(builder, loc, init.name(), type);
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
  HostTensor preview;
  if (!decodeTensor(init, isExternal(init) ? &external : nullptr, preview,
                    error, options.paramPreview))
    return emitError(loc) << error;
  param.setPreviewAttr(toAttr(
      preview, RankedTensorType::get({preview.numElements()}, elemType)));
  return success();
}

/// Whether `name` is a PyTorch submodule's weight or bias (a.b.bias, as
/// the bias of nn.Linear(C, 1) is named): identifiers joined by dots, the
/// last `weight` or `bias`. Other one-element initializers stay constants:
/// a buffer (a norm's eps, an exponent, a scale) that raising matches as a
/// constant, a constant a tool stored as an initializer
/// (/ln/Constant_output_0).
static bool isModuleParameterName(StringRef name, bool weightOrBias = true) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  auto identifier = [](StringRef p) {
    return !p.empty() &&
           llvm::all_of(p, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  };
  return parts.size() > 1 && llvm::all_of(parts, identifier) &&
         (!weightOrBias || parts.back() == "weight" || parts.back() == "bias");
}

LogicalResult Importer::declareInitializers() {
  builder.setInsertionPointToEnd(module.getBody());
  // One-element initializers named as a module's (blocks.0.alpha) read as
  // constants: a learned scalar among them would not be trained, which
  // --mp-summary and mp-autodiff say.
  SmallVector<Attribute> namedScalars;
  for (const auto &init : model.model.graph().initializer()) {
    Location loc = NameLoc::get(builder.getStringAttr(init.name()));
    FailureOr<Type> elem =
        elementType(init.data_type(), loc, "initializer '" + init.name() + "'");
    if (failed(elem))
      return failure();
    int64_t numElements = 1;
    for (int64_t d : init.dims())
      numElements *= d;
    // Float tensors are weights; integers and float scalars are constants,
    // but for a submodule's one-element weight or bias (nn.Linear(C, 1)'s,
    // a value or reward head's).
    if (isa<FloatType>(*elem) &&
        (numElements > 1 || isModuleParameterName(init.name()))) {
      if (failed(declareParam(init, *elem)))
        return failure();
      continue;
    }
    if (isa<FloatType>(*elem) && numElements == 1 &&
        isModuleParameterName(init.name(), /*weightOrBias=*/false))
      namedScalars.push_back(builder.getStringAttr(init.name()));
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
  if (!namedScalars.empty())
    module->setAttr(MPDialect::getScalarConstantsAttrName(),
                    builder.getArrayAttr(namedScalars));
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
                                  const std::string &spec, Location loc) {
  HostTensor value;
  std::string error;
  if (!readBoundInput(input, spec, value, error))
    return emitError(loc) << error;
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
        builder, NameLoc::get(builder.getStringAttr(name)), e.type, e.param);
    return e.value;
  }
  e.value = ConstantOp::create(builder, loc, toAttr(*e.constant, e.type));
  return e.value;
}

OwningOpRef<ModuleOp> Importer::run() {
  Location fileLoc = FileLineColLoc::get(ctx, model.path, 0, 0);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc);
  module = *owned;
  module->setAttr(MPDialect::getSourceAttrName(),
                  builder.getStringAttr(model.path));
  module->setAttr(MPDialect::getOpsetAttrName(),
                  builder.getI64IntegerAttr(model.originalOpset));
  for (const std::string &name : model.droppedInputs)
    emitWarning(NameLoc::get(builder.getStringAttr(name)))
        << "graph input '" << name
        << "' is read only by branches of an If not taken: the program "
           "does not take it";
  if (failed(checkSupportedOps()) || failed(declareInitializers()) ||
      failed(createFunction()))
    return nullptr;
  const auto &graph = model.model.graph();
  for (int i = 0; i < graph.node_size(); ++i)
    if (failed(importNode(graph.node(i), i)))
      return nullptr;
  if (failed(finishFunction()) || failed(tieTransposedCopies()))
    return nullptr;
  nameFoldedWeights();
  if (!options.shapeOnly)
    warnSlicedCopies();
  if (failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

FailureOr<std::vector<int64_t>> NodeEmitter::constInts(int i,
                                                       const char *what) {
  Entry *e = entry(i);
  if (!e || !e->constant) {
    error() << what << " (input " << i << ", '" << node.input(i)
            << "') must be known at import: a constant or computed from "
               "static shapes";
    return failure();
  }
  if (e->constant->isFloat()) {
    error() << what << " (input " << i << ", '" << node.input(i)
            << "') must hold integers, not floating-point values";
    return failure();
  }
  std::vector<int64_t> v(e->constant->numElements());
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = e->constant->getInt(k);
  return v;
}

FailureOr<int64_t> NodeEmitter::axis(int64_t a, int64_t rank) {
  std::optional<int64_t> normalized = normalizeAxis(a, rank);
  if (!normalized) {
    error() << "axis " << a << " is out of range for rank " << rank;
    return failure();
  }
  return *normalized;
}

Value scalarConstant(NodeEmitter &e, Type elem, double v) {
  auto type = RankedTensorType::get({}, elem);
  Attribute value =
      isa<FloatType>(elem)
          ? Attribute(e.b().getFloatAttr(elem, v))
          : Attribute(e.b().getIntegerAttr(elem, static_cast<int64_t>(v)));
  return ConstantOp::create(e.b(), e.loc, DenseElementsAttr::get(type, value));
}

Value boolConstant(NodeEmitter &e, bool v) {
  auto type = RankedTensorType::get({}, e.b().getI1Type());
  return ConstantOp::create(e.b(), e.loc, DenseElementsAttr::get(type, v));
}

Value reshapeValue(NodeEmitter &e, Value x, ArrayRef<int64_t> shape) {
  auto elem = cast<RankedTensorType>(x.getType()).getElementType();
  return ReshapeOp::create(e.b(), e.loc, RankedTensorType::get(shape, elem), x);
}

/// Elements [start, limit) of `x` along `axis` by `step` (negative: walking
/// back, `limit` may be -1).
Value sliceAxis(NodeEmitter &e, Value x, int64_t axis, int64_t start,
                int64_t limit, int64_t step) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
  const int64_t rank = shape.size();
  SmallVector<int64_t> starts(rank, 0), limits(shape), steps(rank, 1);
  starts[axis] = start;
  limits[axis] = limit;
  steps[axis] = step;
  return SliceOp::create(e.b(), e.loc, x, e.b().getDenseI64ArrayAttr(starts),
                         e.b().getDenseI64ArrayAttr(limits),
                         e.b().getDenseI64ArrayAttr(steps));
}

Value padAxis(NodeEmitter &e, Value x, int64_t axis, int64_t before,
              int64_t after, double fill, Value fillValue) {
  if (before <= 0 && after <= 0)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  Type elem = type.getElementType();
  auto filled = [&](int64_t count) -> Value {
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = count;
    auto blockType = RankedTensorType::get(shape, elem);
    if (fillValue)
      return ExpandOp::create(e.b(), e.loc, blockType, fillValue);
    Attribute value =
        isa<FloatType>(elem)
            ? Attribute(e.b().getFloatAttr(elem, fill))
            : Attribute(e.b().getIntegerAttr(elem, static_cast<int64_t>(fill)));
    return ConstantOp::create(e.b(), e.loc,
                              DenseElementsAttr::get(blockType, value));
  };
  SmallVector<Value> parts;
  if (before > 0)
    parts.push_back(filled(before));
  parts.push_back(x);
  if (after > 0)
    parts.push_back(filled(after));
  return ConcatOp::create(e.b(), e.loc, parts, e.b().getI64IntegerAttr(axis));
}

LogicalResult Importer::importNode(const onnx::NodeProto &node, int index) {
  std::string name = nodeName(node, index);
  Location loc = NameLoc::get(builder.getStringAttr(name));
  NodeEmitter e{*this, node, loc, name};
  std::vector<const HostTensor *> known;
  std::vector<Shape> shapes;
  bool allKnown = true;
  for (int i = 0; i < node.input_size(); ++i) {
    if (!e.hasInput(i)) {
      known.push_back(nullptr);
      shapes.emplace_back();
      continue;
    }
    Entry *en = e.entry(i);
    if (!en)
      return emitError(loc) << "node '" << name << "' reads '" << node.input(i)
                            << "', an optional output the importer does not "
                               "produce";
    known.push_back(en->constant ? &*en->constant : nullptr);
    shapes.push_back(e.shape(i));
    allKnown &= en->constant.has_value();
  }

  // checkSupportedOps has seen every node's op type.
  const ONNXOpDef &op = *lookupONNXOp(node.op_type());
  std::vector<HostTensor> outputs;
  std::string error;
  if ((allKnown || op.foldInputs == FoldInputs::None) &&
      !foldNode(op, node, known, shapes, outputs, error) && !error.empty())
    return e.error() << error;

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
  return op.import(e);
}

} // namespace mp::onnx_import

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::vector<std::string> mp::getSupportedONNXOps() {
  std::vector<std::string> ops;
  for (const ONNXOpDef &op : getONNXOpDefs())
    ops.push_back(op.name.str());
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
      error = "malformed binding '" + item.str() +
              "': expected NAME=FILE.pb or NAME=true|false|NUMBER";
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
      // An empty batch or sequence computes nothing and trains on nothing.
      if (d == 0) {
        error = "dimension 0 in shape of '" + name.str() +
                "': a pinned dimension must be at least 1";
        return false;
      }
      shape.push_back(d);
    }
    if (!shapes.emplace(name.str(), shape).second) {
      error = "'" + name.str() + "' is given twice";
      return false;
    }
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
