//===- PipelineRun.cpp - mp-run on a pipeline artifact --------------------===//
//
// Each rank loads its stage (mp/Runtime/Pipeline.h). A step takes a batch
// of `microbatches` micro-batches along the first axis of every input: the
// inputs given with --input (one step: the outputs are written, each by
// the stage computing it), or each replica's rows of the token file under
// --train (the loop of Train.cpp, with gradients accumulated over the
// micro-batches and the norm summed over the stages). --timeline draws the
// last step as it ran.
//
//===----------------------------------------------------------------------===//
#include "Modes.h"
#include "TrainBatch.h"
#include "TrainState.h"

#include "mp/Runtime/Pipeline.h"
#include "mp/Support/TimelineSvg.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

using namespace mp::rt;
namespace pipeline = mp::pipeline;

namespace mprun {

namespace {

/// The inputs of one step, a batch of `dims.microbatches` micro-batches.
std::vector<IOSpec> stepInputs(const PipelineStage &stage) {
  std::vector<IOSpec> specs = stage.inputs();
  for (IOSpec &s : specs)
    if (!s.shape.empty())
      s.shape[0] *= stage.dims().microbatches;
  return specs;
}

/// Views of micro-batch m of each of `batch` (split along the first axis).
std::vector<std::vector<Tensor>> microbatchesOf(const PipelineStage &stage,
                                                std::vector<Tensor> batch) {
  const int64_t count = stage.dims().microbatches;
  std::vector<std::vector<Tensor>> out(static_cast<size_t>(count));
  for (size_t i = 0; i < batch.size(); ++i) {
    const IOSpec &spec = stage.inputs()[i];
    Tensor part{nullptr, spec.dtype, spec.shape};
    for (int64_t m = 0; m < count; ++m) {
      part.data = static_cast<uint8_t *>(batch[i].data) +
                  static_cast<size_t>(m) * part.bytes();
      out[static_cast<size_t>(m)].push_back(part);
    }
  }
  return out;
}

/// The pipeline's train step: the schedule over this replica's batch.
class PipelineStep : public StepRunner {
public:
  PipelineStep(PipelineStage &stage, size_t loss)
      : stage(stage), lossOutput(loss) {}
  Status run(std::vector<HostBuffer> &inputs, int64_t seed, int64_t step,
             double &loss) override {
    std::vector<Tensor> batch;
    for (HostBuffer &b : inputs)
      batch.push_back(b.view());
    stage.setRandomState(static_cast<uint64_t>(seed),
                         static_cast<uint64_t>(step));
    if (Status s = stage.run(microbatchesOf(stage, batch)); !s)
      return s;
    // The loss is the last stage's; every stage learns it.
    const HostBuffer *here = stage.result(lossOutput);
    loss = here ? *reinterpret_cast<const float *>(here->bytes.data()) : 0.0;
    Tensor t{&loss, DType::F64, {1}};
    return stage.pipelineComm().allReduceSum(t, t);
  }
  const void *gradient(const Slot &slot) override {
    return stage.result(slot.gradIndex)->bytes.data();
  }

private:
  PipelineStage &stage;
  size_t lossOutput;
};

/// This stage's trained parameters, each with its gradient among the
/// pipeline's outputs (found in its chunks' backward programs).
Status bindStage(PipelineStage &stage, const TrainOptions &t,
                 std::vector<Slot> &slots, size_t &idsInput,
                 size_t &labelsInput, size_t &lossOutput) {
  const std::string notTraining =
      "this pipeline artifact is not a train step (compile it with mp-opt "
      "MODEL.onnx --mp-parallelize=\"pp=N ...\" --mp-train --artifact DIR)";
  const auto &outs = stage.outputs();
  if (!stage.training())
    return Status::error(notTraining);
  if (Status s = findTrainStep(stage.inputs(), outs, t.inputs, notTraining,
                               idsInput, labelsInput);
      !s)
    return s;
  if (stage.inputs()[idsInput].shape.size() != 2 ||
      stage.inputs()[idsInput].shape != stage.inputs()[labelsInput].shape)
    return Status::error("the train step's token ids must be [batch, "
                         "sequence], as its labels");
  lossOutput = 0;
  for (const PipelineStage::Parameter &p : stage.parameters()) {
    const Tensor &param = p.copies.front();
    if (param.dtype != DType::F32 && param.dtype != DType::BF16 &&
        param.dtype != DType::F16)
      continue;
    const IOSpec *grad = nullptr;
    for (int64_t c = 0; c < stage.dims().chunks && !grad; ++c)
      for (const IOSpec &spec : stage.function(c, true).outputs())
        if (spec.name == "grads/" + p.name)
          grad = &spec;
    Slot slot;
    slot.name = p.name;
    slot.param = param;
    slot.copies.assign(p.copies.begin() + 1, p.copies.end());
    slot.gradIndex = outs.size();
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].name == "grads/" + p.name)
        slot.gradIndex = i;
    // A parameter several stages hold gets its gradient summed over them
    // (zeros from a stage not computing one).
    if (!grad && p.stages.size() > 1 && slot.gradIndex < outs.size())
      grad = &outs[slot.gradIndex];
    if (!grad || slot.gradIndex == outs.size())
      return Status::error(notTraining + ": no gradient of parameter '" +
                           p.name + "'");
    if (grad->shape != param.shape || grad->dtype != param.dtype)
      return Status::error("the gradient of '" + p.name +
                           "' does not match the parameter");
    slot.sharded = grad->shardAxis >= 0;
    slot.shardAxis = grad->shardAxis;
    slot.shardGroups = grad->shardGroups;
    slot.decays = param.shape.size() >= 2;
    slot.partOf = p.info->partOf;
    slot.partAxis = p.info->partAxis;
    slot.partStart = p.info->partStart;
    slot.partWhole = p.info->partWhole;
    slot.frozen = grad->constant;
    slot.normHere = p.stages.front() == stage.stage();
    slots.push_back(std::move(slot));
  }
  return Status::success();
}

