//===- Pipelines.cpp - the mp pass pipelines ------------------------------===//
#include "mp/Transforms/Pipelines.h"
#include "mp/Support/PipelineSchedule.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

#include <set>

using namespace mlir;

void mp::buildRaisePipeline(OpPassManager &pm,
                            const ParallelizeOptions &options) {
  pm.addPass(createMPRaise());
  if (options.dtype != StorageType::F32)
    pm.addPass(createMPConvertPrecision({options.dtype}));
}

void mp::buildPartitionPipeline(OpPassManager &pm,
                                const ParallelizeOptions &options) {
  pm.addPass(createMPTensorParallel({options.tp, options.grid}));
  if (options.tp > 1)
    pm.addPass(createMPMergePartialSums());
  if (options.sp)
    pm.addPass(createMPSequenceParallel({options.grid}));
  if (options.dp > 1 || options.zero)
    pm.addPass(createMPDataParallel({options.dp, options.zero}));
  // One stage with several micro-batches is gradient accumulation.
  if (options.pp > 1 || options.vp > 1 || options.microbatches > 1)
    pm.addPass(createMPPipeline({options.pp, options.vp, options.microbatches,
                                 options.schedule, options.layout}));
  // Marks the regions and records the policy; mp-train applies it.
  if (options.recompute != "none") {
    MPRecomputeOptions recompute;
    recompute.granularity = options.recompute;
    recompute.method = options.recomputeMethod;
    recompute.layers = options.recomputeLayers;
    pm.addPass(createMPRecompute(recompute));
  }
}

void mp::buildParallelizePipeline(OpPassManager &pm,
                                  const ParallelizeOptions &options) {
  buildRaisePipeline(pm, options);
  buildPartitionPipeline(pm, options);
}

void mp::buildTrainPipeline(OpPassManager &pm) {
  pm.addPass(createMPLoss());
  pm.addPass(createMPAutodiff());
  // The recompute policy --mp-parallelize recorded, if any.
  pm.addPass(createMPRecompute());
}

/// Why `options` do not make a pipeline, or "" when they do.
static std::string invalid(const mp::ParallelizeOptions &options) {
  if (options.tp < 1)
    return "tp must be at least 1, got " +
           std::to_string(static_cast<int64_t>(options.tp));
  if (options.sp && options.tp == 1)
    return "sequence parallelism (sp) needs tp > 1";
  if (options.dp < 1)
    return "dp must be at least 1, got " +
           std::to_string(static_cast<int64_t>(options.dp));
  if (options.zero != 0 && options.zero != 1)
    return "zero must be 0 or 1, got " +
           std::to_string(static_cast<int64_t>(options.zero));
  if (options.zero == 1 && options.dp == 1)
    return "zero=1 shards the optimizer state over the data-parallel "
           "replicas: it needs dp > 1";
  if (options.pp < 1 || options.vp < 1 || options.microbatches < 1)
    return "pp, vp and microbatches must be at least 1";
  if (options.recompute != "none" && options.recompute != "selective" &&
      options.recompute != "full")
    return "recompute must be none, selective or full, got '" +
           options.recompute + "'";
  if (options.recomputeMethod != "uniform" &&
      options.recomputeMethod != "block")
    return "recompute-method must be uniform or block, got '" +
           options.recomputeMethod + "'";
  if (options.recomputeLayers < 1)
    return "recompute-layers must be at least 1";
  if (!mp::pipeline::parseSchedule(options.schedule))
    return "unknown pipeline schedule '" + options.schedule +
           "' (gpipe, 1f1b or interleaved)";
  if (options.pp == 1 && options.vp == 1 &&
      (!options.layout.empty() || options.schedule != "1f1b"))
    return "schedule and layout are pipeline options: they need pp > 1 "
           "(microbatches=M with pp=1 accumulates gradients over M "
           "micro-batches)";
  return "";
}

std::string mp::repeatedOption(llvm::StringRef text) {
  std::set<std::string> seen;
  llvm::SmallVector<llvm::StringRef> words;
  text.split(words, ' ', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef word : words) {
    std::string key = word.split('=').first.trim().str();
    if (!key.empty() && !seen.insert(key).second)
      return key;
  }
  return "";
}

void mp::registerMPPipelines() {
  // As PassPipelineRegistration does, but with the options checked, so that
  // a bad combination is an error naming it rather than a pass failing later.
  registerPassPipeline(
      "mp-parallelize",
      "raise, convert precision and partition (tensor, sequence parallelism) "
      "an imported model",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        if (std::string twice = repeatedOption(text); !twice.empty())
          return errorHandler("'" + twice + "' is given twice in '" + text +
                              "': give each option once");
        ParallelizeOptions options;
        if (failed(options.parseFromString(text)))
          return errorHandler(
              "expected tp=N sp[=true|false] dp=N zero=0|1 "
              "dtype=f32|bf16|f16 grid=NAME pp=N vp=N microbatches=N "
              "schedule=gpipe|1f1b|interleaved layout=E...|...L "
              "recompute=none|selective|full recompute-method=uniform|block "
              "recompute-layers=N, got '" +
              text + "'");
        if (std::string why = invalid(options); !why.empty())
          return errorHandler(why);
        buildParallelizePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> optHandler) {
        optHandler(ParallelizeOptions());
      });
  PassPipelineRegistration<>(
      "mp-train",
      "append the training loss (cross-entropy against a 'labels' input) "
      "and the backward pass: the program becomes the train step, returning "
      "the loss and every parameter's gradient",
      buildTrainPipeline);
}
