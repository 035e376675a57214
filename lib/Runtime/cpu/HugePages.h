//===- HugePages.h - host buffers on transparent huge pages -------*- C++
//-*-===//
//
// Large buffers the CPU kernels stream through again and again (weights,
// their packed copies, the arena) are 2 MiB aligned and advised to use
// transparent huge pages, which Linux gives only when asked under its
// usual "madvise" setting: fewer TLB misses while the GEMMs read the
// weights (GPT-2-small's forward: 603 against 616–644 ms/run here). Free
// with std::free.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_CPU_HUGEPAGES_H
#define MP_LIB_RUNTIME_CPU_HUGEPAGES_H

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>

namespace mp::rt::cpu {

/// At least `bytes` (plus 64 bytes of slack past the end), 64-byte aligned;
/// from 2 MiB on, 2 MiB aligned and on huge pages where the kernel has
/// them. Null when out of memory.
inline void *allocateHugeAligned(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t size = (bytes + 63) / 64 * 64 + 64;
  if (size < kHuge)
    return std::aligned_alloc(64, size);
  const size_t rounded = (size + kHuge - 1) / kHuge * kHuge;
  void *p = std::aligned_alloc(kHuge, rounded);
  if (p)
    madvise(p, rounded, MADV_HUGEPAGE); // advice: failure changes nothing
  return p;
}

} // namespace mp::rt::cpu

#endif // MP_LIB_RUNTIME_CPU_HUGEPAGES_H