/// The last step's timeline of every stage (its first rank's), on rank 0:
/// times from the step's start, in milliseconds.
pipeline::Timeline gatherTimeline(const PipelineStage &stage,
                                  Communicator &world) {
  size_t most = 0;
  for (const auto &list : stage.actionLists())
    most = std::max(most, list.size());
  constexpr size_t kFields = 5;
  std::vector<double> mine(most * kFields, -1.0);
  const auto &timeline = stage.lastTimeline();
  for (size_t i = 0; i < timeline.size() && i < most; ++i) {
    const pipeline::TimedAction &t = timeline[i];
    double *f = mine.data() + i * kFields;
    f[0] = static_cast<double>(t.action.kind);
    f[1] = static_cast<double>(t.action.chunk);
    f[2] = static_cast<double>(t.action.microbatch);
    f[3] = t.start;
    f[4] = t.end;
  }
  std::vector<double> all(mine.size() * static_cast<size_t>(world.size()));
  Tensor in{mine.data(), DType::F64, {1, static_cast<int64_t>(mine.size())}};
  Tensor out{all.data(),
             DType::F64,
             {world.size(), static_cast<int64_t>(mine.size())}};
  if (Status s = world.allGather(in, out, 0); !s)
    abortRun("gathering the timeline: " + s.message);
  pipeline::Timeline result;
  const int64_t perStage = world.size() / stage.dims().stages;
  double origin = 1e300, computed = 0;
  for (int64_t s = 0; s < stage.dims().stages; ++s)
    for (size_t i = 0; i < most; ++i) {
      const double *f = all.data() + (s * perStage * most + i) * kFields;
      if (f[0] >= 0)
        origin = std::min(origin, f[3]);
    }
  for (int64_t s = 0; s < stage.dims().stages; ++s) {
    result.ranks.emplace_back();
    for (size_t i = 0; i < most; ++i) {
      const double *f = all.data() + (s * perStage * most + i) * kFields;
      if (f[0] < 0)
        continue;
      pipeline::Action a{static_cast<pipeline::ActionKind>(f[0]),
                         static_cast<int64_t>(f[1]), static_cast<int64_t>(f[2]),
                         -1};
      const double start = (f[3] - origin) * 1e3, end = (f[4] - origin) * 1e3;
      result.ranks.back().push_back({a, start, end});
      result.makespan = std::max(result.makespan, end);
      if (a.kind == pipeline::ActionKind::Forward ||
          a.kind == pipeline::ActionKind::Backward)
        computed += end - start;
    }
  }
  result.bubble =
      computed > 0
          ? (static_cast<double>(stage.dims().stages) * result.makespan -
             computed) /
                computed
          : 0;
  return result;
}

