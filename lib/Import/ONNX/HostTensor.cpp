//===- HostTensor.cpp - constant folding at import ------------------------===//
//
// Evaluates ONNX nodes whose inputs are all known at import time: shape
// arithmetic (Shape/Gather/Concat/Reshape chains), causal masks (Trilu,
// ConstantOfShape, Where), rotary tables (Range, Einsum, Cos, Sin) and any
// other subgraph of supported ops on constants. Exactness matters more than
// speed here: tensors are small.
//
//===----------------------------------------------------------------------===//
#include "HostTensor.h"

#include "mp/Support/Einsum.h"
#include "mp/Support/Float16.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>

namespace mp::onnx_import {

bool isSupportedDType(int32_t t) {
  switch (static_cast<DType>(t)) {
  case DType::Float:
  case DType::Int8:
  case DType::Int32:
  case DType::Int64:
  case DType::Bool:
  case DType::Float16:
  case DType::Double:
  case DType::BFloat16:
    return true;
  }
  return false;
}

bool isFloatDType(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::Double ||
         t == DType::BFloat16;
}

std::string dtypeName(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(t));
  return "type#" + std::to_string(t);
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t HostTensor::getInt(int64_t i) const {
  return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
}

void HostTensor::allocate() {
  floats.clear();
  ints.clear();
  if (isFloat())
    floats.assign(numElements(), 0.0);
  else
    ints.assign(numElements(), 0);
}

static double roundToFloat16(double v) {
  // Round to the nearest value with an 11-bit significand.
  if (v == 0 || !std::isfinite(v))
    return v;
  int exp;
  double m = std::frexp(v, &exp);
  return std::ldexp(std::nearbyint(std::ldexp(m, 11)), exp - 11);
}

static double roundToBFloat16(double v) {
  if (v == 0 || !std::isfinite(v))
    return v;
  int exp;
  double m = std::frexp(static_cast<float>(v), &exp);
  return std::ldexp(std::nearbyint(std::ldexp(m, 8)), exp - 8);
}

void HostTensor::set(int64_t i, double v) {
  switch (dtype) {
  case DType::Float:
    floats[i] = static_cast<float>(v);
    return;
  case DType::Double:
    floats[i] = v;
    return;
  case DType::Float16:
    floats[i] = roundToFloat16(v);
    return;
  case DType::BFloat16:
    floats[i] = roundToBFloat16(v);
    return;
  case DType::Bool:
    ints[i] = v != 0;
    return;
  case DType::Int8:
    ints[i] = static_cast<int8_t>(v);
    return;
  case DType::Int32:
    ints[i] = static_cast<int32_t>(v);
    return;
  case DType::Int64:
    ints[i] = static_cast<int64_t>(v);
    return;
  }
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

SliceRange normalizeSlice(int64_t dim, int64_t start, int64_t end,
                          int64_t step) {
  if (dim == 0)
    return {0, 0, 0};
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::max(std::clamp<int64_t>(end, 0, dim), start);
    return {start, end, (end - start + step - 1) / step};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::min(std::clamp<int64_t>(end, -1, dim - 1), start);
  return {start, end, (start - end - step - 1) / (-step)};
}

//===----------------------------------------------------------------------===//
// Decoding TensorProto
//===----------------------------------------------------------------------===//

static int64_t elementBytes(DType t) {
  switch (t) {
  case DType::Int8:
  case DType::Bool:
    return 1;
  case DType::Float16:
  case DType::BFloat16:
    return 2;
  case DType::Float:
  case DType::Int32:
    return 4;
  case DType::Int64:
  case DType::Double:
    return 8;
  }
  return 0;
}

/// Decodes little-endian raw bytes of `count` elements.
static void decodeRaw(const std::string &bytes, HostTensor &out) {
  int64_t n = out.numElements();
  const char *p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (out.dtype) {
    case DType::Float: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      out.floats[i] = v;
      break;
    }
    case DType::Double: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      out.floats[i] = v;
      break;
    }
    case DType::Float16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out.floats[i] = halfToFloat(v);
      break;
    }
    case DType::BFloat16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out.floats[i] = bf16ToFloat(v);
      break;
    }
    case DType::Int8:
      out.ints[i] = static_cast<int8_t>(p[i]);
      break;
    case DType::Bool:
      out.ints[i] = p[i] != 0;
      break;
    case DType::Int32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out.ints[i] = v;
      break;
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      out.ints[i] = v;
      break;
    }
    }
  }
}

