//===- SharedMemory.h - host memory other processes of the host can map ---===//
//
// When the ranks of a job share a host, their collectives read each other's
// buffers directly (mpi/SharedMemoryGroup.h) instead of copying them through
// MPI. For that, the runtime's host allocations (allocateHost: arena,
// scratch, gradients) are memfd mappings when several ranks share the host:
// a peer opens the owner's descriptor through /proc/PID/fd/N and maps it
// (writable: an all_reduce writes each summed slice into every rank's
// buffer). Nothing is named in the file system, so nothing outlives the
// processes.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_SHAREDMEMORY_H
#define MP_LIB_RUNTIME_SHAREDMEMORY_H

#include "mp/Runtime/HostMemory.h"

#include <cstddef>
#include <cstdint>

namespace mp::rt {

/// A byte range of shareable memory as another process of the host names
/// it: the owner's process and descriptor, the memfd's inode (descriptor
/// numbers are reused once a region is freed; the inode tells regions
/// apart) and size, and the range's offset and length in it.
struct SharedLocation {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t inode = 0;
  uint64_t regionBytes = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

/// From now on, allocateHost gives shareable memory (set when several ranks
/// of the job share this host; off, it gives plain aligned allocations).
void shareHostAllocations(bool on);

/// Shareable host memory (page aligned, zeroed) whatever the setting; freed
/// by releaseHost.
Status allocateShared(size_t bytes, void **ptr);

/// Where [p, p + bytes) lies, when all of it is in one shareable region of
/// this process.
bool locateShared(const void *p, size_t bytes, SharedLocation &out);

/// A view of another process's shareable range; `ptr` points at
/// `where.offset`. A region is mapped once and kept until its descriptor
/// shows another inode (the owner freed it and reused the number), so
/// mappings do not accumulate.
Status mapShared(const SharedLocation &where, void *&ptr);

} // namespace mp::rt

#endif // MP_LIB_RUNTIME_SHAREDMEMORY_H
