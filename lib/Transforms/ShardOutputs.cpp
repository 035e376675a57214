//===- ShardOutputs.cpp - results returned sharded, gathered when written
//--===//
//
// mp-shard-outputs: a result that tensor parallelism gathers only to return
// it (the logits, gathered over the vocabulary) is returned as this rank's
// shard instead, marked `mp.shard_axis`; mp-run gathers it once, when it
// writes or verifies the outputs, as it does a train step's sharded
// gradients. A run then does not gather on every iteration what only the
// last one's output file needs: on GPT-2-small's shape with tp=2 that
// gather moved 100 MB per rank, 3 % of the step. Megatron keeps its logits
// vocab-parallel the same way (parallel_output).
//
//===----------------------------------------------------------------------===//
#include "VocabPadding.h"
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mp {
#define GEN_PASS_DEF_MPSHARDOUTPUTS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// The all_gather that `result` is, when returning its operand instead is
/// the same as returning it gathered over the whole grid (the communicator
/// mp-run gathers outputs over): a gather over the only axis of a
/// one-dimensional grid, used by nothing else.
shard::AllGatherOp deferrableGather(Value result,
                                    SymbolTableCollection &symbols) {
  auto gather = result.getDefiningOp<shard::AllGatherOp>();
  if (!gather || !gather->hasOneUse())
    return nullptr;
  shard::GridOp grid = shard::getGrid(gather, symbols);
  if (!grid || grid.getRank() != 1 || gather.getGridAxes().size() != 1)
    return nullptr;
  return gather;
}

struct ShardOutputsPass
    : public mp::impl::MPShardOutputsBase<ShardOutputsPass> {
  using MPShardOutputsBase::MPShardOutputsBase;

  void runOnOperation() override {
    // (A train step's gradients autodiff shards itself; a called function
    // returns to its caller, which reads its results whole.)
    SymbolTableCollection symbols;
    for (func::FuncOp func : userFacingFunctions(getOperation()))
      shardResults(func, symbols);
  }

  void shardResults(func::FuncOp func, SymbolTableCollection &symbols) {
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    bool changed = false;
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (func.getResultAttr(i, MPDialect::getShardAxisAttrName()))
        continue;
      // Logits of a padded vocabulary: gathered, then cut back to it.
      auto unpad = operand.get().getDefiningOp<SliceOp>();
      if (unpad && (!unpad->hasOneUse() || !isVocabularyPrefix(unpad)))
        unpad = nullptr;
      shard::AllGatherOp gather =
          deferrableGather(unpad ? unpad.getInput() : operand.get(), symbols);
      int64_t axis = gather ? gather.getGatherAxis().getSExtValue() : -1;
      if (!gather || (unpad && axis != unpad.getType().getRank() - 1))
        continue;
      operand.set(gather.getInput());
      auto i64 = IntegerType::get(&getContext(), 64);
      func.setResultAttr(i, MPDialect::getShardAxisAttrName(),
                         IntegerAttr::get(i64, axis));
      if (unpad) {
        func.setResultAttr(
            i, MPDialect::getShardSizeAttrName(),
            IntegerAttr::get(i64, unpad.getType().getShape().back()));
        unpad->erase();
      }
      gather->erase();
      changed = true;
    }
    if (changed)
      func.setFunctionType(FunctionType::get(
          &getContext(), func.getArgumentTypes(), ret->getOperandTypes()));
  }
};

} // namespace
