//===- Freeze.cpp - parameters the train step does not train -------------===//
//
// mp-freeze: marks the parameters a user names (buffers that ONNX stores as
// initializers, indistinguishable from parameters) `mp.frozen`, which
// mp-autodiff reads: no gradient, so mp-run --train leaves them as loaded.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "llvm/Support/GlobPattern.h"

namespace mp {
#define GEN_PASS_DEF_MPFREEZE
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

struct FreezePass : public mp::impl::MPFreezeBase<FreezePass> {
  using MPFreezeBase::MPFreezeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto params = llvm::to_vector(module.getOps<ParamOp>());
    for (const std::string &text : this->params) {
      llvm::Expected<llvm::GlobPattern> pattern =
          llvm::GlobPattern::create(text);
      if (!pattern) {
        emitError(module.getLoc())
            << "--mp-freeze: '" << text << "' is not a glob pattern: "
            << llvm::toString(pattern.takeError());
        return signalPassFailure();
      }
      bool matched = false;
      for (ParamOp param : params)
        if (pattern->match(param.getSymName())) {
          param->setAttr(MPDialect::getFrozenAttrName(),
                         UnitAttr::get(&getContext()));
          matched = true;
        }
      if (!matched)
        return reportNoMatch(module, text, params);
    }
  }

  void reportNoMatch(ModuleOp module, StringRef text,
                     ArrayRef<ParamOp> params) {
    InFlightDiagnostic diag = emitError(module.getLoc())
                              << "--mp-freeze: no parameter is named '" << text
                              << "'";
    constexpr size_t kShown = 6;
    if (!params.empty()) {
      diag << " (the model's parameters include ";
      llvm::interleaveComma(params.take_front(kShown), diag, [&](ParamOp p) {
        diag << "'" << p.getSymName() << "'";
      });
      diag << (params.size() > kShown ? ", ...)" : ")");
    }
    signalPassFailure();
  }
};

} // namespace
