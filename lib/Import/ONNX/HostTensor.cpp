//===- HostTensor.cpp - constant tensors held by the importer -------------===//
//
// HostTensor itself: element types, storage, rounding to the narrow float
// types, and decoding TensorProtos (initializers, Constant attributes, bound
// inputs); plus the small helpers on ONNX attributes and slices that the
// importer and the folder share. Evaluating nodes on HostTensors is in
// Fold*.cpp.
//
//===----------------------------------------------------------------------===//
#include "HostTensor.h"

#include "mp/Support/Float16.h"
#include "mp/Support/IntegerArithmetic.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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
  case DType::BFloat16: return true;
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
  if (!isFloat())
    return ints[i];
  // Saturated as a cast is (NaN as 0): a float's int64 conversion out of
  // range is undefined.
  double f = floats[i];
  if (std::isnan(f))
    return 0;
  if (f >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (f <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(f);
}

std::string knownShapeProblem(const std::vector<int64_t> &shape) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return "shape " + formatShape(shape) + " has a negative dimension";
  std::optional<int64_t> n = checkedNumElements(shape);
  if (!n)
    return "shape " + formatShape(shape) +
           " has more elements than int64 "
           "counts";
  if (*n > kMaxKnownElements)
    return "a known tensor of " + std::to_string(*n) + " elements (" +
           formatShape(shape) + ") is larger than the importer's limit of " +
           std::to_string(kMaxKnownElements);
  return "";
}

bool HostTensor::allocate(std::string &error) {
  error = knownShapeProblem(shape);
  if (!error.empty())
    return false;
  floats.clear();
  ints.clear();
  if (isFloat())
    floats.assign(numElements(), 0.0);
  else
    ints.assign(numElements(), 0);
  return true;
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
  case DType::Float: floats[i] = static_cast<float>(v); return;
  case DType::Double: floats[i] = v; return;
  case DType::Float16: floats[i] = roundToFloat16(v); return;
  case DType::BFloat16: floats[i] = roundToBFloat16(v); return;
  case DType::Bool: ints[i] = v != 0; return;
  case DType::Int8: ints[i] = rt::saturatingToInt<int8_t>(v); return;
  case DType::Int32: ints[i] = rt::saturatingToInt<int32_t>(v); return;
  case DType::Int64: ints[i] = rt::saturatingToInt<int64_t>(v); return;
  }
}

void HostTensor::setInt(int64_t i, int64_t v) {
  switch (dtype) {
  case DType::Bool: ints[i] = v != 0; return;
  case DType::Int8: ints[i] = static_cast<int8_t>(v); return;
  case DType::Int32: ints[i] = static_cast<int32_t>(v); return;
  default: ints[i] = v; return;
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
    // (Counted without adding the step, which may be near INT64_MAX.)
    return {start, end, end > start ? (end - start - 1) / step + 1 : 0};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::min(std::clamp<int64_t>(end, -1, dim - 1), start);
  const uint64_t stride = uint64_t{0} - static_cast<uint64_t>(step); // |step|
  return {start, end,
          start > end ? static_cast<int64_t>(
                            static_cast<uint64_t>(start - end - 1) / stride) +
                            1
                      : 0};
}

//===----------------------------------------------------------------------===//
// Decoding TensorProto
//===----------------------------------------------------------------------===//

static int64_t elementBytes(DType t) {
  switch (t) {
  case DType::Int8:
  case DType::Bool: return 1;
  case DType::Float16:
  case DType::BFloat16: return 2;
  case DType::Float:
  case DType::Int32: return 4;
  case DType::Int64:
  case DType::Double: return 8;
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
    case DType::Int8: out.ints[i] = static_cast<int8_t>(p[i]); break;
    case DType::Bool: out.ints[i] = p[i] != 0; break;
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
                  HostTensor &out, std::string &error, int64_t leading) {
  if (!isSupportedDType(proto.data_type())) {
    error = "tensor '" + proto.name() + "' has unsupported element type " +
            dtypeName(proto.data_type());
    return false;
  }
  out.dtype = static_cast<DType>(proto.data_type());
  out.shape.assign(proto.dims().begin(), proto.dims().end());
  std::optional<int64_t> count = checkedNumElements(out.shape);
  if (!count) {
    error = "tensor '" + proto.name() + "' has shape " +
            formatShape(out.shape) +
            ": a negative dimension or more elements than int64 counts";
    return false;
  }
  const int64_t n = *count;
  auto sizeError = [&](int64_t found) {
    error = "tensor '" + proto.name() + "' holds " + std::to_string(found) +
            " values but its shape needs " + std::to_string(n);
    return false;
  };
  const std::string *raw = external               ? external
                           : proto.has_raw_data() ? &proto.raw_data()
                                                  : nullptr;
  int64_t found = 0;
  if (raw) {
    int64_t bytes;
    bool overflow = __builtin_mul_overflow(n, elementBytes(out.dtype), &bytes);
    if (overflow || static_cast<int64_t>(raw->size()) != bytes) {
      error = "tensor '" + proto.name() + "' has " +
              std::to_string(raw->size()) +
              " bytes of data but its shape needs " +
              (overflow ? "more than int64 counts" : std::to_string(bytes));
      return false;
    }
  } else {
    switch (out.dtype) {
    case DType::Float: found = proto.float_data_size(); break;
    case DType::Double: found = proto.double_data_size(); break;
    case DType::Int64: found = proto.int64_data_size(); break;
    default: found = proto.int32_data_size(); break;
    }
    if (found != n)
      return sizeError(found);
  }
  if (leading >= 0)
    out.shape = {std::min(leading, n)};
  if (std::string problem = knownShapeProblem(out.shape); !problem.empty()) {
    error = "tensor '" + proto.name() + "': " + problem;
    return false;
  }
  out.allocate(error);
  const int64_t m = out.numElements();
  if (raw) {
    decodeRaw(*raw, out);
    return true;
  }
  for (int64_t i = 0; i < m; ++i) {
    switch (out.dtype) {
    case DType::Float: out.floats[i] = proto.float_data(i); break;
    case DType::Double: out.floats[i] = proto.double_data(i); break;
    case DType::Int64: out.ints[i] = proto.int64_data(i); break;
    case DType::Float16:
    case DType::BFloat16: {
      uint16_t bits = static_cast<uint16_t>(proto.int32_data(i));
      out.floats[i] =
          out.dtype == DType::Float16 ? halfToFloat(bits) : bf16ToFloat(bits);
      break;
    }
    case DType::Int8:
    case DType::Int32:
    case DType::Bool: out.ints[i] = proto.int32_data(i); break;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Attributes
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

} // namespace mp::onnx_import