bool decodeTensor(const onnx::TensorProto &proto, const std::string *external,
                  HostTensor &out, std::string &error) {
  if (!isSupportedDType(proto.data_type())) {
    error = "tensor '" + proto.name() + "' has unsupported element type " +
            dtypeName(proto.data_type());
    return false;
  }
  out.dtype = static_cast<DType>(proto.data_type());
  out.shape.assign(proto.dims().begin(), proto.dims().end());
  out.allocate();
  int64_t n = out.numElements();
  auto sizeError = [&](int64_t found) {
    error = "tensor '" + proto.name() + "' holds " + std::to_string(found) +
            " values but its shape needs " + std::to_string(n);
    return false;
  };
  const std::string *raw = external               ? external
                           : proto.has_raw_data() ? &proto.raw_data()
                                                  : nullptr;
  if (raw) {
    int64_t bytes = n * elementBytes(out.dtype);
    if (static_cast<int64_t>(raw->size()) != bytes) {
      error = "tensor '" + proto.name() + "' has " +
              std::to_string(raw->size()) +
              " bytes of data but its shape "
              "needs " +
              std::to_string(bytes);
      return false;
    }
    decodeRaw(*raw, out);
    return true;
  }
  switch (out.dtype) {
  case DType::Float:
    if (proto.float_data_size() != n)
      return sizeError(proto.float_data_size());
    for (int64_t i = 0; i < n; ++i)
      out.floats[i] = proto.float_data(i);
    return true;
  case DType::Double:
    if (proto.double_data_size() != n)
      return sizeError(proto.double_data_size());
    for (int64_t i = 0; i < n; ++i)
      out.floats[i] = proto.double_data(i);
    return true;
  case DType::Int64:
    if (proto.int64_data_size() != n)
      return sizeError(proto.int64_data_size());
    for (int64_t i = 0; i < n; ++i)
      out.ints[i] = proto.int64_data(i);
    return true;
  case DType::Float16:
  case DType::BFloat16:
    if (proto.int32_data_size() != n)
      return sizeError(proto.int32_data_size());
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits = static_cast<uint16_t>(proto.int32_data(i));
      out.floats[i] =
          out.dtype == DType::Float16 ? halfToFloat(bits) : bf16ToFloat(bits);
    }
    return true;
  case DType::Int8:
  case DType::Int32:
  case DType::Bool:
    if (proto.int32_data_size() != n)
      return sizeError(proto.int32_data_size());
    for (int64_t i = 0; i < n; ++i)
      out.ints[i] = proto.int32_data(i);
    return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Folding
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     const std::string &name) {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttr(const onnx::NodeProto &node, const std::string &name,
                int64_t def) {
  const auto *a = findAttr(node, name);
  return a ? a->i() : def;
}

namespace {

std::vector<int64_t> intsOf(const HostTensor &t) {
  std::vector<int64_t> v(t.numElements());
  for (int64_t i = 0; i < t.numElements(); ++i)
    v[i] = t.getInt(i);
  return v;
}

/// Maps an output index to the input index of a broadcast operand.
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

struct Folder {
  const onnx::NodeProto &node;
  const std::vector<const HostTensor *> &in;
  std::vector<HostTensor> &out;
  std::string &error;

  bool fail(const std::string &msg) {
    error = msg;
    return false;
  }
  const HostTensor &input(size_t i) { return *in[i]; }
  bool has(size_t i) { return i < in.size() && in[i]; }

  bool elementwise(DType outType,
                   const std::function<double(double, double)> &fd,
                   const std::function<int64_t(int64_t, int64_t)> &fi) {
    std::vector<int64_t> shape;
    if (!broadcastShapes(input(0).shape, input(1).shape, shape))
      return fail("operand shapes are not broadcastable");
    HostTensor r;
    r.dtype = outType;
    r.shape = shape;
    r.allocate();
    bool useFloat = input(0).isFloat() || input(1).isFloat();
    for (int64_t i = 0; i < r.numElements(); ++i) {
      int64_t a = broadcastIndex(i, shape, input(0).shape);
      int64_t b = broadcastIndex(i, shape, input(1).shape);
      if (useFloat || !fi)
        r.set(i, fd(input(0).getDouble(a), input(1).getDouble(b)));
      else
        r.ints[i] = fi(input(0).ints[a], input(1).ints[b]);
    }
    out.push_back(std::move(r));
    return true;
  }

  bool unary(const std::function<double(double)> &f) {
    HostTensor r = input(0);
    for (int64_t i = 0; i < r.numElements(); ++i)
      r.set(i, f(input(0).getDouble(i)));
    out.push_back(std::move(r));
    return true;
  }

  /// Copies elements picked by `source(i)` into a tensor of `shape`.
  void gatherInto(const HostTensor &src, const std::vector<int64_t> &shape,
                  const std::function<int64_t(int64_t)> &source) {
    HostTensor r;
    r.dtype = src.dtype;
    r.shape = shape;
    r.allocate();
    for (int64_t i = 0; i < r.numElements(); ++i) {
      if (r.isFloat())
        r.floats[i] = src.floats[source(i)];
      else
        r.ints[i] = src.ints[source(i)];
    }
    out.push_back(std::move(r));
  }

  bool reshapeTo(const HostTensor &src, std::vector<int64_t> shape) {
    HostTensor r = src;
    r.shape = std::move(shape);
    if (r.numElements() != src.numElements())
      return fail("reshape changes the number of elements");
    out.push_back(std::move(r));
    return true;
  }

  bool run();
  bool reshape();
  bool transpose();
  bool unsqueeze();
  bool squeeze();
  bool concat();
  bool slice();
  bool gather();
  bool expand();
  bool range();
  bool einsum();
  bool trilu();
  bool matmul();
  bool reduce(const std::string &kind);
  bool split();
  bool cast();
  bool where();
  bool softmax();
  bool constantOfShape();
};

bool Folder::reshape() {
  std::vector<int64_t> spec = intsOf(input(1)), shape;
  bool allowZero = intAttr(node, "allowzero", 0) != 0;
  int64_t known = 1, inferIdx = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowZero)
      d = input(0).shape.at(i);
    if (d == -1) {
      inferIdx = static_cast<int64_t>(i);
      d = 1;
    } else {
      known *= d;
    }
    shape.push_back(d);
  }
  if (inferIdx >= 0)
    shape[inferIdx] = known ? input(0).numElements() / known : 0;
  return reshapeTo(input(0), shape);
}

