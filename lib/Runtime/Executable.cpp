//===- Executable.cpp - loading and running an artifact -------------------===//
//
// Loading validates everything a corrupt or hand-edited artifact could get
// wrong before any kernel runs: the program's version and structure, every
// buffer's size and place, parameter lengths and checksums, and the shapes
// each instruction's kernel relies on. Running is then a loop over bound
// kernels.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Executable.h"
#include "mp/Dialect/MP/IR/Einsum.h"
#include "mp/Program/program.pb.h"
#include "mp/Runtime/Kernels.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <sys/stat.h>

namespace mp::rt {

using Shape = std::vector<int64_t>;

static int64_t product(const Shape &s, size_t from = 0,
                       size_t to = std::string::npos) {
  const auto begin = s.begin() + std::min(from, s.size());
  const auto end = s.begin() + std::min(to, s.size());
  return std::accumulate(begin, std::max(begin, end), int64_t(1),
                         std::multiplies<int64_t>());
}

/// Binds one instruction: checks its operands and builds its kernel call.
struct StepIndexCheck;

class Binder {
public:
  Binder(Executable &exe, const program::Instruction &inst)
      : exe(exe), inst(inst) {}

  Status bind(Executable::Step &step);

private:
  Status fail(const std::string &msg) {
    return Status::error("instruction '" + inst.op() + "' at '" +
                         inst.location() + "': " + msg);
  }
  Status arity(int operands, int results, int optional = 0) {
    if (inst.operands_size() < operands ||
        inst.operands_size() > operands + optional ||
        inst.results_size() != results)
      return fail("expected " + std::to_string(operands) + " operand(s) and " +
                  std::to_string(results) + " result(s), found " +
                  std::to_string(inst.operands_size()) + " and " +
                  std::to_string(inst.results_size()));
    return Status::success();
  }
  const Tensor &in(int i) { return exe.buffers[inst.operands(i)]; }
  /// The range check (against [0, dim), or [-dim, dim) with
  /// `allowNegative`) of operand `i`'s indices that its step makes.
  StepIndexCheck indexCheck(int i, int64_t dim, bool allowNegative,
                            const std::string &where);
  const Tensor *optIn(int i) {
    return i < inst.operands_size() && inst.operands(i) >= 0 ? &in(i) : nullptr;
  }
  Tensor &out(int i = 0) { return exe.buffers[inst.results(i)]; }
  /// Every operand and result within the device's kernel rank limit.
  Status checkRanks() {
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

  const program::Attribute *attr(const std::string &name) {
    for (const auto &a : inst.attributes())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t intAttr(const std::string &name, int64_t def = 0) {
    const auto *a = attr(name);
    return a ? a->i() : def;
  }
  double floatAttr(const std::string &name, double def = 0) {
    const auto *a = attr(name);
    return a ? a->f() : def;
  }
  Shape intsAttr(const std::string &name) {
    const auto *a = attr(name);
    return a ? Shape(a->ints().values().begin(), a->ints().values().end())
             : Shape();
  }
  Status expectShape(const std::string &what, const Shape &found,
                     const Shape &expected) {
    if (found == expected)
      return Status::success();
    return fail("expected " + what + " shape " + formatShape(expected) +
                " but found " + formatShape(found));
  }
  Status axisAttr(const std::string &name, int64_t rank, int64_t &axis) {
    axis = intAttr(name);
    if (axis < 0 || axis >= std::max<int64_t>(rank, 1))
      return fail(name + " " + std::to_string(axis) +
                  " is out of range for rank " + std::to_string(rank));
    return Status::success();
  }

  Status bindBinary(Executable::Step &step);
  Status bindUnary(Executable::Step &step);
  Status bindMatmul(Executable::Step &step);
  Status bindLinear(Executable::Step &step);
  Status bindNorm(Executable::Step &step);
  Status bindAttention(Executable::Step &step);
  Status bindGather(Executable::Step &step);
  Status bindShapeOp(Executable::Step &step);
  Status bindCollective(Executable::Step &step);

  Executable &exe;
  const program::Instruction &inst;
};

static const std::map<std::string, cpu::BinaryKind> kBinary = {
    {"add", cpu::BinaryKind::Add}, {"sub", cpu::BinaryKind::Sub},
    {"mul", cpu::BinaryKind::Mul}, {"div", cpu::BinaryKind::Div},
    {"pow", cpu::BinaryKind::Pow}};

static const std::map<std::string, cpu::UnaryKind> kUnary = {
    {"neg", cpu::UnaryKind::Neg},   {"exp", cpu::UnaryKind::Exp},
    {"log", cpu::UnaryKind::Log},   {"sqrt", cpu::UnaryKind::Sqrt},
    {"rsqrt", cpu::UnaryKind::Rsqrt}, {"reciprocal", cpu::UnaryKind::Reciprocal},
    {"tanh", cpu::UnaryKind::Tanh}, {"erf", cpu::UnaryKind::Erf},
    {"sigmoid", cpu::UnaryKind::Sigmoid}, {"relu", cpu::UnaryKind::Relu},
    {"silu", cpu::UnaryKind::Silu}, {"gelu", cpu::UnaryKind::Gelu},
    {"cos", cpu::UnaryKind::Cos},   {"sin", cpu::UnaryKind::Sin}};

Status Binder::bindBinary(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  bool isWhere = inst.op() == "where";
  if (Status s = arity(isWhere ? 3 : 2, 1); !s)
    return s;
  Shape shape;
  if (!broadcastShapes(in(0).shape, in(1).shape, shape) ||
      (isWhere && !broadcastShapes(shape, in(2).shape, shape)))
    return fail("operands do not broadcast");
  if (Status s = expectShape("result", out().shape, shape); !s)
    return s;
  const Tensor a = in(0), b = in(1);
  Tensor o = out();
  if (isWhere) {
    const Tensor c = in(2);
    step.kernel = [kernels, a, b, c, o]() mutable { return kernels->where(a, b, c, o); };
  } else if (inst.op() == "compare") {
    auto kind = static_cast<cpu::CompareKind>(intAttr("predicate"));
    step.kernel = [kernels, kind, a, b, o]() mutable { return kernels->compare(kind, a, b, o); };
  } else {
    cpu::BinaryKind kind = kBinary.at(inst.op());
    step.kernel = [kernels, kind, a, b, o]() mutable { return kernels->binary(kind, a, b, o); };
  }
  return Status::success();
}

Status Binder::bindUnary(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = arity(1, 1); !s)
    return s;
  if (in(0).numel() != out().numel())
    return fail("result has " + std::to_string(out().numel()) +
                " elements but the input has " + std::to_string(in(0).numel()));
  const Tensor x = in(0);
  Tensor o = out();
  const std::string &op = inst.op();
  if (op == "cast") {
    step.kernel = [kernels, x, o]() mutable { return kernels->cast(x, o); };
  } else if (op == "reshape" || op == "dropout") {
    if (x.dtype != o.dtype)
      return fail("result element type differs from the input's");
    step.kernel = [kernels, x, o]() mutable { return kernels->copy(x, o); };
  } else if (op == "trilu") {
    bool upper = intAttr("upper") != 0;
    int64_t diagonal = intAttr("diagonal");
    if (x.shape.size() < 2)
      return fail("input must have rank >= 2");
    step.kernel = [kernels, x, o, upper, diagonal]() mutable {
      return kernels->trilu(x, upper, diagonal, o);
    };
  } else if (op == "softmax") {
    int64_t axis;
    if (Status s = axisAttr("axis", x.shape.size(), axis); !s)
      return s;
    step.kernel = [kernels, x, o, axis]() mutable { return kernels->softmax(x, axis, o); };
  } else {
    cpu::UnaryKind kind = kUnary.at(op);
    if (op == "gelu" && intAttr("approximate") == 1)
      kind = cpu::UnaryKind::GeluTanh;
    step.kernel = [kernels, kind, x, o]() mutable { return kernels->unary(kind, x, o); };
  }
  return Status::success();
}

Status Binder::bindMatmul(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = arity(2, 1); !s)
    return s;
  Shape a = in(0).shape, b = in(1).shape;
  if (a.empty() || b.empty())
    return fail("operands must have rank >= 1");
  bool vecA = a.size() == 1, vecB = b.size() == 1;
  if (vecA)
    a.insert(a.begin(), 1);
  if (vecB)
    b.push_back(1);
  Shape batch;
  if (a.back() != b[b.size() - 2] ||
      !broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2),
                 batch))
    return fail("operand shapes " + formatShape(in(0).shape) + " and " +
                formatShape(in(1).shape) + " do not multiply");
  Shape expected = batch;
  if (!vecA)
    expected.push_back(a[a.size() - 2]);
  if (!vecB)
    expected.push_back(b.back());
  if (Status s = expectShape("result", out().shape, expected); !s)
    return s;
  exe.flops += 2.0 * static_cast<double>(product(batch)) *
               static_cast<double>(a[a.size() - 2] * a.back() * b.back());
  const Tensor x = in(0), y = in(1);
  Tensor o = out();
  step.kernel = [kernels, x, y, o]() mutable { return kernels->matmul(x, y, o); };
  return Status::success();
}

