//===- MPOps.h - mp dialect ops ---------------------------------*- C++ -*-===//
#ifndef MP_DIALECT_MP_IR_MPOPS_H
#define MP_DIALECT_MP_IR_MPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPEnums.h.inc"
#include "mp/Dialect/MP/IR/MPInterfaces.h"

#define GET_OP_CLASSES
#include "mp/Dialect/MP/IR/MPOps.h.inc"

namespace mp {
/// The function a program runs: the module's only public function with a
/// body (the importer's `main`). Emits an error on the module when there is
/// none, or more than one.
mlir::FailureOr<mlir::func::FuncOp> getEntryFunction(mlir::ModuleOp module);
/// Whether `module` holds a backward pass (ops mp-autodiff made): a train
/// step, whole or cut into pipeline chunks.
bool isTrainStep(mlir::ModuleOp module);
/// Whether `a` and `b` are in one pipeline stage (the same `mp.stage`, or
/// neither has one).
bool inSameStage(mlir::Operation *a, mlir::Operation *b);
/// The other operand of the binary op `op` when `value` is one of them;
/// null otherwise.
mlir::Value otherOperand(mlir::Operation *op, mlir::Value value);
/// The pass that makes `op`, a fusion (OpTrait::Fused): for the errors of
/// the passes that must run before it.
llvm::StringRef fusionPassOf(mlir::Operation *op);
/// A collective a fused op holds: its kind ("all_reduce", ...) and the
/// tensor it moves (a reduction's input, a gather's result).
struct FusedCollective {
  llvm::StringRef kind;
  mlir::Type moved;
};
/// The collectives `op` holds when it is a collective fused with its norm
/// (mp-fuse-reduced-norms); none otherwise.
llvm::SmallVector<FusedCollective> fusedCollectives(mlir::Operation *op);
/// The functions whose inputs and results mp-run exchanges with the user:
/// every defined function nothing calls, in an inference program that is
/// not cut into pipeline stages (a train step is fed from the token file
/// and returns its gradients; stages pass values to other stages); none
/// otherwise.
llvm::SmallVector<mlir::func::FuncOp>
userFacingFunctions(mlir::ModuleOp module);
} // namespace mp

#endif // MP_DIALECT_MP_IR_MPOPS_H
