//===- ONNXFuzzer.cpp - fuzz the ONNX importer and the passes -------------===//
//
// Input: the bytes of an .onnx file. It is imported (parsing, checking,
// folding) and, when that succeeds, raised and partitioned as
// --mp-parallelize="tp=2 sp=true" does, then verified. Errors are the
// expected outcome for most inputs; a crash, a sanitizer report or a module
// that fails verification after passes that succeeded is a bug.
//
//===----------------------------------------------------------------------===//
#include "FuzzIO.h"

#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Import/ONNXImporter.h"
#include "mp/Transforms/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <memory>

using namespace mlir;

/// A context that keeps quiet about diagnostics. Recreated now and then:
/// a context keeps every attribute and type it ever uniqued.
static MLIRContext &context() {
  static std::unique_ptr<MLIRContext> ctx;
  static int uses = 0;
  if (!ctx || ++uses % 256 == 0) {
    DialectRegistry registry;
    registry.insert<mp::MPDialect, func::FuncDialect, shard::ShardDialect>();
    ctx = std::make_unique<MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    ctx->getDiagEngine().registerHandler(
        [](Diagnostic &) { return success(); });
  }
  return *ctx;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = mp::fuzz::scratchDirectory() + "/model.onnx";
  mp::fuzz::writeScratchFile(path, data, size);
  MLIRContext &ctx = context();
  mp::ImportOptions options;
  OwningOpRef<ModuleOp> module = mp::importONNXFile(path, &ctx, options);
  if (!module)
    return 0;
  if (failed(verify(*module)))
    __builtin_trap(); // the importer built invalid IR
  PassManager pm(&ctx);
  mp::ParallelizeOptions parallelize;
  parallelize.tp = 2;
  parallelize.sp = true;
  mp::buildParallelizePipeline(pm, parallelize);
  // The pass manager verifies after each pass: a pass that succeeds on
  // valid input must leave valid IR (a failure there is reported and
  // returned as an error, not checked here).
  (void)pm.run(*module);
  return 0;
}
