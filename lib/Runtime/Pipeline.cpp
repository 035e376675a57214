//===- Pipeline.cpp - one stage of a pipeline artifact --------------------===//
#include "mp/Runtime/Pipeline.h"

#include "mp/Program/program.pb.h"
#include "mp/Support/Float16.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sys/stat.h>

namespace mp::rt {

namespace {

constexpr uint32_t kPipelineVersion = 1;

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status readPipeline(const std::string &dir, program::Pipeline &pipe) {
  const std::string path = dir + "/pipeline.pb";
  std::string file, bytes;
  uint32_t checksum = 0;
  if (Status s = readWholeFile(path, file, int64_t(1) << 31); !s)
    return s;
  if (Status s = unsealProgram(file, path, bytes, checksum); !s)
    return s;
  if (!pipe.ParseFromString(bytes))
    return Status::error("'" + path + "' is corrupt or truncated");
  if (pipe.version() != kPipelineVersion)
    return Status::error("'" + path + "' has pipeline version " +
                         std::to_string(pipe.version()) +
                         "; this mp-run reads version " +
                         std::to_string(kPipelineVersion));
  pipeline::Dims dims{pipe.stages(), pipe.chunks(), pipe.microbatches()};
  std::optional<pipeline::ScheduleKind> kind =
      pipeline::parseSchedule(pipe.schedule());
  if (!kind)
    return Status::error("'" + path + "' names an unknown schedule '" +
                         pipe.schedule() + "'");
  if (std::string why = pipeline::checkDims(*kind, dims); !why.empty())
    return Status::error("'" + path + "': " + why);
  if (pipe.actions_size() != pipe.stages() || pipe.grid_size() < 1 ||
      pipe.grid_size() > (1 << 20) || pipe.data_parallel() < 0 ||
      pipe.data_parallel() > (1 << 20) ||
      pipe.stash_bytes_size() != dims.virtualStages())
    return Status::error("'" + path +
                         "' is inconsistent (stages, grid, "
                         "replicas or stashes)");
  return Status::success();
}

/// The action lists of `pipe`, checked as the compiler checked them (a
/// corrupt schedule is an error here, not a hang).
Status readSchedule(const program::Pipeline &pipe, const std::string &path,
                    const pipeline::Dims &dims, pipeline::Schedule &out) {
  for (const program::StageActions &stage : pipe.actions()) {
    out.emplace_back();
    for (const program::Action &a : stage.actions())
      out.back().push_back({static_cast<pipeline::ActionKind>(a.kind()),
                            a.chunk(), a.microbatch(), a.peer()});
  }
  if (std::string why = pipeline::validate(out, dims); !why.empty())
    return Status::error("'" + path + "' holds an invalid schedule: " + why);
  return Status::success();
}

std::vector<IOSpec>
specsOf(const google::protobuf::RepeatedPtrField<program::TensorSpec> &specs) {
  std::vector<IOSpec> out;
  for (const program::TensorSpec &t : specs) {
    IOSpec s;
    s.name = t.name();
    parseDType(t.dtype(), s.dtype);
    s.shape.assign(t.shape().begin(), t.shape().end());
    out.push_back(std::move(s));
  }
  return out;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

float floatAt(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32: return static_cast<const float *>(data)[i];
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  default: return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  }
}

void storeFloat(void *data, DType dtype, int64_t i, float v) {
  switch (dtype) {
  case DType::F32: static_cast<float *>(data)[i] = v; break;
  case DType::BF16: static_cast<uint16_t *>(data)[i] = floatToBf16(v); break;
  default: static_cast<uint16_t *>(data)[i] = floatToHalf(v); break;
  }
}

/// "recv:3" -> ("recv", 3); other names -> ("", -1).
std::pair<std::string, int64_t> roleOf(const std::string &name) {
  for (const char *role : {"recv", "send", "stash"}) {
    const std::string prefix = std::string(role) + ":";
    if (name.rfind(prefix, 0) == 0) {
      char *end = nullptr;
      long long id = std::strtoll(name.c_str() + prefix.size(), &end, 10);
      if (*end == '\0' && id >= 0)
        return {role, id};
    }
  }
  return {"", -1};
}

/// Lays `tensors` (positions, ordered by transfer id) end to end.
void layOut(const std::vector<std::pair<int64_t, size_t>> &byId,
            const std::vector<IOSpec> &specs, std::vector<int64_t> &offsets,
            int64_t &total) {
  offsets.assign(specs.size(), -1);
  total = 0;
  for (auto [id, pos] : byId) {
    offsets[pos] = total;
    total += Tensor{nullptr, specs[pos].dtype, specs[pos].shape}.numel() *
             static_cast<int64_t>(dtypeSize(specs[pos].dtype));
  }
}

Tensor bytesView(std::vector<uint8_t> &bytes) {
  return Tensor{bytes.data(), DType::I8, {static_cast<int64_t>(bytes.size())}};
}

/// `local`, or (when another rank failed) an error saying so: every rank
/// calls it at the same point.
Status agreed(Communicator &world, const Status &local,
              const std::string &dir) {
  if (!anyRankFailed(world, !local))
    return Status::success();
  return local ? Status::error("another rank could not load its stage of '" +
                               dir + "' (its error says why)")
               : local;
}

} // namespace

bool isPipelineArtifact(const std::string &dir) {
  struct stat st;
  return stat((dir + "/pipeline.pb").c_str(), &st) == 0;
}

PipelineStage::~PipelineStage() = default;

Status PipelineStage::load(const std::string &dir, Communicator &world,
                           Device device, std::unique_ptr<PipelineStage> &out) {
  auto stage = std::unique_ptr<PipelineStage>(new PipelineStage());
  program::Pipeline pipe;
  Status read = readPipeline(dir, pipe);
  pipeline::Dims dims{pipe.stages(), pipe.chunks(), pipe.microbatches()};
  if (read)
    read = readSchedule(pipe, dir + "/pipeline.pb", dims, stage->actions);
  const int64_t replicas = std::max<int64_t>(pipe.data_parallel(), 1);
  const int64_t perStage = replicas * pipe.grid_size();
  if (read && perStage * dims.stages != world.size())
    read = Status::error(
        "pipeline artifact '" + dir + "' was compiled for " +
        std::to_string(perStage * dims.stages) + " ranks (" +
        std::to_string(dims.stages) + " stages of " + std::to_string(perStage) +
        ") but this run has " + std::to_string(world.size()) +
        (haveMPI() ? "; launch it with mpirun -np " +
                         std::to_string(perStage * dims.stages) + " mp-run ..."
                   : " (this mp-run was built without MPI)"));
  if (anyRankFailed(world, !read))
    return read ? Status::error("another rank could not open pipeline '" + dir +
                                "' (its error says why)")
                : read;
  stage->shape = dims;
  stage->schedule = pipe.schedule();
  stage->train = pipe.train();
  stage->totalRanks = world.size();
  stage->stageId = world.rank() / perStage;
  stage->inputSpecs = specsOf(pipe.inputs());
  for (const IOSpec &spec : stage->inputSpecs)
    if (Status s = agreed(
            world,
            spec.shape.empty()
                ? Status::error("pipeline input '" + spec.name +
                                "' is a scalar: a step's inputs are its "
                                "micro-batches stacked along their first axis")
                : Status::success(),
            dir);
        !s)
      return s;
  stage->outputSpecs = specsOf(pipe.outputs());
  stage->stashBytes.assign(pipe.stash_bytes().begin(),
                           pipe.stash_bytes().end());
  // [stage][replica · grid]: the stage's ranks, and each position's stages.
  // Every step below is agreed on by every rank, so that an error on one
  // stops all at the same point (none left waiting in a collective).
  const std::vector<int64_t> layout = {dims.stages, perStage};
  Status split = world.split(layout, 1, stage->stageComm);
  if (split)
    split = world.split(layout, 0, stage->pipeComm);
  if (Status s = agreed(world, split, dir); !s)
    return s;
  if (Status s = stage->loadChunks(dir, world, device); !s)
    return s;
  for (const program::TiedParameter &t : pipe.tied()) {
    std::vector<int64_t> stages(t.stages().begin(), t.stages().end());
    stage->tiedStages[t.name()] = stages;
    if (stage->tiedComms.count(stages))
      continue;
    const bool in =
        std::find(stages.begin(), stages.end(), stage->stageId) != stages.end();
    std::unique_ptr<Communicator> &comm = stage->tiedComms[stages];
    if (Status s =
            agreed(world,
                   world.splitByColor(
                       in ? static_cast<int>(world.rank() % perStage) : -1,
                       static_cast<int>(stage->stageId), comm),
                   dir);
        !s)
      return s;
  }
  for (Parameter &p : stage->params) {
    auto tied = stage->tiedStages.find(p.name);
    p.stages = tied == stage->tiedStages.end()
                   ? std::vector<int64_t>{stage->stageId}
                   : tied->second;
  }
  out = std::move(stage);
  return Status::success();
}

Status PipelineStage::loadChunks(const std::string &dir, Communicator &world,
                                 Device device) {
  for (int64_t c = 0; c < shape.chunks; ++c) {
    const std::string k = std::to_string(shape.virtualStage(stageId, c));
    chunks.emplace_back();
    Chunk &chunk = chunks.back();
    // Every rank loads as many programs, in step.
    if (Status s =
            agreed(world,
                   Executable::load(dir + "/forward_" + k, chunk.forward,
                                    stageComm.get(), device, nullptr, train),
                   dir);
        !s)
      return s;
    if (train)
      if (Status s = agreed(world,
                            Executable::load(dir + "/backward_" + k,
                                             chunk.backward, stageComm.get(),
                                             device, chunk.forward.get()),
                            dir);
          !s)
        return s;
    if (Status s = agreed(world, bindChunk(chunks.size() - 1), dir); !s)
      return s;
    for (const Executable::Parameter &p : chunk.forward->parameters()) {
      auto same =
          std::find_if(params.begin(), params.end(),
                       [&](const Parameter &q) { return q.name == p.name; });
      if (same != params.end())
        same->copies.push_back(p.tensor);
      else
        params.push_back({p.name, {p.tensor}, chunk.forward.get(), &p, {}});
    }
  }
  return Status::success();
}

Status PipelineStage::bindChunk(size_t c) {
  Chunk &chunk = chunks[c];
  auto indexOf = [](const std::vector<IOSpec> &specs, const std::string &name) {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == name)
        return static_cast<int64_t>(i);
    return int64_t(-1);
  };
  auto bind = [&](const Executable &exe, bool inputs, std::vector<Port> &ports,
                  std::vector<int64_t> &offsets, int64_t &bytes) -> Status {
    const std::vector<IOSpec> &specs = inputs ? exe.inputs() : exe.outputs();
    std::vector<std::pair<int64_t, size_t>> transfers;
    for (size_t i = 0; i < specs.size(); ++i) {
      auto [role, id] = roleOf(specs[i].name);
      if (role == (inputs ? "recv" : "send")) {
        transfers.push_back({id, i});
        ports.push_back({Port::Transfer, id});
      } else if (role == "stash") {
        ports.push_back({Port::Stash, id});
      } else {
        int64_t index =
            indexOf(inputs ? inputSpecs : outputSpecs, specs[i].name);
        if (index < 0 || !role.empty())
          return Status::error(
              "chunk program " + std::string(inputs ? "input" : "output") +
              " '" + specs[i].name + "' is not one of the pipeline's");
        ports.push_back({inputs ? Port::Input : Port::Output, index});
      }
    }
    std::sort(transfers.begin(), transfers.end());
    layOut(transfers, specs, offsets, bytes);
    return Status::success();
  };
  if (Status s = bind(*chunk.forward, true, chunk.forwardIn, chunk.actInOffsets,
                      chunk.actInBytes);
      !s)
    return s;
  if (Status s = bind(*chunk.forward, false, chunk.forwardOut,
                      chunk.actOutOffsets, chunk.actOutBytes);
      !s)
    return s;
  if (!chunk.backward)
    return Status::success();
  if (Status s = bind(*chunk.backward, true, chunk.backwardIn,
                      chunk.gradInOffsets, chunk.gradInBytes);
      !s)
    return s;
  return bind(*chunk.backward, false, chunk.backwardOut, chunk.gradOutOffsets,
              chunk.gradOutBytes);
}