Status Binder::bindLinear(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = arity(3, 1); !s)
    return s;
  const Tensor x = in(0), w = in(1);
  const Tensor *bias = optIn(2);
  bool transposed = intAttr("transpose_weight") != 0;
  if (x.shape.empty() || w.shape.size() != 2)
    return fail("expected input rank >= 1 and a rank-2 weight");
  int64_t features = transposed ? w.shape[1] : w.shape[0];
  int64_t n = transposed ? w.shape[0] : w.shape[1];
  if (x.shape.back() != features)
    return fail("input feature size " + std::to_string(x.shape.back()) +
                " does not match the weight's " + std::to_string(features));
  if (bias && bias->shape != Shape{n})
    return fail("bias shape " + formatShape(bias->shape) + " is not " +
                std::to_string(n));
  Shape expected(x.shape.begin(), x.shape.end() - 1);
  expected.push_back(n);
  if (Status s = expectShape("result", out().shape, expected); !s)
    return s;
  exe.flops += 2.0 * product(x.shape) * n;
  Tensor o = out();
  std::optional<Tensor> b = bias ? std::optional<Tensor>(*bias) : std::nullopt;
  step.kernel = [kernels, x, w, b, transposed, o]() mutable {
    return kernels->linear(x, w, b ? &*b : nullptr, transposed, o);
  };
  return Status::success();
}

