//===- PipelineArtifact.cpp - a pipeline-parallel runtime artifact --------===//
//
// A module cut into pipeline chunks (mp-pipeline, mp-pipeline-split) becomes
// a directory with pipeline.pb and one program directory per chunk function:
// forward_K, and with a train step backward_K, for virtual stage K. Each is
// an ordinary program for its stage's ranks (tensor-parallel grid, data
// parallelism); a backward reads its forward's parameters (parameters_from)
// so that the runtime keeps one copy. pipeline.pb holds the schedule's
// action lists, generated and validated here, the program's inputs and
// outputs per micro-batch, and the parameters several stages hold.
//
//===----------------------------------------------------------------------===//
#include "WriteProgram.h"

#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Program/program.pb.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"
#include "mp/Support/DType.h"
#include "mp/Support/PipelineSchedule.h"

#include "llvm/ADT/StringMap.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mp;

namespace fs = std::filesystem;

namespace {

/// The parameters `func` reads.
std::set<std::string> paramsRead(func::FuncOp func) {
  std::set<std::string> names;
  func.walk([&](GetParamOp get) { names.insert(get.getName().str()); });
  return names;
}

int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  return tensor.getNumElements() * std::max<int64_t>(bits / 8, 1);
}

/// Records a program input or output of one micro-batch at `index`.
LogicalResult addSpec(std::map<int64_t, program::TensorSpec> &specs,
                      StringRef kind, int64_t index, DictionaryAttr attrs,
                      Type type, Location loc) {
  auto tensor = cast<RankedTensorType>(type);
  FailureOr<DType> dtype = runtimeDType(type, loc);
  if (failed(dtype))
    return failure();
  program::TensorSpec spec;
  auto name = attrs.getAs<StringAttr>(MPDialect::getNameAttrName());
  spec.set_name(name ? name.str() : (kind + Twine(index)).str());
  spec.set_dtype(dtypeName(*dtype));
  for (int64_t d : tensor.getShape())
    spec.add_shape(d);
  specs[index] = spec;
  return success();
}

struct ChunkFunctions {
  func::FuncOp forward, backward;
};

} // namespace

