//===- ProgramFuzzer.cpp - fuzz the artifact loader -----------------------===//
//
// Input: the bytes of a Program message (program.pb without its checksum
// trailer: the target seals it, else nearly every mutation would only test
// the crc). It is loaded as an artifact whose parameter files are those of
// $MP_FUZZ_ARTIFACT (a real artifact; scripts/fuzz.sh compiles one), and a
// program the loader accepts is run on zero inputs: the loader's checks are
// what stands between a bad program and the kernels.
//
//===----------------------------------------------------------------------===//
#include "FuzzIO.h"

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Kernels.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdlib>
#include <dirent.h>
#include <memory>
#include <unistd.h>
#include <vector>

using namespace mp::rt;

/// Links the parameter files of $MP_FUZZ_ARTIFACT into the scratch artifact.
static void linkParameterFiles(const std::string &dir) {
  const char *artifact = std::getenv("MP_FUZZ_ARTIFACT");
  if (!artifact)
    return;
  DIR *d = opendir(artifact);
  if (!d)
    return;
  while (dirent *entry = readdir(d)) {
    std::string name = entry->d_name;
    if (name.size() > 12 &&
        name.compare(name.size() - 12, 12, ".safetensors") == 0)
      (void)symlink((std::string(artifact) + "/" + name).c_str(),
                    (dir + "/" + name).c_str());
  }
  closedir(d);
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Protobuf logs each string that is not UTF-8 before the parse fails.
  google::protobuf::SetLogHandler(nullptr);
  cpu::setNumThreads(1);
  linkParameterFiles(mp::fuzz::scratchDirectory());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = mp::fuzz::scratchDirectory();
  std::string sealed =
      sealProgram(std::string(reinterpret_cast<const char *>(data), size));
  mp::fuzz::writeScratchFile(dir + "/program.pb",
                             reinterpret_cast<const uint8_t *>(sealed.data()),
                             sealed.size());
  std::unique_ptr<Executable> exe;
  if (!Executable::load(dir, exe))
    return 0;
  // Run what loads, unless it is too big to run quickly.
  constexpr int64_t kMaxRunBytes = int64_t(64) << 20;
  if (exe->arenaBytes() > kMaxRunBytes)
    return 0;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<Tensor> inputs, outputs;
  int64_t inputBytes = 0;
  for (const IOSpec &spec : exe->inputs()) {
    Tensor t{nullptr, spec.dtype, spec.shape};
    inputBytes += static_cast<int64_t>(t.bytes());
    if (inputBytes > kMaxRunBytes)
      return 0;
    storage.emplace_back(t.bytes());
    t.data = storage.back().data();
    inputs.push_back(t);
  }
  (void)exe->run(inputs, outputs);
  return 0;
}
