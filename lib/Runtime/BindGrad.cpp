//===- BindGrad.cpp - binding the gradient ops to kernels -----------------===//
//
// The Binder's part for the backward of a train step: each gradient op's
// operands are checked against its shape rule (mp/Support/Shape.h, the
// verifier's), its results against the forward operands' shapes, and its
// kernel is looked up in the device's table (a device without one is an
// error at load naming the op).
//
//===----------------------------------------------------------------------===//
#include "Binder.h"
#include "mp/Support/Flops.h"

#include <cmath>
#include <memory>

namespace mp::rt {

Status Binder::noKernel() const {
  return fail(std::string("the ") + exe.kernels->name +
              " backend has no kernel for this op yet (train on the cpu)");
}

/// A device's cross-entropy gradients count their targets in the
/// scratch crossEntropy uses.
void Binder::reserveCountScratch(const Tensor &out) {
  if (exe.kernels->crossEntropyScratch)
    exe.kernelScratch =
        std::max(exe.kernelScratch, exe.kernels->crossEntropyScratch(out));
}

Status Binder::positiveFloat(AttrName name, float &value) const {
  value = static_cast<float>(floatAttr(name));
  if (!(value > 0) || !std::isfinite(value))
    return fail(std::string(contract::attrName(name)) + " " +
                std::to_string(floatAttr(name)) + " is not a positive number");
  return Status::success();
}

Status Binder::bindLinearWeightGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->linearWeightGrad); !s)
    return s;
  const Tensor x = in(0), dy = in(1);
  bool transposed = intAttr(AttrName::TransposeWeight) != 0;
  Shape expected;
  std::string error;
  if (Status s =
          expectResult(shape::linearWeightGrad(x.shape, dy.shape, transposed,
                                               expected, error),
                       error, expected);
      !s)
    return s;
  exe.flops += flops::linearWeightGrad(x.shape, dy.shape.back());
  Tensor o = out();
  if (kernels->planLinearWeightGrad)
    step.kernel = kernels->planLinearWeightGrad(x, dy, transposed, o).run;
  if (!step.kernel)
    step.kernel = [kernels, x, dy, transposed, o]() mutable {
      return kernels->linearWeightGrad(x, dy, transposed, o);
    };
  return Status::success();
}

Status Binder::bindNormGrad(Executable::Step &step, bool layer) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = layer ? needKernel(kernels->layerNormGrad)
                       : needKernel(kernels->rmsNormGrad);
      !s)
    return s;
  const Tensor x = in(0), scale = in(1), dy = in(2);
  float eps;
  if (Status s = positiveFloat(AttrName::Epsilon, eps); !s)
    return s;
  int64_t axis = static_cast<int64_t>(x.shape.size()) - 1;
  if (layer)
    if (Status s = axisAttr(AttrName::Axis, x.shape.size(), axis); !s)
      return s;
  std::string error;
  bool rule =
      layer ? shape::layerNormGrad(x.shape, axis, scale.shape, dy.shape, error)
            : shape::rmsNormGrad(x.shape, scale.shape, dy.shape, error);
  if (!rule)
    return fail(error);
  if (Status s = expectShape("input gradient", out(0).shape, x.shape); !s)
    return s;
  if (Status s = expectShape("scale gradient", out(1).shape, scale.shape); !s)
    return s;
  Tensor dx = out(0), dscale = out(1);
  if (kernels->normGradScratch)
    exe.kernelScratch =
        std::max(exe.kernelScratch, kernels->normGradScratch(x, axis));
  if (layer)
    step.kernel = [kernels, x, scale, dy, axis, eps, dx, dscale]() mutable {
      return kernels->layerNormGrad(x, scale, dy, axis, eps, dx, dscale);
    };
  else
    step.kernel = [kernels, x, scale, dy, eps, dx, dscale]() mutable {
      return kernels->rmsNormGrad(x, scale, dy, eps, dx, dscale);
    };
  return Status::success();
}

Status Binder::bindGeluGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->geluGrad); !s)
    return s;
  const Tensor x = in(0), dy = in(1);
  if (Status s = expectShape("result gradient", dy.shape, x.shape); !s)
    return s;
  if (Status s = expectShape("result", out().shape, x.shape); !s)
    return s;
  std::optional<contract::GeluApproximation> form =
      contract::enumFromInt<contract::GeluApproximation>(
          intAttr(AttrName::Approximate));
  if (!form)
    return fail("approximate " +
                std::to_string(intAttr(AttrName::Approximate)) +
                " is not a known value");
  bool tanhForm = *form == contract::GeluApproximation::Tanh;
  Tensor o = out();
  step.kernel = [kernels, x, dy, tanhForm, o]() mutable {
    return kernels->geluGrad(x, dy, tanhForm, o);
  };
  return Status::success();
}

