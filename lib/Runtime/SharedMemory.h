//===- SharedMemory.h - host memory other processes of the host can map ---===//
//
// When the ranks of a job share a host, their collectives read each other's
// buffers directly (mpi/SharedMemoryGroup.h) instead of copying them through
// MPI. For that, the runtime's host allocations (arena, parameters, scratch)
// are memfd mappings: a peer opens the owner's descriptor through
// /proc/PID/fd/N and maps it read-only. Nothing is named in the file system,
// so nothing outlives the processes.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_SHAREDMEMORY_H
#define MP_LIB_RUNTIME_SHAREDMEMORY_H

#include "mp/Runtime/Tensor.h"

#include <cstddef>
#include <cstdint>

namespace mp::rt {

/// A byte range of shareable memory, as another process of the host names
/// it: the owner's process and descriptor, the region's generation (unique
/// within the owner, since descriptor numbers are reused) and size, and the
/// offset of the range in it.
struct SharedLocation {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t generation = 0;
  uint64_t regionBytes = 0;
  uint64_t offset = 0;
};

/// From now on, host allocations of this process are shareable (set when a
/// job has more than one rank; off, they are plain aligned allocations).
void shareHostAllocations(bool on);

/// 64-byte aligned host memory, shareable when shareHostAllocations is on.
Status allocateHost(size_t bytes, void **ptr);
/// Frees what allocateHost or allocateShared returned (null is ignored).
void releaseHost(void *ptr);
/// Shareable host memory (page aligned, zeroed) whatever the setting.
Status allocateShared(size_t bytes, void **ptr);

/// Where [p, p + bytes) lies, when all of it is in one shareable region of
/// this process.
bool locateShared(const void *p, size_t bytes, SharedLocation &out);

/// A read-only view of another process's shareable range (its region is
/// mapped once, then kept for the life of this process); `ptr` points at
/// `where.offset`.
Status mapShared(const SharedLocation &where, const void *&ptr);

} // namespace mp::rt

#endif // MP_LIB_RUNTIME_SHAREDMEMORY_H
