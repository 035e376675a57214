//===- FusedLinear.h - a linear whose output is taken in parts --*- C++ -*-===//
//
// A fused linear (Falcon's QKV: [q heads..., k, v]) computes several
// linears at once; its output is only ever taken in contiguous parts along
// the feature axis, possibly through a reshape that views the features as
// [parts, ...] and reshapes and transposes that keep that axis (timm's
// permuted QKV, Baichuan's W_pack). When those parts need different splits
// (the query
// heads split over the ranks, the one key/value head whole), tensor
// parallelism cuts it into a linear per part.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_FUSEDLINEAR_H
#define MP_TRANSFORMS_FUSEDLINEAR_H

#include "mp/Dialect/MP/IR/MPOps.h"

namespace mp {

/// True when `op` takes a part of `linear`'s output and `linear` could be
/// cut into a linear per part: its output is taken only in parts that tile
/// it, and its weight and bias are parameters that only it reads, or only
/// it and the other calls of its module (the same weight read by several
/// linears), each of them taking its output in the same parts.
bool takesPartOfFusedLinear(LinearOp linear, mlir::Operation *op);

/// True when `linear` could be cut into a linear per part (as above) for
/// some reader of its output.
bool isCuttableFusedLinear(LinearOp linear);

/// Cuts `linear`, and the other calls of its module, into one linear per
/// part, each reading a parameter that is that block of the weight (and
/// bias): `mp.param`'s `part_of`/`part`. The linears replaced (and erased)
/// are appended to `cut`. Fails (changing nothing) when `linear` is not
/// such a fused linear.
mlir::LogicalResult
cutFusedLinear(LinearOp linear, llvm::SmallVectorImpl<mlir::Operation *> &cut);

} // namespace mp

#endif // MP_TRANSFORMS_FUSEDLINEAR_H