Status Binder::bindAttentionGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->attentionGrad); !s)
    return s;
  using namespace contract::attention_grad;
  const Tensor q = in(Query), k = in(Key), v = in(Value), o = in(Result),
               dout = in(ResultGrad);
  const Tensor *mask = optIn(Mask);
  std::string error;
  if (!shape::attentionGrad(q.shape, k.shape, v.shape, o.shape, dout.shape,
                            mask ? &mask->shape : nullptr, error))
    return fail(error);
  const char *names[] = {"query gradient", "key gradient", "value gradient"};
  const Tensor *forward[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i)
    if (Status s = expectShape(names[i], out(i).shape, forward[i]->shape); !s)
      return s;
  float scale;
  if (Status s = positiveFloat(AttrName::Scale, scale); !s)
    return s;
  bool causal = intAttr(AttrName::Causal) != 0;
  exe.flops += flops::attentionGrad(q.shape, k.shape, v.shape);
  if (kernels->attentionGradScratch)
    exe.kernelScratch =
        std::max(exe.kernelScratch, kernels->attentionGradScratch(q, k, v));
  std::optional<Tensor> m = mask ? std::optional<Tensor>(*mask) : std::nullopt;
  Tensor dq = out(0), dk = out(1), dv = out(2);
  step.kernel = [kernels, q, k, v, m, o, dout, scale, causal, dq, dk,
                 dv]() mutable {
    return kernels->attentionGrad(q, k, v, m ? &*m : nullptr, o, dout, scale,
                                  causal, dq, dk, dv);
  };
  return Status::success();
}

Status Binder::bindEmbeddingGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->embeddingGrad); !s)
    return s;
  const Tensor ids = in(0), dy = in(1);
  if (ids.dtype != DType::I64 && ids.dtype != DType::I32)
    return fail("indices must be i64 or i32");
  Tensor o = out();
  std::string error;
  if (!shape::embeddingGrad(o.shape, ids.shape, dy.shape, error))
    return fail(error);
  int64_t rows = o.shape[0], offset = 0, vocab = rows;
  if (intAttr(AttrName::VocabParallel)) {
    Communicator *group = exe.axisComms[0].get();
    offset = rows * group->rank();
    vocab = rows * group->size();
    if (Status s = paddedVocabulary(vocab); !s)
      return s;
  } else if (intAttr(AttrName::Vocab)) {
    return fail("a vocab needs a vocab-parallel table");
  }
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  step.kernel = [kernels, ids, dy, o, offset, vocab,
                 check = indexCheck(0, vocab, true, where)]() mutable {
    if (Status s = check(); !s)
      return s;
    return kernels->embeddingGrad(ids, dy, offset, vocab, o);
  };
  return Status::success();
}

Status Binder::bindCrossEntropyGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->crossEntropyGrad); !s)
    return s;
  const Tensor logits = in(0), targets = in(1), dloss = in(2);
  std::string error;
  if (!shape::crossEntropyGrad(logits.shape, targets.shape, dloss.shape, error))
    return fail(error);
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return fail("targets must be i64 or i32");
  if (Status s = expectShape("result", out().shape, logits.shape); !s)
    return s;
  Tensor o = out();
  reserveCountScratch(o);
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  step.kernel = [kernels, logits, targets, dloss, o,
                 check = indexCheck(1, logits.shape.back(),
                                    /*allowNegative=*/false, where)]() mutable {
    if (Status s = check(); !s)
      return s;
    return kernels->crossEntropyGrad(logits, targets, dloss, o);
  };
  return Status::success();
}

Status Binder::bindSliceGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->sliceGrad); !s)
    return s;
  const Tensor dy = in(0);
  Tensor o = out();
  Shape starts = intsAttr(AttrName::Starts);
  Shape strides = intsAttr(AttrName::Strides);
  size_t rank = o.shape.size();
  if (starts.size() != rank || strides.size() != rank ||
      dy.shape.size() != rank)
    return fail("starts and strides must have one entry per dimension");
  // The slice that read dy's elements must lie inside the result.
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = dy.shape[d];
    int64_t last = starts[d] + (n - 1) * strides[d];
    if (n > 0 && (starts[d] < 0 || starts[d] >= o.shape[d] || last < 0 ||
                  last >= o.shape[d]))
      return fail("slice of dimension " + std::to_string(d) +
                  " writes outside the result");
  }
  step.kernel = [kernels, dy, starts, strides, o]() mutable {
    return kernels->sliceGrad(dy, starts, strides, o);
  };
  return Status::success();
}

/// This rank's first vocabulary row and the whole vocabulary, for logits
/// [..., rows] sliced over `group`.
static void vocabSlice(const Communicator &group, int64_t rows, int64_t &offset,
                       int64_t &vocab) {
  offset = rows * group.rank();
  vocab = rows * group.size();
}

