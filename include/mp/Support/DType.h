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

namespace mp {

/// Element types. Bool is one byte (0 or 1).
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, Bool };

size_t dtypeSize(DType type);
/// "f32", "f64", "f16", "bf16", "i64", "i32", "i8", "bool".
const char *dtypeName(DType type);
/// Parses the names dtypeName gives; false if unknown.
bool parseDType(const std::string &name, DType &type);

} // namespace mp

#endif // MP_SUPPORT_DTYPE_H
