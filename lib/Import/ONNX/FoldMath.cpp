//===- FoldMath.cpp - folding arithmetic and reductions -------------------===//
//
// The fold functions of the ops that compute values (elementwise arithmetic
// and comparisons, casts, matmul, einsum, reductions, softmax, masks and
// ranges) on tensors known at import: causal masks (Trilu, Where), rotary
// tables (Range, Einsum, Cos, Sin) and shape arithmetic. The shape-only ops
// are in FoldShape.cpp.
//
//===----------------------------------------------------------------------===//
#include "Fold.h"

#include "mp/Support/Einsum.h"
#include "mp/Support/Shape.h"

#include <onnx/onnx_pb.h>

#include <sstream>

#include <algorithm>
#include <cmath>
#include <map>

namespace mp::onnx_import {

//===----------------------------------------------------------------------===//
// Elementwise helpers
//===----------------------------------------------------------------------===//

int64_t broadcastIndex(int64_t outIndex, const std::vector<int64_t> &outShape,
                       const std::vector<int64_t> &inShape) {
  int64_t idx = 0, stride = 1;
  size_t offset = outShape.size() - inShape.size();
  for (int64_t d = static_cast<int64_t>(outShape.size()) - 1; d >= 0; --d) {
    int64_t coord = outIndex % outShape[d];
    outIndex /= outShape[d];
    if (d >= static_cast<int64_t>(offset)) {
      int64_t inDim = inShape[d - offset];
      if (inDim != 1)
        idx += coord * stride;
      stride *= inDim;
    }
  }
  return idx;
}

bool Folder::elementwise(DType outType,
                         const std::function<double(double, double)> &fd,
                         const std::function<int64_t(int64_t, int64_t)> &fi) {
  std::vector<int64_t> shape;
  if (!broadcastShapes(input(0).shape, input(1).shape, shape))
    return fail("operand shapes are not broadcastable");
  HostTensor r;
  r.dtype = outType;
  r.shape = shape;
  if (!r.allocate(error))
    return false;
  bool useFloat = input(0).isFloat() || input(1).isFloat();
  for (int64_t i = 0; i < r.numElements(); ++i) {
    int64_t a = broadcastIndex(i, shape, input(0).shape);
    int64_t b = broadcastIndex(i, shape, input(1).shape);
    if (useFloat || !fi)
      r.set(i, fd(input(0).getDouble(a), input(1).getDouble(b)));
    else
      r.setInt(i, fi(input(0).ints[a], input(1).ints[b]));
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::unary(const std::function<double(double)> &f,
                   const std::function<int64_t(int64_t)> &fi) {
  HostTensor r = input(0);
  for (int64_t i = 0; i < r.numElements(); ++i) {
    if (fi && !r.isFloat())
      r.setInt(i, fi(input(0).ints[i]));
    else
      r.set(i, f(input(0).getDouble(i)));
  }
  out.push_back(std::move(r));
  return true;
}

//===----------------------------------------------------------------------===//
// Fold functions
//===----------------------------------------------------------------------===//

bool foldDiv(Folder &f) {
  const HostTensor &divisor = f.input(1);
  for (int64_t i = 0; !divisor.isFloat() && i < divisor.numElements(); ++i)
    if (divisor.ints[i] == 0)
      return f.fail("integer division by zero");
  return f.elementwise(f.input(0).dtype, std::divides<double>(),
                       rt::intDiv<int64_t>);
}

bool foldPow(Folder &f) {
  return f.elementwise(
      f.input(0).dtype, [](double a, double b) { return std::pow(a, b); },
      rt::intPow<int64_t>);
}

bool foldWhere(Folder &f) {
  std::vector<int64_t> s1, shape;
  if (!broadcastShapes(f.input(0).shape, f.input(1).shape, s1) ||
      !broadcastShapes(s1, f.input(2).shape, shape))
    return f.fail("where operands are not broadcastable");
  HostTensor r;
  r.dtype = f.input(1).dtype;
  r.shape = shape;
  if (!r.allocate(f.error))
    return false;
  for (int64_t i = 0; i < r.numElements(); ++i) {
    bool c = f.input(0).getInt(broadcastIndex(i, shape, f.input(0).shape)) != 0;
    const HostTensor &src = c ? f.input(1) : f.input(2);
    int64_t j = broadcastIndex(i, shape, src.shape);
    if (r.isFloat())
      r.floats[i] = src.floats[j];
    else
      r.ints[i] = src.ints[j];
  }
  f.out.push_back(std::move(r));
  return true;
}

bool foldClip(Folder &f) {
  const HostTensor *bounds[2] = {nullptr, nullptr};
  for (int i : {1, 2}) {
    if (i >= f.node.input_size() || f.node.input(i).empty())
      continue;
    if (!f.has(i))
      return false; // a bound computed at run time: imported as mp ops
    if (f.input(i).numElements() != 1)
      return f.fail(std::string(i == 1 ? "min" : "max") + " must be a scalar");
    if (f.input(i).dtype != f.input(0).dtype)
      return f.fail(std::string(i == 1 ? "min" : "max") +
                    " must have the input's element type");
    bounds[i - 1] = &f.input(i);
  }
  HostTensor r = f.input(0);
  for (int64_t k = 0; k < r.numElements(); ++k) {
    if (r.isFloat()) {
      double x = r.getDouble(k);
      if (bounds[0] && x < bounds[0]->getDouble(0))
        x = bounds[0]->getDouble(0);
      if (bounds[1] && x > bounds[1]->getDouble(0))
        x = bounds[1]->getDouble(0);
      r.set(k, x);
    } else {
      int64_t x = r.ints[k];
      if (bounds[0])
        x = std::max(x, bounds[0]->getInt(0));
      if (bounds[1])
        x = std::min(x, bounds[1]->getInt(0));
      r.setInt(k, x);
    }
  }
  f.out.push_back(std::move(r));
  return true;
}

bool foldExtremum(Folder &f, bool largest) {
  if (f.node.input_size() == 1) {
    f.out.push_back(f.input(0));
    return true;
  }
  if (f.node.input_size() != 2)
    return false; // more than two: imported as mp ops, pairwise
  auto pick = [largest](auto a, auto b) {
    return largest ? std::max(a, b) : std::min(a, b);
  };
  return f.elementwise(
      f.input(0).dtype, [&](double a, double b) { return pick(a, b); },
      [&](int64_t a, int64_t b) { return pick(a, b); });
}

bool foldCast(Folder &f) {
  int64_t to = intAttr(f.node, "to", 1);
  if (!isSupportedDType(static_cast<int32_t>(to)))
    return f.fail("cast to unsupported type " +
                  dtypeName(static_cast<int32_t>(to)));
  HostTensor r;
  r.dtype = static_cast<DType>(to);
  r.shape = f.input(0).shape;
  if (!r.allocate(f.error))
    return false;
  for (int64_t i = 0; i < r.numElements(); ++i) {
    if (!r.isFloat() && !f.input(0).isFloat())
      r.ints[i] =
          r.dtype == DType::Bool ? f.input(0).ints[i] != 0 : f.input(0).ints[i];
    else
      r.set(i, f.input(0).getDouble(i));
  }
  f.out.push_back(std::move(r));
  return true;
}

bool foldMatMul(Folder &f) {
  std::vector<int64_t> a = f.input(0).shape, b = f.input(1).shape;
  if (a.size() < 2 || b.size() < 2)
    return false; // vector forms are rare in constant subgraphs
  std::vector<int64_t> shape;
  if (!shape::matmul(a, b, shape, f.error))
    return false;
  std::vector<int64_t> batchA(a.begin(), a.end() - 2),
      batchB(b.begin(), b.end() - 2), batch(shape.begin(), shape.end() - 2);
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  HostTensor r;
  r.dtype = f.input(0).dtype;
  r.shape = shape;
  if (!r.allocate(f.error))
    return false;
  int64_t batches = 1;
  for (int64_t d : batch)
    batches *= d;
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t oa = broadcastIndex(bi, batch, batchA) * m * k;
    int64_t ob = broadcastIndex(bi, batch, batchB) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          s += f.input(0).getDouble(oa + i * k + kk) *
               f.input(1).getDouble(ob + kk * n + j);
        r.set((bi * m + i) * n + j, s);
      }
  }
  f.out.push_back(std::move(r));
  return true;
}

bool foldEinsum(Folder &f) {
  const auto *eqAttr = findAttr(f.node, "equation");
  if (!eqAttr)
    return f.fail("Einsum has no equation");
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < f.in.size(); ++k) {
    ranks.push_back(f.input(k).shape.size());
    shapes.push_back(f.input(k).shape);
  }
  EinsumSpec spec;
  std::vector<int64_t> outShape;
  if (!parseEinsum(eqAttr->s(), ranks, spec, f.error) ||
      !inferEinsumShape(spec, shapes, outShape, f.error))
    return false;
  // Sizes of all labels; iterate over the full index space.
  std::map<char, int64_t> size;
  for (size_t k = 0; k < f.in.size(); ++k)
    for (size_t d = 0; d < spec.inputs[k].size(); ++d)
      size[spec.inputs[k][d]] =
          std::max(size[spec.inputs[k][d]], f.input(k).shape[d]);
  std::vector<char> labels;
  for (auto &[c, n] : size)
    labels.push_back(c);
  HostTensor r;
  r.dtype = f.input(0).dtype;
  r.shape = outShape;
  if (!r.allocate(f.error))
    return false;
  std::vector<double> acc(r.numElements(), 0.0);
  std::map<char, int64_t> value;
  std::function<void(size_t)> loop = [&](size_t li) {
    if (li == labels.size()) {
      double prod = 1.0;
      for (size_t k = 0; k < f.in.size(); ++k) {
        int64_t idx = 0;
        for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
          int64_t dim = f.input(k).shape[d];
          idx = idx * dim + (dim == 1 ? 0 : value[spec.inputs[k][d]]);
        }
        prod *= f.input(k).getDouble(idx);
      }
      int64_t o = 0;
      for (size_t d = 0; d < spec.output.size(); ++d)
        o = o * outShape[d] + value[spec.output[d]];
      acc[o] += prod;
      return;
    }
    for (int64_t v = 0; v < size[labels[li]]; ++v) {
      value[labels[li]] = v;
      loop(li + 1);
    }
  };
  loop(0);
  for (int64_t i = 0; i < r.numElements(); ++i)
    r.set(i, acc[i]);
  f.out.push_back(std::move(r));
  return true;
}

