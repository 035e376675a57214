//===- Tensor.cpp - runtime tensors ---------------------------------------===//
#include "mp/Runtime/Tensor.h"

#include <algorithm>

namespace mp::rt {

size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F32: case DType::I32: return 4;
  case DType::F64: case DType::I64: return 8;
  case DType::F16: case DType::BF16: return 2;
  case DType::I8: case DType::Bool: return 1;
  }
  return 0;
}

static const char *const kNames[] = {"f32", "f64", "f16", "bf16",
                                     "i64", "i32", "i8",  "bool"};

const char *dtypeName(DType type) { return kNames[static_cast<int>(type)]; }

bool parseDType(const std::string &name, DType &type) {
  for (int i = 0; i < 8; ++i)
    if (name == kNames[i]) {
      type = static_cast<DType>(i);
      return true;
    }
  return false;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    result[i] = da == 1 ? db : da;
  }
  out = std::move(result); // `out` may alias `a` or `b`
  return true;
}

} // namespace mp::rt
