//===- ExportWeights.h - trained weights back into ONNX ---------*- C++ -*-===//
#ifndef MP_TARGET_EXPORTWEIGHTS_H
#define MP_TARGET_EXPORTWEIGHTS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

namespace mp {

/// Writes a copy of the ONNX model `onnxPath` to `outPath` in which every
/// parameter of `module` (the model as imported) holds its trained values
/// from `weightsDir` (mp-run --train --save: rank<R>.safetensors and
/// manifest.json; sharded parameters are reassembled whole), converted to
/// the initializer's element type. A trained parameter the model has no
/// initializer for, or of another shape, is an error naming it. The file is
/// written to a temporary name and renamed into place. Returns the number
/// of initializers replaced, or failure (diagnostics emitted).
mlir::FailureOr<int64_t> exportTrainedWeights(mlir::ModuleOp module,
                                              llvm::StringRef onnxPath,
                                              llvm::StringRef weightsDir,
                                              llvm::StringRef outPath);

} // namespace mp

#endif // MP_TARGET_EXPORTWEIGHTS_H
