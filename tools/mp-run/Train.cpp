//===- Train.cpp - mp-run --train: the training loop ----------------------===//
//
// Each step runs the artifact's train step (loss and gradients) on the next
// rows of the token file, clips the gradients by their global norm over all
// ranks, and updates this rank's parameters with AdamW or SGD on fp32
// master weights (mp/Runtime/Optimizer.h). Every rank reads the token file
// and runs the same steps; rank 0 prints and logs.
//
//===----------------------------------------------------------------------===//
#include "Train.h"
#include "Modes.h"
#include "Run.h"
#include "TrainBatch.h"
#include "TrainState.h"

#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Safetensors.h"
#include "mp/Support/Float16.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mp::rt;

namespace mprun {

const char *kTrainUsage =
    R"(
training (an artifact written by mp-opt ... --mp-train; with dp=D replicas,
launch D times the grid's ranks):
  --train                 run train steps (loss, gradients, optimizer update)
  --data TOKENS.npy       integer tokens [N, S+1]: step i takes rows i*G ...
                          i*G+G-1 (wrapping; G = batch x replicas, each
                          replica its block); inputs [:, :-1], labels [:, 1:]
  --input NAME=FILE.npy   a train step's other input (attention mask, token
                          types, decoder ids): the step's shape, given every
                          step, or [N, ...], a row per row of --data, taken
                          with the tokens' rows
  --steps N               the total number of steps
  --optimizer adamw|sgd   default adamw (torch.optim.AdamW; fp32 master
                          weights and moments)
  --lr X                  peak learning rate (default 1e-3)
  --betas B1,B2           AdamW betas (default 0.9,0.95)
  --eps X                 AdamW epsilon (default 1e-8)
  --weight-decay X        decay of parameters with 2+ dims (default 0.1)
  --clip-grad X           clip the global gradient norm (default 1.0; 0: off)
  --warmup-steps W        linear warmup from 0 (default 0)
  --lr-decay constant|cosine  after the warmup (default constant)
  --min-lr X              where the cosine decay ends (default 0)
  --log FILE.jsonl        one JSON object per step: step, loss, grad_norm, lr
                          (a resumed run appends to it)
  --save DIR              write a checkpoint at the end: DIR/rank<R>.safetensors
                          (weights, fp32 master weights, AdamW moments) and
                          DIR/manifest.json, written into DIR.tmp and swapped
                          into place when every rank has written
  --save-every K          also write the checkpoint every K steps
  --seed N                the random streams of dropout (default 1234; a
                          resumed run continues the checkpoint's)
  --resume DIR            start from checkpoint DIR (any tp/dp layout) at its
                          step + 1; --steps is the total, as Megatron's
                          --train-iters
Every rank must be given the same training options. A step whose loss or
gradient norm is not finite stops the run (exit 1) before it updates or
saves the weights, as Megatron's check for NaN does.
)";

std::string TrainOptions::shared() const {
  if (!enabled)
    return "";
  // Everything that decides the collectives or the numbers: ranks given
  // another learning rate or token file would train a mixed model, and
  // ranks resuming other checkpoints would wait in different steps.
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  return " --train --steps " + std::to_string(steps) + " --data " + data +
         " --save " + save + " --resume " + resume + " --save-every " +
         std::to_string(saveEvery) + " --seed " + std::to_string(seed) +
         " --optimizer " + (sgd ? "sgd" : "adamw") + " --lr " +
         number(schedule.maxLr) + " --min-lr " + number(schedule.minLr) +
         " --warmup-steps " + std::to_string(schedule.warmupSteps) +
         " --lr-decay " +
         (schedule.decay == LRSchedule::Decay::Cosine ? "cosine" : "constant") +
         " --betas " + number(adam.beta1) + "," + number(adam.beta2) +
         " --eps " + number(adam.eps) + " --weight-decay " +
         number(weightDecay) + " --clip-grad " + number(clipGrad);
}

bool isTrainValueOption(const std::string &flag) {
  return flag == "--data" || flag == "--steps" || flag == "--optimizer" ||
         flag == "--lr" || flag == "--betas" || flag == "--eps" ||
         flag == "--weight-decay" || flag == "--clip-grad" ||
         flag == "--warmup-steps" || flag == "--lr-decay" ||
         flag == "--min-lr" || flag == "--log" || flag == "--save" ||
         flag == "--resume" || flag == "--save-every" || flag == "--seed";
}

namespace {

Status parseNumber(const std::string &flag, const std::string &text,
                   double &out) {
  char *end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(out) ||
      out < 0)
    return Status::error(flag + " expects a non-negative number, got '" + text +
                         "'");
  return Status::success();
}

Status parseSteps(const std::string &flag, const std::string &text,
                  int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0)
    return Status::error(flag + " expects a non-negative integer, got '" +
                         text + "'");
  out = v;
  return Status::success();
}

} // namespace

