//===- WriteProgram.h - the artifact writer's parts -------------*- C++ -*-===//
//
// Internal to lib/Target/Program: one function written as a program
// directory, the pipeline artifact built from those, and the temporary
// directory an artifact is written into and then swapped into place.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_TARGET_PROGRAM_WRITEPROGRAM_H
#define MP_LIB_TARGET_PROGRAM_WRITEPROGRAM_H

#include "mp/Support/DType.h"
#include "mp/Target/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <filesystem>

namespace mp {

/// The runtime's element type of tensor type `type` (an error at `loc` when
/// it has none).
mlir::FailureOr<DType> runtimeDType(mlir::Type type, mlir::Location loc);

/// Writes `func` as program.pb and its parameter files into `dir` (which
/// exists): the grid, data parallelism and ZeRO of `module`; the
/// parameters left to the sibling directory `parametersFrom` when it is not
/// empty (a pipeline chunk's backward reads its forward's).
mlir::LogicalResult writeProgram(mlir::ModuleOp module, mlir::func::FuncOp func,
                                 llvm::StringRef dir, ArtifactSummary &summary,
                                 bool syntheticWeights,
                                 llvm::StringRef parametersFrom = {});

/// Writes a module cut into pipeline chunks (mp-pipeline, then
/// mp-pipeline-split) as a pipeline artifact: pipeline.pb, a program
/// directory per chunk function, and `reference` (if any: the unpartitioned
/// program, mp-run --verify's) as the plain artifact DIR/reference.
mlir::LogicalResult writePipelineArtifact(mlir::ModuleOp module,
                                          llvm::StringRef dir,
                                          ArtifactSummary &summary,
                                          bool syntheticWeights,
                                          mlir::ModuleOp reference = nullptr);

/// `dir`'s temporary sibling, created empty.
mlir::LogicalResult makeTemporaryDirectory(const std::filesystem::path &dir,
                                           std::filesystem::path &tmp,
                                           mlir::Location loc);

/// Replaces `dir` (an artifact, or absent) by the finished `tmp`.
mlir::LogicalResult commitDirectory(const std::filesystem::path &tmp,
                                    const std::filesystem::path &dir,
                                    mlir::Location loc);

/// Adds `reference` (if any: the unpartitioned program, mp-run --verify's)
/// to the finished `tmp` as tmp/reference, then puts `tmp` at `dir`.
mlir::LogicalResult finishArtifact(const std::filesystem::path &tmp,
                                   const std::filesystem::path &dir,
                                   mlir::ModuleOp module,
                                   mlir::ModuleOp reference,
                                   bool syntheticWeights);

} // namespace mp

#endif // MP_LIB_TARGET_PROGRAM_WRITEPROGRAM_H
