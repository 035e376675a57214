//===- Importer.h - state shared by the ONNX node importers -----*- C++ -*-===//
//
// The importer's view of the graph (what is known about each ONNX value) and
// NodeEmitter, through which the emit functions of each area
// (ImportElementwise.cpp, ImportShape.cpp, ImportTransformer.cpp) read a
// node's inputs, report errors at the node and define its outputs. Which
// function imports which op type is said once, in the table of ONNXOps.cpp.
//
// Emit functions build the mp ops that infer their result type without
// giving one. An inferring builder aborts when inference fails, so each emit
// function first checks the node against the op's shape rule from
// mp/Support/Shape.h and reports the rule's error at the node.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_IMPORTER_H
#define MP_LIB_IMPORT_ONNX_IMPORTER_H

#include "HostTensor.h"
#include "ModelLoader.h"

#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mp::onnx_import {

/// What the importer knows about one ONNX value.
struct Entry {
  mlir::Value value;                  // emitted SSA value (may be null)
  std::optional<HostTensor> constant; // known at import
  std::string param;                  // parameter symbol, if a parameter
  mlir::RankedTensorType type;
};

struct Importer {
  Importer(mlir::MLIRContext *ctx, LoadedModel &model,
           const ImportOptions &options)
      : ctx(ctx), builder(ctx), model(model), options(options) {}

  mlir::OwningOpRef<mlir::ModuleOp> run();

  // Types and attributes.
  mlir::FailureOr<mlir::Type> elementType(int32_t onnxType, mlir::Location loc,
                                          const std::string &what);
  mlir::DenseElementsAttr toAttr(const HostTensor &t,
                                 mlir::RankedTensorType type);
  mlir::RankedTensorType typeOf(const HostTensor &t);

  // Module structure.
  mlir::LogicalResult checkSupportedOps();
  mlir::LogicalResult declareInitializers();
  mlir::LogicalResult declareParam(const onnx::TensorProto &init,
                                   mlir::Type elemType);
  mlir::LogicalResult createFunction();
  mlir::LogicalResult finishFunction();
  /// Parameters constant folding made (FoldedParams.cpp): transposed
  /// copies read as their sources' transposes, and weights named after the
  /// module of the one node reading them.
  mlir::LogicalResult tieTransposedCopies();
  void tieEqualCopies(mlir::SymbolTable &symbols);
  void nameFoldedWeights();
  void warnSlicedCopies();
  /// The raw bytes of `p`'s initializer (false when it has none readable).
  bool paramBytes(mp::ParamOp p, std::string &bytes);
  mlir::LogicalResult bindInput(const onnx::ValueInfoProto &input,
                                const std::string &spec, mlir::Location loc);

  // Nodes.
  mlir::LogicalResult importNode(const onnx::NodeProto &node, int index);
  mlir::Value materialize(const std::string &name, mlir::Location loc);

  mlir::MLIRContext *ctx;
  mlir::OpBuilder builder;
  LoadedModel &model;
  const ImportOptions &options;
  mlir::ModuleOp module;
  mlir::func::FuncOp func;
  llvm::StringMap<Entry> values;
};

/// The shape of a ranked tensor value.
inline Shape shapeOf(mlir::Value v) {
  llvm::ArrayRef<int64_t> s =
      llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
  return Shape(s.begin(), s.end());
}

/// Emission of one node: gives access to inputs and reports errors located at
/// the node.
struct NodeEmitter {
  Importer &imp;
  const onnx::NodeProto &node;
  mlir::Location loc;
  std::string name; // the node's name, or OpType_index when it has none

  mlir::OpBuilder &b() { return imp.builder; }
  mlir::MLIRContext *ctx() { return imp.ctx; }