void writeTimeline(const Options &o, const PipelineStage &stage,
                   Communicator &world) {
  pipeline::Timeline timeline = gatherTimeline(stage, world);
  if (world.rank() != 0)
    return;
  const std::string title =
      "measured: " + std::to_string(stage.dims().stages) + " stages, " +
      std::to_string(stage.dims().chunks) + " chunk(s) each, " +
      std::to_string(stage.dims().microbatches) + " micro-batches, " +
      stage.scheduleName() + " (" + o.artifact + ")";
  if (Status s = writeFileAtomically(
          o.timeline,
          pipeline::timelineSvg(timeline, stage.dims(), title, "ms"));
      !s)
    abortRun("--timeline: " + s.message);
  std::printf("mp-run: wrote %s: one step in %.2f ms, measured bubble %.1f%%\n",
              o.timeline.c_str(), timeline.makespan, 100 * timeline.bubble);
}

/// The results of the last step this stage reports, by name: its first
/// rank's (a tied parameter's gradient from its first stage), shards
/// gathered over the stage's grid (every rank of it takes part) and a cut
/// fused weight's parts joined. Empty on the other ranks.
struct StageResults {
  std::vector<HostBuffer> gathered;
  std::map<std::string, HostBuffer> joined;
  std::vector<std::pair<std::string, Tensor>> named;
};

void collectResults(const PipelineStage &stage, StageResults &out) {
  out.gathered.assign(stage.outputs().size(), HostBuffer());
  std::vector<const Executable::Parameter *> params;
  for (const PipelineStage::Parameter &p : stage.parameters())
    params.push_back(p.info);
  std::vector<std::string> names;
  std::vector<Tensor> values;
  Communicator &grid = stage.gridComm();
  const bool lead = grid.rank() == 0 && (!stage.dataParallelComm() ||
                                         stage.dataParallelComm()->rank() == 0);
  for (size_t i = 0; i < stage.outputs().size(); ++i) {
    const HostBuffer *r = stage.result(i);
    const IOSpec *spec = stage.resultSpec(i);
    if (!r)
      continue;
    Tensor value = const_cast<HostBuffer *>(r)->view();
    if (spec && spec->shardAxis >= 0 && grid.size() > 1) {
      if (Status s = gatherWhole(grid, value, *spec, out.gathered[i]); !s)
        abortRun(s.message);
      value = out.gathered[i].view();
    }
    const std::string &name = stage.outputs()[i].name;
    bool firstHolder = true;
    for (const PipelineStage::Parameter &p : stage.parameters())
      if (name == "grads/" + p.name)
        firstHolder = p.stages.front() == stage.stage();
    if (lead && firstHolder) {
      names.push_back(name);
      values.push_back(value);
    }
  }
  if (!names.empty())
    if (Status s = outputsToWrite(params, names, values, out.joined, out.named);
        !s)
      abortRun(s.message);
}

