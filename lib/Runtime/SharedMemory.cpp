//===- SharedMemory.cpp - host memory other processes of the host can map -===//
#include "SharedMemory.h"

#include "cpu/HugePages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace mp::rt {

namespace {

struct Region {
  int fd = -1;
  uint64_t inode = 0;
  size_t bytes = 0;
};

struct PeerMapping {
  uint64_t inode = 0;
  size_t bytes = 0;
  uint8_t *base = nullptr;
};

/// This process's shareable regions by base address, and the peers'
/// regions it maps by (pid, descriptor).
struct Registry {
  std::mutex mutex;
  bool shareAllocations = false;
  std::map<uintptr_t, Region> own;
  std::map<std::pair<int32_t, int32_t>, PeerMapping> mapped;
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed: used until exit
  return *r;
}

std::string systemError(const std::string &what) {
  return what + ": " + std::strerror(errno);
}

} // namespace

void shareHostAllocations(bool on) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.shareAllocations = on;
}

Status allocateShared(size_t bytes, void **ptr) {
  *ptr = nullptr;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t size = std::max<size_t>(page, (bytes + page - 1) / page * page);
  int fd = memfd_create("mp-shared", MFD_CLOEXEC);
  if (fd < 0)
    return Status::error(systemError("memfd_create"));
  struct stat st;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fstat(fd, &st) != 0) {
    Status s = Status::error(systemError("cannot size shared memory of " +
                                         std::to_string(size) + " bytes"));
    close(fd);
    return s;
  }
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status s = Status::error(systemError("cannot map " + std::to_string(size) +
                                         " bytes of shared memory"));
    close(fd);
    return s;
  }
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.own[reinterpret_cast<uintptr_t>(p)] =
      Region{fd, static_cast<uint64_t>(st.st_ino), size};
  *ptr = p;
  return Status::success();
}

Status allocateHost(size_t bytes, void **ptr) {
  bool shared;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    shared = r.shareAllocations;
  }
  if (shared)
    return allocateShared(bytes, ptr);
  *ptr = cpu::allocateHugeAligned(bytes);
  return *ptr ? Status::success()
              : Status::error("cannot allocate " + std::to_string(bytes) +
                              " bytes");
}

void releaseHost(void *ptr) {
  if (!ptr)
    return;
  Registry &r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.own.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != r.own.end()) {
      munmap(ptr, it->second.bytes);
      close(it->second.fd);
      r.own.erase(it);
      return;
    }
  }
  std::free(ptr);
}

bool locateShared(const void *p, size_t bytes, SharedLocation &out) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = r.own.upper_bound(address);
  if (it == r.own.begin())
    return false;
  --it;
  const Region &region = it->second;
  const uintptr_t offset = address - it->first;
  if (offset > region.bytes || bytes > region.bytes - offset)
    return false;
  out = SharedLocation{static_cast<int32_t>(getpid()),
                       region.fd,
                       region.inode,
                       region.bytes,
                       offset,
                       bytes};
  return true;
}

Status mapShared(const SharedLocation &where, void *&ptr) {
  if (where.offset > where.regionBytes ||
      where.bytes > where.regionBytes - where.offset)
    return Status::error("a range beyond its shared region");
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  PeerMapping &m = r.mapped[std::make_pair(where.pid, where.fd)];
  if (!m.base || m.inode != where.inode || m.bytes < where.regionBytes) {
    if (m.base) // the owner freed that region: its descriptor is reused
      munmap(m.base, m.bytes);
    m = PeerMapping{};
    const std::string path = "/proc/" + std::to_string(where.pid) + "/fd/" +
                             std::to_string(where.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return Status::error(systemError("cannot open " + path));
    struct stat st;
    if (fstat(fd, &st) != 0 ||
        static_cast<uint64_t>(st.st_ino) != where.inode ||
        static_cast<uint64_t>(st.st_size) < where.regionBytes) {
      close(fd);
      return Status::error(path + " is not the " +
                           std::to_string(where.regionBytes) +
                           "-byte region its process announced");
    }
    void *p = mmap(nullptr, where.regionBytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
      return Status::error(systemError("cannot map " + path));
    m = PeerMapping{where.inode, where.regionBytes, static_cast<uint8_t *>(p)};
  }
  ptr = m.base + where.offset;
  return Status::success();
}

} // namespace mp::rt