  mlir::InFlightDiagnostic error() {
    return mlir::emitError(loc)
           << "node '" << name << "' (" << node.op_type() << "): ";
  }
  bool hasInput(int i) {
    return i < node.input_size() && !node.input(i).empty();
  }
  Entry *entry(int i) {
    auto it = imp.values.find(node.input(i));
    return it == imp.values.end() ? nullptr : &it->second;
  }
  mlir::RankedTensorType type(int i) { return entry(i)->type; }
  Shape shape(int i) {
    llvm::ArrayRef<int64_t> s = type(i).getShape();
    return Shape(s.begin(), s.end());
  }
  mlir::Value value(int i) { return imp.materialize(node.input(i), loc); }
  /// An input that must be known at import (shapes, axes, indices...).
  mlir::FailureOr<std::vector<int64_t>> constInts(int i, const char *what);
  void setOutput(int i, mlir::Value v) {
    imp.values[node.output(i)] = Entry{
        v, std::nullopt, "", llvm::cast<mlir::RankedTensorType>(v.getType())};
  }
  /// A tensor type of `shape` with input i's element type.
  mlir::RankedTensorType like(int i, const Shape &shape) {
    return mlir::RankedTensorType::get(shape, type(i).getElementType());
  }
  /// `a` in [-rank, rank) made non-negative, or an error at the node.
  mlir::FailureOr<int64_t> axis(int64_t a, int64_t rank);
};

//===----------------------------------------------------------------------===//
// Emit functions, by area (the table in ONNXOps.cpp picks one per op type)
//===----------------------------------------------------------------------===//

// ImportElementwise.cpp

/// A unary elementwise op (its result has its operand's type).
template <typename OpT> mlir::LogicalResult emitUnary(NodeEmitter &e) {
  mlir::Value x = e.value(0);
  if (!x)
    return mlir::failure();
  e.setOutput(0, OpT::create(e.b(), e.loc, x));
  return mlir::success();
}
/// Builds one binary op on broadcast operands.
using BinaryBuilder = mlir::Value (*)(mlir::OpBuilder &, mlir::Location,
                                      mlir::Value, mlir::Value);
/// A broadcasting binary op; `convertRhs` converts the second operand to the
/// first's element type (Pow's exponent may have another type).
mlir::LogicalResult emitBinary(NodeEmitter &e, BinaryBuilder build,
                               bool convertRhs);
template <typename OpT> mlir::LogicalResult emitBinary(NodeEmitter &e) {
  return emitBinary(
      e,
      [](mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
         mlir::Value rhs) -> mlir::Value {
        return OpT::create(b, loc, lhs, rhs);
      },
      std::is_same_v<OpT, PowOp>);
}
mlir::LogicalResult emitCompare(NodeEmitter &e, ComparePredicate predicate);
mlir::LogicalResult emitClip(NodeEmitter &e);
mlir::LogicalResult emitNot(NodeEmitter &e);
/// Max (`largest`) or Min of one or more inputs.
mlir::LogicalResult emitExtremum(NodeEmitter &e, bool largest);
template <ComparePredicate P> mlir::LogicalResult emitCompare(NodeEmitter &e) {
  return emitCompare(e, P);
}
mlir::LogicalResult emitWhere(NodeEmitter &e);
enum class LogicalKind { And, Or, Xor };
mlir::LogicalResult emitLogical(NodeEmitter &e, LogicalKind kind);
template <LogicalKind K> mlir::LogicalResult emitLogical(NodeEmitter &e) {
  return emitLogical(e, K);
}
mlir::LogicalResult emitCast(NodeEmitter &e);

// ImportTransformer.cpp
mlir::LogicalResult emitMatMul(NodeEmitter &e);
mlir::LogicalResult emitGemm(NodeEmitter &e);
mlir::LogicalResult emitSoftmax(NodeEmitter &e);
mlir::LogicalResult emitLayerNorm(NodeEmitter &e);
mlir::LogicalResult emitInstanceNorm(NodeEmitter &e);
/// A Reduce* node's axes (normalized, sorted) and keepdims; `none` when it
/// reduces nothing (empty axes with noop_with_empty_axes).
struct ReduceAxes {
  llvm::SmallVector<int64_t> axes;
  bool keep = true, none = false;
};
mlir::FailureOr<ReduceAxes> reduceAxes(NodeEmitter &e);
mlir::LogicalResult emitReduce(NodeEmitter &e, ReduceKind kind);
template <ReduceKind K> mlir::LogicalResult emitReduce(NodeEmitter &e) {
  return emitReduce(e, K);
}
/// ArgMax (`largest`) or ArgMin.
mlir::LogicalResult emitArgExtremum(NodeEmitter &e, bool largest);
mlir::LogicalResult emitTrilu(NodeEmitter &e);
mlir::LogicalResult emitCumSum(NodeEmitter &e);
mlir::LogicalResult emitEinsum(NodeEmitter &e);

