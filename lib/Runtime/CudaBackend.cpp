//===- CudaBackend.cpp - loading the CUDA backend plugin ------------------===//
//
// cudaKernelTable and makeDeviceCommunicator of a runtime built with CUDA:
// the first call loads libmp-cuda.so (CudaBackend.h) from $MP_CUDA_BACKEND,
// else from the executable's folder or ../lib beside it, else by the
// dynamic linker's search; every later call gives the same result.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/CudaBackend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <sys/stat.h>
#include <vector>

namespace mp::rt {

namespace {

struct Loaded {
  const CudaBackend *backend = nullptr;
  std::string error;
};

std::string executableFolder() {
  std::vector<char> path(4096);
  ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0)
    return "";
  std::string exe(path.data(), static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

bool fileExists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// Where to look, in order: only $MP_CUDA_BACKEND when it is set.
std::vector<std::string> candidates() {
  if (const char *forced = std::getenv(kCudaBackendVariable); forced && *forced)
    return {forced};
  std::vector<std::string> paths;
  std::string folder = executableFolder();
  if (!folder.empty()) {
    paths.push_back(folder + "/" + kCudaBackendLibrary);
    paths.push_back(folder + "/../lib/" + kCudaBackendLibrary);
  }
  paths.push_back(kCudaBackendLibrary); // (the dynamic linker's search)
  return paths;
}

Loaded load() {
  Loaded result;
  const std::vector<std::string> paths = candidates();
  const bool forced = paths.size() == 1;
  void *handle = nullptr;
  for (const std::string &path : paths) {
    // A file that is there but fails to load is the error to report (a
    // missing CUDA library, say), not the places where nothing was.
    if (!forced && path.find('/') != std::string::npos && !fileExists(path))
      continue;
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle)
      break;
    const char *why = dlerror();
    result.error = "cannot load the CUDA backend '" + path +
                   "': " + (why ? why : "unknown error");
    if (path.find('/') == std::string::npos)
      result.error += " (it is not beside this executable nor in ../lib; "
                      "set " +
                      std::string(kCudaBackendVariable) + " to its path)";
    return result;
  }
  using Entry = const CudaBackend *(*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaBackendSymbol));
  const CudaBackend *backend = entry ? entry() : nullptr;
  if (!backend) {
    result.error = std::string("the CUDA backend has no '") +
                   kCudaBackendSymbol + "' entry point";
  } else if (backend->abi != kCudaBackendAbi ||
             backend->tableBytes != sizeof(KernelTable)) {
    result.error = "the CUDA backend is from another build of mp (interface " +
                   std::to_string(backend->abi) + "/" +
                   std::to_string(backend->tableBytes) + ", this runtime's " +
                   std::to_string(kCudaBackendAbi) + "/" +
                   std::to_string(sizeof(KernelTable)) + ")";
  } else {
    result.backend = backend;
    return result; // (stays loaded until the process ends)
  }
  dlclose(handle);
  return result;
}

const Loaded &loaded() {
  static const Loaded once = load();
  return once;
}

} // namespace

const KernelTable *cudaKernelTable(std::string *why) {
  const Loaded &l = loaded();
  if (!l.backend && why)
    *why = l.error;
  return l.backend ? l.backend->kernels : nullptr;
}

Status makeDeviceCommunicator(Communicator &host,
                              std::unique_ptr<Communicator> &out) {
  const Loaded &l = loaded();
  if (!l.backend)
    return Status::error(l.error);
  return l.backend->makeCommunicator(host, out);
}

} // namespace mp::rt
