//===- Tensor.h - runtime tensors and status ----------------------*- C++ -*-===//
//
// Plain C++17: the runtime links no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_TENSOR_H
#define MP_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mp::rt {

/// Element types. Bool is one byte (0 or 1).
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, Bool };

size_t dtypeSize(DType type);
const char *dtypeName(DType type);
/// Parses "f32", "i64", ... (the names dtypeName gives); false if unknown.
bool parseDType(const std::string &name, DType &type);

/// A view of memory the runtime owns elsewhere (arena, parameters,
/// constants): row-major, contiguous.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// "2x3x4" ("scalar" for rank 0), for messages.
std::string formatShape(const std::vector<int64_t> &shape);

/// The numpy broadcast of two shapes; false when they do not broadcast.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out);

/// Result of an operation that can fail on user input: ok, or a message
/// that says what was expected and what was found.
struct Status {
  bool ok = true;
  std::string message;

  static Status success() { return {}; }
  static Status error(std::string message) { return {false, std::move(message)}; }
  explicit operator bool() const { return ok; }
};

} // namespace mp::rt

#endif // MP_RUNTIME_TENSOR_H
