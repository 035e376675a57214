//===- mp-opt.cpp - mp optimizer driver -----------------------------------===//
//
// opt-style driver: reads an ONNX model (imported to the mp dialect) or an
// .mlir file, runs the requested passes and prints the result or lowers it
// to an artifact. An imported module stays in memory from import to output.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Import/ONNXImporter.h"
#include "mp/Support/AtomicFile.h"
#include "mp/Target/Artifact.h"
#include "mp/Target/ExportWeights.h"
#include "mp/Transforms/Passes.h"
#include "mp/Transforms/Pipelines.h"

#include "mlir/Pass/PassInstrumentation.h"

#include "mlir/Bytecode/BytecodeWriter.h"
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
#include "llvm/Support/FileSystem.h"
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
    llvm::cl::desc("Treat graph inputs as constants: NAME=VALUE[,...], VALUE "
                   "a serialized ONNX TensorProto file or a literal (true, "
                   "false, a number) filling the input's static shape "
                   "(use_cache_branch=true picks an Optimum merged "
                   "decoder's cached step)"),
    llvm::cl::value_desc("bindings"), llvm::cl::cat(importCategory));

// --mp-parallelize="tp=2 sp=true dtype=bf16" is the registered pipeline
// (mp/Transforms/Pipelines.h). With --artifact, the program as it was before
// partitioning is stored in DIR/reference for mp-run --verify.
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

static llvm::cl::opt<bool> gatherOutputs(
    "mp-gather-outputs",
    llvm::cl::desc("With --artifact: gather sharded outputs (tensor-parallel "
                   "logits) in the program on every run, rather than leave "
                   "them sharded for mp-run to gather once when it writes "
                   "them (mp-shard-outputs)"),
    llvm::cl::init(false), llvm::cl::cat(targetCategory));

static llvm::cl::opt<std::string> exportWeights(
    "mp-export-weights",
    llvm::cl::desc("Write the ONNX model with the trained weights of DIR "
                   "(mp-run --train --save DIR) in place of its initializers, "
                   "to the -o file"),
    llvm::cl::value_desc("dir"), llvm::cl::cat(targetCategory));

static llvm::cl::opt<bool> listONNXOps(
    "mp-list-onnx-ops",
    llvm::cl::desc("Print the ONNX op types the importer supports and exit"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

/// Imports the ONNX model at `path` as the import options ask.
static OwningOpRef<ModuleOp> importModel(StringRef path, MLIRContext &context) {
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
  if (paramPreview < 0) {
    llvm::errs() << "error: --mp-param-preview: " << paramPreview
                 << " is negative (give the number of leading values to "
                    "record, 0 for none)\n";
    return nullptr;
  }
  options.paramPreview = paramPreview;
  return mp::importONNXFile(path, &context, options);
}

/// Keeps a clone of the module as it is before the first partitioning pass
/// (mp-tensor-parallel, whether given alone or through mp-parallelize): the
/// unpartitioned program that mp-run --verify compares against.
class ReferenceCapture : public PassInstrumentation {
public:
  explicit ReferenceCapture(OwningOpRef<ModuleOp> &reference)
      : reference(reference) {}
  void runBeforePass(Pass *pass, Operation *op) override {
    if (!reference && pass->getArgument() == "mp-tensor-parallel")
      if (auto module = dyn_cast<ModuleOp>(op))
        reference = module.clone();
  }

private:
  OwningOpRef<ModuleOp> &reference;
};

/// Whether `pm` runs pass `argument`.
static bool runs(PassManager &pm, StringRef argument) {
  return llvm::any_of(pm.getPasses(), [&](Pass &pass) {
    return pass.getArgument() == argument;
  });
}

/// Whether a function of `module` carries a memory plan (an IR that
/// mp-plan-memory planned before; the writer checks it as it is).
static bool carriesMemoryPlan(ModuleOp module) {
  return llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp func) {
    return mp::MemoryPlan::isAttached(func);
  });
}

/// Writes the module's IR to `path` ("-": standard output), as text (with
/// locations when `locations`) or as bytecode (--emit-bytecode).
static LogicalResult printModule(ModuleOp module, StringRef path,
                                 const MlirOptMainConfig &config,
                                 bool locations) {
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  if (config.shouldEmitBytecode()) {
    BytecodeWriterConfig writerConfig;
    if (failed(writeBytecodeToFile(module, output->os(), writerConfig)))
      return failure();
  } else {
    OpPrintingFlags flags;
    if (locations)
      flags.enableDebugInfo();
    module.print(output->os(), flags);
    output->os() << "\n";
  }
  output->keep();
  return success();
}

