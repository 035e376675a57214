//===- HostMemory.h - the runtime's host allocations --------------*- C++
//-*-===//
//
// Host memory for buffers collectives read: in a job with several ranks on
// one host it is shareable, so that their collectives read it in place
// (lib/Runtime/SharedMemory.h) instead of copying it first.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_HOSTMEMORY_H
#define MP_RUNTIME_HOSTMEMORY_H

#include "mp/Runtime/Tensor.h"

#include <cstddef>
#include <new>
#include <vector>

namespace mp::rt {

/// 64-byte aligned host memory, shareable with the other ranks of this host
/// when the job has several there.
Status allocateHost(size_t bytes, void **ptr);
/// Frees what allocateHost returned (null is ignored).
void releaseHost(void *ptr);

/// std::vector's allocator over allocateHost.
template <typename T> struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <typename U> HostAllocator(const HostAllocator<U> &) {}
  T *allocate(size_t n) {
    void *p = nullptr;
    if (!allocateHost(n * sizeof(T), &p))
      throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, size_t) { releaseHost(p); }
  template <typename U> bool operator==(const HostAllocator<U> &) const {
    return true;
  }
  template <typename U> bool operator!=(const HostAllocator<U> &) const {
    return false;
  }
};

template <typename T> using HostVector = std::vector<T, HostAllocator<T>>;

} // namespace mp::rt

#endif // MP_RUNTIME_HOSTMEMORY_H