Executable &PipelineStage::function(int64_t chunk, bool backward) const {
  const Chunk &c = chunks[static_cast<size_t>(chunk)];
  return backward ? *c.backward : *c.forward;
}

int64_t PipelineStage::plannedStashBytes(int64_t chunk) const {
  return stashBytes[static_cast<size_t>(shape.virtualStage(stageId, chunk))];
}

int64_t PipelineStage::plannedStashPeak() const {
  int64_t now = 0, peak = 0;
  for (const pipeline::Action &a : actions[static_cast<size_t>(stageId)]) {
    if (a.kind == pipeline::ActionKind::Forward)
      now += plannedStashBytes(a.chunk);
    else if (a.kind == pipeline::ActionKind::Backward)
      now -= plannedStashBytes(a.chunk);
    peak = std::max(peak, now);
  }
  return peak;
}

const HostBuffer *PipelineStage::result(size_t i) const {
  return i < results.size() && resultHere[i] ? &results[i] : nullptr;
}

const IOSpec *PipelineStage::resultSpec(size_t i) const {
  return i < resultSpecs.size() ? resultSpecs[i] : nullptr;
}

Status
PipelineStage::run(const std::vector<std::vector<Tensor>> &microbatches) {
  if (static_cast<int64_t>(microbatches.size()) != shape.microbatches)
    return Status::error(
        "a pipeline step takes " + std::to_string(shape.microbatches) +
        " micro-batches, got " + std::to_string(microbatches.size()));
  received.clear();
  toSend.clear();
  stash.clear();
  timeline.clear();
  results.assign(outputSpecs.size(), HostBuffer());
  resultHere.assign(outputSpecs.size(), false);
  resultIsGradient.assign(outputSpecs.size(), false);
  resultSpecs.assign(outputSpecs.size(), nullptr);
  sums.assign(outputSpecs.size(), {});
  stashedBytesNow = peakStashBytes = peakStashed = 0;
  for (const pipeline::Action &a : actions[static_cast<size_t>(stageId)]) {
    const bool backwardPart = a.kind == pipeline::ActionKind::Backward ||
                              a.kind == pipeline::ActionKind::SendGradient ||
                              a.kind == pipeline::ActionKind::RecvGradient;
    if (backwardPart && !train)
      continue;
    const double start = now();
    if (Status s = runAction(a, microbatches); !s)
      return s;
    timeline.push_back({a, start, now()});
    // Buffers of completed sends go at once: under 1F1B a stage holds
    // what is in flight, not every micro-batch's.
    int64_t completed = 0;
    if (Status s = pipeComm->completedSends(completed); !s)
      return s;
    for (; firstPosted < completed && !posted.empty(); ++firstPosted)
      posted.pop_front();
  }
  if (Status s = pipeComm->waitSends(); !s)
    return s;
  firstPosted += static_cast<int64_t>(posted.size());
  posted.clear();
  if (Status s = sumTiedGradients(); !s)
    return s;
  return finishResults();
}

