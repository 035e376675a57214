//===- RankLocal.cpp - values that differ between the ranks ---------------===//
//
// See RankLocal.h.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/RankLocal.h"

#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mp;

DenseSet<Value> mp::rankLocalValues(Block &body,
                                    SymbolTableCollection &symbols) {
  DenseSet<Value> local;
  for (Operation &op : body.without_terminator()) {
    bool isLocal;
    if (auto read = dyn_cast<GetParamOp>(op)) {
      auto param =
          symbols.lookupNearestSymbolFrom<ParamOp>(read, read.getNameAttr());
      isLocal = param && param.getGrid();
    } else if (isa<shard::AllReduceOp, shard::AllGatherOp>(op)) {
      isLocal = false;
    } else if (isa<shard::ReduceScatterOp, shard::AllSliceOp>(op)) {
      isLocal = true;
    } else if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      isLocal = embedding.getGrid().has_value();
    } else if (op.hasTrait<mp::OpTrait::ReplicatedResults>()) {
      isLocal = false;
    } else if (isa<ReduceScatterAddLayerNormOp, ReduceScatterAddRMSNormOp>(
                   op)) {
      // This rank's slice of the sum; the gathered norm, the same on all.
      local.insert(op.getResult(0));
      continue;
    } else {
      isLocal = llvm::any_of(op.getOperands(),
                             [&](Value v) { return local.contains(v); });
    }
    if (isLocal)
      local.insert(op.getResults().begin(), op.getResults().end());
  }
  return local;
}
