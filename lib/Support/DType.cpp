//===- DType.cpp - element types of the artifact --------------------------===//
#include "mp/Support/DType.h"

namespace mp {

size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32: return 4;
  case DType::F64:
  case DType::I64: return 8;
  case DType::F16:
  case DType::BF16: return 2;
  case DType::I8:
  case DType::Bool: return 1;
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

bool tensorBytes(const std::vector<int64_t> &shape, DType type, int64_t &bytes,
                 std::string &why) {
  int64_t n = static_cast<int64_t>(dtypeSize(type));
  for (int64_t d : shape) {
    if (d < 0) {
      why = "a negative dimension (" + std::to_string(d) + ")";
      return false;
    }
    if (d != 0 && n > kMaxTensorBytes / d) {
      why = "more than " + std::to_string(kMaxTensorBytes) + " bytes";
      return false;
    }
    n *= d;
  }
  bytes = n;
  return true;
}

} // namespace mp