static LogicalResult writeArtifactOf(ModuleOp module, ModuleOp reference) {
  mp::ArtifactSummary summary;
  if (failed(mp::writeArtifact(module, artifactDir, summary, reference,
                               syntheticWeights)))
    return failure();
  if (summary.pipeline) {
    llvm::outs() << "mp-opt: wrote pipeline artifact " << artifactDir << ": "
                 << summary.stages << " stages, " << summary.functions
                 << " chunk functions, " << summary.instructions
                 << " instructions, largest arena " << summary.arenaBytes
                 << " bytes, parameters " << summary.parameterBytes
                 << " bytes, " << summary.ranks << " ranks\n";
    return success();
  }
  llvm::outs() << "mp-opt: wrote artifact " << artifactDir << ": "
               << summary.instructions << " instructions, arena "
               << summary.arenaBytes << " bytes (peak of the static plan; "
               << summary.unplannedBytes << " without reuse"
               << (summary.forwardArenaBytes
                       ? "; the forward pass alone: " +
                             std::to_string(summary.forwardArenaBytes)
                       : std::string())
               << "), parameters " << summary.parameterBytes << " bytes"
               << (syntheticWeights ? " (synthetic: not written)" : "")
               << (summary.ranks > 1
                       ? " in " + std::to_string(summary.ranks) + " rank files"
                       : std::string())
               << ", constants " << summary.constantBytes << " bytes\n";
  return success();
}

/// Runs `passes` (with mp-opt's pass manager options) on `module`.
static LogicalResult runPasses(PassManager &pm, ModuleOp module,
                               const MlirOptMainConfig &config) {
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  if (config.shouldDumpPassPipeline()) {
    pm.dump();
    llvm::errs() << "\n";
  }
  return pm.run(module);
}

/// Whether `note` is the "see current operation" note MLIR attaches to an
/// error on an op, and that op is the whole module or a function: thousands
/// of lines of generic IR after an error whose location already says what
/// is at fault.
static bool isModuleDump(Diagnostic &note) {
  std::string text = note.str();
  StringRef op = text;
  if (!op.consume_front("see current operation:"))
    return false;
  op = op.ltrim();
  return op.starts_with("\"builtin.module\"") ||
         op.starts_with("\"func.func\"");
}

/// Prints `diag` as `printer` would, without module dumps; fails (leaving it
/// to `printer`) when it has none.
static LogicalResult
printWithoutModuleDumps(Diagnostic &diag, SourceMgrDiagnosticHandler &printer) {
  if (llvm::none_of(diag.getNotes(), isModuleDump))
    return failure();
  printer.emitDiagnostic(diag.getLocation(), diag.str(), diag.getSeverity());
  for (Diagnostic &note : diag.getNotes())
    if (!isModuleDump(note))
      printer.emitDiagnostic(note.getLocation(), note.str(),
                             note.getSeverity());
  return success();
}