Status
PipelineStage::runAction(const pipeline::Action &a,
                         const std::vector<std::vector<Tensor>> &microbatches) {
  const auto key = std::make_pair(a.chunk, a.microbatch);
  const Chunk &chunk = chunks[static_cast<size_t>(a.chunk)];
  // Activations and gradients of one (chunk, micro-batch) are told apart
  // by the sign of the key's chunk.
  const auto gradKey = std::make_pair(-1 - a.chunk, a.microbatch);
  switch (a.kind) {
  case pipeline::ActionKind::Forward:
    return runForward(a.chunk, a.microbatch, microbatches);
  case pipeline::ActionKind::Backward:
    return runBackward(a.chunk, a.microbatch, microbatches);
  case pipeline::ActionKind::RecvActivation:
  case pipeline::ActionKind::RecvGradient: {
    const bool grad = a.kind == pipeline::ActionKind::RecvGradient;
    std::vector<uint8_t> &buffer = received[grad ? gradKey : key];
    buffer.resize(
        static_cast<size_t>(grad ? chunk.gradInBytes : chunk.actInBytes));
    Tensor view = bytesView(buffer);
    return pipeComm->recv(view, static_cast<int>(a.peer));
  }
  case pipeline::ActionKind::SendActivation:
  case pipeline::ActionKind::SendGradient: {
    const bool grad = a.kind == pipeline::ActionKind::SendGradient;
    auto found = toSend.find(grad ? gradKey : key);
    if (found == toSend.end())
      return Status::error("the schedule sends what chunk " +
                           std::to_string(a.chunk) + " has not computed");
    posted.push_back(std::move(found->second));
    toSend.erase(found);
    return pipeComm->postSend(bytesView(posted.back()),
                              static_cast<int>(a.peer));
  }
  }
  return Status::success();
}

