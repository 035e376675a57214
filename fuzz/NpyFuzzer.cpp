//===- NpyFuzzer.cpp - fuzz the .npy reader -------------------------------===//
//
// Input: the bytes of a .npy file, as mp-run --input reads them.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Npy.h"

#include <cstdint>
#include <numeric>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mp::rt::HostBuffer out;
  std::string_view file(reinterpret_cast<const char *>(data), size);
  if (mp::rt::decodeNpy(file, "fuzz.npy", out)) {
    // A decoded tensor must be exactly as large as its shape says.
    if (static_cast<int64_t>(out.bytes.size()) !=
        out.view().numel() * static_cast<int64_t>(dtypeSize(out.dtype)))
      __builtin_trap();
  }
  return 0;
}
