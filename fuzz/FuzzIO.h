//===- FuzzIO.h - scratch files for the fuzz targets ------------*- C++ -*-===//
//
// The importer and the loader read paths, not buffers: each target writes its
// input into a scratch directory of its own process (libFuzzer's -fork and
// -jobs run several) and reads it from there.
//
//===----------------------------------------------------------------------===//
#ifndef MP_FUZZ_FUZZIO_H
#define MP_FUZZ_FUZZIO_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace mp::fuzz {

/// A directory for this process's scratch files (made on first use).
inline const std::string &scratchDirectory() {
  static const std::string dir = [] {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/mp-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("mp-fuzz: mkdtemp");
      std::abort();
    }
    return pattern;
  }();
  return dir;
}

/// Writes `size` bytes at `data` to `path` (replacing it).
inline void writeScratchFile(const std::string &path, const uint8_t *data,
                             size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size)) {
    std::perror("mp-fuzz: writing a scratch file");
    std::abort();
  }
  std::fclose(f);
}

} // namespace mp::fuzz

#endif // MP_FUZZ_FUZZIO_H
