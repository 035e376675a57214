//===- Raise.cpp - raise decomposed ONNX to named ops ---------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

namespace mp {
#define GEN_PASS_DEF_MPRAISE
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {
struct RaisePass : public mp::impl::MPRaiseBase<RaisePass> {
  void runOnOperation() override {}
};
} // namespace
