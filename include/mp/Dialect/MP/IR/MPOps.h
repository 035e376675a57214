//===- MPOps.h - mp dialect ops ---------------------------------*- C++ -*-===//
#ifndef MP_DIALECT_MP_IR_MPOPS_H
#define MP_DIALECT_MP_IR_MPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPEnums.h.inc"

#define GET_OP_CLASSES
#include "mp/Dialect/MP/IR/MPOps.h.inc"

namespace mp {
/// Ops applying a function to each element of one same-shaped operand
/// (including casts and inference dropout).
bool isUnaryElementwise(mlir::Operation *op);
/// Elementwise ops whose operands broadcast numpy-style (add ... where).
bool isBroadcastingElementwise(mlir::Operation *op);
} // namespace mp

#endif // MP_DIALECT_MP_IR_MPOPS_H