// ImportConv.cpp
mlir::LogicalResult emitConv(NodeEmitter &e);

// ImportComposite.cpp: ops imported as several mp ops
mlir::LogicalResult emitAbs(NodeEmitter &e);
mlir::LogicalResult emitSign(NodeEmitter &e);
mlir::LogicalResult emitSoftplus(NodeEmitter &e);
mlir::LogicalResult emitLogSoftmax(NodeEmitter &e);
enum class CompositeReduce { L2, SumSquare, LogSumExp };
mlir::LogicalResult emitCompositeReduce(NodeEmitter &e, CompositeReduce kind);
template <CompositeReduce K>
mlir::LogicalResult emitCompositeReduce(NodeEmitter &e) {
  return emitCompositeReduce(e, K);
}
mlir::LogicalResult emitTile(NodeEmitter &e);
mlir::LogicalResult emitPad(NodeEmitter &e);

// ImportSelect.cpp: selections by indices computed at run time
mlir::LogicalResult emitTopK(NodeEmitter &e);
mlir::LogicalResult emitOneHot(NodeEmitter &e);
mlir::LogicalResult emitScatterElements(NodeEmitter &e);
/// GatherElements whose indices are not known at import (emitGatherElements
/// takes those that are).
mlir::LogicalResult emitGatherElementsAtRunTime(NodeEmitter &e);

// ImportShape.cpp
mlir::LogicalResult emitReshape(NodeEmitter &e);
mlir::LogicalResult emitUnsqueeze(NodeEmitter &e);
mlir::LogicalResult emitSqueeze(NodeEmitter &e);
mlir::LogicalResult emitFlatten(NodeEmitter &e);
mlir::LogicalResult emitTranspose(NodeEmitter &e);
mlir::LogicalResult emitSplit(NodeEmitter &e);
mlir::LogicalResult emitConcat(NodeEmitter &e);
mlir::LogicalResult emitSlice(NodeEmitter &e);
mlir::LogicalResult emitGather(NodeEmitter &e);
mlir::LogicalResult emitGatherElements(NodeEmitter &e);
mlir::LogicalResult emitExpand(NodeEmitter &e);
mlir::LogicalResult emitIdentity(NodeEmitter &e);
mlir::LogicalResult emitDropout(NodeEmitter &e);

// Importer.cpp

/// A rank-0 constant of `elem`.
mlir::Value scalarConstant(NodeEmitter &e, mlir::Type elem, double v);
/// A rank-0 boolean constant.
mlir::Value boolConstant(NodeEmitter &e, bool v);
/// `x` viewed as `shape` (as many elements).
mlir::Value reshapeValue(NodeEmitter &e, mlir::Value x,
                         llvm::ArrayRef<int64_t> shape);
/// Elements [start, limit) of `x` along `axis` by `step` (negative: walking
/// back, `limit` may be -1).
mlir::Value sliceAxis(NodeEmitter &e, mlir::Value x, int64_t axis,
                      int64_t start, int64_t limit, int64_t step = 1);
/// Input `i` holds int32 or int64 values, as indices must (ONNX's Tind).
mlir::LogicalResult integerIndices(NodeEmitter &e, int i);
/// `x` with `before` and `after` elements (where positive) concatenated
/// along `axis`, each `fill`, or the run-time scalar `fillValue` where given.
mlir::Value padAxis(NodeEmitter &e, mlir::Value x, int64_t axis, int64_t before,
                    int64_t after, double fill, mlir::Value fillValue = {});

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_IMPORTER_H
