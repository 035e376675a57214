//===- FoldShape.cpp - folding shape ops and constants --------------------===//
//
// The fold functions of the ops that move data without computing on it
// (Reshape, Transpose, Slice, Gather, Concat, Split, ...) and of the ops
// that make constants (Constant, ConstantOfShape, Shape). Together they
// evaluate the shape arithmetic of exported models (Shape -> Gather ->
// Concat -> Reshape chains) at import, which keeps the IR static.
//
//===----------------------------------------------------------------------===//
#include "Fold.h"

#include "mp/Support/Shape.h"

#include <onnx/onnx_pb.h>

#include <algorithm>

namespace mp::onnx_import {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

std::vector<int64_t> intsOf(const HostTensor &t) {
  std::vector<int64_t> v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[i] = t.getInt(i);
  return v;
}

bool Folder::gatherInto(const HostTensor &src,
                        const std::vector<int64_t> &shape,
                        const std::function<int64_t(int64_t)> &source) {
  HostTensor r;
  r.dtype = src.dtype;
  r.shape = shape;
  if (!r.allocate(error))
    return false;
  for (int64_t i = 0; i < r.numElements(); ++i) {
    if (r.isFloat())
      r.floats[i] = src.floats[source(i)];
    else
      r.ints[i] = src.ints[source(i)];
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::reshapeTo(const HostTensor &src, std::vector<int64_t> shape) {
  HostTensor r = src;
  r.shape = std::move(shape);
  if (r.numElements() != src.numElements())
    return fail("reshape changes the number of elements");
  out.push_back(std::move(r));
  return true;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

bool foldIdentity(Folder &f) {
  f.out.push_back(f.input(0));
  return true;
}

bool foldReshape(Folder &f) {
  std::vector<int64_t> spec = intsOf(f.input(1)), shape;
  bool allowZero = intAttr(f.node, "allowzero", 0) != 0;
  int64_t known = 1, inferIdx = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero) {
      if (i >= f.input(0).shape.size())
        return f.fail("shape entry " + std::to_string(i) +
                      " is 0 but the input has rank " +
                      std::to_string(f.input(0).shape.size()));
      d = f.input(0).shape[i];
    }
    if (d == -1) {
      if (inferIdx >= 0)
        return f.fail("shape has more than one -1");
      inferIdx = static_cast<int64_t>(i);
      d = 1;
    } else if (d < 0) {
      return f.fail("invalid shape entry " + std::to_string(d));
    } else {
      known *= d;
    }
    shape.push_back(d);
  }
  if (inferIdx >= 0)
    shape[inferIdx] = known ? f.input(0).numElements() / known : 0;
  return f.reshapeTo(f.input(0), shape);
}

bool foldTranspose(Folder &f) {
  const HostTensor &x = f.input(0);
  size_t rank = x.shape.size();
  std::vector<int64_t> perm(rank);
  if (const auto *a = findAttr(f.node, "perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (size_t i = 0; i < rank; ++i)
      perm[i] = static_cast<int64_t>(rank - 1 - i);
  std::vector<int64_t> shape;
  if (!shape::transpose(x.shape, perm, shape, f.error))
    return false;
  std::vector<int64_t> inStrides = stridesOf(x.shape);
  if (!f.gatherInto(x, shape, [&](int64_t i) {
        int64_t src = 0;
        for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
          src += (i % shape[d]) * inStrides[perm[d]];
          i /= shape[d];
        }
        return src;
      }))
    return false;
  return true;
}

bool foldUnsqueeze(Folder &f) {
  std::vector<int64_t> axes = intsOf(f.input(1));
  int64_t rank = f.input(0).shape.size() + axes.size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : axes) {
    int64_t n;
    if (!f.axis(a, rank, n))
      return false;
    if (isNew[n])
      return f.fail("axis " + std::to_string(a) + " is repeated");
    isNew[n] = true;
  }
  std::vector<int64_t> shape;
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(isNew[i] ? 1 : f.input(0).shape[j++]);
  return f.reshapeTo(f.input(0), shape);
}

bool foldSqueeze(Folder &f) {
  const auto &s = f.input(0).shape;
  int64_t rank = s.size();
  std::vector<bool> drop(rank, false);
  if (f.has(1)) {
    for (int64_t a : intsOf(f.input(1))) {
      int64_t n;
      if (!f.axis(a, rank, n))
        return false;
      if (s[n] != 1)
        return f.fail("cannot squeeze dimension " + std::to_string(n) +
                      " of size " + std::to_string(s[n]));
      drop[n] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = s[i] == 1;
  }
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      shape.push_back(s[i]);
  return f.reshapeTo(f.input(0), shape);
}

bool foldTile(Folder &f) {
  const HostTensor &x = f.input(0);
  std::vector<int64_t> repeats = intsOf(f.input(1)), shape;
  if (repeats.size() != x.shape.size())
    return f.fail("repeats has " + std::to_string(repeats.size()) +
                  " entries for an input of rank " +
                  std::to_string(x.shape.size()));
  for (size_t k = 0; k < repeats.size(); ++k) {
    int64_t size, r = repeats[k];
    if (r < 0 || __builtin_mul_overflow(x.shape[k], r, &size))
      return f.fail("repeat " + std::to_string(r) + " is invalid");
    shape.push_back(size);
  }
  std::vector<int64_t> outStrides = stridesOf(shape),
                       inStrides = stridesOf(x.shape);
  return f.gatherInto(x, shape, [&](int64_t i) {
    int64_t source = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      source += (i / outStrides[d] % shape[d]) % x.shape[d] * inStrides[d];
    return source;
  });
}

bool foldFlatten(Folder &f) {
  std::vector<int64_t> shape;
  if (!shape::flatten(f.input(0).shape, intAttr(f.node, "axis", 1), shape,
                      f.error))
    return false;
  return f.reshapeTo(f.input(0), shape);
}

bool foldConcat(Folder &f) {
  int64_t rank = f.input(0).shape.size(), axis;
  std::vector<Shape> shapes;
  for (size_t k = 0; k < f.in.size(); ++k)
    shapes.push_back(f.input(k).shape);
  std::vector<int64_t> shape;
  if (!f.axis(intAttr(f.node, "axis", 0), rank, axis) ||
      !shape::concat(shapes, axis, shape, f.error))
    return false;
  HostTensor r;
  r.dtype = f.input(0).dtype;
  r.shape = shape;
  if (!r.allocate(f.error))
    return false;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < f.in.size(); ++k) {
      int64_t chunk = f.input(k).shape[axis] * inner;
      for (int64_t e = 0; e < chunk; ++e, ++pos) {
        int64_t src = o * chunk + e;
        if (r.isFloat())
          r.floats[pos] = f.input(k).getDouble(src);
        else
          r.ints[pos] = f.input(k).getInt(src);
      }
    }
  f.out.push_back(std::move(r));
  return true;
}

bool foldSlice(Folder &f) {
  const HostTensor &x = f.input(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> starts = intsOf(f.input(1)), ends = intsOf(f.input(2));
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (f.has(3))
    axes = intsOf(f.input(3));
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (f.has(4))
    steps = intsOf(f.input(4));
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return f.fail("starts, ends, axes and steps differ in length");
  std::vector<int64_t> start(rank, 0), step(rank, 1), shape = x.shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a;
    if (!f.axis(axes[i], rank, a))
      return false;
    int64_t st = steps[i];
    if (st == 0)
      return f.fail("slice step is zero");
    SliceRange range = normalizeSlice(x.shape[a], starts[i], ends[i], st);
    shape[a] = range.count;
    start[a] = range.start;
    step[a] = st;
  }
  std::vector<int64_t> inStrides = stridesOf(x.shape);
  if (!f.gatherInto(x, shape, [&](int64_t i) {
        int64_t src = 0;
        for (int64_t d = rank - 1; d >= 0; --d) {
          src += (start[d] + (i % shape[d]) * step[d]) * inStrides[d];
          i /= shape[d];
        }
        return src;
      }))
    return false;
  return true;
}

bool foldGather(Folder &f) {
  const HostTensor &x = f.input(0), &idx = f.input(1);
  int64_t rank = x.shape.size(), axis;
  std::vector<int64_t> shape;
  if (!isIndexDType(idx.dtype))
    return f.fail("gather indices must be int32 or int64");
  if (!f.axis(intAttr(f.node, "axis", 0), rank, axis) ||
      !shape::gather(x.shape, idx.shape, axis, shape, f.error))
    return false;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  int64_t n = idx.numElements(), dim = x.shape[axis];
  for (int64_t k = 0; k < n; ++k) {
    int64_t j = idx.getInt(k);
    if (j < -dim || j >= dim)
      return f.fail("gather index " + std::to_string(j) + " is out of range");
  }
  if (!f.gatherInto(x, shape, [&](int64_t i) {
        int64_t in0 = i % inner;
        int64_t k = (i / inner) % n;
        int64_t o = i / inner / n;
        int64_t j = idx.getInt(k);
        if (j < 0)
          j += dim;
        return (o * dim + j) * inner + in0;
      }))
    return false;
  return true;
}

bool foldGatherElements(Folder &f) {
  const HostTensor &x = f.input(0), &idx = f.input(1);
  int64_t rank = x.shape.size(), axis;
  if (!isIndexDType(idx.dtype))
    return f.fail("gather indices must be int32 or int64");
  if (!f.axis(intAttr(f.node, "axis", 0), rank, axis))
    return false;
  if (static_cast<int64_t>(idx.shape.size()) != rank)
    return f.fail("indices and data differ in rank");
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      return f.fail("indices exceed the data along dim " + std::to_string(d));
  const int64_t dim = x.shape[axis];
  for (int64_t k = 0; k < idx.numElements(); ++k) {
    int64_t j = idx.getInt(k);
    if (j < -dim || j >= dim)
      return f.fail("gather index " + std::to_string(j) + " is out of range");
  }
  return f.gatherInto(x, idx.shape, [&](int64_t i) {
    // Output i's coordinates, the axis one replaced by its index.
    int64_t rest = i, source = 0, scale = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % idx.shape[d];
      rest /= idx.shape[d];
      if (d == axis) {
        coord = idx.getInt(i);
        coord = coord < 0 ? coord + dim : coord;
      }
      source += coord * scale;
      scale *= x.shape[d];
    }
    return source;
  });
}

bool foldExpand(Folder &f) {
  std::vector<int64_t> shape;
  if (!broadcastShapes(f.input(0).shape, intsOf(f.input(1)), shape))
    return f.fail("cannot expand to the given shape");
  if (!f.gatherInto(f.input(0), shape, [&](int64_t i) {
        return broadcastIndex(i, shape, f.input(0).shape);
      }))
    return false;
  return true;
}

bool foldSplit(Folder &f) {
  const HostTensor &x = f.input(0);
  int64_t rank = x.shape.size(), axis;
  if (!f.axis(intAttr(f.node, "axis", 0), rank, axis))
    return false;
  int64_t parts = f.node.output_size(), dim = x.shape[axis];
  std::vector<int64_t> sizes;
  if (f.has(1))
    sizes = intsOf(f.input(1));
  else if (const auto *a = findAttr(f.node, "split"))
    sizes.assign(a->ints().begin(), a->ints().end());
  else {
    if (dim % parts)
      return f.fail("dimension " + std::to_string(dim) +
                    " does not split evenly into " + std::to_string(parts));
    sizes.assign(parts, dim / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return f.fail("split gives " + std::to_string(sizes.size()) +
                  " sizes for " + std::to_string(parts) + " outputs");
  std::vector<Shape> partShapes;
  for (int64_t size : sizes) {
    partShapes.push_back(x.shape);
    partShapes.back()[axis] = size;
  }
  if (!shape::split(x.shape, axis, partShapes, f.error))
    return false;
  int64_t offset = 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape;
    shape[axis] = s;
    if (!f.gatherInto(x, shape, [&](int64_t i) {
          int64_t in0 = i % inner, a = (i / inner) % s, o = i / inner / s;
          return (o * dim + offset + a) * inner + in0;
        }))
      return false;
    offset += s;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

/// Value of a Constant node's attribute.
static bool constantValue(const onnx::NodeProto &node, HostTensor &out,
                          std::string &error) {
  for (const auto &a : node.attribute()) {
    if (a.name() == "value")
      return decodeTensor(a.t(), nullptr, out, error);
    out = HostTensor();
    if (a.name() == "value_float" || a.name() == "value_floats") {
      out.dtype = DType::Float;
      if (a.name() == "value_float")
        out.floats = {a.f()};
      else
        out.floats.assign(a.floats().begin(), a.floats().end());
      if (a.name() == "value_floats")
        out.shape = {static_cast<int64_t>(out.floats.size())};
      return true;
    }
    if (a.name() == "value_int" || a.name() == "value_ints") {
      out.dtype = DType::Int64;
      if (a.name() == "value_int")
        out.ints = {a.i()};
      else
        out.ints.assign(a.ints().begin(), a.ints().end());
      if (a.name() == "value_ints")
        out.shape = {static_cast<int64_t>(out.ints.size())};
      return true;
    }
  }
  error = "Constant has no supported value attribute";
  return false;
}

bool foldConstant(Folder &f) {
  f.out.emplace_back();
  return constantValue(f.node, f.out.back(), f.error);
}

bool foldConstantOfShape(Folder &f) {
  HostTensor r;
  r.dtype = DType::Float;
  double value = 0;
  if (const auto *a = findAttr(f.node, "value")) {
    HostTensor v;
    if (!decodeTensor(a->t(), nullptr, v, f.error))
      return false;
    r.dtype = v.dtype;
    value = v.numElements() ? v.getDouble(0) : 0;
  }
  r.shape = intsOf(f.input(0));
  if (!r.allocate(f.error))
    return false;
  for (int64_t i = 0; i < r.numElements(); ++i)
    r.set(i, value);
  f.out.push_back(std::move(r));
  return true;
}

bool foldShape(Folder &f) {
  const Shape &s = f.shapes[0];
  int64_t rank = s.size();
  int64_t start = intAttr(f.node, "start", 0);
  int64_t end = intAttr(f.node, "end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  HostTensor t;
  t.dtype = DType::Int64;
  t.ints.assign(s.begin() + start, s.begin() + std::max(start, end));
  t.shape = {static_cast<int64_t>(t.ints.size())};
  f.out.push_back(std::move(t));
  return true;
}

} // namespace mp::onnx_import