/// --verify: the unpartitioned program (the artifact's reference) run on
/// each micro-batch alone, its results combined as the step combines them
/// (losses and gradients averaged, the rest stacked), against this stage's.
bool verifyStage(const std::string &refDir, const PipelineStage &stage,
                 const std::vector<std::vector<Tensor>> &microbatches,
                 const StageResults &results, double tolerance) {
  std::unique_ptr<Executable> ref;
  if (Status s = Executable::load(refDir, ref); !s)
    abortRun("--verify: " + s.message);
  const int64_t count = stage.dims().microbatches;
  std::vector<HostBuffer> combined(ref->outputs().size());
  for (int64_t m = 0; m < count; ++m) {
    std::vector<Tensor> inputs;
    for (const IOSpec &spec : ref->inputs()) {
      size_t i = 0;
      while (i < stage.inputs().size() && stage.inputs()[i].name != spec.name)
        ++i;
      if (i == stage.inputs().size())
        abortRun("--verify: the reference's input '" + spec.name +
                 "' is not the pipeline's");
      inputs.push_back(microbatches[static_cast<size_t>(m)][i]);
    }
    std::vector<Tensor> outputs;
    if (Status s = ref->run(inputs, outputs); !s)
      abortRun("--verify: " + s.message);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Tensor &t = outputs[i];
      HostBuffer &c = combined[i];
      const bool averaged =
          t.dtype == DType::F32 &&
          (t.shape.empty() || ref->outputs()[i].name.rfind("grads/", 0) == 0);
      if (m == 0) {
        c.dtype = t.dtype;
        c.shape = t.shape;
        if (!averaged && !c.shape.empty())
          c.shape[0] *= count;
        c.bytes.assign(c.view().bytes(), 0);
      }
      if (averaged) {
        float *sum = reinterpret_cast<float *>(c.bytes.data());
        for (int64_t k = 0; k < t.numel(); ++k)
          sum[k] += t.as<float>()[k] / static_cast<float>(count);
      } else if (c.bytes.size() == t.bytes() * static_cast<size_t>(count)) {
        std::memcpy(c.bytes.data() + t.bytes() * static_cast<size_t>(m), t.data,
                    t.bytes());
      }
    }
  }
  std::vector<Tensor> refValues;
  for (HostBuffer &c : combined)
    refValues.push_back(c.view());
  std::printf("mp-run: verify stage %lld against %s (one rank, each of %lld "
              "micro-batches):\n",
              static_cast<long long>(stage.stage()), refDir.c_str(),
              static_cast<long long>(count));
  const bool finite =
      compareOutputs(results.named, ref->outputs(), refValues, tolerance);
  std::fflush(stdout);
  return finite;
}

/// Every chunk program of the stage times its op kinds (--profile).
void setProfiling(PipelineStage &stage, bool on) {
  for (int64_t c = 0; c < stage.dims().chunks; ++c) {
    stage.function(c, false).enableProfiling(on);
    if (stage.training())
      stage.function(c, true).enableProfiling(on);
  }
}

/// --profile: each stage's time per op kind over the timed steps (its first
/// rank's, all its chunk programs together), printed by rank 0.
void printProfiles(const PipelineStage &stage, Communicator &world, int steps) {
  std::map<std::string, std::pair<double, int64_t>> byOp;
  double total = 0;
  for (int64_t c = 0; c < stage.dims().chunks; ++c)
    for (bool backward : {false, true}) {
      if (backward && !stage.training())
        continue;
      for (const auto &[op, secs, calls] :
           stage.function(c, backward).profile()) {
        byOp[op].first += secs;
        byOp[op].second += calls;
        total += secs;
      }
    }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(
      byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  const bool lead = world.rank() % (world.size() / stage.dims().stages) == 0;
  std::string text;
  if (lead) {
    text = "  stage " + std::to_string(stage.stage()) + ":\n";
    char line[128];
    for (const auto &[op, row] : rows) {
      std::snprintf(line, sizeof line, "    %-18s %9.3f ms %5.1f%% %6lld\n",
                    op.c_str(), row.first * 1e3 / steps,
                    total > 0 ? 100 * row.first / total : 0.0,
                    static_cast<long long>(row.second / steps));
      text += line;
    }
  }
  // (Every rank takes part; each stage's first rank brings its lines.)
  const std::vector<std::string> all = allGatherStrings(world, text);
  if (world.rank() != 0)
    return;
  std::printf("mp-run: profile per stage over %d steps (op, ms/step, share, "
              "calls/step):\n",
              steps);
  for (const std::string &stageText : all)
    std::fputs(stageText.c_str(), stdout);
}

/// One step on the --input batch, timed as a plain artifact's runs are.
int runStep(const Options &o, PipelineStage &stage, Communicator &world) {
  const std::vector<IOSpec> specs = stepInputs(stage);
  std::vector<HostBuffer> buffers;
  stopIfAnyRankFailed(world, world.rank() == 0 ? readInputs(o, specs, buffers)
                                               : Status::success());
  if (Status s = shareInputs(world, specs, buffers); !s)
    abortRun(s.message);
  std::vector<Tensor> batch;
  for (HostBuffer &b : buffers)
    batch.push_back(b.view());
  const auto microbatches = microbatchesOf(stage, batch);
  for (int i = 0; i < o.warmup; ++i)
    if (Status s = stage.run(microbatches); !s)
      abortRun(s.message);
  std::vector<double> times;
  setProfiling(stage, o.profile);
  for (int i = 0; i < std::max(o.iterations, 1); ++i) {
    const double start = seconds();
    if (Status s = stage.run(microbatches); !s)
      abortRun(s.message);
    times.push_back(seconds() - start);
  }
  setProfiling(stage, false);
  if (o.profile)
    printProfiles(stage, world, std::max(o.iterations, 1));
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  if (!o.quiet) {
    int64_t tokens = 0;
    for (const IOSpec &s : specs)
      if (!tokens && (s.dtype == DType::I64 || s.dtype == DType::I32))
        tokens = Tensor{nullptr, s.dtype, s.shape}.numel();
    std::printf("mp-run: %zu steps: %.3f ms/step (median, min %.3f ms)",
                times.size(), median * 1e3, times.front() * 1e3);
    if (tokens)
      std::printf(", %.0f tokens/s", static_cast<double>(tokens) / median);
    std::printf("\n");
  }
  // The first stage's stashed activations, measured against the plan.
  if (stage.training() && !o.quiet)
    std::printf("mp-run: stage 0 held the stash of at most %lld "
                "micro-batch(es) at once, %lld bytes (the plan: %lld)\n",
                static_cast<long long>(stage.stashPeakMicrobatches()),
                static_cast<long long>(stage.stashPeakBytes()),
                static_cast<long long>(stage.plannedStashPeak()));
  if (!o.timeline.empty())
    writeTimeline(o, stage, world);
  if (!o.outputDir.empty() || !o.verify.empty()) {
    StageResults results;
    collectResults(stage, results);
    bool verified = true;
    if (!o.verify.empty() && !results.named.empty())
      verified =
          verifyStage(o.verify == "-" ? o.artifact + "/reference" : o.verify,
                      stage, microbatches, results, o.verifyTolerance);
    if (!o.outputDir.empty() && !results.named.empty())
      writeOutputs(o, results.named);
    if (!verified) {
      std::fprintf(stderr, "mp-run: error: --verify: outputs differ from "
                           "the reference (see above)\n");
      return 1;
    }
  }
  return 0;
}

} // namespace

