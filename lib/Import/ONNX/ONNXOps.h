//===- ONNXOps.h - the ONNX op types the importer handles -------*- C++ -*-===//
//
// One entry per ONNX op type (default domain) holds everything the importer
// knows about it: how a node is imported as mp ops, and how it is evaluated
// on the host when its inputs are known at import. The supported op list
// (`mp-opt --mp-list-onnx-ops`), the import dispatch and the fold dispatch
// are all read from the one table in ONNXOps.cpp; supporting a new op type
// is adding its entry there.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_ONNXOPS_H
#define MP_LIB_IMPORT_ONNX_ONNXOPS_H

#include "HostTensor.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace mp::onnx_import {

struct Folder;
struct NodeEmitter;

/// Imports a node as mp ops, reporting errors at the node (Importer.h).
using EmitFn = mlir::LogicalResult (*)(NodeEmitter &);
/// Evaluates a node on the host (Fold.h).
using FoldFn = bool (*)(Folder &);

/// Which of a node's inputs must be known at import for it to be folded.
enum class FoldInputs {
  /// Every input, and every input present.
  All,
  /// Every present input; absent optional inputs reach the folder as
  /// nullptr.
  Present,
  /// None: the result follows from the attributes and the inputs' shapes
  /// (Constant, Shape), so the node is always folded.
  None,
};

struct ONNXOpDef {
  /// The ONNX op type.
  llvm::StringLiteral name;
  /// Builds the mp ops of a node that is not folded.
  EmitFn import;
  /// Evaluates a node whose inputs are known; nullptr: never folded (the
  /// node is imported even when its inputs are constants).
  FoldFn fold = nullptr;
  FoldInputs foldInputs = FoldInputs::All;
};

/// Every supported op type, grouped by area.
llvm::ArrayRef<ONNXOpDef> getONNXOpDefs();
/// The entry of op type `name` (default domain), or nullptr when the
/// importer does not support it.
const ONNXOpDef *lookupONNXOp(llvm::StringRef name);

/// Folds `node` with `op`'s fold function when it has one. `inputs[i]` is the
/// value of input i, nullptr when absent (or, for FoldInputs::None, not
/// known); the caller folds only nodes whose inputs are known as
/// `op.foldInputs` asks. `shapes[i]` is input i's shape (empty when absent).
/// Returns false with empty `error` when the node is not folded (it is then
/// imported); false with `error` set when the inputs are invalid for the op.
bool foldNode(const ONNXOpDef &op, const onnx::NodeProto &node,
              const std::vector<const HostTensor *> &inputs,
              const std::vector<Shape> &shapes,
              std::vector<HostTensor> &outputs, std::string &error);
/// The same for a node of any op type whose present inputs are all known
/// (absent optional inputs are nullptr).
bool foldNode(const onnx::NodeProto &node,
              const std::vector<const HostTensor *> &inputs,
              std::vector<HostTensor> &outputs, std::string &error);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_ONNXOPS_H
