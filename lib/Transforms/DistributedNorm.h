//===- DistributedNorm.h - a norm over a split dimension --------*- C++ -*-===//
//
// A norm over a dimension tensor parallelism splits (OLMo 2's query and key
// norms over a column-parallel projection's whole width; NormFormer's norm
// of the MLP's inner activation) can still run on each rank's block: its
// statistics are sums over the normalized dim, so each rank sums its block
// and one all-reduce per statistic gives every rank the whole sums (as
// PyTorch's DTensor and OLMo-core do). The norm is rewritten as those ops;
// its scale and bias are cut to the rank's block.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_DISTRIBUTEDNORM_H
#define MP_TRANSFORMS_DISTRIBUTEDNORM_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace mp {

/// True when `op` is a norm over its last dimension alone (layer_norm or
/// rms_norm) whose input is split along that dimension (`dims[0]`) and
/// whose other operands are whole.
bool isNormOverSplit(mlir::Operation *op, llvm::ArrayRef<int64_t> dims);

/// Rewrites such a norm, whose input already has its local shape (the
/// normalized dim holds 1/`ranks` of `whole` elements), as local sums,
/// all-reduced over `grid`, and elementwise ops; statistics in fp32
/// whatever the storage type.
void distributeNorm(mlir::Operation *norm, int64_t ranks,
                    mlir::FlatSymbolRefAttr grid);

} // namespace mp

#endif // MP_TRANSFORMS_DISTRIBUTEDNORM_H
