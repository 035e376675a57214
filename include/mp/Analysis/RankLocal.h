//===- RankLocal.h - values that differ between the ranks -------*- C++ -*-===//
//
// In a partitioned program (one per rank), a value is replicated (every
// rank of the tensor-parallel grid holds the same) or rank-local (a shard,
// or a partial sum). Autodiff reduces the adjoints of replicated values
// from rank-local consumers; sequence parallelism must not cut a
// rank-local value by sequence as if every rank held it whole.
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_RANKLOCAL_H
#define MP_ANALYSIS_RANKLOCAL_H

#include "mlir/IR/Block.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

namespace mp {

/// Values that differ between the ranks of a partitioned program: sharded
/// parameters, the results of reduce_scatter and all_slice and of
/// vocab-parallel lookups (partial sums), and whatever is computed from
/// them, up to an all_reduce or all_gather.
llvm::DenseSet<mlir::Value>
rankLocalValues(mlir::Block &body, mlir::SymbolTableCollection &symbols);

} // namespace mp

#endif // MP_ANALYSIS_RANKLOCAL_H