void PipelineStage::seedMicrobatch(Executable &exe, int64_t m) const {
  exe.setRandomState(rngSeed,
                     rngStep * static_cast<uint64_t>(shape.microbatches) +
                         static_cast<uint64_t>(m));
}

Status PipelineStage::runForward(
    int64_t c, int64_t m,
    const std::vector<std::vector<Tensor>> &microbatches) {
  Chunk &chunk = chunks[static_cast<size_t>(c)];
  const auto key = std::make_pair(c, m);
  std::vector<uint8_t> &in = received[key];
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < chunk.forwardIn.size(); ++i) {
    const Port &p = chunk.forwardIn[i];
    const IOSpec &spec = chunk.forward->inputs()[i];
    if (p.kind == Port::Input)
      inputs.push_back(
          microbatches[static_cast<size_t>(m)][static_cast<size_t>(p.index)]);
    else if (p.kind == Port::Transfer &&
             static_cast<int64_t>(in.size()) == chunk.actInBytes)
      inputs.push_back(
          Tensor{in.data() + chunk.actInOffsets[i], spec.dtype, spec.shape});
    else
      return Status::error("forward of chunk " + std::to_string(c) +
                           " on micro-batch " + std::to_string(m) +
                           " before its input arrived");
  }
  std::vector<Tensor> outputs;
  seedMicrobatch(*chunk.forward, m);
  if (Status s = chunk.forward->run(inputs, outputs); !s)
    return s;
  received.erase(key);
  std::vector<uint8_t> &out = toSend[key];
  out.resize(static_cast<size_t>(chunk.actOutBytes));
  std::vector<std::vector<uint8_t>> &kept = stash[key];
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Port &p = chunk.forwardOut[i];
    const Tensor &t = outputs[i];
    const auto *bytes = static_cast<const uint8_t *>(t.data);
    if (p.kind == Port::Transfer)
      std::memcpy(out.data() + chunk.actOutOffsets[i], bytes, t.bytes());
    else if (p.kind == Port::Stash) {
      kept.emplace_back(bytes, bytes + t.bytes());
      stashedBytesNow += static_cast<int64_t>(t.bytes());
    } else {
      resultSpecs[static_cast<size_t>(p.index)] = &chunk.forward->outputs()[i];
      if (Status s = accumulate(static_cast<size_t>(p.index), t, m,
                                /*gradient=*/false);
          !s)
        return s;
    }
  }
  if (kept.empty())
    stash.erase(key);
  peakStashBytes = std::max(peakStashBytes, stashedBytesNow);
  peakStashed = std::max(peakStashed, static_cast<int64_t>(stash.size()));
  return Status::success();
}

