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
#include "mp/Dialect/MP/IR/MPInterfaces.h"

#define GET_OP_CLASSES
#include "mp/Dialect/MP/IR/MPOps.h.inc"

#endif // MP_DIALECT_MP_IR_MPOPS_H
