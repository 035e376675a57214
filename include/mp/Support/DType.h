//===- DType.h - element types of the artifact ------------------*- C++ -*-===//
//
// The element types the compiler writes into an artifact and the runtime
// reads, by one set of names. Plain C++: shared by both sides.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_DTYPE_H
#define MP_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mp {

/// Element types. Bool is one byte (0 or 1).
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, Bool };

size_t dtypeSize(DType type);
/// "f32", "f64", "f16", "bf16", "i64", "i32", "i8", "bool".
const char *dtypeName(DType type);
/// Parses the names dtypeName gives; false if unknown.
bool parseDType(const std::string &name, DType &type);
/// Whether `type` is a 16-bit float (bf16 or f16).
inline bool isHalfFloat(DType type) {
  return type == DType::BF16 || type == DType::F16;
}

/// The most bytes one tensor may have (256 TiB): sizes read from files are
/// checked against it before anything is allocated or indexed.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;
/// The bytes of a tensor of `shape` and `type`, computed without overflow;
/// false (and `why` set) for a negative dim or a size past kMaxTensorBytes.
bool tensorBytes(const std::vector<int64_t> &shape, DType type, int64_t &bytes,
                 std::string &why);

} // namespace mp

#endif // MP_SUPPORT_DTYPE_H
