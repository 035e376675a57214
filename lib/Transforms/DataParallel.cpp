//===- DataParallel.cpp - the data-parallel layout of a train step --------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

namespace mp {
#define GEN_PASS_DEF_MPDATAPARALLEL
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

struct DataParallelPass
    : public mp::impl::MPDataParallelBase<DataParallelPass> {
  using MPDataParallelBase::MPDataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dp < 1 || (zero != 0 && zero != 1)) {
      module.emitError() << "mp-data-parallel: dp must be at least 1 and zero "
                            "0 or 1 (got dp="
                         << static_cast<int64_t>(dp)
                         << " zero=" << static_cast<int64_t>(zero) << ")";
      return signalPassFailure();
    }
    Builder b(module.getContext());
    module->setAttr(MPDialect::getDataParallelAttrName(),
                    b.getI64IntegerAttr(dp));
    module->setAttr(MPDialect::getZeroAttrName(), b.getI64IntegerAttr(zero));
  }
};

} // namespace