Status Binder::bindNorm(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  bool layer = inst.op() == "layer_norm";
  if (Status s = arity(2, 1, layer ? 1 : 0); !s)
    return s;
  const Tensor x = in(0), scale = in(1);
  const Tensor *bias = optIn(2);
  if (x.shape.empty())
    return fail("input must have rank >= 1");
  int64_t axis = static_cast<int64_t>(x.shape.size()) - 1;
  if (layer)
    if (Status s = axisAttr("axis", x.shape.size(), axis); !s)
      return s;
  Shape normalized(x.shape.begin() + axis, x.shape.end());
  if (scale.shape != normalized || (bias && bias->shape != normalized))
    return fail("scale/bias shape must be " + formatShape(normalized));
  if (Status s = expectShape("result", out().shape, x.shape); !s)
    return s;
  float eps = static_cast<float>(floatAttr("epsilon", 1e-5));
  Tensor o = out();
  if (!layer) {
    step.kernel = [kernels, x, scale, eps, o]() mutable {
      return kernels->rmsNorm(x, scale, eps, o);
    };
    return Status::success();
  }
  std::optional<Tensor> b = bias ? std::optional<Tensor>(*bias) : std::nullopt;
  step.kernel = [kernels, x, scale, b, axis, eps, o]() mutable {
    return kernels->layerNorm(x, scale, b ? &*b : nullptr, axis, eps, o);
  };
  return Status::success();
}

Status Binder::bindAttention(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = arity(3, 1, 1); !s)
    return s;
  const Tensor q = in(0), k = in(1), v = in(2);
  const Tensor *mask = optIn(3);
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
    return fail("query, key and value must be [B, H, S, D]");
  if (q.shape[0] != k.shape[0] || k.shape[0] != v.shape[0] ||
      k.shape[1] != v.shape[1] || k.shape[2] != v.shape[2] ||
      q.shape[3] != k.shape[3] || k.shape[1] == 0 ||
      q.shape[1] % k.shape[1] != 0)
    return fail("query " + formatShape(q.shape) + ", key " +
                formatShape(k.shape) + " and value " + formatShape(v.shape) +
                " do not fit together");
  Shape scores = {q.shape[0], q.shape[1], q.shape[2], k.shape[2]}, bshape;
  if (mask && (!broadcastShapes(scores, mask->shape, bshape) || bshape != scores))
    return fail("mask shape " + formatShape(mask->shape) +
                " does not broadcast to " + formatShape(scores));
  if (Status s = expectShape("result", out().shape,
                             {q.shape[0], q.shape[1], q.shape[2], v.shape[3]});
      !s)
    return s;
  exe.flops += 2.0 * product(scores) * (q.shape[3] + v.shape[3]);
  float scale = static_cast<float>(floatAttr("scale", 1.0));
  bool causal = intAttr("causal") != 0;
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

/// Indices come from user input: out-of-range ones are an error, not a
/// stray read. Gather indices may count from the end ([-dim, dim)); class
/// targets may not (`allowNegative` false: [0, dim)).
static Status checkIndices(const KernelTable *k, const Tensor &device,
                           int64_t dim, const std::string &where,
                           bool allowNegative = true) {
  // Device indices are checked from a host copy (they are small: token ids).
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
    if (j < (allowNegative ? -dim : 0) || j >= dim)
      return Status::error(where + ": index " + std::to_string(j) +
                           " is out of range [" +
                           (allowNegative ? std::to_string(-dim) : "0") + ", " +
                           std::to_string(dim) + ")");
  }
  return Status::success();
}

/// A step's check of its indices: none when they are a program input, as
/// run() checks those on their host values before uploading them.
struct StepIndexCheck {
  const KernelTable *kernels = nullptr; // null: nothing to check here
  Tensor indices;
  int64_t dim = 0;
  bool allowNegative = true;
  std::string where;
  Status operator()() const {
    return kernels ? checkIndices(kernels, indices, dim, where, allowNegative)
                   : Status::success();
  }
};

StepIndexCheck Binder::indexCheck(int i, int64_t dim, bool allowNegative,
                                  const std::string &where) {
  const auto &ids = exe.inputBuffers;
  auto found = std::find(ids.begin(), ids.end(), inst.operands(i));
  if (found != ids.end()) {
    exe.inputIndexChecks.push_back({static_cast<size_t>(found - ids.begin()),
                                    dim, allowNegative, where});
    return {};
  }
  return {exe.kernels, in(i), dim, allowNegative, where};
}

