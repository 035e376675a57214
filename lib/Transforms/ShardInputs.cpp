//===- ShardInputs.cpp - inputs read as each rank's block -----------------===//
//
// mp-shard-inputs: an input that every rank reads whole only to take its
// block of it (shard.all_slice: tensor parallelism's cut of a decoder's
// cached keys and values, split by heads) becomes that block, marked
// `mp.shard_axis`; mp-run hands each rank its block. A rank then holds
// only its heads' cache, as in Megatron's inference, rather than all of it
// plus a copy of its block.
//
//===----------------------------------------------------------------------===//
#include "ShardInputs.h"
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace mp {
#define GEN_PASS_DEF_MPSHARDINPUTS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

std::optional<int64_t> mp::slicedInputAxis(BlockArgument arg,
                                           SymbolTableCollection &symbols) {
  std::optional<int64_t> axis;
  for (Operation *user : arg.getUsers()) {
    auto slice = dyn_cast<shard::AllSliceOp>(user);
    if (!slice)
      return std::nullopt;
    shard::GridOp grid = shard::getGrid(slice, symbols);
    int64_t sliceAxis = slice.getSliceAxis().getSExtValue();
    if (!grid || grid.getRank() != 1 || slice.getGridAxes().size() != 1 ||
        (axis && *axis != sliceAxis))
      return std::nullopt;
    axis = sliceAxis;
  }
  return axis;
}

namespace {

/// Takes this rank's block before a cast of the input rather than after
/// it (mp-convert-precision casts f32 inputs to bf16 first): each rank then
/// casts only its block, and the input is read only by the slice.
void sliceBeforeCasts(BlockArgument arg) {
  for (Operation *user : llvm::make_early_inc_range(arg.getUsers())) {
    auto convert = dyn_cast<CastOp>(user);
    if (!convert)
      continue;
    for (Operation *castUser :
         llvm::make_early_inc_range(convert->getUsers())) {
      auto slice = dyn_cast<shard::AllSliceOp>(castUser);
      if (!slice)
        continue;
      OpBuilder b(slice);
      auto wholeType = cast<RankedTensorType>(arg.getType());
      auto block = cast<RankedTensorType>(slice.getType())
                       .clone(wholeType.getElementType());
      auto early = shard::AllSliceOp::create(
          b, slice.getLoc(), block, arg, slice.getGrid(), slice.getGridAxes(),
          slice.getSliceAxis().getSExtValue());
      early->setAttrs(slice->getAttrs());
      auto converted = CastOp::create(b, convert.getLoc(), slice.getType(),
                                      early.getResult());
      slice.getResult().replaceAllUsesWith(converted.getResult());
      slice->erase();
    }
    if (convert->use_empty())
      convert->erase();
  }
}

struct ShardInputsPass : public mp::impl::MPShardInputsBase<ShardInputsPass> {
  using MPShardInputsBase::MPShardInputsBase;

  void runOnOperation() override {
    // (A called function's caller passes its arguments whole.)
    SymbolTableCollection symbols;
    for (func::FuncOp func : userFacingFunctions(getOperation()))
      shardArguments(func, symbols);
  }

  void shardArguments(func::FuncOp func, SymbolTableCollection &symbols) {
    bool changed = false;
    for (BlockArgument arg : func.getArguments()) {
      if (func.getArgAttr(arg.getArgNumber(),
                          MPDialect::getShardAxisAttrName()))
        continue;
      sliceBeforeCasts(arg);
      std::optional<int64_t> axis = slicedInputAxis(arg, symbols);
      if (!axis)
        continue;
      Type local = (*arg.getUsers().begin())->getResult(0).getType();
      for (Operation *slice : llvm::make_early_inc_range(arg.getUsers())) {
        slice->getResult(0).replaceAllUsesWith(arg);
        slice->erase();
      }
      arg.setType(local);
      func.setArgAttr(
          arg.getArgNumber(), MPDialect::getShardAxisAttrName(),
          IntegerAttr::get(IntegerType::get(&getContext(), 64), *axis));
      changed = true;
    }
    if (changed)
      func.setFunctionType(FunctionType::get(&getContext(),
                                             func.getBody().getArgumentTypes(),
                                             func.getResultTypes()));
  }
};

} // namespace