Status parseTrainOption(const std::string &flag, const std::string &value,
                        TrainOptions &t) {
  if (flag == "--train") {
    t.enabled = true;
    return Status::success();
  }
  t.given.push_back(flag);
  if ((flag == "--data" || flag == "--log" || flag == "--save" ||
       flag == "--resume") &&
      value.empty())
    return Status::error(flag + " expects a path, got ''");
  if (flag == "--data")
    t.data = value;
  else if (flag == "--log")
    t.log = value;
  else if (flag == "--save" || flag == "--resume") {
    // "ck/" is the directory "ck" (its temporary sibling is "ck.tmp").
    std::string dir = value;
    while (dir.size() > 1 && dir.back() == '/')
      dir.pop_back();
    (flag == "--save" ? t.save : t.resume) = dir;
  } else if (flag == "--save-every")
    return parseSteps(flag, value, t.saveEvery);
  else if (flag == "--seed")
    return parseSteps(flag, value, t.seed);
  else if (flag == "--steps")
    return parseSteps(flag, value, t.steps);
  else if (flag == "--warmup-steps")
    return parseSteps(flag, value, t.schedule.warmupSteps);
  else if (flag == "--lr")
    return parseNumber(flag, value, t.schedule.maxLr);
  else if (flag == "--min-lr")
    return parseNumber(flag, value, t.schedule.minLr);
  else if (flag == "--eps")
    return parseNumber(flag, value, t.adam.eps);
  else if (flag == "--weight-decay")
    return parseNumber(flag, value, t.weightDecay);
  else if (flag == "--clip-grad")
    return parseNumber(flag, value, t.clipGrad);
  else if (flag == "--optimizer") {
    if (value != "adamw" && value != "sgd")
      return Status::error("--optimizer expects adamw or sgd, got '" + value +
                           "'");
    t.sgd = value == "sgd";
  } else if (flag == "--lr-decay") {
    if (value != "constant" && value != "cosine")
      return Status::error("--lr-decay expects constant or cosine, got '" +
                           value + "'");
    t.schedule.decay = value == "cosine" ? LRSchedule::Decay::Cosine
                                         : LRSchedule::Decay::Constant;
  } else if (flag == "--betas") {
    size_t comma = value.find(',');
    double b1, b2;
    if (comma == std::string::npos ||
        !parseNumber(flag, value.substr(0, comma), b1) ||
        !parseNumber(flag, value.substr(comma + 1), b2) || b1 >= 1 || b2 >= 1)
      return Status::error("--betas expects B1,B2 in [0, 1), got '" + value +
                           "'");
    t.adam.beta1 = b1;
    t.adam.beta2 = b2;
  }
  return Status::success();
}

Status checkTrainOptions(const TrainOptions &t) {
  if (!t.enabled) {
    if (!t.given.empty())
      return Status::error(t.given.front() +
                           " is a training option: it needs --train");
    return Status::success();
  }
  auto given = [&](const char *flag) {
    return std::find(t.given.begin(), t.given.end(), flag) != t.given.end();
  };
  if (t.sgd && (given("--betas") || given("--eps")))
    return Status::error("--betas and --eps are AdamW's: --optimizer sgd "
                         "takes neither");
  // AdamW divides by sqrt(v) + eps: with eps 0 a parameter that got no
  // gradient yet (an unused position's embedding) becomes 0/0.
  if (!t.sgd && !(t.adam.eps > 0))
    return Status::error("--eps must be above 0 (AdamW divides by sqrt(v) + "
                         "eps; 0 turns a parameter without gradient into "
                         "NaN)");
  if (given("--min-lr") && t.schedule.decay != LRSchedule::Decay::Cosine)
    return Status::error("--min-lr is where --lr-decay cosine ends: it needs "
                         "--lr-decay cosine");
  if (t.schedule.minLr > t.schedule.maxLr)
    return Status::error("--min-lr " + std::to_string(t.schedule.minLr) +
                         " is above --lr " + std::to_string(t.schedule.maxLr) +
                         ": the cosine decay would raise the learning rate");
  if (t.saveEvery && t.save.empty())
    return Status::error("--save-every needs --save DIR");
  if (t.data.empty())
    return Status::error("--train needs --data TOKENS.npy");
  if (t.steps < 1)
    return Status::error("--train needs --steps N (N >= 1)");
  return Status::success();
}