/// The ONNX and artifact paths: the module stays in memory from import (or
/// parse) through the passes to the printer or the artifact writer.
static int compile(StringRef inputFilename, StringRef outputFilename,
                   DialectRegistry &registry, const MlirOptMainConfig &config) {
  if (!config.inputSplitMarker().empty() && !artifactDir.empty()) {
    llvm::errs() << "error: --artifact cannot be combined with "
                    "--split-input-file\n";
    return 1;
  }
  MLIRContext context(registry);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  ScopedDiagnosticHandler withoutModuleDumps(&context, [&](Diagnostic &diag) {
    return printWithoutModuleDumps(diag, handler);
  });
  bool onnx = inputFilename.ends_with(".onnx");
  OwningOpRef<ModuleOp> module =
      onnx ? importModel(inputFilename, context)
           : parseSourceFile<ModuleOp>(inputFilename, sourceMgr,
                                       ParserConfig(&context));
  if (!module)
    return 1;
  if (!exportWeights.empty()) {
    if (!onnx || outputFilename == "-") {
      llvm::errs() << "error: --mp-export-weights needs an ONNX model and "
                      "-o TRAINED.onnx\n";
      return 1;
    }
    PassManager passes(&context);
    if (failed(config.setupPassPipeline(passes)))
      return 1;
    if (!artifactDir.empty() || passes.size() > 0) {
      llvm::errs() << "error: --mp-export-weights writes the ONNX model with "
                      "trained weights: it takes no passes and no "
                      "--artifact\n";
      return 1;
    }
    FailureOr<int64_t> replaced = mp::exportTrainedWeights(
        *module, inputFilename, exportWeights, outputFilename);
    if (failed(replaced))
      return 1;
    llvm::outs() << "mp-opt: wrote " << outputFilename << " with " << *replaced
                 << " trained parameters from " << exportWeights << "\n";
    return 0;
  }
  OwningOpRef<ModuleOp> reference;
  PassManager pm(&context);
  pm.addInstrumentation(std::make_unique<ReferenceCapture>(reference));
  if (failed(config.setupPassPipeline(pm)))
    return 1;
  // An artifact needs the named ops the runtime has kernels for: an ONNX
  // model is raised first unless the pipeline does it.
  if (onnx && !artifactDir.empty() && !runs(pm, "mp-raise")) {
    PassManager raise(&context);
    raise.addPass(mp::createMPRaise());
    if (failed(runPasses(raise, *module, config)))
      return 1;
  }
  if (failed(runPasses(pm, *module, config)))
    return 1;
  if (artifactDir.empty())
    return failed(printModule(*module, outputFilename, config,
                              /*locations=*/false))
               ? 1
               : 0;
  if (outputFilename != "-" &&
      mp::liesWithin(outputFilename.str(), artifactDir)) {
    llvm::errs() << "error: -o " << outputFilename << " lies in --artifact "
                 << artifactDir << ", which the artifact replaces whole\n";
    return 1;
  }
  // -o keeps the program the pipeline made, with its locations (ONNX node
  // names, which mp-run reports errors and profiles by) for a later
  // --artifact.
  if (outputFilename != "-" &&
      failed(printModule(*module, outputFilename, config, /*locations=*/true)))
    return 1;
  // Activations become their linears' epilogues, rotary embeddings one op,
  // residual adds join their norms, outputs gathered only to be returned stay
  // sharded and inputs only cut are read as each rank's block, last
  // (partitioning and training are done) and before the memory plan,
  // unless this pipeline planned memory already (the plan would no longer
  // fit the program).
  if (!runs(pm, "mp-plan-memory") && !carriesMemoryPlan(*module)) {
    PassManager fuse(&context);
    if (!runs(pm, "mp-fuse-epilogues"))
      fuse.addPass(mp::createMPFuseEpilogues());
    if (!runs(pm, "mp-fuse-rotary"))
      fuse.addPass(mp::createMPFuseRotary());
    if (!runs(pm, "mp-fuse-residual-norms"))
      fuse.addPass(mp::createMPFuseResidualNorms());
    if (!runs(pm, "mp-fuse-reduced-norms"))
      fuse.addPass(mp::createMPFuseReducedNorms());
    if (!gatherOutputs && !runs(pm, "mp-shard-outputs"))
      fuse.addPass(mp::createMPShardOutputs());
    if (!runs(pm, "mp-shard-inputs"))
      fuse.addPass(mp::createMPShardInputs());
    if (failed(runPasses(fuse, *module, config)))
      return 1;
  }
  // A program cut into pipeline chunks is written one function per chunk
  // and phase (each planned as it is written).
  const bool pipelined =
      (*module)->hasAttr(mp::MPDialect::getPipelineAttrName());
  if (pipelined && !runs(pm, "mp-pipeline-split")) {
    PassManager split(&context);
    split.addPass(mp::createMPPipelineSplit());
    if (failed(runPasses(split, *module, config)))
      return 1;
  }
  // The artifact writer serializes the memory plan mp-plan-memory records:
  // planned now unless this pipeline planned it (a plan read from the IR is
  // checked against it).
  if (!pipelined && !runs(pm, "mp-plan-memory")) {
    PassManager plan(&context);
    plan.addPass(mp::createMPPlanMemory());
    if (failed(runPasses(plan, *module, config)))
      return 1;
  }
  // A train step's reference is the unpartitioned train step.
  if (reference && runs(pm, "mp-autodiff")) {
    PassManager train(&context);
    mp::buildTrainPipeline(train);
    if (failed(runPasses(train, *reference, config)))
      return 1;
  }
  return failed(writeArtifactOf(*module, reference ? *reference : ModuleOp()))
             ? 1
             : 0;
}