bool Folder::transpose() {
  const HostTensor &x = input(0);
  size_t rank = x.shape.size();
  std::vector<int64_t> perm(rank);
  if (const auto *a = findAttr(node, "perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (size_t i = 0; i < rank; ++i)
      perm[i] = static_cast<int64_t>(rank - 1 - i);
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i)
    shape[i] = x.shape[perm[i]];
  std::vector<int64_t> inStrides = stridesOf(x.shape);
  gatherInto(x, shape, [&](int64_t i) {
    int64_t src = 0;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      src += (i % shape[d]) * inStrides[perm[d]];
      i /= shape[d];
    }
    return src;
  });
  return true;
}

bool Folder::unsqueeze() {
  std::vector<int64_t> axes = intsOf(input(1));
  int64_t rank = input(0).shape.size() + axes.size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : axes)
    isNew[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> shape;
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(isNew[i] ? 1 : input(0).shape[j++]);
  return reshapeTo(input(0), shape);
}

bool Folder::squeeze() {
  const auto &s = input(0).shape;
  int64_t rank = s.size();
  std::vector<bool> drop(rank, false);
  if (has(1)) {
    for (int64_t a : intsOf(input(1)))
      drop[a < 0 ? a + rank : a] = true;
  } else {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = s[i] == 1;
  }
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      shape.push_back(s[i]);
  return reshapeTo(input(0), shape);
}

bool Folder::concat() {
  int64_t rank = input(0).shape.size();
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0)
    axis += rank;
  std::vector<int64_t> shape = input(0).shape;
  shape[axis] = 0;
  for (size_t k = 0; k < in.size(); ++k)
    shape[axis] += input(k).shape[axis];
  HostTensor r;
  r.dtype = input(0).dtype;
  r.shape = shape;
  r.allocate();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < in.size(); ++k) {
      int64_t chunk = input(k).shape[axis] * inner;
      for (int64_t e = 0; e < chunk; ++e, ++pos) {
        int64_t src = o * chunk + e;
        if (r.isFloat())
          r.floats[pos] = input(k).getDouble(src);
        else
          r.ints[pos] = input(k).getInt(src);
      }
    }
  out.push_back(std::move(r));
  return true;
}

