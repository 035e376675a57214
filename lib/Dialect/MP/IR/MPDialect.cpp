//===- MPDialect.cpp - mp dialect -----------------------------------------===//
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPOps.h"

using namespace mlir;
using namespace mp;

#include "mp/Dialect/MP/IR/MPOpsDialect.cpp.inc"

void MPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mp/Dialect/MP/IR/MPOps.cpp.inc"
      >();
}
