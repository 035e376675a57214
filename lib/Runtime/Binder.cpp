//===- Binder.cpp - binding instructions to kernels -----------------------===//
//
// The structure of every instruction (operand and result counts, optional
// operands, attributes) is checked against the op contract, its shapes
// against the ops' shape rules (mp/Support/Shape.h, the rules the compiler
// verified), and then its kernel call is built. Dispatch is on the contract's
// op kind.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"

#include "mp/Runtime/Kernels.h"
#include "mp/Support/Flops.h"
#include "mp/Support/Shape.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace mp::rt {

using contract::AttrType;

Status checkIndices(const KernelTable *k, const Tensor &device, int64_t dim,
                    const std::string &where, bool allowNegative) {
  std::vector<uint8_t> host;
  Tensor indices = device;
  if (k != &cpuKernelTable()) {
    host.resize(device.bytes());
    if (Status s = k->toHost(host.data(), device.data, device.bytes()); !s)
      return s;
    indices.data = host.data();
  }
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t j = indices.dtype == DType::I64 ? indices.as<int64_t>()[i]
                                            : indices.as<int32_t>()[i];
    if (!allowNegative && j == cpu::kIgnoreIndex)
      continue; // a class target PyTorch ignores
    if (j < (allowNegative ? -dim : 0) || j >= dim)
      return Status::error(where + ": index " + std::to_string(j) +
                           " is out of range [" +
                           (allowNegative ? std::to_string(-dim) : "0") + ", " +
                           std::to_string(dim) + ")");
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

Status Binder::fail(const std::string &msg) const {
  return Status::error("instruction '" + inst.op() + "' at '" +
                       inst.location() + "': " + msg);
}

Status Binder::checkContract(const contract::OpInfo &info) {
  int operands = inst.operands_size(), results = inst.results_size();
  if (info.variadicOperands()
          ? operands < 1
          : operands < info.requiredOperands() || operands > info.operands)
    return fail("expected " +
                (info.variadicOperands()
                     ? std::string("at least one operand")
                     : std::to_string(info.requiredOperands()) +
                           (info.requiredOperands() == info.operands
                                ? ""
                                : " to " + std::to_string(info.operands)) +
                           " operand(s)") +
                ", found " + std::to_string(operands));
  if (info.results < 0 ? results < 1 : results != info.results)
    return fail("expected " +
                (info.results < 0 ? std::string("at least one")
                                  : std::to_string(info.results)) +
                " result(s), found " + std::to_string(results));
  int buffers = static_cast<int>(exe.buffers.size());
  for (int i = 0; i < operands; ++i) {
    int id = inst.operands(i);
    if (id == -1 && !info.isOptional(i))
      return fail("operand " + std::to_string(i) + " is missing");
    if (id < -1 || id >= buffers)
      return fail("operand buffer " + std::to_string(id) + " does not exist");
  }
  for (int id : inst.results())
    if (id < 0 || id >= buffers || exe.buffers[id].data < exe.arena ||
        exe.buffers[id].data >= exe.arena + std::max<int64_t>(exe.arenaSize, 1))
      return fail("result buffer " + std::to_string(id) +
                  " is not an arena buffer");
  return checkAttributes(info);
}

static bool hasType(const program::Attribute &a, AttrType type) {
  switch (type) {
  case AttrType::Int: return a.value_case() == program::Attribute::kI;
  case AttrType::Float: return a.value_case() == program::Attribute::kF;
  case AttrType::Ints: return a.value_case() == program::Attribute::kInts;
  case AttrType::String: return a.value_case() == program::Attribute::kS;
  }
  return false;
}

Status Binder::checkAttributes(const contract::OpInfo &info) {
  for (const program::Attribute &a : inst.attributes())
    if (std::none_of(info.attributes.begin(), info.attributes.end(),
                     [&](const contract::AttrInfo &c) {
                       return a.name() == contract::attrName(c.name);
                     }))
      return fail("unexpected attribute '" + a.name() + "'");
  for (const contract::AttrInfo &c : info.attributes) {
    const char *name = contract::attrName(c.name);
    auto found = std::find_if(
        inst.attributes().begin(), inst.attributes().end(),
        [&](const program::Attribute &a) { return a.name() == name; });
    if (found == inst.attributes().end())
      return fail("missing attribute '" + std::string(name) + "'");
    if (!hasType(*found, c.type))
      return fail("attribute '" + std::string(name) + "' is not " +
                  contract::attrTypeName(c.type));
  }
  return Status::success();
}

Status Binder::checkRanks() {
  size_t limit = exe.kernels->maxRank;
  if (limit == 0)
    return Status::success();
  std::vector<int> ids(inst.operands().begin(), inst.operands().end());
  ids.insert(ids.end(), inst.results().begin(), inst.results().end());
  for (int id : ids)
    if (id >= 0 && exe.buffers[id].shape.size() > limit)
      return fail("a tensor of rank " +
                  std::to_string(exe.buffers[id].shape.size()) +
                  " exceeds the " + exe.kernels->name + " kernels' " +
                  std::to_string(limit) + " dimensions");
  return Status::success();
}

std::vector<Shape> Binder::operandShapes() const {
  std::vector<Shape> shapes;
  for (int i = 0; i < inst.operands_size(); ++i)
    shapes.push_back(in(i).shape);
  return shapes;
}

const program::Attribute &Binder::attr(AttrName name) const {
  const char *key = contract::attrName(name);
  for (const auto &a : inst.attributes())
    if (a.name() == key)
      return a;
  static const program::Attribute kNone;
  return kNone; // (not reached: checkAttributes found every one)
}

Shape Binder::intsAttr(AttrName name) const {
  const auto &values = attr(name).ints().values();
  return Shape(values.begin(), values.end());
}

Status Binder::axisAttr(AttrName name, int64_t rank, int64_t &axis) {
  axis = intAttr(name);
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
    return fail(std::string(contract::attrName(name)) + " " +
                std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  return Status::success();
}

Status Binder::expectShape(const std::string &what, const Shape &found,
                           const Shape &expected) {
  if (found == expected)
    return Status::success();
  return fail("expected " + what + " shape " + formatShape(expected) +
              " but found " + formatShape(found));
}

Status Binder::expectResult(bool rule, const std::string &error,
                            const Shape &expected) {
  if (!rule)
    return fail(error);
  return expectShape("result", out().shape, expected);
}

Status Binder::paddedVocabulary(int64_t &rows) {
  int64_t vocab = intAttr(AttrName::Vocab);
  if (vocab < 0 || vocab > rows)
    return fail("vocab " + std::to_string(vocab) + " is out of range [0, " +
                std::to_string(rows) + "]");
  if (vocab > 0)
    rows = vocab;
  return Status::success();
}

StepIndexCheck Binder::indexCheck(int i, int64_t dim, bool allowNegative,
                                  const std::string &where) {
  const auto &ids = exe.inputBuffers;
  auto found = std::find(ids.begin(), ids.end(), inst.operands(i));
  if (found != ids.end()) {
    exe.inputIndexChecks.push_back(
        {static_cast<size_t>(found - ids.begin()), dim, allowNegative, where});
    return {};
  }
  return {exe.kernels, in(i), dim, allowNegative, where};
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Status Binder::bindBinary(Executable::Step &step, OpKind kind) {
  const KernelTable *kernels = exe.kernels;
  Shape shape;
  std::string error;
  if (Status s = expectResult(shape::broadcast(operandShapes(), shape, error),
                              error, shape);
      !s)
    return s;
  const Tensor a = in(0), b = in(1);
  Tensor o = out();
  if (kind == OpKind::Where) {
    const Tensor c = in(2);
    step.kernel = [kernels, a, b, c, o]() mutable {
      return kernels->where(a, b, c, o);
    };
    return Status::success();
  }
  if (kind == OpKind::Compare) {
    cpu::CompareKind predicate;
    if (Status s = enumAttr(AttrName::Predicate, predicate); !s)
      return s;
    step.kernel = [kernels, predicate, a, b, o]() mutable {
      return kernels->compare(predicate, a, b, o);
    };
    return Status::success();
  }
  cpu::BinaryKind op;
  switch (kind) {
  case OpKind::Add: op = cpu::BinaryKind::Add; break;
  case OpKind::Sub: op = cpu::BinaryKind::Sub; break;
  case OpKind::Mul: op = cpu::BinaryKind::Mul; break;
  case OpKind::Div: op = cpu::BinaryKind::Div; break;
  default: op = cpu::BinaryKind::Pow; break;
  }
  step.kernel = [kernels, op, a, b, o]() mutable {
    return kernels->binary(op, a, b, o);
  };
  return Status::success();
}

static cpu::UnaryKind unaryKind(contract::OpKind kind) {
  using contract::OpKind;
  switch (kind) {
  case OpKind::Neg: return cpu::UnaryKind::Neg;
  case OpKind::Exp: return cpu::UnaryKind::Exp;
  case OpKind::Log: return cpu::UnaryKind::Log;
  case OpKind::Sqrt: return cpu::UnaryKind::Sqrt;
  case OpKind::Rsqrt: return cpu::UnaryKind::Rsqrt;
  case OpKind::Reciprocal: return cpu::UnaryKind::Reciprocal;
  case OpKind::Tanh: return cpu::UnaryKind::Tanh;
  case OpKind::Erf: return cpu::UnaryKind::Erf;
  case OpKind::Sigmoid: return cpu::UnaryKind::Sigmoid;
  case OpKind::Relu: return cpu::UnaryKind::Relu;
  case OpKind::Silu: return cpu::UnaryKind::Silu;
  case OpKind::Gelu: return cpu::UnaryKind::Gelu;
  case OpKind::Cos: return cpu::UnaryKind::Cos;
  default: return cpu::UnaryKind::Sin;
  }
}

Status Binder::bindUnary(Executable::Step &step, OpKind kind) {
  const KernelTable *kernels = exe.kernels;
  if (in(0).numel() != out().numel())
    return fail("result has " + std::to_string(out().numel()) +
                " elements but the input has " + std::to_string(in(0).numel()));
  cpu::UnaryKind op = unaryKind(kind);
  if (kind == OpKind::Gelu) {
    contract::GeluApproximation approximate;
    if (Status s = enumAttr(AttrName::Approximate, approximate); !s)
      return s;
    if (approximate == contract::GeluApproximation::Tanh)
      op = cpu::UnaryKind::GeluTanh;
  }
  const Tensor x = in(0);
  Tensor o = out();
  step.kernel = [kernels, op, x, o]() mutable {
    return kernels->unary(op, x, o);
  };
  return Status::success();
}

/// cast, and the ops that move bytes unchanged (reshape, inference dropout).
Status Binder::bindCopyLike(Executable::Step &step, OpKind kind) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Tensor o = out();
  std::string error; // (the kernels need the same element count)
  if (!shape::reshape(x.shape, o.shape, error))
    return fail(error);
  if (kind == OpKind::Cast) {
    step.kernel = [kernels, x, o]() mutable { return kernels->cast(x, o); };
    return Status::success();
  }
  if (x.dtype != o.dtype)
    return fail("result element type differs from the input's");
  step.kernel = [kernels, x, o]() mutable { return kernels->copy(x, o); };
  return Status::success();
}

Status Binder::bindSoftmax(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  int64_t axis;
  if (Status s = axisAttr(AttrName::Axis, x.shape.size(), axis); !s)
    return s;
  Shape expected;
  std::string error;
  if (Status s = expectResult(shape::softmax(x.shape, axis, expected, error),
                              error, expected);
      !s)
    return s;
  Tensor o = out();
  step.kernel = [kernels, x, o, axis]() mutable {
    return kernels->softmax(x, axis, o);
  };
  return Status::success();
}

Status Binder::bindTrilu(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Shape expected;
  std::string error;
  if (Status s =
          expectResult(shape::trilu(x.shape, expected, error), error, expected);
      !s)
    return s;
  bool upper = intAttr(AttrName::Upper) != 0;
  int64_t diagonal = intAttr(AttrName::Diagonal);
  Tensor o = out();
  step.kernel = [kernels, x, o, upper, diagonal]() mutable {
    return kernels->trilu(x, upper, diagonal, o);
  };
  return Status::success();
}

Status Binder::bindRotary(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (!kernels->rotary)
    return fail(std::string("the ") + kernels->name +
                " kernels have no rotary embedding");
  const Tensor x = in(0), cos = in(1), sin = in(2);
  Tensor o = out();
  for (const Tensor *t :
       std::initializer_list<const Tensor *>{&x, &cos, &sin, &o})
    if (t->dtype != DType::F32)
      return fail("rotary takes f32 only, not " +
                  std::string(dtypeName(t->dtype)));
  if (Status s = expectShape("sin", sin.shape, cos.shape); !s)
    return s;
  const int64_t rotaryDim = intAttr(AttrName::RotaryDim);
  const bool interleaved = intAttr(AttrName::Interleaved) != 0;
  Shape expected;
  std::string error;
  if (Status s = expectResult(
          shape::rotary(x.shape, cos.shape, rotaryDim, expected, error), error,
          expected);
      !s)
    return s;
  step.kernel = [kernels, x, cos, sin, o, rotaryDim, interleaved]() mutable {
    return kernels->rotary(x, cos, sin, rotaryDim, interleaved, o);
  };
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

Status Binder::bindMatmul(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  Shape expected;
  std::string error;
  if (Status s =
          expectResult(shape::matmul(in(0).shape, in(1).shape, expected, error),
                       error, expected);
      !s)
    return s;
  exe.flops += flops::contraction(expected, in(0).shape.back());
  const Tensor x = in(0), y = in(1);
  Tensor o = out();
  step.kernel = [kernels, x, y, o]() mutable {
    return kernels->matmul(x, y, o);
  };
  return Status::success();
}

Status Binder::bindLinear(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  using namespace contract::linear;
  const Tensor x = in(Input), w = in(Weight);
  const Tensor *bias = optIn(Bias);
  bool transposed = intAttr(AttrName::TransposeWeight) != 0;
  contract::LinearActivation activation;
  if (Status s = enumAttr(AttrName::Activation, activation); !s)
    return s;
  Shape expected;
  std::string error;
  if (Status s = expectResult(shape::linear(x.shape, w.shape,
                                            bias ? &bias->shape : nullptr,
                                            transposed, expected, error),
                              error, expected);
      !s)
    return s;
  exe.flops += flops::contraction(expected, x.shape.back());
  Tensor o = out();
  std::optional<Tensor> b = bias ? std::optional<Tensor>(*bias) : std::nullopt;
  if (kernels->planLinear) {
    const bool pack = !exe.parametersChange && exe.isParameter(w);
    cpu::PlannedKernel plan =
        kernels->planLinear(x, w, bias, transposed, o, pack, activation);
    step.kernel = std::move(plan.run);
    if (plan.refresh)
      exe.packedWeights.push_back({w, std::move(plan.refresh)});
    exe.packedBytes += static_cast<int64_t>(plan.packedBytes);
  }
  if (step.kernel)
    return Status::success();
  // On the CPU, widenedBytes chose oneDNN's bf16 GEMM for this linear.
  if (x.dtype == DType::BF16 && kernels == &cpuKernelTable())
    return fail("oneDNN cannot run this bf16 linear");
  if (activation == contract::LinearActivation::None) {
    step.kernel = [kernels, x, w, b, transposed, o]() mutable {
      return kernels->linear(x, w, b ? &*b : nullptr, transposed, o);
    };
    return Status::success();
  }
  // Where the GEMM has no epilogue, the activation runs after it, in place.
  const cpu::UnaryKind kind =
      activation == contract::LinearActivation::Gelu ? cpu::UnaryKind::Gelu
      : activation == contract::LinearActivation::GeluTanh
          ? cpu::UnaryKind::GeluTanh
          : cpu::UnaryKind::Silu;
  step.kernel = [kernels, x, w, b, transposed, o, kind]() mutable {
    if (Status s = kernels->linear(x, w, b ? &*b : nullptr, transposed, o); !s)
      return s;
    return kernels->unary(kind, o, o);
  };
  return Status::success();
}

Status Binder::bindAttention(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  using namespace contract::attention;
  const Tensor q = in(Query), k = in(Key), v = in(Value);
  const Tensor *mask = optIn(Mask);
  Shape expected;
  std::string error;
  if (Status s = expectResult(shape::attention(q.shape, k.shape, v.shape,
                                               mask ? &mask->shape : nullptr,
                                               expected, error),
                              error, expected);
      !s)
    return s;
  exe.flops += flops::attention(q.shape, k.shape, v.shape);
  float scale = static_cast<float>(floatAttr(AttrName::Scale));
  if (!(scale > 0) || !std::isfinite(scale))
    return fail("scale " + std::to_string(floatAttr(AttrName::Scale)) +
                " is not a positive number");
  bool causal = intAttr(AttrName::Causal) != 0;
  std::optional<Tensor> m = mask ? std::optional<Tensor>(*mask) : std::nullopt;
  if (kernels->attentionScratch)
    exe.kernelScratch =
        std::max(exe.kernelScratch, kernels->attentionScratch(q, k, v));
  Tensor o = out();
  step.kernel = [kernels, q, k, v, m, scale, causal, o]() mutable {
    return kernels->attention(q, k, v, m ? &*m : nullptr, scale, causal, o);
  };
  return Status::success();
}

/// gather (any axis) and embedding (axis 0 of a [V, H] table, possibly
/// vocab-parallel).
Status Binder::bindEmbedding(Executable::Step &step, bool isGather) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0), idx = in(1);
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    return fail("indices must be i64 or i32");
  int64_t axis = 0;
  if (isGather)
    if (Status s = axisAttr(AttrName::Axis, x.shape.size(), axis); !s)
      return s;
  Shape expected;
  std::string error;
  bool rule = isGather
                  ? shape::gather(x.shape, idx.shape, axis, expected, error)
                  : shape::embedding(x.shape, idx.shape, expected, error);
  if (Status s = expectResult(rule, error, expected); !s)
    return s;
  Tensor o = out();
  int64_t dim = x.shape[axis];
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  if (!isGather && intAttr(AttrName::VocabParallel)) {
    Communicator *group = exe.axisComms[0].get();
    int64_t offset = dim * group->rank(), vocab = dim * group->size();
    if (Status s = paddedVocabulary(vocab); !s)
      return s;
    step.kernel = [kernels, x, idx, o, offset, vocab,
                   check = indexCheck(1, vocab, true, where)]() mutable {
      if (Status s = check(); !s)
        return s;
      return kernels->vocabEmbedding(x, idx, offset, vocab, o);
    };
    return Status::success();
  }
  if (!isGather && intAttr(AttrName::Vocab))
    return fail("a vocab needs a vocab-parallel table");
  step.kernel = [kernels, x, idx, o, axis,
                 check = indexCheck(1, dim, true, where)]() mutable {
    if (Status s = check(); !s)
      return s;
    return kernels->gather(x, idx, axis, o);
  };
  return Status::success();
}

Status Binder::bindCrossEntropy(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor logits = in(0), targets = in(1);
  Shape expected;
  std::string error;
  if (!shape::crossEntropy(logits.shape, targets.shape, expected, error))
    return fail(error);
  if (out().numel() != 1)
    return fail("the result must be a scalar");
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return fail("targets must be i64 or i32");
  Tensor o = out();
  if (kernels->crossEntropyScratch)
    exe.kernelScratch =
        std::max(exe.kernelScratch, kernels->crossEntropyScratch(o));
  std::string where =
      "instruction 'cross_entropy' at '" + inst.location() + "'";
  int64_t vocab = logits.shape.back();
  step.kernel =
      [kernels, logits, targets, o,
       check = indexCheck(1, vocab, /*allowNegative=*/false, where)]() mutable {
        if (Status s = check(); !s)
          return s;
        return kernels->crossEntropy(logits, targets, o);
      };
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

Status Binder::groupOf(Communicator *&comm) {
  int64_t gridAxis = intAttr(AttrName::GridAxis);
  if (gridAxis < 0 || gridAxis >= static_cast<int64_t>(exe.axisComms.size()))
    return fail("grid axis " + std::to_string(gridAxis) +
                " is not an axis of the artifact's grid");
  comm = exe.axisComms[gridAxis].get();
  if (comm->size() > 1 &&
      (exe.kernels != &cpuKernelTable()) != comm->deviceMemory())
    return fail(std::string("the ") + comm->backend() +
                " communicator cannot work on " + exe.kernels->name +
                " memory");
  return Status::success();
}

Status Binder::bindCollective(Executable::Step &step, OpKind kind) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Tensor o = out();
  Communicator *comm = nullptr;
  if (Status s = groupOf(comm); !s)
    return s;
  int64_t groupSize = comm->size();
  if (groupSize == 1) { // every collective of one rank is a copy
    if (x.numel() != o.numel())
      return fail("input and result sizes differ");
    step.kernel = [kernels, x, o]() mutable { return kernels->copy(x, o); };
    return Status::success();
  }
  if (kind == OpKind::AllReduce) {
    if (x.shape != o.shape)
      return fail("input and result shapes differ");
    step.kernel = [comm, x, o]() mutable { return comm->allReduceSum(x, o); };
    return Status::success();
  }
  int64_t axis = intAttr(AttrName::Axis);
  const Tensor &local = kind == OpKind::AllGather ? x : o;
  const Tensor &full = kind == OpKind::AllGather ? o : x;
  Shape expected = local.shape;
  if (axis < 0 || axis >= static_cast<int64_t>(expected.size()))
    return fail("axis " + std::to_string(axis) + " is out of range");
  expected[axis] *= groupSize;
  if (full.shape != expected)
    return fail("shapes " + formatShape(local.shape) + " and " +
                formatShape(full.shape) + " do not fit axis " +
                std::to_string(axis) + " over " + std::to_string(groupSize) +
                " ranks");
  if (kind != OpKind::AllSlice) {
    size_t &scratch = exe.commScratch[intAttr(AttrName::GridAxis)];
    scratch = std::max(scratch, comm->packingBytes(local, full, axis));
  }
  if (kind == OpKind::AllGather)
    step.kernel = [comm, x, o, axis]() mutable {
      return comm->allGather(x, o, axis);
    };
  else if (kind == OpKind::ReduceScatter)
    step.kernel = [comm, x, o, axis]() mutable {
      return comm->reduceScatterSum(x, o, axis);
    };
  else
    step.kernel = [comm, x, o, axis]() mutable {
      return comm->allSlice(x, o, axis);
    };
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

Status Binder::bind(Executable::Step &step) {
  step.op = inst.op();
  step.location = inst.location();
  std::optional<OpKind> kind = contract::opKindFromName(inst.op());
  if (!kind)
    return fail("unknown op (this runtime is older than the compiler?)");
  if (!widening) { // (the checks were made on the 16-bit values)
    if (Status s = checkContract(contract::info(*kind)); !s)
      return s;
    if (Status s = checkRanks(); !s)
      return s;
    if (widenedBytes(exe, inst) > 0)
      return bindWidened(step);
  }
  switch (*kind) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Pow:
  case OpKind::Compare:
  case OpKind::Where: return bindBinary(step, *kind);
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Rsqrt:
  case OpKind::Reciprocal:
  case OpKind::Tanh:
  case OpKind::Erf:
  case OpKind::Sigmoid:
  case OpKind::Relu:
  case OpKind::Silu:
  case OpKind::Gelu:
  case OpKind::Cos:
  case OpKind::Sin: return bindUnary(step, *kind);
  case OpKind::Dropout:
    if (intAttr(AttrName::SeedId) >= 0)
      return bindDropout(step);
    return bindCopyLike(step, *kind);
  case OpKind::Cast:
  case OpKind::Reshape: return bindCopyLike(step, *kind);
  case OpKind::Softmax: return bindSoftmax(step);
  case OpKind::Trilu: return bindTrilu(step);
  case OpKind::Matmul: return bindMatmul(step);
  case OpKind::Linear: return bindLinear(step);
  case OpKind::LayerNorm: return bindNorm(step, /*layer=*/true);
  case OpKind::RMSNorm: return bindNorm(step, /*layer=*/false);
  case OpKind::AddLayerNorm: return bindAddNorm(step, /*layer=*/true);
  case OpKind::AddRMSNorm: return bindAddNorm(step, /*layer=*/false);
  case OpKind::Rotary: return bindRotary(step);
  case OpKind::Attention: return bindAttention(step);
  case OpKind::Embedding: return bindEmbedding(step, /*gather=*/false);
  case OpKind::Gather: return bindEmbedding(step, /*gather=*/true);
  case OpKind::CrossEntropy: return bindCrossEntropy(step);
  case OpKind::Reduce: return bindReduce(step);
  case OpKind::Einsum: return bindEinsum(step);
  case OpKind::Transpose: return bindTranspose(step);
  case OpKind::Slice: return bindSlice(step);
  case OpKind::Concat: return bindConcat(step);
  case OpKind::Split: return bindSplit(step);
  case OpKind::Expand: return bindExpand(step);
  case OpKind::AllReduce:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::AllSlice: return bindCollective(step, *kind);
  case OpKind::AllReduceAddLayerNorm:
    return bindReducedNorm(step, /*layer=*/true, /*scattered=*/false);
  case OpKind::AllReduceAddRMSNorm:
    return bindReducedNorm(step, /*layer=*/false, /*scattered=*/false);
  case OpKind::ReduceScatterAddLayerNorm:
    return bindReducedNorm(step, /*layer=*/true, /*scattered=*/true);
  case OpKind::ReduceScatterAddRMSNorm:
    return bindReducedNorm(step, /*layer=*/false, /*scattered=*/true);
  case OpKind::LinearWeightGrad: return bindLinearWeightGrad(step);
  case OpKind::LayerNormGrad: return bindNormGrad(step, /*layer=*/true);
  case OpKind::RMSNormGrad: return bindNormGrad(step, /*layer=*/false);
  case OpKind::GeluGrad: return bindGeluGrad(step);
  case OpKind::AttentionGrad: return bindAttentionGrad(step);
  case OpKind::EmbeddingGrad: return bindEmbeddingGrad(step);
  case OpKind::CrossEntropyGrad: return bindCrossEntropyGrad(step);
  case OpKind::SliceGrad: return bindSliceGrad(step);
  case OpKind::VocabParallelCrossEntropy:
    return bindVocabParallelCrossEntropy(step);
  case OpKind::VocabParallelCrossEntropyGrad:
    return bindVocabParallelCrossEntropyGrad(step);
  }
  return fail("unknown op");
}

} // namespace mp::rt
