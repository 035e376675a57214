//===- BindNorm.cpp - binding the norms to kernels ------------------------===//
//
// The Binder's part for layer_norm and rms_norm, alone or fused with the
// residual add that feeds them (add_layer_norm, add_rms_norm: made by
// mp-fuse-residual-norms). A device without a fused kernel runs the add and
// then the norm.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"

#include "mp/Support/Shape.h"

namespace mp::rt {

Status NormParams::run(const KernelTable &kernels, const Tensor &x,
                       Tensor &out) const {
  if (layer)
    return kernels.layerNorm(x, scale, bias ? &*bias : nullptr, axis, epsilon,
                             out);
  return kernels.rmsNorm(x, scale, epsilon, out);
}

Status Binder::readNorm(bool layer, int scaleAt, const Shape &input,
                        const Tensor &result, NormParams &params) {
  params.layer = layer;
  params.scale = in(scaleAt);
  const Tensor *bias = layer ? optIn(scaleAt + 1) : nullptr;
  params.bias = bias ? std::optional<Tensor>(*bias) : std::nullopt;
  if (Status s = positiveFloat(AttrName::Epsilon, params.epsilon); !s)
    return s;
  if (layer)
    if (Status s = axisAttr(AttrName::Axis, input.size(), params.axis); !s)
      return s;
  Shape expected;
  std::string error;
  bool held =
      layer ? shape::layerNorm(input, params.axis, params.scale.shape,
                               bias ? &bias->shape : nullptr, expected, error)
            : shape::rmsNorm(input, params.scale.shape, expected, error);
  if (!held)
    return fail(error);
  return expectShape("result", result.shape, expected);
}

Status Binder::bindNorm(Executable::Step &step, bool layer) {
  using namespace contract::layer_norm;
  const Tensor x = in(Input);
  NormParams params;
  if (Status s = readNorm(layer, Scale, x.shape, out(), params); !s)
    return s;
  const KernelTable *kernels = exe.kernels;
  Tensor o = out();
  step.kernel = [kernels, x, params, o]() mutable {
    return params.run(*kernels, x, o);
  };
  return Status::success();
}

Status Binder::bindAddNorm(Executable::Step &step, bool layer) {
  using namespace contract::add_norm;
  const Tensor a = in(Lhs), b = in(Rhs);
  Tensor sum = out(Sum), normalized = out(Normalized);
  // (The fusion is made only where the add needs no broadcast.)
  if (a.dtype != b.dtype || a.dtype != sum.dtype)
    return fail("the sum's operands and result have different element types");
  if (Status s = expectShape("right operand", b.shape, a.shape); !s)
    return s;
  if (Status s = expectShape("sum", sum.shape, a.shape); !s)
    return s;
  NormParams params;
  if (Status s = readNorm(layer, Scale, a.shape, normalized, params); !s)
    return s;
  const KernelTable *kernels = exe.kernels;
  if (layer && kernels->addLayerNorm) {
    step.kernel = [kernels, a, b, params, sum, normalized]() mutable {
      return kernels->addLayerNorm(
          a, b, params.scale, params.bias ? &*params.bias : nullptr,
          params.axis, params.epsilon, sum, normalized);
    };
    return Status::success();
  }
  if (!layer && kernels->addRmsNorm) {
    step.kernel = [kernels, a, b, params, sum, normalized]() mutable {
      return kernels->addRmsNorm(a, b, params.scale, params.epsilon, sum,
                                 normalized);
    };
    return Status::success();
  }
  step.kernel = [kernels, a, b, params, sum, normalized]() mutable {
    if (Status s = kernels->binary(cpu::BinaryKind::Add, a, b, sum); !s)
      return s;
    return params.run(*kernels, sum, normalized);
  };
  return Status::success();
}

} // namespace mp::rt