Status Binder::bindGather(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (inst.op() == "cross_entropy") {
    if (Status s = arity(2, 1); !s)
      return s;
    const Tensor logits = in(0), targets = in(1);
    if (logits.shape.empty() ||
        targets.shape != Shape(logits.shape.begin(), logits.shape.end() - 1) ||
        out().numel() != 1)
      return fail("expected logits [..., V], targets [...] and a scalar");
    if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
      return fail("targets must be i64 or i32");
    Tensor o = out();
    if (kernels->crossEntropyScratch)
      exe.kernelScratch =
          std::max(exe.kernelScratch, kernels->crossEntropyScratch(o));
    std::string where = "instruction 'cross_entropy' at '" + inst.location() + "'";
    int64_t vocab = logits.shape.back();
    step.kernel = [kernels, logits, targets, o,
                   check = indexCheck(1, vocab, /*allowNegative=*/false,
                                      where)]() mutable {
      if (Status s = check(); !s)
        return s;
      return kernels->crossEntropy(logits, targets, o);
    };
    return Status::success();
  }
  if (Status s = arity(2, 1); !s)
    return s;
  const Tensor x = in(0), idx = in(1);
  int64_t axis = 0;
  if (inst.op() == "gather")
    if (Status s = axisAttr("axis", x.shape.size(), axis); !s)
      return s;
  if (x.shape.empty() || (idx.dtype != DType::I64 && idx.dtype != DType::I32))
    return fail("expected a ranked input and i64/i32 indices");
  Shape expected(x.shape.begin(), x.shape.begin() + axis);
  expected.insert(expected.end(), idx.shape.begin(), idx.shape.end());
  expected.insert(expected.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (Status s = expectShape("result", out().shape, expected); !s)
    return s;
  Tensor o = out();
  int64_t dim = x.shape[axis];
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  if (intAttr("vocab_parallel")) {
    Communicator *group = exe.axisComms[0].get();
    int64_t offset = dim * group->rank(), vocab = dim * group->size();
    step.kernel = [kernels, x, idx, o, offset, vocab,
                   check = indexCheck(1, vocab, true, where)]() mutable {
      if (Status s = check(); !s)
        return s;
      return kernels->vocabEmbedding(x, idx, offset, vocab, o);
    };
    return Status::success();
  }
  step.kernel = [kernels, x, idx, o, axis,
                 check = indexCheck(1, dim, true, where)]() mutable {
    if (Status s = check(); !s)
      return s;
    return kernels->gather(x, idx, axis, o);
  };
  return Status::success();
}

Status Binder::bindCollective(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = arity(1, 1); !s)
    return s;
  const Tensor x = in(0);
  Tensor o = out();
  int64_t gridAxis = intAttr("grid_axis");
  if (gridAxis < 0 || gridAxis >= static_cast<int64_t>(exe.axisComms.size()))
    return fail("grid axis " + std::to_string(gridAxis) +
                " is not an axis of the artifact's grid");
  Communicator *comm = exe.axisComms[gridAxis].get();
  int64_t groupSize = comm->size();
  const std::string &op = inst.op();
  if (groupSize == 1) { // every collective of one rank is a copy
    if (x.numel() != o.numel())
      return fail("input and result sizes differ");
    step.kernel = [kernels, x, o]() mutable { return kernels->copy(x, o); };
    return Status::success();
  }
  if ((kernels != &cpuKernelTable()) != comm->deviceMemory())
    return fail(std::string("the ") + comm->backend() +
                " communicator cannot work on " + kernels->name + " memory");
  if (op == "all_reduce") {
    if (x.shape != o.shape)
      return fail("input and result shapes differ");
    step.kernel = [kernels, comm, x, o]() mutable { return comm->allReduceSum(x, o); };
    return Status::success();
  }
  int64_t axis = intAttr("axis");
  const Tensor &local = op == "all_gather" ? x : o;
  const Tensor &full = op == "all_gather" ? o : x;
  Shape expected = local.shape;
  if (axis < 0 || axis >= static_cast<int64_t>(expected.size()))
    return fail("axis " + std::to_string(axis) + " is out of range");
  expected[axis] *= groupSize;
  if (full.shape != expected)
    return fail("shapes " + formatShape(local.shape) + " and " +
                formatShape(full.shape) + " do not fit axis " +
                std::to_string(axis) + " over " + std::to_string(groupSize) +
                " ranks");
  if (op != "all_slice")
    exe.commScratch[gridAxis] = std::max(
        exe.commScratch[gridAxis], Communicator::packingBytes(local, full, axis));
  if (op == "all_gather")
    step.kernel = [kernels, comm, x, o, axis]() mutable {
      return comm->allGather(x, o, axis);
    };
  else if (op == "reduce_scatter")
    step.kernel = [kernels, comm, x, o, axis]() mutable {
      return comm->reduceScatterSum(x, o, axis);
    };
  else
    step.kernel = [kernels, comm, x, o, axis]() mutable {
      return comm->allSlice(x, o, axis);
    };
  return Status::success();
}

