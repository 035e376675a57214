//===- KeyValueHeads.h - key/value heads fewer than the ranks --*- C++ -*-===//
//
// Grouped-query attention with fewer key/value heads than tensor-parallel
// ranks (2 for 8 query heads under tp=4) cannot split them: as vLLM does,
// the key/value linears stay whole, every rank computes every key/value
// head, and each takes the head its query heads read. For mp.attention the
// heads are repeated to one per rank and cut (shard.all_slice, no data
// moved); attention left decomposed with HF's repeat_kv written out has its
// repeated heads cut instead.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_KEYVALUEHEADS_H
#define MP_TRANSFORMS_KEYVALUEHEADS_H

#include "SplitAnalysis.h"

namespace mp::tensor_parallel {

/// Marks (kReplicateKeyValueAttr) each attention whose key/value heads,
/// more than one, are fewer than the `ranks` and divide them, its query
/// heads dividing them too.
void markReplicatedKeyValues(mlir::func::FuncOp func, int64_t ranks);

/// The linears whose splits reach a marked attention's key or value, or a
/// repeat of key/value heads fewer than the `ranks`: they stay whole (each
/// recorded in `stops` with why).
llvm::BitVector fewHeadSplits(mlir::func::FuncOp func, int64_t ranks,
                              const Split &split,
                              llvm::DenseMap<unsigned, Stop> &stops);

/// Whether `cut` takes a head of a marked attention's key or value.
bool repeatsHeads(const Cut &cut);

/// `heads` [B, H, S, D] with each head repeated `times` times in place:
/// [B, H * times, S, D], head h * times + i being head h (the new ops in
/// `like`'s layer).
mlir::Value repeatHeads(mlir::OpBuilder &b, mlir::Value heads, int64_t times,
                        mlir::Operation *like);

} // namespace mp::tensor_parallel

#endif // MP_TRANSFORMS_KEYVALUEHEADS_H
