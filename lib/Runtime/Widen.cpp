//===- Widen.cpp - 16-bit float programs on kernels that compute in f32 ---===//
//
// A bf16 or fp16 program (mp-convert-precision) runs on the CPU although
// most CPU kernels compute in f32 (and on a GPU, whose table names the few
// kernels that do): an instruction with 16-bit float
// operands or results whose kernel has no 16-bit form is bound to the f32
// kernel on f32 copies ("shadows") of them, and its step converts the
// operands into their shadows before the kernel and the results back after
// it, rounding once per value as a GPU's bf16 kernels do (they too compute
// in f32). Byte-moving kernels (transposes, slices, gathers, casts), the
// residual add-norms (which round the sum before normalizing it, as shadows
// would not) and a linear that oneDNN runs in bf16 need no shadows. The
// shadows of a step live only while it runs, so all steps share one block,
// sized at load for the largest need.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"

#include "mp/Runtime/Device.h"

#include <algorithm>

namespace mp::rt {

namespace {

size_t shadowBytes(const Tensor &t) {
  return (static_cast<size_t>(t.numel()) * 4 + 63) / 64 * 64;
}

/// Kernels that move bytes whatever the element type, or that take 16-bit
/// floats themselves.
bool takesHalfFloats(contract::OpKind kind) {
  using contract::OpKind;
  switch (kind) {
  case OpKind::Cast:
  case OpKind::Reshape:
  case OpKind::Transpose:
  case OpKind::Slice:
  case OpKind::Concat:
  case OpKind::Split:
  case OpKind::Expand:
  case OpKind::Embedding:
  case OpKind::Gather:
  // (They round the sum before normalizing it, which f32 shadows would
  // not.)
  case OpKind::AddLayerNorm:
  case OpKind::AddRMSNorm: return true;
  default: return false;
  }
}

/// Whether a linear runs on its bf16 values as they are: all of them bf16,
/// and oneDNN's bf16 GEMM available (`buffer` gives a buffer id's tensor,
/// null for an absent operand).
template <class Buffer>
bool linearRunsInBf16(const program::Instruction &inst, Buffer buffer) {
  for (const auto *ids : {&inst.operands(), &inst.results()})
    for (int id : *ids)
      if (const Tensor *t = buffer(id); t && t->dtype != DType::BF16)
        return false;
  const Tensor *x = buffer(inst.operands_size() > 0 ? inst.operands(0) : -1);
  const Tensor *w = buffer(inst.operands_size() > 1 ? inst.operands(1) : -1);
  if (!x || !w || x->shape.empty() || w->shape.size() != 2)
    return false;
  return cpu::runsInBf16(*x, *w);
}

} // namespace

size_t Binder::widenedBytes(const Executable &exe,
                            const program::Instruction &inst) {
  std::optional<contract::OpKind> kind = contract::opKindFromName(inst.op());
  if (!kind)
    return 0;
  if (exe.kernels != &cpuKernelTable()) {
    if (!exe.kernels->widens || !exe.kernels->widens(*kind))
      return 0;
  } else if (takesHalfFloats(*kind)) {
    return 0;
  }
  auto buffer = [&](int id) -> const Tensor * {
    return id >= 0 && id < static_cast<int>(exe.buffers.size())
               ? &exe.buffers[id]
               : nullptr;
  };
  if (*kind == contract::OpKind::Linear && linearRunsInBf16(inst, buffer))
    return 0;
  size_t bytes = 0;
  std::vector<int> seen;
  auto add = [&](int id) {
    const Tensor *t = buffer(id);
    if (t && isHalfFloat(t->dtype) &&
        std::find(seen.begin(), seen.end(), id) == seen.end()) {
      seen.push_back(id);
      bytes += shadowBytes(*t);
    }
  };
  for (const auto *ids : {&inst.operands(), &inst.results()})
    for (int id : *ids)
      add(id);
  return bytes;
}

Status Binder::bindWidened(Executable::Step &step) {
  struct Shadow {
    Tensor narrow, wide;
  };
  std::vector<Shadow> operands, results;
  std::vector<std::pair<int, Tensor>> replaced;
  uint8_t *next = exe.widenArena;
  auto widen = [&](int id, std::vector<Shadow> &list) {
    if (id < 0)
      return;
    Tensor &t = exe.buffers[id];
    if (!isHalfFloat(t.dtype))
      return; // (not 16-bit, or already widened: an operand read twice)
    Tensor wide{next, DType::F32, t.shape};
    next += shadowBytes(t);
    list.push_back({t, wide});
    replaced.push_back({id, t});
    t = wide;
  };
  for (int id : inst.operands())
    widen(id, operands);
  for (int id : inst.results())
    widen(id, results);
  widening = true;
  Status bound = bind(step);
  widening = false;
  for (auto it = replaced.rbegin(); it != replaced.rend(); ++it)
    exe.buffers[it->first] = it->second;
  if (!bound)
    return bound;
  const KernelTable *kernels = exe.kernels;
  // (mutable: cast writes through the Shadow's own tensors, so a run copies
  // no shapes.)
  step.kernel = [kernels, operands, results,
                 inner = std::move(step.kernel)]() mutable {
    for (Shadow &s : operands)
      if (Status st = kernels->cast(s.narrow, s.wide); !st)
        return st;
    if (Status st = inner(); !st)
      return st;
    for (Shadow &s : results)
      if (Status st = kernels->cast(s.wide, s.narrow); !st)
        return st;
    return Status::success();
  };
  return Status::success();
}

} // namespace mp::rt
