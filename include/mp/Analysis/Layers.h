//===- Layers.h - transformer blocks and their layer indices ----*- C++ -*-===//
//
// Pipeline stages, recompute regions and the per-layer summary all work in
// transformer blocks. A block is found by structure, not by names: each
// self-attention (not cross-attention) starts one, and it runs from the
// residual-stream value it reads to the last residual add (or post-LN norm)
// before the next self-attention. Exports whose node names follow a
// "layers.N" pattern only matter for bodies without self-attention.
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_LAYERS_H
#define MP_ANALYSIS_LAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <utility>

namespace mp {

/// The transformer blocks of a body, in order, as ranges (begin, end] of op
/// positions (the op at `begin` defines the block's input; -1 for a block
/// argument), each started by a self-attention (mp.attention, and with
/// `decomposed` softmax(q · kᵀ ...) · v left as ops; heads written one by
/// one start one block). Empty when the body has none.
llvm::SmallVector<std::pair<int64_t, int64_t>>
findTransformerBlocks(mlir::Block &body, bool decomposed = false);

/// Sets mp.layer on every mp op of a transformer block to the block's index:
/// blocks by findTransformerBlocks, or, in a body without self-attention,
/// from ONNX node and parameter names ("h.3", "layers.3", "block_3"), or,
/// without those either, blocks started by decomposed self-attention.
void tagLayers(mlir::func::FuncOp func);

/// The ops of `func`'s body that depend on its arguments (what a pipeline
/// stage runs per microbatch); the others compute from parameters and
/// constants alone.
llvm::DenseSet<mlir::Operation *> inputDependentOps(mlir::func::FuncOp func);

/// The integer attribute `name` of `op` (mp.layer, mp.stage, ...), if set.
inline std::optional<int64_t> intAttr(mlir::Operation *op,
                                      llvm::StringRef name) {
  if (auto attr = op->getAttrOfType<mlir::IntegerAttr>(name))
    return attr.getInt();
  return std::nullopt;
}

} // namespace mp

#endif // MP_ANALYSIS_LAYERS_H