Status Binder::bindShapeOp(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const std::string &op = inst.op();
  if (op == "transpose") {
    if (Status s = arity(1, 1); !s)
      return s;
    const Tensor x = in(0);
    Shape perm = intsAttr("permutation"), expected;
    std::vector<bool> seen(x.shape.size(), false);
    if (perm.size() != x.shape.size())
      return fail("permutation does not match the input rank");
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(x.shape.size()) || seen[p])
        return fail("invalid permutation");
      seen[p] = true;
      expected.push_back(x.shape[p]);
    }
    if (Status s = expectShape("result", out().shape, expected); !s)
      return s;
    Tensor o = out();
    step.kernel = [kernels, x, perm, o]() mutable { return kernels->transpose(x, perm, o); };
    return Status::success();
  }
  if (op == "slice") {
    if (Status s = arity(1, 1); !s)
      return s;
    const Tensor x = in(0);
    Shape starts = intsAttr("starts"), strides = intsAttr("strides");
    size_t rank = x.shape.size();
    if (starts.size() != rank || strides.size() != rank ||
        out().shape.size() != rank)
      return fail("starts and strides must have one entry per dimension");
    for (size_t d = 0; d < rank; ++d) {
      int64_t n = out().shape[d];
      int64_t last = starts[d] + (n - 1) * strides[d];
      if (n > 0 && (starts[d] < 0 || starts[d] >= x.shape[d] || last < 0 ||
                    last >= x.shape[d]))
        return fail("slice of dimension " + std::to_string(d) +
                    " reads outside the input");
    }
    Tensor o = out();
    step.kernel = [kernels, x, starts, strides, o]() mutable {
      return kernels->slice(x, starts, strides, o);
    };
    return Status::success();
  }
  if (op == "expand") {
    if (Status s = arity(1, 1); !s)
      return s;
    Shape shape;
    if (!broadcastShapes(in(0).shape, out().shape, shape) || shape != out().shape)
      return fail("cannot broadcast " + formatShape(in(0).shape) + " to " +
                  formatShape(out().shape));
    const Tensor x = in(0);
    Tensor o = out();
    step.kernel = [kernels, x, o]() mutable { return kernels->expand(x, o); };
    return Status::success();
  }
  if (op == "concat") {
    if (inst.operands_size() < 1 || inst.results_size() != 1)
      return fail("expected at least one operand and one result");
    int64_t axis;
    if (Status s = axisAttr("axis", out().shape.size(), axis); !s)
      return s;
    Shape expected = out().shape;
    expected[axis] = 0;
    std::vector<Tensor> inputs;
    for (int i = 0; i < inst.operands_size(); ++i) {
      Shape s = in(i).shape;
      if (s.size() != out().shape.size())
        return fail("inputs must have the result's rank");
      expected[axis] += s[axis];
      s[axis] = out().shape[axis];
      if (s != out().shape)
        return fail("input shape " + formatShape(in(i).shape) +
                    " does not fit the result outside axis " + std::to_string(axis));
      inputs.push_back(in(i));
    }
    if (Status s = expectShape("result", out().shape, expected); !s)
      return s;
    Tensor o = out();
    step.kernel = [kernels, inputs, axis, o]() mutable {
      std::vector<const Tensor *> ptrs;
      for (const Tensor &t : inputs)
        ptrs.push_back(&t);
      return kernels->concat(ptrs, axis, o);
    };
    return Status::success();
  }
  if (op == "split") {
    if (inst.operands_size() != 1 || inst.results_size() < 1)
      return fail("expected one operand and at least one result");
    const Tensor x = in(0);
    int64_t axis;
    if (Status s = axisAttr("axis", x.shape.size(), axis); !s)
      return s;
    int64_t total = 0;
    std::vector<Tensor> outs;
    for (int i = 0; i < inst.results_size(); ++i) {
      Shape s = out(i).shape;
      if (s.size() != x.shape.size())
        return fail("results must have the input's rank");
      total += s[axis];
      s[axis] = x.shape[axis];
      if (s != x.shape)
        return fail("result shape does not fit the input");
      outs.push_back(out(i));
    }
    if (total != x.shape[axis])
      return fail("split sizes do not add up to the input dimension");
    step.kernel = [kernels, x, outs, axis]() mutable {
      std::vector<Tensor *> ptrs;
      for (Tensor &t : outs)
        ptrs.push_back(&t);
      return kernels->split(x, axis, ptrs);
    };
    return Status::success();
  }
  if (op == "reduce") {
    if (Status s = arity(1, 1); !s)
      return s;
    const Tensor x = in(0);
    Shape axes = intsAttr("axes");
    int64_t kept = x.numel();
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(x.shape.size()) ||
          (i && axes[i] <= axes[i - 1]))
        return fail("axes must be sorted, unique and in range");
      kept = x.shape[axes[i]] ? kept / x.shape[axes[i]] : 0;
    }
    if (out().numel() != kept)
      return fail("result has " + std::to_string(out().numel()) +
                  " elements; expected " + std::to_string(kept));
    auto kind = static_cast<cpu::ReduceKind>(intAttr("kind"));
    Tensor o = out();
    step.kernel = [kernels, kind, x, axes, o]() mutable {
      return kernels->reduce(kind, x, axes, o);
    };
    return Status::success();
  }
  // einsum
  if (inst.operands_size() < 1 || inst.results_size() != 1)
    return fail("expected operands and one result");
  std::vector<Tensor> inputs;
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (int i = 0; i < inst.operands_size(); ++i) {
    inputs.push_back(in(i));
    ranks.push_back(in(i).shape.size());
    shapes.push_back(in(i).shape);
  }
  const auto *eq = attr("equation");
  EinsumSpec spec;
  std::string error;
  Shape expected;
  if (!eq || !parseEinsum(eq->s(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, expected, error))
    return fail(eq ? error : "missing equation");
  if (Status s = expectShape("result", out().shape, expected); !s)
    return s;
  std::string equation = eq->s();
  Tensor o = out();
  step.kernel = [kernels, inputs, equation, o]() mutable {
    std::vector<const Tensor *> ptrs;
    for (const Tensor &t : inputs)
      ptrs.push_back(&t);
    return kernels->einsum(equation, ptrs, o);
  };
  return Status::success();
}