bool Folder::slice() {
  const HostTensor &x = input(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> starts = intsOf(input(1)), ends = intsOf(input(2));
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (has(3))
    axes = intsOf(input(3));
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (has(4))
    steps = intsOf(input(4));
  std::vector<int64_t> start(rank, 0), step(rank, 1), shape = x.shape;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    int64_t st = steps[i];
    if (st == 0)
      return fail("slice step is zero");
    SliceRange range = normalizeSlice(x.shape[a], starts[i], ends[i], st);
    shape[a] = range.count;
    start[a] = range.start;
    step[a] = st;
  }
  std::vector<int64_t> inStrides = stridesOf(x.shape);
  gatherInto(x, shape, [&](int64_t i) {
    int64_t src = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      src += (start[d] + (i % shape[d]) * step[d]) * inStrides[d];
      i /= shape[d];
    }
    return src;
  });
  return true;
}

bool Folder::gather() {
  const HostTensor &x = input(0), &idx = input(1);
  int64_t rank = x.shape.size();
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0)
    axis += rank;
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  int64_t n = idx.numElements(), dim = x.shape[axis];
  for (int64_t k = 0; k < n; ++k) {
    int64_t j = idx.getInt(k);
    if (j < -dim || j >= dim)
      return fail("gather index " + std::to_string(j) + " is out of range");
  }
  gatherInto(x, shape, [&](int64_t i) {
    int64_t in0 = i % inner;
    int64_t k = (i / inner) % n;
    int64_t o = i / inner / n;
    int64_t j = idx.getInt(k);
    if (j < 0)
      j += dim;
    return (o * dim + j) * inner + in0;
  });
  return true;
}

bool Folder::expand() {
  std::vector<int64_t> shape;
  if (!broadcastShapes(input(0).shape, intsOf(input(1)), shape))
    return fail("cannot expand to the given shape");
  gatherInto(input(0), shape, [&](int64_t i) {
    return broadcastIndex(i, shape, input(0).shape);
  });
  return true;
}

bool Folder::range() {
  HostTensor r;
  r.dtype = input(0).dtype;
  double start = input(0).getDouble(0), limit = input(1).getDouble(0);
  double delta = input(2).getDouble(0);
  if (delta == 0)
    return fail("range delta is zero");
  int64_t n = std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  r.shape = {n};
  r.allocate();
  for (int64_t i = 0; i < n; ++i)
    r.set(i, start + i * delta);
  out.push_back(std::move(r));
  return true;
}

