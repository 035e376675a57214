//===- Artifact.h - mp IR -> runtime artifact -------------------*- C++ -*-===//
#ifndef MP_TARGET_ARTIFACT_H
#define MP_TARGET_ARTIFACT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mp {

struct ArtifactSummary {
  int64_t instructions = 0;
  int64_t arenaBytes = 0;     // peak of the static buffer plan
  int64_t unplannedBytes = 0; // sum of all intermediate buffers (no reuse)
  int64_t parameterBytes = 0; // summed over the ranks' files
  int64_t ranks = 1;
  int64_t constantBytes = 0;
  /// A train step's: the peak of its forward pass alone (0: not a train
  /// step), beside arenaBytes, which also holds what the backward reads.
  int64_t forwardArenaBytes = 0;
  /// A pipeline artifact's stages and chunk functions (the arena is the
  /// largest function's; the other sizes are summed).
  int64_t stages = 1, functions = 1;
  bool pipeline = false;
};

/// Lowers the `main` function of `module` to an artifact directory `dir`
/// (program.pb + params.safetensors). The directory is written under a
/// temporary name and renamed into place, so a failure leaves any previous
/// artifact intact. Errors are emitted as diagnostics. With `reference` (the
/// unpartitioned program), the artifact carries it in `dir/reference` for
/// `mp-run --verify`.
/// With `syntheticWeights`, parameter data is neither read nor written: the
/// runtime fills parameters with deterministic random values (to benchmark
/// models imported with --mp-shape-only).
mlir::LogicalResult writeArtifact(mlir::ModuleOp module, llvm::StringRef dir,
                                  ArtifactSummary &summary,
                                  mlir::ModuleOp reference = nullptr,
                                  bool syntheticWeights = false);

} // namespace mp

#endif // MP_TARGET_ARTIFACT_H