bool foldSoftmax(Folder &f) {
  HostTensor r = f.input(0);
  int64_t rank = r.shape.size(), axis;
  Shape shape;
  if (!f.axis(intAttr(f.node, "axis", -1), rank, axis) ||
      !shape::softmax(r.shape, axis, shape, f.error))
    return false;
  if (!r.isFloat()) {
    f.error = "Softmax takes floating-point data, not " +
              dtypeName(static_cast<int32_t>(r.dtype));
    return false;
  }
  if (r.numElements() == 0) {
    f.out.push_back(std::move(r));
    return true;
  }
  int64_t dim = r.shape[axis], inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= r.shape[d];
  int64_t outer = r.numElements() / (dim * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in0 = 0; in0 < inner; ++in0) {
      auto at = [&](int64_t a) { return (o * dim + a) * inner + in0; };
      double mx = -INFINITY, sum = 0;
      for (int64_t a = 0; a < dim; ++a)
        mx = std::max(mx, r.floats[at(a)]);
      for (int64_t a = 0; a < dim; ++a)
        sum += std::exp(r.floats[at(a)] - mx);
      for (int64_t a = 0; a < dim; ++a)
        r.set(at(a), std::exp(f.input(0).floats[at(a)] - mx) / sum);
    }
  f.out.push_back(std::move(r));
  return true;
}

