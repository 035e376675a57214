//===- OpHelpers.h - shared by the mp dialect's op files --------*- C++ -*-===//
//
// Private to lib/Dialect/MP/IR: shapes of values as the shape rules of
// mp/Support/Shape.h take them, and a rule's failure as an op diagnostic.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_DIALECT_MP_IR_OPHELPERS_H
#define MP_LIB_DIALECT_MP_IR_OPHELPERS_H

#include "mp/Support/Shape.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

namespace mp::detail {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

inline Shape shapeOf(mlir::Value v) {
  llvm::ArrayRef<int64_t> shape = tensorType(v).getShape();
  return Shape(shape.begin(), shape.end());
}

/// Emits a shape rule's error on `op` when the rule failed.
inline mlir::LogicalResult checkRule(mlir::Operation *op, bool ruleHeld,
                                     const std::string &error) {
  if (ruleHeld)
    return mlir::success();
  return op->emitOpError() << error;
}

} // namespace mp::detail

#endif // MP_LIB_DIALECT_MP_IR_OPHELPERS_H
