//===- ONNXImporter.h - ONNX model -> mp dialect ----------------*- C++ -*-===//
#ifndef MP_IMPORT_ONNXIMPORTER_H
#define MP_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mp {

struct ImportOptions {
  /// Sizes for graph inputs with dynamic dimensions (`--mp-shape`).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Graph inputs bound to constant values: name -> serialized ONNX
  /// TensorProto file (`--mp-bind-input`). Shape arithmetic on them folds.
  std::map<std::string, std::string> boundInputs;
  /// Import without reading parameter data; external data may be absent.
  bool shapeOnly = false;
  /// Number of leading values to record in each parameter's `preview`.
  int64_t paramPreview = 0;
};

/// Reads the raw little-endian bytes of initializer `name` of the ONNX model
/// `modelPath` (models are parsed once and cached). False with `error` set
/// when the file or the initializer is missing.
bool readONNXInitializer(const std::string &modelPath, const std::string &name,
                         std::string &bytes, std::string &error);

/// The ONNX op types (default domain) the importer handles, sorted.
std::vector<std::string> getSupportedONNXOps();

/// Parses "a=x.pb,b=y.pb" into `bindings`.
bool parseInputBindings(llvm::StringRef spec,
                        std::map<std::string, std::string> &bindings,
                        std::string &error);

/// Parses "a=2x16,b=4" into `shapes`. Returns false and sets `error` when
/// malformed.
bool parseInputShapes(llvm::StringRef spec,
                      std::map<std::string, std::vector<int64_t>> &shapes,
                      std::string &error);

/// Imports an ONNX file into a module holding `mp.param`s and a `func.func
/// @main`. Problems are reported as diagnostics on `context` (located at the
/// ONNX node where one is at fault); returns null on failure.
mlir::OwningOpRef<mlir::ModuleOp> importONNXFile(llvm::StringRef path,
                                                 mlir::MLIRContext *context,
                                                 const ImportOptions &options);

} // namespace mp

#endif // MP_IMPORT_ONNXIMPORTER_H
