//===- DropoutMask.h - the counter-based dropout mask -----------*- C++ -*-===//
//
// Which elements dropout keeps, as a pure function of a key (the run's seed
// and step, the op, the rank) and the element's index: the CPU and CUDA
// kernels draw the same mask, and a backward replays its forward's without
// storing it.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_DROPOUTMASK_H
#define MP_SUPPORT_DROPOUTMASK_H

#include "mp/Support/HostDevice.h"

#include <cstdint>

namespace mp::dropout {

/// SplitMix64's finalizer: a bijective mix of 64 bits.
MP_HOST_DEVICE inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The threshold of keep() for a drop `ratio` in [0, 1): u is 24 bits.
MP_HOST_DEVICE inline uint64_t threshold(float ratio) {
  return static_cast<uint64_t>(static_cast<double>(ratio) *
                               static_cast<double>(1 << 24));
}

/// Whether element `i` is kept: u = the top 24 bits of its hash, uniform in
/// [0, 2^24), kept when u >= threshold(ratio).
MP_HOST_DEVICE inline bool keep(uint64_t key, uint64_t i, uint64_t threshold) {
  return (mix(key ^ mix(i)) >> 40) >= threshold;
}

} // namespace mp::dropout

#endif // MP_SUPPORT_DROPOUTMASK_H