Status Binder::bind(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  step.op = inst.op();
  step.location = inst.location();
  for (int id : inst.operands())
    if (id < -1 || id >= static_cast<int>(exe.buffers.size()))
      return fail("operand buffer " + std::to_string(id) + " does not exist");
  for (int id : inst.results())
    if (id < 0 || id >= static_cast<int>(exe.buffers.size()) ||
        exe.buffers[id].data < exe.arena ||
        exe.buffers[id].data >= exe.arena + std::max<int64_t>(exe.arenaSize, 1))
      return fail("result buffer " + std::to_string(id) +
                  " is not an arena buffer");
  for (int i = 0; i < inst.operands_size(); ++i)
    if (inst.operands(i) < 0 &&
        !((inst.op() == "linear" && i == 2) ||
          (inst.op() == "layer_norm" && i == 2) ||
          (inst.op() == "attention" && i == 3)))
      return fail("operand " + std::to_string(i) + " is missing");
  if (Status s = checkRanks(); !s)
    return s;
  const std::string &op = inst.op();
  if (kBinary.count(op) || op == "compare" || op == "where")
    return bindBinary(step);
  if (kUnary.count(op) || op == "cast" || op == "reshape" ||
      op == "dropout" || op == "trilu" || op == "softmax")
    return bindUnary(step);
  if (op == "matmul")
    return bindMatmul(step);
  if (op == "linear")
    return bindLinear(step);
  if (op == "layer_norm" || op == "rms_norm")
    return bindNorm(step);
  if (op == "attention")
    return bindAttention(step);
  if (op == "gather" || op == "embedding" || op == "cross_entropy")
    return bindGather(step);
  if (op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" ||
      op == "all_slice")
    return bindCollective(step);
  if (op == "transpose" || op == "slice" || op == "expand" ||
      op == "concat" || op == "split" || op == "reduce" || op == "einsum")
    return bindShapeOp(step);
  return fail("unknown op (this runtime is older than the compiler?)");
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

static Status readProgram(const std::string &dir, program::Program &prog) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error("artifact directory '" + dir + "' does not exist");
  std::string path = dir + "/program.pb";
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("'" + path + "' is missing: '" + dir +
                         "' is not an mp artifact");
  if (!prog.ParseFromIstream(&in))
    return Status::error("'" + path + "' is corrupt or truncated");
  if (prog.version() != kProgramVersion)
    return Status::error("'" + path + "' has program version " +
                         std::to_string(prog.version()) +
                         "; this mp-run reads version " +
                         std::to_string(kProgramVersion));
  return Status::success();
}

/// Deterministic pseudo-random parameters (a hash of the parameter's index
/// and the element's), uniform in [-0.05, 0.05]: enough to benchmark.
static Status syntheticParameters(const program::Program &prog,
                                  std::vector<std::string> &storage,
                                  std::vector<Tensor> &params,
                                  int64_t &bytes) {
  bytes = 0;
  for (int i = 0; i < prog.parameters_size(); ++i) {
    const auto &p = prog.parameters(i);
    Tensor t;
    t.shape.assign(p.shape().begin(), p.shape().end());
    if (!parseDType(p.dtype(), t.dtype))
      return Status::error("parameter '" + p.name() + "' has unknown dtype");
    storage.emplace_back(t.bytes(), '\0');
    t.data = storage.back().data();
    bool isFloat = t.dtype == DType::F32 || t.dtype == DType::F16 ||
                   t.dtype == DType::BF16;
    if (isFloat) {
      std::vector<float> values(t.numel());
      for (int64_t j = 0; j < t.numel(); ++j) {
        uint64_t h = (static_cast<uint64_t>(i) << 40) ^ static_cast<uint64_t>(j);
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        values[j] = (static_cast<float>(h & 0xffffff) / 0xffffff - 0.5f) * 0.1f;
      }
      Tensor source{values.data(), DType::F32, t.shape};
      if (Status s = cpu::cast(source, t); !s)
        return s;
    }
    bytes += static_cast<int64_t>(t.bytes());
    params.push_back(t);
  }
  return Status::success();
}

static Status loadParameters(const std::string &dir, int rank,
                             const program::Program &prog,
                             std::unique_ptr<SafetensorsFile> &file,
                             std::vector<Tensor> &params, int64_t &bytes) {
  if (prog.parameters_size() == 0)
    return Status::success();
  std::string name = prog.parameter_file();
  size_t placeholder = name.find("{rank}");
  if (placeholder != std::string::npos)
    name.replace(placeholder, 6, std::to_string(rank));
  std::string path = dir + "/" + name;
  if (Status s = SafetensorsFile::open(path, file); !s)
    return s;
  bytes = 0;
  for (const auto &p : prog.parameters()) {
    auto it = file->entries().find(p.name());
    if (it == file->entries().end())
      return Status::error("parameter '" + p.name() + "' is missing from '" +
                           path + "'");
    DType dtype;
    Shape shape(p.shape().begin(), p.shape().end());
    if (!parseDType(p.dtype(), dtype) || it->second.dtype != dtype ||
        it->second.shape != shape)
      return Status::error("parameter '" + p.name() + "' in '" + path +
                           "' is not " + p.dtype() + " " + formatShape(shape));
    const uint8_t *data = file->data(it->second);
    uint64_t length = it->second.end - it->second.begin;
    uint32_t crc = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
    for (uint64_t off = 0; off < length; off += 1u << 30)
      crc = static_cast<uint32_t>(
          crc32(crc, data + off, static_cast<uInt>(std::min<uint64_t>(length - off, 1u << 30))));
    uint32_t expected = p.rank_crc32_size() > rank ? p.rank_crc32(rank)
                                                   : p.crc32();
    if (crc != expected)
      return Status::error("parameter '" + p.name() + "' in '" + path +
                           "' fails its checksum (corrupt file)");
    params.push_back(Tensor{const_cast<uint8_t *>(data), dtype, shape});
    bytes += static_cast<int64_t>(length);
  }
  return Status::success();
}

