//===- Pipelines.h - the mp pass pipelines ----------------------*- C++ -*-===//
//
// The whole flow from an imported model to the partitioned program, as one
// registered pipeline (`mp-parallelize{tp=2 sp=true dtype=bf16}`), used by
// mp-opt's --mp-parallelize and by --pass-pipeline alike.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_PIPELINES_H
#define MP_TRANSFORMS_PIPELINES_H

#include "mp/Transforms/PassOptions.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mp {

struct ParallelizeOptions : mlir::PassPipelineOptions<ParallelizeOptions> {
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("tensor-parallel size (ranks of the grid)"),
                     llvm::cl::init(1)};
  Option<bool> sp{
      *this, "sp",
      llvm::cl::desc("Megatron sequence parallelism (needs tp > 1)"),
      llvm::cl::init(false)};
  Option<StorageType> dtype{
      *this, "dtype",
      llvm::cl::desc("storage type of parameters and activations"),
      llvm::cl::init(StorageType::F32),
      llvm::cl::values(
          clEnumValN(StorageType::F32, "f32", "fp32 (no conversion)"),
          clEnumValN(StorageType::BF16, "bf16", "bfloat16"),
          clEnumValN(StorageType::F16, "f16", "IEEE half"))};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("data-parallel size (replicas of the "
                                    "tensor-parallel group; training)"),
                     llvm::cl::init(1)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("1: shard the optimizer state over the data-parallel "
                     "replicas (Megatron's distributed optimizer)"),
      llvm::cl::init(0)};
  Option<std::string> grid{
      *this, "grid",
      llvm::cl::desc("name of the shard.grid tensor parallelism creates"),
      llvm::cl::init(kDefaultTensorParallelGrid)};
  Option<int64_t> pp{*this, "pp",
                     llvm::cl::desc("pipeline-parallel size (stages; the "
                                    "plan only, see mp-pipeline)"),
                     llvm::cl::init(1)};
  Option<int64_t> vp{*this, "vp",
                     llvm::cl::desc("chunks per pipeline stage (interleaved)"),
                     llvm::cl::init(1)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("microbatches per training step (pipeline)"),
      llvm::cl::init(1)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("pipeline schedule: gpipe, 1f1b or interleaved"),
      llvm::cl::init("1f1b")};
  Option<std::string> layout{
      *this, "layout",
      llvm::cl::desc("pipeline cut by hand: chunks of E, t, L separated by |"),
      llvm::cl::init("")};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("activation recompute in the train step: none, "
                     "selective (core attention) or full (whole layers)"),
      llvm::cl::init("none")};
  Option<std::string> recomputeMethod{
      *this, "recompute-method",
      llvm::cl::desc("full recompute: uniform (groups of recompute-layers "
                     "layers) or block (the first recompute-layers layers "
                     "of each pipeline stage)"),
      llvm::cl::init("uniform")};
  Option<int64_t> recomputeLayers{
      *this, "recompute-layers",
      llvm::cl::desc("full recompute: layers per group or per stage"),
      llvm::cl::init(1)};
};

/// Raising to named transformer ops and the storage precision: the program
/// every layout computes (mp-run --verify's reference).
void buildRaisePipeline(mlir::OpPassManager &pm,
                        const ParallelizeOptions &options);
/// Tensor and sequence parallelism on a raised program.
void buildPartitionPipeline(mlir::OpPassManager &pm,
                            const ParallelizeOptions &options);
/// Both: an imported model to the program each rank runs.
void buildParallelizePipeline(mlir::OpPassManager &pm,
                              const ParallelizeOptions &options);

/// The train step of a (partitioned) program: the loss appended (mp-loss),
/// then its backward (mp-autodiff). Registered as `mp-train`, so that
/// `mp-opt MODEL.onnx --mp-parallelize=... --mp-train` runs it after
/// partitioning: each rank differentiates its own program.
void buildTrainPipeline(mlir::OpPassManager &pm);

/// The first key that pass options `text` ("tp=2 tp=1") give twice, or ""
/// if none: MLIR's option parser keeps the last, so `tp=2 tp=1` would
/// silently mean tp=1.
std::string repeatedOption(llvm::StringRef text);

/// Registers `mp-parallelize` and `mp-train` (for --pass-pipeline and
/// mp-opt's options).
void registerMPPipelines();

} // namespace mp

#endif // MP_TRANSFORMS_PIPELINES_H