/// The report's shorthands, as the pass's options: `--mp-report=json` is
/// `--mp-report=format=json`, and `--mp-report-gpu=G` and
/// `--mp-report-iteration-time=T` join the report's options.
static std::vector<std::string> reportShorthands(int argc, char **argv) {
  std::vector<std::string> args;
  std::string extra;
  std::vector<int> reports;
  for (int i = 0; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg.consume_front("--mp-report-gpu="))
      extra += " gpu=" + arg.str();
    else if (arg.consume_front("--mp-report-iteration-time="))
      extra += " iteration-time=" + arg.str();
    else {
      if (arg == "--mp-report" || arg.starts_with("--mp-report="))
        reports.push_back(static_cast<int>(args.size()));
      args.push_back(argv[i]);
    }
  }
  // Each --mp-report runs a report (--mp-report=json --mp-report=text
  // prints both).
  for (int i : reports) {
    StringRef arg = args[i];
    std::string options = arg.consume_front("--mp-report=") ? arg.str() : "";
    if (!options.empty() && options.find('=') == std::string::npos)
      options = "format=" + options; // --mp-report=json
    options += extra;
    args[i] = "--mp-report=" + StringRef(options).ltrim().str();
  }
  if (reports.empty() && !extra.empty()) {
    args.push_back("--mp-report=" + StringRef(extra).ltrim().str());
  }
  return args;
}

/// Passes run in the order given, and the train step is built from the
/// raised and partitioned program: nothing that raises or partitions may
/// follow mp-loss or mp-autodiff (--mp-train before --mp-parallelize).
static LogicalResult checkTrainStepComesLast(PassManager &pm) {
  static constexpr StringRef kBeforeTraining[] = {
      "mp-raise",           "mp-convert-precision",
      "mp-tensor-parallel", "mp-sequence-parallel",
      "mp-data-parallel",   "mp-pipeline"};
  StringRef train;
  for (Pass &pass : pm.getPasses()) {
    StringRef argument = pass.getArgument();
    if (argument == "mp-loss" || argument == "mp-autodiff") {
      if (train.empty())
        train = argument;
    } else if (!train.empty() &&
               llvm::is_contained(kBeforeTraining, argument)) {
      emitError(UnknownLoc::get(pm.getContext()))
          << "'" << argument << "' would run after '" << train
          << "': passes run in the order given, and the train step is "
             "built from the raised and partitioned program (give --mp-train "
             "after --mp-parallelize)";
      return failure();
    }
  }
  return success();
}

/// `config`'s pipeline setup, checked: the train step comes last, and an
/// option the pass's parser rejects (its reason already printed by the
/// command-line library) is not followed by an empty "error:".
static void checkPipelineSetup(MlirOptMainConfig &config) {
  MlirOptMainConfig parsed = config;
  config.setPassPipelineSetupFn([parsed](PassManager &pm) {
    ScopedDiagnosticHandler namesEmptyErrors(
        pm.getContext(), [](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error &&
              diag.str().empty())
            diag << "a pass option is invalid (the reason is printed above)";
          return failure(); // printed by the next handler
        });
    if (failed(parsed.setupPassPipeline(pm)))
      return failure();
    return checkTrainStepComesLast(pm);
  });
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  std::vector<std::string> rewritten = reportShorthands(argc, argv);
  for (StringRef arg : rewritten)
    if (arg.consume_front("--mp-report="))
      if (std::string twice = mp::repeatedOption(arg); !twice.empty()) {
        llvm::errs() << "error: --mp-report: '" << twice
                     << "' is given twice in '" << arg
                     << "': give each option once\n";
        return 1;
      }
  std::vector<char *> argvRewritten;
  for (std::string &arg : rewritten)
    argvRewritten.push_back(arg.data());
  argvRewritten.push_back(nullptr);
  argc = static_cast<int>(rewritten.size());
  argv = argvRewritten.data();
  DialectRegistry registry;
  registry.insert<mp::MPDialect, func::FuncDialect, shard::ShardDialect>();
  mp::registerMPPasses();
  mp::registerMPPipelines();
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
  if (artifactDir.getNumOccurrences() && artifactDir.empty()) {
    llvm::errs() << "error: --artifact needs a directory\n";
    return 1;
  }
  // Inputs are read whole: a device or pipe (/dev/zero) would never end.
  if (inputFilename != "-" && llvm::sys::fs::exists(inputFilename) &&
      !llvm::sys::fs::is_regular_file(inputFilename) &&
      !llvm::sys::fs::is_directory(inputFilename)) {
    llvm::errs() << "error: '" << inputFilename
                 << "' is not a regular file (a device or pipe?)\n";
    return 1;
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  checkPipelineSetup(config);
  // MLIR input without an artifact: mlir-opt's own driver
  // (--split-input-file, --verify-diagnostics, ...).
  if (llvm::StringRef(inputFilename).ends_with(".onnx") ||
      !artifactDir.empty() || !exportWeights.empty())
    return compile(inputFilename, outputFilename, registry, config);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
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