bool Folder::einsum() {
  const auto *eqAttr = findAttr(node, "equation");
  if (!eqAttr)
    return fail("Einsum has no equation");
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < in.size(); ++k) {
    ranks.push_back(input(k).shape.size());
    shapes.push_back(input(k).shape);
  }
  EinsumSpec spec;
  std::vector<int64_t> outShape;
  if (!parseEinsum(eqAttr->s(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, outShape, error))
    return false;
  // Sizes of all labels; iterate over the full index space.
  std::map<char, int64_t> size;
  for (size_t k = 0; k < in.size(); ++k)
    for (size_t d = 0; d < spec.inputs[k].size(); ++d)
      size[spec.inputs[k][d]] =
          std::max(size[spec.inputs[k][d]], input(k).shape[d]);
  std::vector<char> labels;
  for (auto &[c, n] : size)
    labels.push_back(c);
  HostTensor r;
  r.dtype = input(0).dtype;
  r.shape = outShape;
  r.allocate();
  std::vector<double> acc(r.numElements(), 0.0);
  std::map<char, int64_t> value;
  std::function<void(size_t)> loop = [&](size_t li) {
    if (li == labels.size()) {
      double prod = 1.0;
      for (size_t k = 0; k < in.size(); ++k) {
        int64_t idx = 0;
        for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
          int64_t dim = input(k).shape[d];
          idx = idx * dim + (dim == 1 ? 0 : value[spec.inputs[k][d]]);
        }
        prod *= input(k).getDouble(idx);
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
  out.push_back(std::move(r));
  return true;
}

bool Folder::trilu() {
  HostTensor r = input(0);
  bool upper = intAttr(node, "upper", 1) != 0;
  int64_t k = has(1) ? input(1).getInt(0) : 0;
  size_t rank = r.shape.size();
  if (rank < 2)
    return fail("Trilu needs rank >= 2");
  int64_t rows = r.shape[rank - 2], cols = r.shape[rank - 1];
  for (int64_t i = 0; i < r.numElements(); ++i) {
    int64_t c = i % cols, row = (i / cols) % rows;
    bool keep = upper ? c - row >= k : c - row <= k;
    if (!keep)
      r.set(i, 0);
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::matmul() {
  std::vector<int64_t> a = input(0).shape, b = input(1).shape;
  if (a.size() < 2 || b.size() < 2)
    return false; // vector forms are rare in constant subgraphs
  std::vector<int64_t> batchA(a.begin(), a.end() - 2),
      batchB(b.begin(), b.end() - 2), batch;
  if (!broadcastShapes(batchA, batchB, batch) || a.back() != b[b.size() - 2])
    return fail("matmul shapes do not match");
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  std::vector<int64_t> shape = batch;
  shape.push_back(m);
  shape.push_back(n);
  HostTensor r;
  r.dtype = input(0).dtype;
  r.shape = shape;
  r.allocate();
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
          s += input(0).getDouble(oa + i * k + kk) *
               input(1).getDouble(ob + kk * n + j);
        r.set((bi * m + i) * n + j, s);
      }
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::reduce(const std::string &kind) {
  const HostTensor &x = input(0);
  int64_t rank = x.shape.size();
  std::vector<int64_t> axes;
  if (const auto *a = findAttr(node, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  else if (has(1))
    axes = intsOf(input(1));
  bool keep = intAttr(node, "keepdims", 1) != 0;
  if (axes.empty() && intAttr(node, "noop_with_empty_axes", 0)) {
    out.push_back(x);
    return true;
  }
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
  std::vector<double> acc(n, kind == "max" ? -INFINITY : 0.0);
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
    acc[o] = kind == "max" ? std::max(acc[o], v) : acc[o] + v;
    ++count[o];
  }
  r.shape = shape;
  r.allocate();
  for (int64_t i = 0; i < n; ++i)
    r.set(i, kind == "mean" ? acc[i] / std::max<int64_t>(count[i], 1) : acc[i]);
  out.push_back(std::move(r));
  return true;
}

bool Folder::split() {
  const HostTensor &x = input(0);
  int64_t rank = x.shape.size();
  int64_t axis = intAttr(node, "axis", 0);
  if (axis < 0)
    axis += rank;
  int64_t parts = node.output_size(), dim = x.shape[axis];
  std::vector<int64_t> sizes;
  if (has(1))
    sizes = intsOf(input(1));
  else if (const auto *a = findAttr(node, "split"))
    sizes.assign(a->ints().begin(), a->ints().end());
  else {
    if (dim % parts)
      return fail("dimension " + std::to_string(dim) +
                  " does not split evenly into " + std::to_string(parts));
    sizes.assign(parts, dim / parts);
  }
  int64_t offset = 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x.shape[d];
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = x.shape;
    shape[axis] = s;
    gatherInto(x, shape, [&](int64_t i) {
      int64_t in0 = i % inner, a = (i / inner) % s, o = i / inner / s;
      return (o * dim + offset + a) * inner + in0;
    });
    offset += s;
  }
  return true;
}

bool Folder::cast() {
  int64_t to = intAttr(node, "to", 1);
  if (!isSupportedDType(static_cast<int32_t>(to)))
    return fail("cast to unsupported type " +
                dtypeName(static_cast<int32_t>(to)));
  HostTensor r;
  r.dtype = static_cast<DType>(to);
  r.shape = input(0).shape;
  r.allocate();
  for (int64_t i = 0; i < r.numElements(); ++i) {
    if (!r.isFloat() && !input(0).isFloat())
      r.ints[i] =
          r.dtype == DType::Bool ? input(0).ints[i] != 0 : input(0).ints[i];
    else
      r.set(i, input(0).getDouble(i));
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::where() {
  std::vector<int64_t> s1, shape;
  if (!broadcastShapes(input(0).shape, input(1).shape, s1) ||
      !broadcastShapes(s1, input(2).shape, shape))
    return fail("where operands are not broadcastable");
  HostTensor r;
  r.dtype = input(1).dtype;
  r.shape = shape;
  r.allocate();
  for (int64_t i = 0; i < r.numElements(); ++i) {
    bool c = input(0).getInt(broadcastIndex(i, shape, input(0).shape)) != 0;
    const HostTensor &src = c ? input(1) : input(2);
    int64_t j = broadcastIndex(i, shape, src.shape);
    if (r.isFloat())
      r.floats[i] = src.floats[j];
    else
      r.ints[i] = src.ints[j];
  }
  out.push_back(std::move(r));
  return true;
}

bool Folder::softmax() {
  HostTensor r = input(0);
  int64_t rank = r.shape.size(), axis = intAttr(node, "axis", -1);
  if (axis < 0)
    axis += rank;
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
        r.set(at(a), std::exp(input(0).floats[at(a)] - mx) / sum);
    }
  out.push_back(std::move(r));
  return true;
}

bool Folder::constantOfShape() {
  HostTensor r;
  r.dtype = DType::Float;
  double value = 0;
  if (const auto *a = findAttr(node, "value")) {
    HostTensor v;
    if (!decodeTensor(a->t(), nullptr, v, error))
      return false;
    r.dtype = v.dtype;
    value = v.numElements() ? v.getDouble(0) : 0;
  }
  r.shape = intsOf(input(0));
  r.allocate();
  for (int64_t i = 0; i < r.numElements(); ++i)
    r.set(i, value);
  out.push_back(std::move(r));
  return true;
}

bool Folder::run() {
  const std::string &op = node.op_type();
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i] &&
        !(op == "Slice" || op == "Trilu" || op == "Squeeze" || op == "Split" ||
          op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax"))
      return false;
  if (op == "Identity") {
    out.push_back(input(0));
    return true;
  }
  auto same = [&] { return input(0).dtype; };
  if (op == "Add")
    return elementwise(same(), std::plus<double>(), std::plus<int64_t>());
  if (op == "Sub")
    return elementwise(same(), std::minus<double>(), std::minus<int64_t>());
  if (op == "Mul")
    return elementwise(same(), std::multiplies<double>(),
                       std::multiplies<int64_t>());
  if (op == "Div") {
    for (int64_t i = 0; !input(1).isFloat() && i < input(1).numElements(); ++i)
      if (input(1).ints[i] == 0)
        return fail("integer division by zero");
    return elementwise(same(), std::divides<double>(), std::divides<int64_t>());
  }
  if (op == "Pow")
    return elementwise(
        same(), [](double a, double b) { return std::pow(a, b); }, nullptr);
  if (op == "Equal")
    return elementwise(
        DType::Bool, [](double a, double b) { return a == b; },
        [](int64_t a, int64_t b) { return a == b; });
  if (op == "Less")
    return elementwise(
        DType::Bool, [](double a, double b) { return a < b; },
        [](int64_t a, int64_t b) { return a < b; });
  if (op == "Sqrt")
    return unary([](double x) { return std::sqrt(x); });
  if (op == "Reciprocal")
    return unary([](double x) { return 1.0 / x; });
  if (op == "Neg")
    return unary([](double x) { return -x; });
  if (op == "Exp")
    return unary([](double x) { return std::exp(x); });
  if (op == "Log")
    return unary([](double x) { return std::log(x); });
  if (op == "Erf")
    return unary([](double x) { return std::erf(x); });
  if (op == "Tanh")
    return unary([](double x) { return std::tanh(x); });
  if (op == "Sigmoid")
    return unary([](double x) { return 1 / (1 + std::exp(-x)); });
  if (op == "Relu")
    return unary([](double x) { return x > 0 ? x : 0.0; });
  if (op == "Cos")
    return unary([](double x) { return std::cos(x); });
  if (op == "Sin")
    return unary([](double x) { return std::sin(x); });
  if (op == "Reshape")
    return reshape();
  if (op == "Transpose")
    return transpose();
  if (op == "Unsqueeze")
    return unsqueeze();
  if (op == "Squeeze")
    return squeeze();
  if (op == "Concat")
    return concat();
  if (op == "Slice")
    return slice();
  if (op == "Gather")
    return gather();
  if (op == "Expand")
    return expand();
  if (op == "Range")
    return range();
  if (op == "Einsum")
    return einsum();
  if (op == "Trilu")
    return trilu();
  if (op == "MatMul")
    return matmul();
  if (op == "ReduceSum")
    return reduce("sum");
  if (op == "ReduceMean")
    return reduce("mean");
  if (op == "ReduceMax")
    return reduce("max");
  if (op == "Split")
    return split();
  if (op == "Cast")
    return cast();
  if (op == "Where")
    return where();
  if (op == "Softmax")
    return softmax();
  if (op == "ConstantOfShape")
    return constantOfShape();
  return false;
}
} // namespace

bool foldNode(const onnx::NodeProto &node,
              const std::vector<const HostTensor *> &inputs,
              std::vector<HostTensor> &outputs, std::string &error) {
  error.clear();
  outputs.clear();
  Folder folder{node, inputs, outputs, error};
  if (inputs.empty() || !inputs[0])
    return false;
  return folder.run();
}

} // namespace mp::onnx_import