int runPipeline(const Options &o, Communicator &world, Device device) {
  Status supported = Status::success();
  if (device == Device::CUDA && !o.device.empty())
    supported = Status::error("--device cuda: pipeline artifacts run on the "
                              "cpu for now");
  stopIfAnyRankFailed(world, supported);
  if (device == Device::CUDA && !o.quiet)
    std::printf("mp-run: note: pipeline artifacts run on the cpu for now\n");
  const double t0 = seconds();
  std::unique_ptr<PipelineStage> stage;
  stopIfAnyRankFailed(
      world, PipelineStage::load(o.artifact, world, Device::CPU, stage));
  if (!o.quiet)
    std::printf("mp-run: %s: %lld stages x %lld chunk(s), %lld micro-batches "
                "per step, %s schedule, %lld rank(s), loaded in %.2f s\n",
                o.artifact.c_str(),
                static_cast<long long>(stage->dims().stages),
                static_cast<long long>(stage->dims().chunks),
                static_cast<long long>(stage->dims().microbatches),
                stage->scheduleName().c_str(),
                static_cast<long long>(stage->ranks()), seconds() - t0);
  if (!o.train.enabled)
    return runStep(o, *stage, world);

  std::vector<Slot> slots;
  size_t idsInput = 0, labelsInput = 0, lossOutput = 0;
  stopIfAnyRankFailed(world, bindStage(*stage, o.train, slots, idsInput,
                                       labelsInput, lossOutput));
  TrainLayout layout;
  layout.exe = &stage->function(0, false);
  layout.grid = &stage->gridComm();
  layout.data = stage->dataParallelComm();
  layout.replicas = layout.data ? layout.data->size() : 1;
  layout.zero = stage->function(0, false).shardedOptimizer();
  layout.pipeline = &stage->pipelineComm();
  layout.stage = stage->stage();
  layout.stages = stage->dims().stages;
  PipelineStep runner(*stage, lossOutput);
  int rc = trainLoop(o.train, o.quiet, layout, slots, runner,
                     stepInputs(*stage), idsInput, labelsInput, world);
  if (rc == 0 && !o.timeline.empty())
    writeTimeline(o, *stage, world);
  return rc;
}

} // namespace mprun