Status Binder::bindVocabParallelCrossEntropy(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->vocabParallelStats); !s)
    return s;
  if (Status s = needKernel(kernels->vocabParallelLoss); !s)
    return s;
  if (exe.axisComms.empty())
    return fail("needs a grid (a partitioned program)");
  const Tensor logits = in(0), targets = in(1);
  Shape loss;
  std::string error;
  if (!shape::crossEntropy(logits.shape, targets.shape, loss, error))
    return fail(error);
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return fail("targets must be i64 or i32");
  if (out(0).numel() != 1 || out(1).shape != targets.shape)
    return fail("expected a scalar loss and a log-sum-exp per target");
  int64_t offset, vocab;
  Communicator *group = exe.axisComms[0].get();
  vocabSlice(*group, logits.shape.back(), offset, vocab);
  if (Status s = paddedVocabulary(vocab); !s)
    return s;
  // Each rank's [positions, 3] statistics, gathered rank-major, in the
  // kernels' memory (the device's, which its communicator gathers).
  const int64_t positions = targets.numel();
  void *block = nullptr;
  const size_t bytes =
      static_cast<size_t>(positions * 3 * (group->size() + 1)) * sizeof(float);
  if (Status s = kernels->allocate(std::max<size_t>(bytes, 1), &block); !s)
    return fail("cannot allocate the loss statistics: " + s.message);
  std::shared_ptr<float> stats(static_cast<float *>(block),
                               [kernels](float *p) { kernels->release(p); });
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  Tensor loss0 = out(0), lse = out(1);
  step.kernel = [kernels, logits, targets, offset, group, stats, positions,
                 loss0, lse,
                 check = indexCheck(1, vocab, /*allowNegative=*/false,
                                    where)]() mutable {
    if (Status s = check(); !s)
      return s;
    const int64_t ranks = group->size();
    Tensor local{stats.get(), DType::F32, {1, positions, 3}};
    Tensor all{stats.get() + positions * 3, DType::F32, {ranks, positions, 3}};
    if (Status s = kernels->vocabParallelStats(logits, targets, offset, local);
        !s)
      return s;
    if (Status s = group->allGather(local, all, 0); !s)
      return s;
    return kernels->vocabParallelLoss(all, targets, loss0, lse);
  };
  return Status::success();
}

Status Binder::bindVocabParallelCrossEntropyGrad(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->vocabParallelCrossEntropyGrad); !s)
    return s;
  if (exe.axisComms.empty())
    return fail("needs a grid (a partitioned program)");
  const Tensor logits = in(0), targets = in(1), lse = in(2), dloss = in(3);
  std::string error;
  if (!shape::crossEntropyGrad(logits.shape, targets.shape, dloss.shape, error))
    return fail(error);
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return fail("targets must be i64 or i32");
  if (Status s = expectShape("logsumexp", lse.shape, targets.shape); !s)
    return s;
  if (Status s = expectShape("result", out().shape, logits.shape); !s)
    return s;
  int64_t offset, vocab;
  Communicator *group = exe.axisComms[0].get();
  vocabSlice(*group, logits.shape.back(), offset, vocab);
  if (Status s = paddedVocabulary(vocab); !s)
    return s;
  Tensor o = out();
  reserveCountScratch(o);
  std::string where =
      "instruction '" + inst.op() + "' at '" + inst.location() + "'";
  step.kernel =
      [kernels, logits, targets, lse, dloss, offset, o,
       check = indexCheck(1, vocab, /*allowNegative=*/false, where)]() mutable {
        if (Status s = check(); !s)
          return s;
        return kernels->vocabParallelCrossEntropyGrad(logits, targets, lse,
                                                      dloss, offset, o);
      };
  return Status::success();
}

Status Binder::bindDropout(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  if (Status s = needKernel(kernels->dropout); !s)
    return s;
  const Tensor x = in(0);
  Tensor o = out();
  if (Status s = expectShape("result", o.shape, x.shape); !s)
    return s;
  const float ratio = static_cast<float>(floatAttr(AttrName::Ratio));
  if (!(ratio >= 0 && ratio < 1))
    return fail("ratio " + std::to_string(ratio) + " is not in [0, 1)");
  const uint64_t id = static_cast<uint64_t>(intAttr(AttrName::SeedId));
  // Megatron's rule: a rank's own stream inside tensor-parallel regions and
  // on sequence shards, the same one everywhere else.
  const uint64_t rank =
      intAttr(AttrName::RankStream) ? exe.comm->rank() + 1 : 0;
  const Executable *program = &exe;
  step.kernel = [kernels, x, o, ratio, id, rank, program]() mutable {
    return kernels->dropout(
        x, ratio,
        cpu::dropoutKey(program->randomSeed(), program->randomStep(), id, rank),
        o);
  };
  return Status::success();
}

} // namespace mp::rt