Status PipelineStage::runBackward(
    int64_t c, int64_t m,
    const std::vector<std::vector<Tensor>> &microbatches) {
  Chunk &chunk = chunks[static_cast<size_t>(c)];
  const auto key = std::make_pair(c, m), gradKey = std::make_pair(-1 - c, m);
  std::vector<uint8_t> &in = received[gradKey];
  std::vector<std::vector<uint8_t>> &kept = stash[key];
  // The forward's stash outputs in order, by id.
  std::vector<int64_t> stashIds;
  for (const Port &p : chunk.forwardOut)
    if (p.kind == Port::Stash)
      stashIds.push_back(p.index);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < chunk.backwardIn.size(); ++i) {
    const Port &p = chunk.backwardIn[i];
    const IOSpec &spec = chunk.backward->inputs()[i];
    if (p.kind == Port::Input) {
      inputs.push_back(
          microbatches[static_cast<size_t>(m)][static_cast<size_t>(p.index)]);
    } else if (p.kind == Port::Transfer) {
      if (static_cast<int64_t>(in.size()) != chunk.gradInBytes)
        return Status::error("backward of chunk " + std::to_string(c) +
                             " on micro-batch " + std::to_string(m) +
                             " before its gradient arrived");
      inputs.push_back(
          Tensor{in.data() + chunk.gradInOffsets[i], spec.dtype, spec.shape});
    } else {
      auto at = std::find(stashIds.begin(), stashIds.end(), p.index);
      size_t pos = static_cast<size_t>(at - stashIds.begin());
      if (at == stashIds.end() || pos >= kept.size() ||
          kept[pos].size() !=
              static_cast<size_t>(
                  Tensor{nullptr, spec.dtype, spec.shape}.bytes()))
        return Status::error("backward of chunk " + std::to_string(c) +
                             " on micro-batch " + std::to_string(m) +
                             " reads stash " + std::to_string(p.index) +
                             ", which its forward did not keep");
      inputs.push_back(Tensor{kept[pos].data(), spec.dtype, spec.shape});
    }
  }
  std::vector<Tensor> outputs;
  seedMicrobatch(*chunk.backward, m);
  if (Status s = chunk.backward->run(inputs, outputs); !s)
    return s;
  for (const std::vector<uint8_t> &v : kept)
    stashedBytesNow -= static_cast<int64_t>(v.size());
  stash.erase(key);
  received.erase(gradKey);
  std::vector<uint8_t> &out = toSend[gradKey];
  out.resize(static_cast<size_t>(chunk.gradOutBytes));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Port &p = chunk.backwardOut[i];
    const Tensor &t = outputs[i];
    if (p.kind == Port::Transfer)
      std::memcpy(out.data() + chunk.gradOutOffsets[i], t.data, t.bytes());
    else if (p.kind == Port::Output) {
      resultSpecs[static_cast<size_t>(p.index)] = &chunk.backward->outputs()[i];
      if (Status s = accumulate(static_cast<size_t>(p.index), t, m,
                                /*gradient=*/true);
          !s)
        return s;
    }
  }
  return Status::success();
}

