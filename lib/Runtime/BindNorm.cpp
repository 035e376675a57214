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

Status NormParams::runAdd(const KernelTable &kernels, const Tensor &a,
                          const Tensor &b, Tensor &sum, Tensor &out) const {
  if (layer && kernels.addLayerNorm)
    return kernels.addLayerNorm(a, b, scale, bias ? &*bias : nullptr, axis,
                                epsilon, sum, out);
  if (!layer && kernels.addRmsNorm)
    return kernels.addRmsNorm(a, b, scale, epsilon, sum, out);
  if (Status s = kernels.binary(cpu::BinaryKind::Add, a, b, sum); !s)
    return s;
  return run(kernels, sum, out);
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
  step.kernel = [kernels, a, b, params, sum, normalized]() mutable {
    return params.runAdd(*kernels, a, b, sum, normalized);
  };
  return Status::success();
}

namespace {
/// Rows [begin, end) of `t`, `rows` rows: a view of shape
/// [end - begin, the dims of a row...].
Tensor rowsOf(const Tensor &t, const Shape &rowShape, int64_t rows,
              int64_t begin, int64_t end) {
  Tensor view = t;
  const size_t rowBytes = rows ? t.bytes() / static_cast<size_t>(rows) : 0;
  view.data = static_cast<uint8_t *>(t.data) + begin * rowBytes;
  view.shape = rowShape;
  view.shape.insert(view.shape.begin(), end - begin);
  return view;
}
} // namespace

Status Binder::bindReducedNorm(Executable::Step &step, bool layer,
                               bool scattered) {
  using namespace contract::all_reduce_add_norm;
  const Tensor partial = in(Partial), residual = in(Residual);
  const Tensor *addend = optIn(layer ? LayerAddend : RMSAddend);
  Tensor sum = out(contract::add_norm::Sum),
         normalized = out(contract::add_norm::Normalized);
  if (partial.dtype != residual.dtype || partial.dtype != sum.dtype)
    return fail("the partial sums, residual and sum have different element "
                "types");
  Communicator *comm = nullptr;
  if (Status s = groupOf(comm); !s)
    return s;
  // The sum and residual: the whole of the partial sums' shape, or this
  // rank's slice of it along the scatter axis.
  const int64_t ranks = comm->size(), me = comm->rank();
  int64_t scatterAxis = -1;
  Shape sliced = partial.shape;
  if (scattered) {
    scatterAxis = intAttr(AttrName::ScatterAxis);
    if (scatterAxis < 0 || scatterAxis >= static_cast<int64_t>(sliced.size()) ||
        sliced[scatterAxis] % ranks != 0)
      return fail("scatter axis " + std::to_string(scatterAxis) + " of " +
                  formatShape(partial.shape) +
                  " is not a dim that divides over " + std::to_string(ranks) +
                  " ranks");
    sliced[scatterAxis] /= ranks;
  }
  if (Status s = expectShape("residual", residual.shape, sliced); !s)
    return s;
  if (Status s = expectShape("sum", sum.shape, sliced); !s)
    return s;
  if (addend)
    if (Status s =
            expectShape("addend", addend->shape,
                        {partial.shape.empty() ? 1 : partial.shape.back()});
        !s)
      return s;
  NormParams params;
  if (Status s = readNorm(layer, Scale, partial.shape, normalized, params); !s)
    return s;
  // A row is what one norm normalizes: the dims from `axis` on.
  const size_t axis =
      layer ? static_cast<size_t>(params.axis)
            : (partial.shape.empty() ? 0 : partial.shape.size() - 1);
  if (scattered && static_cast<size_t>(scatterAxis) >= axis)
    return fail("scatter axis " + std::to_string(scatterAxis) +
                " is not before the norm's axis " + std::to_string(axis));
  const Shape rowShape(partial.shape.begin() + axis, partial.shape.end());
  int64_t rows = 1, outer = 1;
  for (size_t d = 0; d < axis; ++d)
    rows *= partial.shape[d];
  for (int64_t d = 0; d < scatterAxis; ++d)
    outer *= partial.shape[d];
  // Full-layout row g of this rank's slices is row localRow(g) of the sum
  // and residual (the identity when nothing is scattered).
  const int64_t blockRows = outer > 0 ? rows / outer : 0,
                sliceRows = blockRows / ranks;
  auto localRow = [scattered, blockRows, sliceRows, me](int64_t g) {
    return scattered
               ? g / blockRows * sliceRows + g % blockRows - me * sliceRows
               : g;
  };
  const int64_t localRows = scattered ? rows / ranks : rows;
  if (scattered) {
    size_t &scratch = exe.commScratch[intAttr(AttrName::GridAxis)];
    scratch =
        std::max(scratch, comm->scatterRowsBytes({partial, normalized}, outer));
  }
  NormParams rowParams = params;
  rowParams.axis = 1;
  const KernelTable *kernels = exe.kernels;
  std::optional<Tensor> bias =
      addend ? std::optional<Tensor>(*addend) : std::nullopt;
  step.kernel = [=]() mutable {
    auto finish = [&](int64_t begin, int64_t end) {
      // (The rows' sums, then their norms, in `normalized`'s bytes.)
      Tensor reduced = rowsOf(normalized, rowShape, rows, begin, end);
      if (bias)
        if (Status s =
                kernels->binary(cpu::BinaryKind::Add, reduced, *bias, reduced);
            !s)
          return s;
      const int64_t local = localRow(begin);
      Tensor res =
          rowsOf(residual, rowShape, localRows, local, local + end - begin);
      Tensor s = rowsOf(sum, rowShape, localRows, local, local + end - begin);
      return rowParams.runAdd(*kernels, res, reduced, s, reduced);
    };
    if (scattered)
      return comm->reduceScatterRows(partial, normalized, rows, outer, finish,
                                     {normalized});
    return comm->allReduceRows(partial, normalized, rows, finish,
                               {sum, normalized});
  };
  return Status::success();
}

} // namespace mp::rt
