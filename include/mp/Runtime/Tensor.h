//===- Tensor.h - runtime tensors and status ----------------------*- C++
//-*-===//
//
// Plain C++17: the runtime links no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_TENSOR_H
#define MP_RUNTIME_TENSOR_H

#include "mp/Support/DType.h"
#include "mp/Support/Shape.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mp::rt {

// Element types and shapes are the op contract's (mp/Support).
using ::mp::broadcastShapes;
using ::mp::DType;
using ::mp::dtypeName;
using ::mp::dtypeSize;
using ::mp::formatShape;
using ::mp::parseDType;

/// A view of memory the runtime owns elsewhere (arena, parameters,
/// constants): row-major, contiguous.
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const;
  size_t bytes() const {
    return static_cast<size_t>(numel()) * dtypeSize(dtype);
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Result of an operation that can fail on user input: ok, or a message
/// that says what was expected and what was found.
struct Status {
  bool ok = true;
  std::string message;

  static Status success() { return {}; }
  static Status error(std::string message) {
    return {false, std::move(message)};
  }
  explicit operator bool() const { return ok; }
};

} // namespace mp::rt

#endif // MP_RUNTIME_TENSOR_H