Status PipelineStage::accumulate(size_t output, const Tensor &value,
                                 int64_t microbatch, bool gradient) {
  const bool summed = isFloat(value.dtype) && (gradient || value.shape.empty());
  std::vector<float> &sum = sums[output];
  HostBuffer &r = results[output];
  if (!resultHere[output]) {
    resultHere[output] = true;
    resultIsGradient[output] = summed;
    r.dtype = value.dtype;
    r.shape = value.shape;
    if (summed)
      sum.assign(static_cast<size_t>(value.numel()), 0.0f);
    else if (!r.shape.empty())
      r.shape[0] *= shape.microbatches;
    else
      r.shape = {shape.microbatches}; // a scalar per micro-batch
    r.bytes.assign(r.view().bytes(), 0);
  }
  const int64_t n = value.numel();
  if (summed) {
    if (static_cast<int64_t>(sum.size()) != n)
      return Status::error("result '" + outputSpecs[output].name +
                           "' changes size between chunks");
    for (int64_t i = 0; i < n; ++i)
      sum[i] += floatAt(value.data, value.dtype, i);
    return Status::success();
  }
  const size_t block = value.bytes();
  if (block * static_cast<size_t>(shape.microbatches) != r.bytes.size())
    return Status::error("result '" + outputSpecs[output].name +
                         "' changes size between micro-batches");
  std::memcpy(r.bytes.data() + block * static_cast<size_t>(microbatch),
              value.data, block);
  return Status::success();
}

Status PipelineStage::sumTiedGradients() {
  if (!train)
    return Status::success();
  // Every stage holding a tied parameter takes part, with its term (zeros
  // when its chunks do not compute one), and keeps the sum: each updates
  // its copy (DeBERTa's relative embeddings, read by every stage, get
  // their whole gradient in the first stage's backward).
  for (const auto &[name, stages] : tiedStages) {
    if (std::find(stages.begin(), stages.end(), stageId) == stages.end())
      continue;
    size_t i = 0;
    while (i < outputSpecs.size() && outputSpecs[i].name != "grads/" + name)
      ++i;
    auto param =
        std::find_if(params.begin(), params.end(),
                     [&](const Parameter &p) { return p.name == name; });
    if (param == params.end())
      return Status::error("tied parameter '" + name + "' is not on stage " +
                           std::to_string(stageId));
    if (i == outputSpecs.size())
      return Status::error("tied parameter '" + name +
                           "' has no gradient among the step's results");
    if (!resultHere[i]) {
      const Tensor &copy = param->copies[0];
      HostBuffer none = HostBuffer::zeros(copy.dtype, copy.shape);
      if (Status s = accumulate(i, none.view(), 0, /*gradient=*/true); !s)
        return s;
    }
    if (!resultIsGradient[i])
      return Status::error("tied parameter '" + name +
                           "': its gradient result is not a gradient");
    std::vector<float> &term = sums[i];
    Tensor t{term.data(), DType::F32, {static_cast<int64_t>(term.size())}};
    if (Status s = tiedComms[stages]->allReduceSum(t, t); !s)
      return s;
  }
  return Status::success();
}

Status PipelineStage::finishResults() {
  const float scale = 1.0f / static_cast<float>(shape.microbatches);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!resultHere[i] || sums[i].empty())
      continue;
    HostBuffer &r = results[i];
    for (size_t j = 0; j < sums[i].size(); ++j)
      storeFloat(r.bytes.data(), r.dtype, static_cast<int64_t>(j),
                 sums[i][j] * scale);
  }
  return Status::success();
}

} // namespace mp::rt
