//===- mp-opt.cpp - mp optimizer driver -----------------------------------===//
//
// opt-style driver: reads an ONNX model (imported to the mp dialect) or an
// .mlir file, runs the requested passes and prints the result.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Import/ONNXImporter.h"
#include "mp/Target/Artifact.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::OptionCategory importCategory("ONNX import options");

static llvm::cl::opt<std::string> inputShapes(
    "mp-shape",
    llvm::cl::desc("Pin dynamic input dimensions: NAME=D0xD1...[,NAME=...] "
                   "(e.g. input_ids=2x16)"),
    llvm::cl::value_desc("shapes"), llvm::cl::cat(importCategory));

static llvm::cl::opt<bool> shapeOnly(
    "mp-shape-only",
    llvm::cl::desc("Import shapes only: parameter data is neither read nor "
                   "required (external data files may be absent)"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

static llvm::cl::opt<int64_t> paramPreview(
    "mp-param-preview",
    llvm::cl::desc("Record the first N values of every parameter in the IR"),
    llvm::cl::value_desc("N"), llvm::cl::init(0),
    llvm::cl::cat(importCategory));

static llvm::cl::opt<std::string> boundInputs(
    "mp-bind-input",
    llvm::cl::desc("Treat graph inputs as constants read from serialized ONNX "
                   "TensorProto files: NAME=FILE.pb[,NAME=FILE.pb]"),
    llvm::cl::value_desc("bindings"), llvm::cl::cat(importCategory));

static llvm::cl::OptionCategory targetCategory("Artifact options");

static llvm::cl::opt<std::string> artifactDir(
    "artifact",
    llvm::cl::desc("Lower the result to a runtime artifact directory for "
                   "mp-run (an ONNX input is raised first)"),
    llvm::cl::value_desc("dir"), llvm::cl::cat(targetCategory));

static llvm::cl::opt<bool> syntheticWeights(
    "mp-synthetic-weights",
    llvm::cl::desc("With --artifact: write no weights; mp-run fills the "
                   "parameters with deterministic random values (benchmark a "
                   "model imported with --mp-shape-only)"),
    llvm::cl::init(false), llvm::cl::cat(targetCategory));

static llvm::cl::opt<std::string> parallelize(
    "mp-parallelize",
    llvm::cl::desc("Raise and partition in one step, e.g. \"tp=2 sp=true\" "
                   "(tp: tensor-parallel size; sp: sequence parallelism; "
                   "dtype=bf16|f16: storage precision). "
                   "With --artifact, the unpartitioned program is stored in "
                   "DIR/reference for mp-run --verify"),
    llvm::cl::value_desc("options"), llvm::cl::cat(targetCategory));

/// The unpartitioned program (IR text) when --mp-parallelize ran.
static std::string referenceIR;

struct ParallelOptions {
  int64_t tp = 1;
  bool sp = false;
  std::string dtype; // empty: keep fp32
};

/// Parses "tp=2 sp=true" (spaces or commas; a bare "sp" means true).
static bool parseParallelOptions(llvm::StringRef spec, ParallelOptions &out,
                                 std::string &error) {
  SmallVector<StringRef> items;
  spec.split(items, ' ', -1, false);
  SmallVector<StringRef> all;
  for (StringRef item : items)
    item.split(all, ',', -1, false);
  for (StringRef item : all) {
    auto [key, value] = item.split('=');
    if (key == "tp") {
      if (value.getAsInteger(10, out.tp) || out.tp < 1) {
        error = "tp expects a positive integer, got '" + value.str() + "'";
        return false;
      }
    } else if (key == "sp") {
      if (value.empty() || value == "true" || value == "1")
        out.sp = true;
      else if (value == "false" || value == "0")
        out.sp = false;
      else {
        error = "sp expects true or false, got '" + value.str() + "'";
        return false;
      }
    } else if (key == "dtype") {
      if (value != "bf16" && value != "f16" && value != "f32") {
        error = "dtype expects bf16, f16 or f32, got '" + value.str() + "'";
        return false;
      }
      out.dtype = value == "f32" ? "" : value.str();
    } else {
      error = "unknown option '" + key.str() + "' (known: tp, sp, dtype)";
      return false;
    }
  }
  if (out.sp && out.tp == 1) {
    error = "sequence parallelism (sp) needs tp > 1";
    return false;
  }
  return true;
}

/// Raises and partitions `module` as --mp-parallelize asks, keeping the
/// unpartitioned program for the artifact's reference.
static LogicalResult runParallelize(ModuleOp module) {
  ParallelOptions options;
  std::string error;
  if (!parseParallelOptions(parallelize, options, error)) {
    llvm::errs() << "error: --mp-parallelize: " << error << "\n";
    return failure();
  }
  PassManager raise(module.getContext());
  raise.addPass(mp::createMPRaise());
  if (!options.dtype.empty())
    raise.addPass(mp::createMPConvertPrecision(
        mp::MPConvertPrecisionOptions{options.dtype}));
  if (failed(raise.run(module)))
    return failure();
  llvm::raw_string_ostream os(referenceIR);
  module.print(os, OpPrintingFlags().enableDebugInfo());
  PassManager pm(module.getContext());
  pm.addPass(mp::createMPTensorParallel(mp::MPTensorParallelOptions{options.tp}));
  if (options.sp)
    pm.addPass(mp::createMPSequenceParallel());
  return pm.run(module);
}

static llvm::cl::opt<bool> listONNXOps(
    "mp-list-onnx-ops",
    llvm::cl::desc("Print the ONNX op types the importer supports and exit"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

/// Imports `path` and returns its IR as a buffer (with locations, so that
/// diagnostics of later passes still name the ONNX nodes).
static std::unique_ptr<llvm::MemoryBuffer>
importToBuffer(llvm::StringRef path, DialectRegistry &registry) {
  MLIRContext context(registry);
  context.allowUnregisteredDialects(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  mp::ImportOptions options;
  std::string error;
  if (!mp::parseInputShapes(inputShapes, options.inputShapes, error)) {
    llvm::errs() << "error: --mp-shape: " << error << "\n";
    return nullptr;
  }
  if (!mp::parseInputBindings(boundInputs, options.boundInputs, error)) {
    llvm::errs() << "error: --mp-bind-input: " << error << "\n";
    return nullptr;
  }
  options.shapeOnly = shapeOnly;
  options.paramPreview = paramPreview;
  OwningOpRef<ModuleOp> module = mp::importONNXFile(path, &context, options);
  if (!module)
    return nullptr;
  if (!parallelize.empty()) {
    if (failed(runParallelize(*module)))
      return nullptr;
  } else if (!artifactDir.empty()) {
    // An artifact needs the named ops the runtime has kernels for.
    PassManager pm(&context);
    pm.addPass(mp::createMPRaise());
    if (failed(pm.run(*module)))
      return nullptr;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().enableDebugInfo());
  return llvm::MemoryBuffer::getMemBufferCopy(text, path);
}

/// Runs the pass pipeline, then lowers the result to --artifact. The IR is
/// also written when -o names a file.
static int emitArtifact(std::unique_ptr<llvm::MemoryBuffer> input,
                        DialectRegistry &registry,
                        const MlirOptMainConfig &config,
                        const std::string &outputFilename) {
  if (!config.inputSplitMarker().empty()) {
    llvm::errs() << "error: --artifact cannot be combined with "
                    "--split-input-file\n";
    return 1;
  }
  // Keep locations (ONNX node names) through the print/parse round trip:
  // the runtime reports errors and profiles by them.
  if (auto *printDebugInfo = static_cast<llvm::cl::opt<bool> *>(
          llvm::cl::getRegisteredOptions().lookup("mlir-print-debuginfo")))
    printDebugInfo->setValue(true);
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(MlirOptMain(os, std::move(input), registry, config)))
    return 1;
  if (outputFilename != "-") {
    std::string error;
    auto output = openOutputFile(outputFilename, &error);
    if (!output) {
      llvm::errs() << "error: " << error << "\n";
      return 1;
    }
    output->os() << text;
    output->keep();
  }
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module)
    return 1;
  OwningOpRef<ModuleOp> reference;
  if (!referenceIR.empty()) {
    reference = parseSourceString<ModuleOp>(referenceIR, &context);
    if (!reference)
      return 1;
  }
  mp::ArtifactSummary summary;
  if (failed(mp::writeArtifact(*module, artifactDir, summary,
                               reference ? *reference : ModuleOp(),
                               syntheticWeights)))
    return 1;
  llvm::outs() << "mp-opt: wrote artifact " << artifactDir << ": "
               << summary.instructions << " instructions, arena "
               << summary.arenaBytes << " bytes (peak of the static plan; "
               << summary.unplannedBytes << " without reuse), parameters "
               << summary.parameterBytes << " bytes"
               << (syntheticWeights ? " (synthetic: not written)" : "")
               << (summary.ranks > 1
                       ? " in " + std::to_string(summary.ranks) + " rank files"
                       : std::string())
               << ", constants "
               << summary.constantBytes << " bytes\n";
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  DialectRegistry registry;
  registry.insert<mp::MPDialect, func::FuncDialect, shard::ShardDialect>();
  mp::registerMPPasses();
  registerCanonicalizerPass();
  registerCSEPass();
  registerSymbolDCEPass();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv,
      "mp-opt: the mp compiler driver\n\n"
      "  mp-opt MODEL.onnx|FILE.mlir [--mp-shape=...] [passes] [-o OUT]\n\n"
      "Reads an ONNX model (imported into the mp dialect) or mp IR, runs the\n"
      "given passes in order and prints the result.\n",
      registry);

  if (listONNXOps) {
    for (const std::string &op : mp::getSupportedONNXOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (!parallelize.empty() &&
      !llvm::StringRef(inputFilename).ends_with(".onnx")) {
    llvm::errs() << "error: --mp-parallelize takes an ONNX model; for mp IR "
                    "use --mp-raise --mp-tensor-parallel=tp=N "
                    "[--mp-sequence-parallel]\n";
    return 1;
  }
  if (llvm::StringRef(inputFilename).ends_with(".onnx")) {
    input = importToBuffer(inputFilename, registry);
    if (!input)
      return 1;
  } else {
    std::string error;
    input = openInputFile(inputFilename, &error);
    if (!input) {
      llvm::errs() << "error: " << error << "\n";
      return 1;
    }
  }
  std::string error;
  if (!artifactDir.empty())
    return emitArtifact(std::move(input), registry, config, outputFilename);
  auto output = openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
