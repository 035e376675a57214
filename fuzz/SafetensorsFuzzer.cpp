//===- SafetensorsFuzzer.cpp - fuzz the safetensors reader ----------------===//
//
// Input: the bytes of a parameter file. Every entry the reader accepts is
// read end to end, so a range past the data shows up under ASan.
//
//===----------------------------------------------------------------------===//
#include "FuzzIO.h"

#include "mp/Runtime/Safetensors.h"

#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path =
      mp::fuzz::scratchDirectory() + "/params.safetensors";
  mp::fuzz::writeScratchFile(path, data, size);
  std::unique_ptr<mp::rt::SafetensorsFile> file;
  if (!mp::rt::SafetensorsFile::open(path, file))
    return 0;
  volatile uint8_t sum = 0;
  for (const auto &[name, entry] : file->entries()) {
    const uint8_t *bytes = file->data(entry);
    for (uint64_t i = entry.begin; i < entry.end; ++i)
      sum = sum + bytes[i - entry.begin];
  }
  return 0;
}
