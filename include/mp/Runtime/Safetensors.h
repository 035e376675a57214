//===- Safetensors.h - safetensors files --------------------------*- C++
//-*-===//
//
// The parameter format of artifacts (https://github.com/huggingface/
// safetensors): an 8-byte little-endian header length, a JSON header mapping
// names to {dtype, shape, data_offsets}, then the data. Python tools read it.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_SAFETENSORS_H
#define MP_RUNTIME_SAFETENSORS_H

#include "mp/Runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mp::rt {

struct SafetensorsEntry {
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte range in the data section
};

/// Writes tensors added with `add` into `path` (via a temporary file that is
/// renamed into place on `finish`).
class SafetensorsWriter {
public:
  /// With `checksums`, the header's metadata holds each tensor's crc32
  /// ("crc32:NAME"), which SafetensorsFile::open checks: files with no
  /// checksum of their own elsewhere (checkpoints; an artifact's are in
  /// program.pb).
  explicit SafetensorsWriter(std::string path, bool checksums = false)
      : path(std::move(path)), checksums(checksums) {}
  void add(const std::string &name, DType dtype, std::vector<int64_t> shape,
           std::string bytes);
  Status finish();

private:
  std::string path;
  bool checksums;
  std::vector<std::pair<std::string, SafetensorsEntry>> entries;
  std::vector<std::string> data;
};

/// A safetensors file read into memory (64-byte aligned data).
class SafetensorsFile {
public:
  static Status open(const std::string &path,
                     std::unique_ptr<SafetensorsFile> &out);
  const std::map<std::string, SafetensorsEntry> &entries() const {
    return table;
  }
  const uint8_t *data(const SafetensorsEntry &e) const {
    return storage.get() + e.begin;
  }

private:
  std::map<std::string, SafetensorsEntry> table;
  std::unique_ptr<uint8_t, void (*)(void *)> storage{nullptr, nullptr};
};

/// The crc32 of `bytes` bytes at `data` (zlib's, any size).
uint32_t checksumOf(const void *data, uint64_t bytes);

/// safetensors dtype names (F32, BF16, I64, BOOL, ...).
const char *safetensorsDTypeName(DType type);

} // namespace mp::rt

#endif // MP_RUNTIME_SAFETENSORS_H