bool foldTrilu(Folder &f) {
  HostTensor r = f.input(0);
  bool upper = intAttr(f.node, "upper", 1) != 0;
  int64_t k = f.has(1) ? f.input(1).getInt(0) : 0;
  size_t rank = r.shape.size();
  Shape shape;
  if (!shape::trilu(r.shape, shape, f.error))
    return false;
  int64_t rows = r.shape[rank - 2], cols = r.shape[rank - 1];
  for (int64_t i = 0; i < r.numElements(); ++i) {
    int64_t c = i % cols, row = (i / cols) % rows;
    bool keep = upper ? c - row >= k : c - row <= k;
    if (!keep)
      r.set(i, 0);
  }
  f.out.push_back(std::move(r));
  return true;
}

bool foldCumSum(Folder &f) {
  const HostTensor &x = f.input(0);
  if (f.input(1).numElements() != 1)
    return f.fail("axis must be one integer");
  int64_t rank = static_cast<int64_t>(x.shape.size()), axis;
  if (!f.axis(f.input(1).getInt(0), rank, axis))
    return false;
  bool exclusive = intAttr(f.node, "exclusive", 0) != 0;
  bool reverse = intAttr(f.node, "reverse", 0) != 0;
  int64_t n = x.shape[axis], inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  HostTensor r = x;
  int64_t outer = n ? x.numElements() / (n * inner) : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double sum = 0;
      int64_t isum = 0;
      for (int64_t step = 0; step < n; ++step) {
        int64_t k = reverse ? n - 1 - step : step;
        int64_t at = (o * n + k) * inner + in;
        double v = x.getDouble(at);
        int64_t iv = x.isFloat() ? 0 : x.ints[at];
        if (!exclusive) {
          sum += v;
          isum = rt::wrapAdd<int64_t>(isum, iv);
        }
        if (x.isFloat())
          r.set(at, sum);
        else
          r.setInt(at, isum);
        if (exclusive) {
          sum += v;
          isum = rt::wrapAdd<int64_t>(isum, iv);
        }
      }
    }
  f.out.push_back(std::move(r));
  return true;
}

