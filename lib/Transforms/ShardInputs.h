//===- ShardInputs.h - inputs each rank reads as its block ------*- C++ -*-===//
//
// The test mp-shard-inputs and --mp-summary share: which function inputs
// tensor parallelism only cuts.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_SHARDINPUTS_H
#define MP_TRANSFORMS_SHARDINPUTS_H

#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace mp {

/// The axis along which every user of `arg` takes this rank's block over
/// the only axis of a one-dimensional grid (the communicator mp-run hands
/// inputs out over); nullopt when some user reads it otherwise, or none.
std::optional<int64_t> slicedInputAxis(mlir::BlockArgument arg,
                                       mlir::SymbolTableCollection &symbols);

} // namespace mp

#endif // MP_TRANSFORMS_SHARDINPUTS_H