LogicalResult mp::writePipelineArtifact(ModuleOp module, StringRef dirName,
                                        ArtifactSummary &summary,
                                        bool syntheticWeights,
                                        ModuleOp reference) {
  auto plan =
      module->getAttrOfType<DictionaryAttr>(MPDialect::getPipelineAttrName());
  auto pp = plan.getAs<IntegerAttr>("pp"), vp = plan.getAs<IntegerAttr>("vp");
  auto microbatches = plan.getAs<IntegerAttr>("microbatches");
  auto scheduleAttr = plan.getAs<StringAttr>("schedule");
  std::optional<pipeline::ScheduleKind> parsed =
      scheduleAttr ? pipeline::parseSchedule(scheduleAttr.getValue())
                   : std::nullopt;
  if (!pp || !vp || !microbatches || !parsed)
    return emitError(module.getLoc()) << "an invalid mp.pipeline plan";
  const pipeline::ScheduleKind kind = *parsed;
  pipeline::Dims dims{pp.getInt(), vp.getInt(), microbatches.getInt()};
  if (std::string why = pipeline::checkDims(kind, dims); !why.empty())
    return emitError(module.getLoc()) << why;

  std::vector<ChunkFunctions> chunks(static_cast<size_t>(dims.virtualStages()));
  for (auto func : module.getOps<func::FuncOp>()) {
    auto chunk =
        func->getAttrOfType<IntegerAttr>(MPDialect::getChunkAttrName());
    if (!chunk || chunk.getInt() < 0 || chunk.getInt() >= dims.virtualStages())
      return func.emitError()
             << "a pipeline artifact is written from the chunk functions of "
                "mp-pipeline-split; '@"
             << func.getSymName() << "' is not one";
    ChunkFunctions &c = chunks[static_cast<size_t>(chunk.getInt())];
    (func.getSymName().starts_with("backward_") ? c.backward : c.forward) =
        func;
  }
  const bool train = chunks.front().backward != nullptr;
  for (auto [k, c] : llvm::enumerate(chunks))
    if (!c.forward || train != (c.backward != nullptr))
      return emitError(module.getLoc())
             << "pipeline chunk " << k << " lacks its "
             << (c.forward ? "backward" : "forward") << " function";

  program::Pipeline pipe;
  pipe.set_version(1);
  pipe.set_stages(dims.stages);
  pipe.set_chunks(dims.chunks);
  pipe.set_microbatches(dims.microbatches);
  pipe.set_schedule(pipeline::scheduleName(kind));
  pipe.set_train(train);
  if (auto dp = module->getAttrOfType<IntegerAttr>(
          MPDialect::getDataParallelAttrName()))
    pipe.set_data_parallel(dp.getInt());

  // The schedule, as the runtime will run it.
  pipeline::Schedule actions = pipeline::generate(kind, dims);
  if (std::string why = pipeline::validate(actions, dims); !why.empty())
    return emitError(module.getLoc()) << "the " << pipeline::scheduleName(kind)
                                      << " schedule is invalid: " << why;
  for (const auto &rankActions : actions) {
    auto *stage = pipe.add_actions();
    for (const pipeline::Action &a : rankActions) {
      auto *action = stage->add_actions();
      action->set_kind(static_cast<program::Action::Kind>(a.kind));
      action->set_chunk(a.chunk);
      action->set_microbatch(a.microbatch);
      action->set_peer(a.peer);
    }
  }

  // Inputs and outputs of one micro-batch; stashed bytes; the parameters
  // each stage reads.
  std::map<int64_t, program::TensorSpec> inputs, outputs;
  std::map<std::string, std::set<int64_t>> stagesOf;
  for (auto [k, c] : llvm::enumerate(chunks)) {
    const int64_t stage = static_cast<int64_t>(k) % dims.stages;
    int64_t stash = 0;
    for (func::FuncOp func : {c.forward, c.backward}) {
      if (!func)
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (auto in = func.getArgAttrOfType<IntegerAttr>(
                i, MPDialect::getInputAttrName()))
          if (failed(addSpec(inputs, "input", in.getInt(),
                             func.getArgAttrDict(i), func.getArgumentTypes()[i],
                             func.getLoc())))
            return failure();
      for (unsigned i = 0; i < func.getNumResults(); ++i) {
        if (auto out = func.getResultAttrOfType<IntegerAttr>(
                i, MPDialect::getOutputAttrName()))
          if (failed(addSpec(outputs, "output", out.getInt(),
                             func.getResultAttrDict(i),
                             func.getResultTypes()[i], func.getLoc())))
            return failure();
        if (func == c.forward &&
            func.getResultAttr(i, MPDialect::getStashAttrName()))
          stash += bytesOf(func.getResultTypes()[i]);
      }
    }
    pipe.add_stash_bytes(stash);
    for (const std::string &name : paramsRead(c.forward))
      stagesOf[name].insert(stage);
    if (c.backward) {
      std::set<std::string> forwardReads = paramsRead(c.forward);
      for (const std::string &name : paramsRead(c.backward))
        if (!forwardReads.count(name))
          return c.backward.emitError()
                 << "the backward of pipeline chunk " << k
                 << " reads parameter '" << name
                 << "', which its forward does not: the runtime shares the "
                    "forward's parameters with it";
    }
  }
  for (auto &[index, spec] : inputs)
    *pipe.add_inputs() = spec;
  for (auto &[index, spec] : outputs)
    *pipe.add_outputs() = spec;
  for (auto &[name, stages] : stagesOf) {
    if (stages.size() < 2)
      continue;
    auto *tied = pipe.add_tied();
    tied->set_name(name);
    for (int64_t s : stages)
      tied->add_stages(s);
  }

  fs::path dir(dirName.str()), tmp;
  if (failed(makeTemporaryDirectory(dir, tmp, module.getLoc())))
    return failure();
  std::error_code ec;
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  summary = ArtifactSummary();
  summary.stages = dims.stages;
  summary.functions = 0;
  summary.pipeline = true;
  for (auto [k, c] : llvm::enumerate(chunks)) {
    for (func::FuncOp func : {c.forward, c.backward}) {
      if (!func)
        continue;
      fs::path sub = tmp / func.getSymName().str();
      ArtifactSummary part;
      if (!fs::create_directory(sub, ec) ||
          failed(writeProgram(
              module, func, sub.string(), part, syntheticWeights,
              func == c.backward ? c.forward.getSymName() : StringRef()))) {
        cleanup();
        return failure();
      }
      summary.instructions += part.instructions;
      summary.arenaBytes = std::max(summary.arenaBytes, part.arenaBytes);
      summary.unplannedBytes += part.unplannedBytes;
      summary.parameterBytes += part.parameterBytes;
      summary.constantBytes += part.constantBytes;
      summary.ranks = part.ranks;
      ++summary.functions;
    }
  }
  pipe.set_grid_size(summary.ranks);
  summary.ranks *= dims.stages * std::max<int64_t>(pipe.data_parallel(), 1);
  std::string bytes;
  rt::Status written =
      pipe.SerializeToString(&bytes)
          ? rt::writeFileAtomically((tmp / "pipeline.pb").string(),
                                    rt::sealProgram(bytes))
          : rt::Status::error("cannot serialize the pipeline");
  if (!written) {
    cleanup();
    return emitError(module.getLoc()) << written.message;
  }
  if (failed(finishArtifact(tmp, dir, module, reference, syntheticWeights))) {
    cleanup();
    return failure();
  }
  return success();
}