bool foldArgExtremum(Folder &f, bool largest) {
  const HostTensor &x = f.input(0);
  int64_t rank = x.shape.size(), axis;
  if (!f.axis(intAttr(f.node, "axis", 0), rank, axis))
    return false;
  bool last = intAttr(f.node, "select_last_index", 0) != 0;
  int64_t n = x.shape[axis];
  if (n == 0)
    return f.fail("axis " + std::to_string(axis) + " is empty");
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  HostTensor r;
  r.dtype = DType::Int64;
  r.shape = x.shape;
  r.shape[axis] = 1;
  if (!r.allocate(f.error))
    return false;
  // Strictly better, or as good and later with select_last_index; a NaN is
  // the extreme (its first, or last, position).
  auto better = [&](double v, double best) {
    if (std::isnan(best))
      return last && std::isnan(v);
    if (std::isnan(v))
      return true;
    return largest ? (v > best || (last && v == best))
                   : (v < best || (last && v == best));
  };
  for (int64_t o = 0; o < r.numElements(); ++o) {
    int64_t base = (o / inner) * n * inner + o % inner, pick = 0;
    for (int64_t k = 1; k < n; ++k)
      if (better(x.getDouble(base + k * inner),
                 x.getDouble(base + pick * inner)))
        pick = k;
    r.ints[o] = pick;
  }
  if (intAttr(f.node, "keepdims", 1) == 0)
    r.shape.erase(r.shape.begin() + axis);
  f.out.push_back(std::move(r));
  return true;
}

bool foldReduce(Folder &f, const std::string &kind) {
  const HostTensor &x = f.input(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> axes;
  if (const auto *a = findAttr(f.node, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  else if (f.has(1))
    axes = intsOf(f.input(1));
  bool keep = intAttr(f.node, "keepdims", 1) != 0;
  if (axes.empty() && intAttr(f.node, "noop_with_empty_axes", 0)) {
    f.out.push_back(x);
    return true;
  }
  Shape checked;
  if (!axes.empty() && !shape::reduce(x.shape, axes, true, checked, f.error))
    return false;
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> keptShape(rank), shape;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape[d] = reduced[d] ? 1 : x.shape[d];
    if (!reduced[d] || keep)
      shape.push_back(keptShape[d]);
  }
  HostTensor r;
  r.dtype = x.dtype;
  r.shape = keptShape;
  int64_t n = r.numElements();
  std::vector<double> acc(n, kind == "max"   ? -INFINITY
                             : kind == "min" ? INFINITY
                                             : 0.0);
  std::vector<int64_t> count(n, 0);
  std::vector<int64_t> outStrides = stridesOf(keptShape);
  for (int64_t i = 0; i < x.numElements(); ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t c = rem % x.shape[d];
      rem /= x.shape[d];
      if (!reduced[d])
        o += c * outStrides[d];
    }
    double v = x.getDouble(i);
    acc[o] = kind == "max"   ? std::max(acc[o], v)
             : kind == "min" ? std::min(acc[o], v)
                             : acc[o] + v;
    ++count[o];
  }
  r.shape = shape;
  if (!r.allocate(f.error))
    return false;
  for (int64_t i = 0; i < n; ++i)
    r.set(i, kind == "mean" ? acc[i] / std::max<int64_t>(count[i], 1) : acc[i]);
  f.out.push_back(std::move(r));
  return true;
}

bool foldRange(Folder &f) {
  for (int k = 0; k < 3; ++k)
    if (f.input(k).numElements() != 1)
      return f.fail("range input " + std::to_string(k) + " must be a scalar");
  HostTensor r;
  r.dtype = f.input(0).dtype;
  double start = f.input(0).getDouble(0), limit = f.input(1).getDouble(0);
  double delta = f.input(2).getDouble(0);
  if (delta == 0)
    return f.fail("range delta is zero");
  double count = std::ceil((limit - start) / delta);
  if (!(count <= static_cast<double>(kMaxKnownElements))) {
    std::ostringstream message;
    message << "range from " << start << " to " << limit << " by " << delta
            << " has more than the importer's limit of " << kMaxKnownElements
            << " elements";
    return f.fail(message.str());
  }
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  r.shape = {n};
  if (!r.allocate(f.error))
    return false;
  for (int64_t i = 0; i < n; ++i)
    r.set(i, start + i * delta);
  f.out.push_back(std::move(r));
  return true;
}

} // namespace mp::onnx_import
