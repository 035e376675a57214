//===- Passes.h - mp passes -------------------------------------*- C++ -*-===//
#ifndef MP_TRANSFORMS_PASSES_H
#define MP_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Transforms/PassOptions.h"

namespace mp {

#define GEN_PASS_DECL
#include "mp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mp/Transforms/Passes.h.inc"

} // namespace mp

#endif // MP_TRANSFORMS_PASSES_H
