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
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef MP_RUNTIME_INTERFACE
#error "CMake defines MP_RUNTIME_INTERFACE (lib/Runtime/CMakeLists.txt)"
#endif

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

const char *forcedPath() {
  const char *forced = std::getenv(kCudaBackendVariable);
  return forced && *forced ? forced : nullptr;
}

/// Where to look, in order: only $MP_CUDA_BACKEND when it is set.
std::vector<std::string> candidates() {
  if (const char *forced = forcedPath())
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

/// The backend `handle` holds, checked to be of this build; else an error.
Loaded enter(void *handle, const std::string &path) {
  Loaded result;
  using Entry = const CudaBackend *(*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaBackendSymbol));
  const CudaBackend *backend = entry ? entry() : nullptr;
  const std::string named = "the CUDA backend '" + path + "' ";
  if (!backend)
    result.error = named + "has no '" + kCudaBackendSymbol + "' entry point";
  else if (backend->abi != kCudaBackendAbi ||
           std::strcmp(backend->interface, MP_RUNTIME_INTERFACE) != 0)
    result.error =
        named + "is from another build of mp (runtime interface " +
        (backend->abi == kCudaBackendAbi ? backend->interface : "unknown") +
        ", this mp-run's " + MP_RUNTIME_INTERFACE + ")";
  else
    result.backend = backend;
  return result;
}

Loaded load() {
  const bool forced = forcedPath() != nullptr;
  for (const std::string &path : candidates()) {
    // A file that is there but fails to load is the error to report (a
    // missing CUDA library, say), not the places where nothing was.
    const bool searched = path.find('/') == std::string::npos;
    if (!forced && !searched && !fileExists(path))
      continue;
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      Loaded failed;
      failed.error = "cannot load the CUDA backend '" + path +
                     "': " + (why ? why : "unknown error");
      if (!forced)
        failed.error += std::string(" (it is not beside this executable nor "
                                    "in ../lib; set ") +
                        kCudaBackendVariable + " to its path)";
      return failed;
    }
    Loaded result = enter(handle, path);
    if (!result.backend)
      dlclose(handle);
    return result; // (a backend stays loaded until the process ends)
  }
  return {nullptr, "no CUDA backend to load"}; // (unreachable: a bare name
                                               // is always tried)
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
  l.backend->setCollectiveTimeout(collectiveTimeout());
  return l.backend->makeCommunicator(host, out);
}

} // namespace mp::rt