/// Copies host tensors into one device allocation and points them there.
static Status uploadAll(const KernelTable *k, std::vector<Tensor *> tensors,
                        void *&storage) {
  size_t total = 0;
  for (Tensor *t : tensors)
    total += (t->bytes() + 255) / 256 * 256;
  if (Status s = k->allocate(total, &storage); !s)
    return s;
  size_t offset = 0;
  for (Tensor *t : tensors) {
    void *dst = static_cast<uint8_t *>(storage) + offset;
    if (Status s = k->toDevice(dst, t->data, t->bytes()); !s)
      return s;
    t->data = dst;
    offset += (t->bytes() + 255) / 256 * 256;
  }
  return Status::success();
}

/// What load checks before its first collective: the program, the device,
/// and that this run has as many ranks as the artifact's grid.
static Status openProgram(const std::string &dir, Device device, int ranksHere,
                          program::Program &prog, const KernelTable *&kernels,
                          int64_t &ranks) {
  if (Status s = readProgram(dir, prog); !s)
    return s;
  kernels = &cpuKernelTable();
  if (device == Device::CUDA) {
    kernels = cudaKernelTable();
    std::string reason;
    if (!kernels)
      return Status::error("--device cuda: this mp-run was built without "
                           "CUDA (configure with the CUDA toolkit installed)");
    if (!kernels->available(reason))
      return Status::error("--device cuda: " + reason);
  }
  ranks = 1;
  for (int64_t d : prog.grid_shape())
    ranks *= d;
  if (ranks != ranksHere)
    return Status::error(
        "artifact '" + dir + "' was compiled for " + std::to_string(ranks) +
        " rank(s) but this run has " + std::to_string(ranksHere) +
        (ranks > 1 ? "; launch it with mpirun -np " + std::to_string(ranks) +
                         " mp-run ..."
                   : "") +
        (ranks > 1 && !haveMPI() ? " (this mp-run was built without MPI)"
                                 : ""));
  return Status::success();
}

Status Executable::load(const std::string &dir,
                        std::unique_ptr<Executable> &out, Communicator *comm,
                        Device device) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  if (!comm) {
    exe->ownedComm = makeSingleProcessCommunicator();
    comm = exe->ownedComm.get();
  }
  exe->comm = comm;
  program::Program prog;
  Status opened =
      openProgram(dir, device, comm->size(), prog, exe->kernels, exe->ranks);
  // Splitting the grid is collective: a rank that cannot get there stops
  // every rank here, rather than leaving the others waiting in the split.
  if (anyRankFailed(*comm, !opened)) {
    return opened ? Status::error("another rank could not open artifact '" +
                                  dir + "' (its error says why)")
                  : opened;
  }
  // One communicator per grid axis (collectives name the axis they span).
  std::vector<int64_t> gridShape(prog.grid_shape().begin(),
                                 prog.grid_shape().end());
  if (gridShape.empty())
    gridShape.push_back(1);
  for (size_t axis = 0; axis < gridShape.size(); ++axis) {
    exe->axisComms.emplace_back();
    if (Status s = comm->split(gridShape, static_cast<int64_t>(axis),
                               exe->axisComms.back());
        !s)
      return s;
  }
  std::vector<Tensor> params;
  exe->syntheticStorage.reserve(prog.parameters_size());
  if (Status s = prog.synthetic_weights()
                     ? syntheticParameters(prog, exe->syntheticStorage, params,
                                           exe->paramBytes)
                     : loadParameters(dir, comm->rank(), prog, exe->params,
                                      params, exe->paramBytes);
      !s)
    return s;
  exe->synthetic = prog.synthetic_weights();

  exe->arenaSize = prog.arena_bytes();
  if (exe->arenaSize < 0)
    return Status::error("program has a negative arena size");
  void *arena = nullptr;
  if (Status s = exe->kernels->allocate(exe->arenaSize, &arena); !s)
    return Status::error("cannot allocate the " +
                         std::to_string(exe->arenaSize) + "-byte arena: " +
                         s.message);
  exe->arena = static_cast<uint8_t *>(arena);
  bool onHost = exe->kernels == &cpuKernelTable();
  if (!onHost) {
    std::vector<Tensor *> ptrs;
    for (Tensor &p : params)
      ptrs.push_back(&p);
    if (Status s = uploadAll(exe->kernels, ptrs, exe->deviceParams); !s)
      return s;
  }

  exe->constants.reserve(prog.buffers_size());
  for (int i = 0; i < prog.buffers_size(); ++i) {
    const auto &b = prog.buffers(i);
    Tensor t;
    std::string where = "buffer " + std::to_string(i);
    if (!parseDType(b.dtype(), t.dtype))
      return Status::error(where + " has unknown dtype '" + b.dtype() + "'");
    t.shape.assign(b.shape().begin(), b.shape().end());
    for (int64_t d : t.shape)
      if (d < 0)
        return Status::error(where + " has a negative dimension");
    switch (b.kind()) {
    case program::Buffer::ARENA:
      if (b.offset() < 0 ||
          b.offset() + static_cast<int64_t>(t.bytes()) > exe->arenaSize)
        return Status::error(where + " lies outside the arena");
      t.data = exe->arena + b.offset();
      break;
    case program::Buffer::PARAMETER:
      if (b.parameter() < 0 || b.parameter() >= static_cast<int>(params.size()) ||
          params[b.parameter()].shape != t.shape ||
          params[b.parameter()].dtype != t.dtype)
        return Status::error(where + " does not match parameter " +
                             std::to_string(b.parameter()));
      t.data = params[b.parameter()].data;
      break;
    case program::Buffer::CONSTANT:
      if (b.data().size() != t.bytes())
        return Status::error(where + " holds " + std::to_string(b.data().size()) +
                             " bytes for " + formatShape(t.shape));
      exe->constants.push_back(b.data());
      t.data = exe->constants.back().data();
      break;
    default:
      return Status::error(where + " has an unknown kind");
    }
    exe->buffers.push_back(std::move(t));
  }

  if (!onHost) {
    std::vector<Tensor *> constants;
    for (int i = 0; i < prog.buffers_size(); ++i)
      if (prog.buffers(i).kind() == program::Buffer::CONSTANT)
        constants.push_back(&exe->buffers[i]);
    if (Status s = uploadAll(exe->kernels, constants, exe->deviceConstants); !s)
      return s;
  }

  auto bindIO = [&](const auto &bindings, std::vector<IOSpec> &specs,
                    std::vector<int> &ids) -> Status {
    for (const auto &b : bindings) {
      if (b.buffer() < 0 || b.buffer() >= static_cast<int>(exe->buffers.size()))
        return Status::error("input/output '" + b.name() +
                             "' names no buffer");
      const Tensor &t = exe->buffers[b.buffer()];
      specs.push_back({b.name(), t.dtype, t.shape});
      ids.push_back(b.buffer());
    }
    return Status::success();
  };
  if (Status s = bindIO(prog.inputs(), exe->inputSpecs, exe->inputBuffers); !s)
    return s;
  if (Status s = bindIO(prog.outputs(), exe->outputSpecs, exe->outputBuffers); !s)
    return s;
  for (int id : exe->inputBuffers)
    if (prog.buffers(id).kind() != program::Buffer::ARENA)
      return Status::error("an input is bound to a non-arena buffer");

  exe->commScratch.assign(exe->axisComms.size(), 0);
  for (const auto &inst : prog.instructions()) {
    Step step;
    if (Status s = Binder(*exe, inst).bind(step); !s)
      return s;
    exe->steps.push_back(std::move(step));
  }
  if (Status s = exe->allocateScratch(); !s)
    return s;
  out = std::move(exe);
  return Status::success();
}