float toFloat(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::F32: return static_cast<const float *>(data)[i];
  case DType::BF16:
    return mp::bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::F16:
    return mp::halfToFloat(static_cast<const uint16_t *>(data)[i]);
  default: return 0;
  }
}

void fromFloats(const float *values, int64_t n, DType dtype,
                std::vector<uint8_t> &out) {
  out.resize(static_cast<size_t>(n) * dtypeSize(dtype));
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::F32)
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    else {
      uint16_t h = dtype == DType::BF16 ? mp::floatToBf16(values[i])
                                        : mp::floatToHalf(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
}

Status uploadWeights(Executable &exe, const std::vector<Slot> &slots,
                     const std::vector<float> &weights) {
  std::vector<uint8_t> bytes;
  for (const Slot &s : slots) {
    fromFloats(weights.data() + s.offset, s.param.numel(), s.param.dtype,
               bytes);
    if (Status st = exe.upload(bytes.data(), s.param); !st)
      return st;
    for (const Tensor &copy : s.copies)
      if (Status st = exe.upload(bytes.data(), copy); !st)
        return st;
  }
  return Status::success();
}

TrainLayout TrainLayout::of(Executable &exe, Communicator &world) {
  TrainLayout layout;
  layout.exe = &exe;
  layout.grid = &exe.gridComm();
  layout.data = exe.dataParallelComm();
  layout.replicas = exe.dataParallelSize();
  layout.zero = exe.shardedOptimizer();
  // The optimizer's sums, gradient reductions and checkpoint gathers work on
  // host buffers: over MPI when the program's communicators are NCCL.
  const bool device = layout.grid->deviceMemory() ||
                      (layout.data && layout.data->deviceMemory());
  if (device) {
    layout.grid =
        &hostCommOf(exe, world, GridAxis::TensorParallel, layout.hostGrid);
    if (layout.data)
      layout.data =
          &hostCommOf(exe, world, GridAxis::DataParallel, layout.hostData);
  }
  return layout;
}

namespace {

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

/// Finds the train step's inputs and outputs and every parameter's
/// gradient; an artifact that is not a train step is an error saying so.
Status bindTrainStep(Executable &exe, const TrainOptions &t,
                     std::vector<Slot> &slots, size_t &idsInput,
                     size_t &labelsInput) {
  const std::string notTraining =
      "this artifact is not a train step (compile it with mp-opt "
      "MODEL.onnx ... --mp-train --artifact DIR)";
  if (Status s = findTrainStep(exe.inputs(), exe.outputs(), t.inputs,
                               notTraining, idsInput, labelsInput);
      !s)
    return s;
  const auto &ins = exe.inputs();
  const auto &outs = exe.outputs();
  if (ins[idsInput].shape.size() != 2 ||
      ins[idsInput].shape != ins[labelsInput].shape)
    return Status::error("the train step's token ids must be [batch, "
                         "sequence], as its labels");
  for (const Executable::Parameter &p : exe.parameters()) {
    if (!isFloat(p.tensor.dtype))
      continue;
    Slot slot;
    slot.name = p.name;
    slot.param = p.tensor;
    slot.gradIndex = outs.size();
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].name == "grads/" + p.name)
        slot.gradIndex = i;
    if (slot.gradIndex == outs.size())
      return Status::error(notTraining + ": no gradient of parameter '" +
                           p.name + "'");
    const IOSpec &g = outs[slot.gradIndex];
    if (g.shape != p.tensor.shape || g.dtype != p.tensor.dtype)
      return Status::error("the gradient of '" + p.name +
                           "' does not match the parameter");
    slot.sharded = g.shardAxis >= 0;
    slot.shardAxis = g.shardAxis;
    slot.shardGroups = g.shardGroups;
    slot.decays = p.tensor.shape.size() >= 2;
    slot.partOf = p.partOf;
    slot.partAxis = p.partAxis;
    slot.partStart = p.partStart;
    slot.partWhole = p.partWhole;
    slot.frozen = g.constant;
    slots.push_back(std::move(slot));
  }
  return Status::success();
}

