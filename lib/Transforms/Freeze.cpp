//===- Freeze.cpp - parameters the train step does not train -------------===//
//
// mp-freeze: marks the parameters a user names (buffers that ONNX stores as
// initializers, indistinguishable from parameters) `mp.frozen`, which
// mp-autodiff reads: no gradient, so mp-run --train leaves them as loaded.
// A parameter matches by any name the user may know it by (namesOf); it
// must be frozen before mp-autodiff runs.
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
    if (!this->params.empty() && isTrainStep(module)) {
      emitError(module.getLoc())
          << "--mp-freeze must come before --mp-train: the gradients are "
             "built already";
      return signalPassFailure();
    }
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
        if (llvm::any_of(namesOf(param), [&](StringRef name) {
              return pattern->match(name);
            })) {
          param->setAttr(MPDialect::getFrozenAttrName(),
                         UnitAttr::get(&getContext()));
          matched = true;
        }
      if (!matched)
        return reportNoMatch(module, text, params);
    }
  }

  /// The names a user may know `param` by: its own; PyTorch's for a
  /// weight the exporter stored transposed (NAME for NAME.T); the
  /// exporter-made initializer it reads and the copies tied to it; the
  /// parameter a part was cut from.
  static SmallVector<StringRef> namesOf(ParamOp param) {
    SmallVector<StringRef> names;
    auto addWithPyTorchName = [&](StringRef name) {
      names.push_back(name);
      if (name.ends_with(".T"))
        names.push_back(name.drop_back(2));
    };
    addWithPyTorchName(param.getSymName());
    // (The exporter also stores equal parameters as one initializer under
    // the first one's name: only its own names count.)
    if (std::optional<StringRef> init = param.getInitializer();
        init && init->starts_with("onnx::"))
      names.push_back(*init);
    if (std::optional<StringRef> whole = param.getPartOf())
      addWithPyTorchName(*whole);
    for (StringRef attr : {MPDialect::getTiedCopiesAttrName(),
                           MPDialect::getEqualCopiesAttrName()})
      if (auto copies = param->getAttrOfType<ArrayAttr>(attr))
        for (Attribute copy : copies)
          names.push_back(cast<StringAttr>(copy).getValue());
    return names;
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
