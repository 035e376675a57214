//===- HostTensor.h - constant tensors held by the importer -----*- C++ -*-===//
//
// A tensor whose value is known at import: an integer initializer, a Constant
// node, or the result of folding a subgraph whose inputs are all known.
// Integers and booleans are held exactly as int64; floats as double.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_HOSTTENSOR_H
#define MP_LIB_IMPORT_ONNX_HOSTTENSOR_H

#include "mp/Support/Shape.h"

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class AttributeProto;
class NodeProto;
class TensorProto;
} // namespace onnx

namespace mp::onnx_import {

/// ONNX TensorProto element types the importer understands.
enum class DType : int32_t {
  Float = 1,
  Int8 = 3,
  Int32 = 6,
  Int64 = 7,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  BFloat16 = 16
};

bool isSupportedDType(int32_t onnxType);
bool isFloatDType(DType type);
/// int32 or int64: ONNX's index types (Tind).
inline bool isIndexDType(DType type) {
  return type == DType::Int32 || type == DType::Int64;
}
std::string dtypeName(int32_t onnxType);

/// The most elements the importer holds in one known tensor (a constant, a
/// folded value): 64 Mi, 512 MiB as doubles; a causal mask of 8192x8192 fits.
/// Larger constants would be written into the IR; ask a model that needs
/// them to compute them at run time instead.
constexpr int64_t kMaxKnownElements = int64_t(1) << 26;

/// Why a tensor of `shape` cannot be held at import (a negative dim, too many
/// elements); empty when it can.
std::string knownShapeProblem(const std::vector<int64_t> &shape);

struct HostTensor {
  DType dtype = DType::Float;
  std::vector<int64_t> shape;
  std::vector<double> floats; // when isFloatDType(dtype)
  std::vector<int64_t> ints;  // otherwise (bool as 0/1)

  bool isFloat() const { return isFloatDType(dtype); }
  int64_t numElements() const;
  /// Element i as double / int64 whatever the dtype.
  double getDouble(int64_t i) const { return isFloat() ? floats[i] : ints[i]; }
  int64_t getInt(int64_t i) const;
  /// Allocates zeroed storage for the current shape; false with `error` set
  /// when a dim is negative or there are more than kMaxKnownElements.
  bool allocate(std::string &error);
  /// Element i set from a double, as a cast does: rounded to a float type,
  /// truncated and saturated to an integer type (the runtime's cast).
  void set(int64_t i, double v);
  /// Integer element i set from an int64, wrapped to the type's width (the
  /// runtime's integer arithmetic).
  void setInt(int64_t i, int64_t v);
};

/// Decodes a TensorProto whose data is inline or in `externalData` (the
/// bytes of its external file slice); with `leading` >= 0, only its first
/// `leading` elements, as a vector. Returns false with `error` set.
bool decodeTensor(const onnx::TensorProto &proto, const std::string *external,
                  HostTensor &out, std::string &error, int64_t leading = -1);

/// The attribute `name` of `node`, or nullptr.
const onnx::AttributeProto *findAttr(const onnx::NodeProto &node,
                                     const std::string &name);
/// An INT attribute, or `def` when absent.
int64_t intAttr(const onnx::NodeProto &node, const std::string &name,
                int64_t def);

using mp::broadcastShapes;
using mp::formatShape;

/// ONNX Slice on one dimension of size `dim`: negative positions count from
/// the end, both ends are clamped; `limit` is exclusive (-1 allowed for a
/// negative step) and `count` the number of elements taken.
struct SliceRange {
  int64_t start, limit, count;
};
SliceRange normalizeSlice(int64_t dim, int64_t start, int64_t end,
                          int64_t step);

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_HOSTTENSOR_H