/// Lays the slots out in the flat vectors and reads the weights: this
/// rank updates all of them, or (ZeRO-1) its replica's 1/dp.
Status initFlat(const TrainLayout &layout, std::vector<Slot> &slots,
                Flat &flat) {
  Executable &exe = *layout.exe;
  for (Slot &s : slots) {
    s.offset = flat.total;
    flat.total += s.param.numel();
  }
  const int64_t replicas = layout.replicas;
  flat.padded = (flat.total + replicas - 1) / replicas * replicas;
  flat.begin = 0;
  flat.end = flat.padded;
  if (layout.zero && replicas > 1) {
    const int64_t chunk = flat.padded / replicas;
    flat.begin = layout.data->rank() * chunk;
    flat.end = flat.begin + chunk;
  }
  flat.grad.assign(static_cast<size_t>(flat.padded), 0.0f);
  flat.m.assign(static_cast<size_t>(flat.end - flat.begin), 0.0f);
  flat.v = flat.m;
  std::vector<float> whole(static_cast<size_t>(flat.padded), 0.0f);
  for (Slot &s : slots) {
    std::vector<uint8_t> host(s.param.bytes());
    if (Status st = exe.download(s.param, host.data()); !st)
      return st;
    for (int64_t i = 0; i < s.param.numel(); ++i)
      whole[s.offset + i] = toFloat(host.data(), s.param.dtype, i);
  }
  flat.master.assign(whole.begin() + flat.begin, whole.begin() + flat.end);
  return Status::success();
}

} // namespace

Status wholeOf(const TrainLayout &layout, const Flat &flat,
               const std::vector<float> &mine, std::vector<float> &whole) {
  if (!layout.zero || !layout.data) {
    whole = mine;
    return Status::success();
  }
  const int64_t chunk = flat.end - flat.begin;
  whole.assign(static_cast<size_t>(flat.padded), 0.0f);
  Tensor in{const_cast<float *>(mine.data()), DType::F32, {1, chunk}};
  Tensor out{whole.data(), DType::F32, {layout.replicas, chunk}};
  return layout.data->allGather(in, out, 0);
}

