//===- BindShape.cpp - binding the shape ops to their kernels -------------===//
//
// Transpose, slice, expand, concat, split, reduce and einsum: their
// attributes checked against the operands' ranks and their results against
// the shape rules (mp/Support/Shape.h), as Binder.cpp does for the others.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"

#include "mp/Runtime/Kernels.h"
#include "mp/Support/Einsum.h"
#include "mp/Support/Flops.h"
#include "mp/Support/Shape.h"

namespace mp::rt {

Status Binder::bindTranspose(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Shape perm = intsAttr(AttrName::Permutation), expected;
  std::string error;
  if (Status s = expectResult(shape::transpose(x.shape, perm, expected, error),
                              error, expected);
      !s)
    return s;
  Tensor o = out();
  step.kernel = [kernels, x, perm, o]() mutable {
    return kernels->transpose(x, perm, o);
  };
  return Status::success();
}

Status Binder::bindSlice(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Shape starts = intsAttr(AttrName::Starts);
  Shape strides = intsAttr(AttrName::Strides);
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

Status Binder::bindExpand(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  std::string error;
  if (!shape::expand(in(0).shape, out().shape, error))
    return fail(error);
  const Tensor x = in(0);
  Tensor o = out();
  step.kernel = [kernels, x, o]() mutable { return kernels->expand(x, o); };
  return Status::success();
}

Status Binder::bindConcat(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  int64_t axis;
  if (Status s = axisAttr(AttrName::Axis, out().shape.size(), axis); !s)
    return s;
  Shape expected;
  std::string error;
  if (Status s =
          expectResult(shape::concat(operandShapes(), axis, expected, error),
                       error, expected);
      !s)
    return s;
  std::vector<Tensor> inputs;
  for (int i = 0; i < inst.operands_size(); ++i)
    inputs.push_back(in(i));
  Tensor o = out();
  step.kernel = [kernels, inputs, axis, o]() mutable {
    std::vector<const Tensor *> ptrs;
    for (const Tensor &t : inputs)
      ptrs.push_back(&t);
    return kernels->concat(ptrs, axis, o);
  };
  return Status::success();
}

Status Binder::bindSplit(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  int64_t axis;
  if (Status s = axisAttr(AttrName::Axis, x.shape.size(), axis); !s)
    return s;
  std::vector<Tensor> outs;
  std::vector<Shape> shapes;
  for (int i = 0; i < inst.results_size(); ++i) {
    outs.push_back(out(i));
    shapes.push_back(out(i).shape);
  }
  std::string error;
  if (!shape::split(x.shape, axis, shapes, error))
    return fail(error);
  step.kernel = [kernels, x, outs, axis]() mutable {
    std::vector<Tensor *> ptrs;
    for (Tensor &t : outs)
      ptrs.push_back(&t);
    return kernels->split(x, axis, ptrs);
  };
  return Status::success();
}

Status Binder::bindReduce(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  const Tensor x = in(0);
  Shape axes = intsAttr(AttrName::Axes);
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
  cpu::ReduceKind kind;
  if (Status s = enumAttr(AttrName::Kind, kind); !s)
    return s;
  Tensor o = out();
  step.kernel = [kernels, kind, x, axes, o]() mutable {
    return kernels->reduce(kind, x, axes, o);
  };
  return Status::success();
}

Status Binder::bindEinsum(Executable::Step &step) {
  const KernelTable *kernels = exe.kernels;
  std::vector<Tensor> inputs;
  std::vector<int64_t> ranks;
  for (int i = 0; i < inst.operands_size(); ++i) {
    inputs.push_back(in(i));
    ranks.push_back(static_cast<int64_t>(in(i).shape.size()));
  }
  std::string equation = attr(AttrName::Equation).s(), error;
  EinsumSpec spec;
  Shape expected;
  if (!parseEinsum(equation, ranks, spec, error) ||
      !inferEinsumShape(spec, operandShapes(), expected, error))
    return fail(error);
  if (Status s = expectShape("result", out().shape, expected); !s)
    return s;
  exe.flops += flops::einsum(equation, operandShapes());
  Tensor o = out();
  step.kernel = [kernels, inputs, equation, o]() mutable {
    std::vector<const Tensor *> ptrs;
    for (const Tensor &t : inputs)
      ptrs.push_back(&t);
    return kernels->einsum(equation, ptrs, o);
  };
  return Status::success();
}

} // namespace mp::rt
