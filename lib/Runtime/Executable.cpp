//===- Executable.cpp - running a loaded artifact -------------------------===//
//
// Running is a loop over the steps the loader bound (Loader.cpp, Binder.cpp):
// inputs checked and uploaded, each kernel called, outputs staged back.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace mp::rt {

Executable::~Executable() {
  if (!kernels)
    return;
  kernels->release(arena);
  if (scratch)
    kernels->release(scratch);
  if (widenArena)
    kernels->release(widenArena);
  if (deviceParams)
    kernels->release(deviceParams);
  if (deviceConstants)
    kernels->release(deviceConstants);
}

std::string Executable::describeCollectives() const {
  for (const std::unique_ptr<Communicator> &axis : axisComms)
    if (axis && axis->size() > 1)
      return axis->describe();
  return comm->describe();
}

std::vector<std::tuple<std::string, double, int64_t>>
Executable::profile() const {
  std::map<std::string, std::pair<double, int64_t>> byOp;
  for (size_t i = 0; i < stepSeconds.size(); ++i) {
    byOp[steps[i].op].first += stepSeconds[i];
    byOp[steps[i].op].second += stepCalls[i];
  }
  std::vector<std::tuple<std::string, double, int64_t>> rows;
  for (const auto &[op, v] : byOp)
    rows.emplace_back(op, v.first, v.second);
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return std::get<1>(a) > std::get<1>(b);
  });
  return rows;
}

namespace {
/// Lends an executable's kernel scratch to the (per-process) kernels for the
/// scope of one of its runs, error returns included.
class KernelScratchLoan {
public:
  KernelScratchLoan(const KernelTable &kernels, void *ptr, size_t bytes)
      : kernels(kernels) {
    if (kernels.lendScratch)
      kernels.lendScratch(ptr, bytes);
  }
  ~KernelScratchLoan() {
    if (kernels.withdrawScratch)
      kernels.withdrawScratch();
  }
  KernelScratchLoan(const KernelScratchLoan &) = delete;
  KernelScratchLoan &operator=(const KernelScratchLoan &) = delete;

private:
  const KernelTable &kernels;
};
} // namespace

Status Executable::run(const std::vector<Tensor> &inputs,
                       std::vector<Tensor> &outputs) {
  KernelScratchLoan loan(*kernels, scratch, kernelScratch);
  if (inputs.size() != inputSpecs.size())
    return Status::error("expected " + std::to_string(inputSpecs.size()) +
                         " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IOSpec &spec = inputSpecs[i];
    if (inputs[i].dtype != spec.dtype || inputs[i].shape != spec.shape)
      return Status::error(
          "input '" + spec.name + "' expects " + dtypeName(spec.dtype) + " " +
          formatShape(spec.shape) + " but got " + dtypeName(inputs[i].dtype) +
          " " + formatShape(inputs[i].shape));
    if (Status s = kernels->toDevice(buffers[inputBuffers[i]].data,
                                     inputs[i].data, inputs[i].bytes());
        !s)
      return s;
  }
  for (const InputIndexCheck &c : inputIndexChecks)
    if (Status s = checkIndices(&cpuKernelTable(), inputs[c.input], c.dim,
                                c.where, c.allowNegative);
        !s)
      return s;
  if (profiling && stepSeconds.size() != steps.size()) {
    stepSeconds.assign(steps.size(), 0.0);
    stepCalls.assign(steps.size(), 0);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Step &step = steps[i];
    auto start = std::chrono::steady_clock::now();
    Status s = step.kernel();
    if (s && profiling)
      s = kernels->synchronize(); // time each kernel, not its launch
    if (!s) {
      // Let the work already queued (e.g. a collective's copies) finish, so
      // that the next run cannot race it on the arena.
      (void)kernels->synchronize();
      return Status::error(s.message.find("instruction") == 0
                               ? s.message
                               : "instruction '" + step.op + "' at '" +
                                     step.location + "': " + s.message);
    }
    if (profiling) {
      stepSeconds[i] += std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count();
      ++stepCalls[i];
    }
  }
  if (Status s = kernels->synchronize(); !s)
    return s;
  outputs.clear();
  bool onHost = kernels == &cpuKernelTable();
  outputStaging.resize(outputBuffers.size());
  for (size_t i = 0; i < outputBuffers.size(); ++i) {
    Tensor t = buffers[outputBuffers[i]];
    if (!onHost) {
      outputStaging[i].resize(t.bytes());
      if (Status s =
              kernels->toHost(outputStaging[i].data(), t.data, t.bytes());
          !s)
        return s;
      t.data = outputStaging[i].data();
    }
    outputs.push_back(t);
  }
  return Status::success();
}

Status Executable::download(const Tensor &device, void *host) const {
  return kernels->toHost(host, device.data, device.bytes());
}

Status Executable::upload(const void *host, const Tensor &device) const {
  if (Status s = kernels->toDevice(device.data, host, device.bytes()); !s)
    return s;
  const auto *begin = static_cast<const uint8_t *>(device.data);
  const uint8_t *end = begin + device.bytes();
  Status first = Status::success();
  for (const PackedWeight &p : packedWeights) {
    const auto *w = static_cast<const uint8_t *>(p.weight.data);
    if (w < end && begin < w + p.weight.bytes())
      if (Status s = p.refresh(); !s && first)
        first = s;
  }
  return first;
}

bool Executable::isParameter(const Tensor &t) const {
  return std::any_of(
      paramTable.begin(), paramTable.end(),
      [&](const Parameter &p) { return p.tensor.data == t.data; });
}

} // namespace mp::rt