namespace {

/// Sums `value` over `comm` (a no-op on one rank).
Status sumOver(Communicator *comm, double &value) {
  if (!comm || comm->size() == 1)
    return Status::success();
  double total = 0;
  Tensor in{&value, DType::F64, {1}}, out{&total, DType::F64, {1}};
  if (Status st = comm->allReduceSum(in, out); !st)
    return st;
  value = total;
  return Status::success();
}

/// Averages the replicas' gradients: all of them on every replica, or
/// (ZeRO-1) this replica's shard only, reduce-scattered.
Status reduceGradients(const TrainLayout &layout, Flat &flat) {
  Communicator *data = layout.data;
  if (!data)
    return Status::success();
  const int64_t replicas = layout.replicas;
  const float scale = 1.0f / static_cast<float>(replicas);
  if (!layout.zero) {
    Tensor all{flat.grad.data(), DType::F32, {flat.padded}};
    if (Status st = data->allReduceSum(all, all); !st)
      return st;
  } else {
    const int64_t chunk = flat.end - flat.begin;
    std::vector<float> mine(static_cast<size_t>(chunk));
    Tensor in{flat.grad.data(), DType::F32, {replicas, chunk}};
    Tensor out{mine.data(), DType::F32, {1, chunk}};
    if (Status st = data->reduceScatterSum(in, out, 0); !st)
      return st;
    std::copy(mine.begin(), mine.end(), flat.grad.begin() + flat.begin);
  }
  for (int64_t i = flat.begin; i < flat.end; ++i)
    flat.grad[i] *= scale;
  return Status::success();
}

/// The global gradient norm over the whole (replica, grid) layout: sharded
/// pieces summed over the grid, replicated copies counted once (grid rank
/// 0's), each replica's shard once under ZeRO-1.
Status globalNorm(const TrainLayout &layout, const std::vector<Slot> &slots,
                  const Flat &flat, double &norm) {
  double sum = 0;
  const bool gridLead = layout.grid->rank() == 0;
  for (const Slot &s : slots) {
    if ((!s.sharded && !gridLead) || !s.normHere)
      continue;
    const int64_t lo = std::max(s.offset, flat.begin);
    const int64_t hi = std::min(s.offset + s.param.numel(), flat.end);
    if (lo < hi)
      sum += sumOfSquares(flat.grad.data() + lo, hi - lo);
  }
  if (Status st = sumOver(layout.grid, sum); !st)
    return st;
  if (layout.zero)
    if (Status st = sumOver(layout.data, sum); !st)
      return st;
  if (Status st = sumOver(layout.pipeline, sum); !st)
    return st;
  norm = std::sqrt(sum);
  return Status::success();
}

/// Updates this rank's range of the master weights, gathers the replicas'
/// shards (ZeRO-1: a transient buffer) and writes every parameter back in
/// its own dtype.
Status applyUpdate(const TrainOptions &t, const TrainLayout &layout,
                   std::vector<Slot> &slots, Flat &flat, int64_t step,
                   double lr) {
  for (Slot &s : slots) {
    const int64_t lo = std::max(s.offset, flat.begin);
    const int64_t hi = std::min(s.offset + s.param.numel(), flat.end);
    if (lo >= hi || s.frozen)
      continue;
    const double wd = s.decays ? t.weightDecay : 0.0;
    float *master = flat.master.data() + (lo - flat.begin);
    if (t.sgd)
      sgdStep(master, flat.grad.data() + lo, hi - lo, lr, wd);
    else
      adamwStep(master, flat.m.data() + (lo - flat.begin),
                flat.v.data() + (lo - flat.begin), flat.grad.data() + lo,
                hi - lo, step, lr, wd, t.adam);
  }
  // The parameters from the whole master weights: this rank's own, or
  // (ZeRO-1) every replica's shard gathered.
  if (!layout.zero || !layout.data)
    return uploadWeights(*layout.exe, slots, flat.master);
  std::vector<float> whole;
  if (Status st = wholeOf(layout, flat, flat.master, whole); !st)
    return st;
  return uploadWeights(*layout.exe, slots, whole);
}

/// Cuts the --log at `path` after step `last` (the checkpoint a resumed run
/// starts after): the steps the interrupted run logged past it are trained
/// again and logged anew, not twice, and a line the crash cut short goes.
/// The file is truncated in place (its mode, links and readers kept). Only
/// a regular file other than this process's stdout or stderr is cut; a
/// missing log is fine, anything else is appended to as it is.
Status truncateLogAfter(const std::string &path, int64_t last) {
  struct stat log, out;
  if (::stat(path.c_str(), &log) != 0 || !S_ISREG(log.st_mode))
    return Status::success();
  for (int fd : {1, 2})
    if (::fstat(fd, &out) == 0 && out.st_dev == log.st_dev &&
        out.st_ino == log.st_ino)
      return Status::success();
  auto failed = [&](const char *what) {
    return Status::error("--log: cannot " + std::string(what) + " '" + path +
                         "': " + std::strerror(errno));
  };
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return failed("open");
  std::string text;
  char chunk[65536];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof chunk)) != 0) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      Status st = failed("read");
      ::close(fd);
      return st;
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  // The lines are in step order: keep whole lines up to `last`.
  size_t keep = 0;
  for (size_t begin = 0; begin < text.size();) {
    const size_t newline = text.find('\n', begin);
    long long step = 0;
    if (newline == std::string::npos ||
        std::sscanf(text.c_str() + begin, "{\"step\": %lld", &step) != 1 ||
        step > last)
      break;
    keep = begin = newline + 1;
  }
  const bool cut = ::ftruncate(fd, static_cast<off_t>(keep)) == 0;
  Status st = cut ? Status::success() : failed("truncate");
  ::close(fd);
  return st;
}

/// "[#####.....]  3/10" on a terminal, overwritten by the next line.
void progressBar(int64_t step, int64_t steps) {
  const int width = 30;
  int done = static_cast<int>(width * step / steps);
  std::printf("[%s%s] %lld/%lld\r", std::string(done, '#').c_str(),
              std::string(width - done, '.').c_str(),
              static_cast<long long>(step), static_cast<long long>(steps));
  std::fflush(stdout);
}

