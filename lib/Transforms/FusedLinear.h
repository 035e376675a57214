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

#include <optional>
#include <utility>

namespace mp {

/// The [begin, end) of `op`'s result along `axis` of its input, when it is
/// a slice of a contiguous block of that axis and the whole of every other.
std::optional<std::pair<int64_t, int64_t>> blockRead(mlir::Operation *op,
                                                     int64_t axis);

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