/// Scratch is one block allocated here, once, for the largest need of any
/// step (known only once every step is bound), so that out-of-memory shows
/// at load and no step allocates while running. The kernels' part is lent
/// while this executable runs (their scratch is per process); each axis
/// communicator, owned by this executable, gets its part now.
Status Executable::allocateScratch() {
  if (kernels->prepare)
    if (Status s = kernels->prepare(); !s)
      return Status::error("cannot prepare the " + std::string(kernels->name) +
                           " kernels: " + s.message);
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  scratchSize = aligned(kernelScratch);
  for (size_t bytes : commScratch)
    scratchSize += aligned(bytes);
  if (scratchSize == 0)
    return Status::success();
  if (Status s = kernels->allocate(scratchSize, &scratch); !s) {
    scratch = nullptr;
    return Status::error("cannot allocate " + std::to_string(scratchSize) +
                         " bytes of scratch (" + std::to_string(kernelScratch) +
                         " for kernels, the rest for collectives): " +
                         s.message);
  }
  size_t offset = aligned(kernelScratch);
  for (size_t axis = 0; axis < axisComms.size(); ++axis) {
    axisComms[axis]->lendScratch(static_cast<uint8_t *>(scratch) + offset,
                                 commScratch[axis]);
    offset += aligned(commScratch[axis]);
  }
  return Status::success();
}

Executable::~Executable() {
  if (!kernels)
    return;
  kernels->release(arena);
  if (scratch)
    kernels->release(scratch);
  if (deviceParams)
    kernels->release(deviceParams);
  if (deviceConstants)
    kernels->release(deviceConstants);
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
      return Status::error("input '" + spec.name + "' expects " +
                           dtypeName(spec.dtype) + " " +
                           formatShape(spec.shape) + " but got " +
                           dtypeName(inputs[i].dtype) + " " +
                           formatShape(inputs[i].shape));
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
      bool halfOnCpu = kernels == &cpuKernelTable() &&
                       (s.message.find("element type bf16") != std::string::npos ||
                        s.message.find("element type f16") != std::string::npos);
      return Status::error(
          (s.message.find("instruction") == 0
               ? s.message
               : "instruction '" + step.op + "' at '" + step.location +
                     "': " + s.message) +
          (halfOnCpu ? " (fp16/bf16 programs run with --device cuda)" : ""));
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
      if (Status s = kernels->toHost(outputStaging[i].data(), t.data, t.bytes());
          !s)
        return s;
      t.data = outputStaging[i].data();
    }
    outputs.push_back(t);
  }
  return Status::success();
}

} // namespace mp::rt