/// The plain artifact's train step: one run of the program.
class ProgramStep : public StepRunner {
public:
  explicit ProgramStep(Executable &exe) : exe(exe) {}
  Status run(std::vector<HostBuffer> &batch, int64_t seed, int64_t step,
             double &loss) override {
    exe.setRandomState(static_cast<uint64_t>(seed),
                       static_cast<uint64_t>(step));
    in.clear();
    for (HostBuffer &b : batch)
      in.push_back(b.view());
    if (Status st = exe.run(in, out); !st)
      return st;
    loss = out[0].as<float>()[0];
    return Status::success();
  }
  const void *gradient(const Slot &slot) override {
    return out[slot.gradIndex].data;
  }

private:
  Executable &exe;
  std::vector<Tensor> in, out;
};

} // namespace

int trainLoop(const TrainOptions &t, bool quiet, TrainLayout &layout,
              std::vector<Slot> &slots, StepRunner &runner,
              const std::vector<IOSpec> &stepInputs, size_t idsInput,
              size_t labelsInput, Communicator &world) {
  const IOSpec &idsSpec = stepInputs[idsInput];
  const int64_t batch = idsSpec.shape[0], seq = idsSpec.shape[1];
  const int64_t replicas = layout.replicas;
  layout.rowsPerStep = batch * replicas;
  const int64_t replica = layout.data ? layout.data->rank() : 0;
  layout.syntheticStart = layout.exe->syntheticWeights();
  if (!quiet && layout.syntheticStart && t.resume.empty())
    std::printf("mp-run: note: synthetic (random) initial weights "
                "(--mp-synthetic-weights): training starts from them, not "
                "from the model's; checkpoints say so\n");
  TrainBatches batches;
  stopIfAnyRankFailed(world,
                      TrainBatches::open(t, stepInputs, idsInput, labelsInput,
                                         replicas, batches));
  if (!t.save.empty())
    stopIfAnyRankFailed(world, checkSaveDirectory(t.save));
  Flat flat;
  stopIfAnyRankFailed(world, initFlat(layout, slots, flat));
  int64_t firstStep = 1, seed = t.seed;
  if (!t.resume.empty()) {
    int64_t saved = 0;
    stopIfAnyRankFailed(world, loadCheckpoint(t.resume, layout, slots, flat,
                                              saved, seed, t.sgd));
    stopIfAnyRankFailed(
        world, saved <= t.steps
                   ? Status::success()
                   : Status::error("--resume: the checkpoint is at step " +
                                   std::to_string(saved) + ", past --steps " +
                                   std::to_string(t.steps) +
                                   " (the total step count)"));
    firstStep = saved + 1;
    if (!quiet)
      std::printf("mp-run: resumed from %s at step %lld (its seed %lld)\n",
                  t.resume.c_str(), static_cast<long long>(saved),
                  static_cast<long long>(seed));
  }
  std::FILE *log = nullptr;
  if (!t.log.empty() && world.rank() == 0) {
    // A resumed run continues the log of the run it resumes.
    if (!t.resume.empty())
      if (Status st = truncateLogAfter(t.log, firstStep - 1); !st)
        abortRun(st.message);
    log = std::fopen(t.log.c_str(), t.resume.empty() ? "w" : "a");
    if (!log)
      abortRun("--log: cannot write '" + t.log + "': " + std::strerror(errno));
  }
  if (firstStep > t.steps && !quiet)
    std::printf("mp-run: the checkpoint is at step %lld, --steps %lld: "
                "nothing to train\n",
                static_cast<long long>(firstStep - 1),
                static_cast<long long>(t.steps));

  // Under mpirun a rank's stdout is a pty even when mpirun's own output is
  // piped to a file, so only a single process draws the bar.
  const bool terminal = !quiet && ::isatty(1) && world.size() == 1;
  LRSchedule schedule = t.schedule;
  schedule.totalSteps = t.steps;
  // Tokens of one step over every replica.
  const double stepTokens = static_cast<double>(batch * seq * replicas);
  double started = seconds(), lastLoss = 0;
  for (int64_t step = firstStep; step <= t.steps; ++step) {
    const double stepStart = seconds();
    batches.fill(step, replica);
    double loss = 0;
    if (Status st = runner.run(batches.batch(), seed, step, loss); !st)
      abortRun(st.message);
    // The replicas' mean loss (each is the mean over its batch).
    if (Status st = sumOver(layout.data, loss); !st)
      abortRun(st.message);
    loss /= static_cast<double>(replicas);
    for (Slot &s : slots) {
      const int64_t n = s.param.numel();
      float *g = flat.grad.data() + s.offset;
      const void *data = runner.gradient(s);
#pragma omp parallel for schedule(static) if (n >= 65536)
      for (int64_t i = 0; i < n; ++i)
        g[i] = toFloat(data, s.param.dtype, i);
    }
    double norm = 0;
    Status reduced = reduceGradients(layout, flat);
    if (reduced)
      reduced = globalNorm(layout, slots, flat, norm);
    if (!reduced)
      abortRun(reduced.message);
    // As Megatron's check for NaN in the loss and gradients: a diverged run
    // stops before its weights are updated or saved (every rank sees the
    // same loss and norm, so all stop here).
    if (!std::isfinite(loss) || !std::isfinite(norm))
      abortRun("step " + std::to_string(step) + ": the loss is " +
               std::to_string(loss) + " and the gradient norm " +
               std::to_string(norm) +
               ": the run diverged (lower --lr, or clip with --clip-grad); "
               "stopped before updating or saving the weights");
    // As torch.nn.utils.clip_grad_norm_: scale by max / (norm + 1e-6).
    if (t.clipGrad > 0 && norm > t.clipGrad) {
      const float scale = static_cast<float>(t.clipGrad / (norm + 1e-6));
      for (int64_t i = flat.begin; i < flat.end; ++i)
        flat.grad[i] *= scale;
    }
    const double lr = schedule.at(step);
    if (Status st = applyUpdate(t, layout, slots, flat, step, lr); !st)
      abortRun(st.message);
    const double elapsed = seconds() - stepStart;
    lastLoss = loss;
    if (!quiet) {
      std::printf("%sstep %lld/%lld  loss %.6f  grad_norm %.4g  lr %.4g  "
                  "%.0f tokens/s\n",
                  terminal ? "\r\033[K" : "", static_cast<long long>(step),
                  static_cast<long long>(t.steps), loss, norm, lr,
                  stepTokens / elapsed);
      if (terminal && step < t.steps)
        progressBar(step, t.steps);
    }
    if (t.saveEvery && step % t.saveEvery == 0 && step < t.steps)
      saveCheckpoint(t.save, world, layout, slots, flat, step, seed, t);
    if (log) {
      std::fprintf(log,
                   "{\"step\": %lld, \"loss\": %.9g, \"grad_norm\": %.9g, "
                   "\"lr\": %.9g}\n",
                   static_cast<long long>(step), loss, norm, lr);
      if (std::fflush(log) != 0 || std::ferror(log))
        abortRun("--log: failed writing '" + t.log +
                 "': " + std::strerror(errno));
    }
  }
  if (log && std::fclose(log) != 0)
    abortRun("--log: failed writing '" + t.log + "': " + std::strerror(errno));
  const double total = seconds() - started;
  const int64_t ran = std::max<int64_t>(t.steps - firstStep + 1, 0);
  if (!quiet && ran > 0)
    std::printf("mp-run: trained %lld steps in %.2f s (%.0f tokens/s), final "
                "loss %.6f\n",
                static_cast<long long>(ran), total,
                stepTokens * static_cast<double>(ran) / total, lastLoss);
  if (!t.save.empty()) {
    saveCheckpoint(t.save, world, layout, slots, flat, t.steps, seed, t);
    if (!quiet)
      std::printf("mp-run: saved the trained weights to %s\n", t.save.c_str());
  }
  return 0;
}

int train(const TrainOptions &t, bool quiet, Executable &exe,
          Communicator &world) {
  std::vector<Slot> slots;
  size_t idsInput, labelsInput;
  stopIfAnyRankFailed(world,
                      bindTrainStep(exe, t, slots, idsInput, labelsInput));
  TrainLayout layout = TrainLayout::of(exe, world);
  ProgramStep runner(exe);
  return trainLoop(t, quiet, layout, slots, runner, exe.inputs(), idsInput,
                   labelsInput, world);
}

} // namespace mprun
