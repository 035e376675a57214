//===- OpenMP.h - the OpenMP calls of the CPU kernels -----------*- C++ -*-===//
//
// The OpenMP runtime functions the CPU kernels call, or their one-thread
// meanings in a build without OpenMP (MP_OPENMP=OFF). The fuzz build uses
// that: its clang has an OpenMP runtime only with libomp-dev, whose
// libgomp.so.1 would then shadow GCC's in mp-opt's library search path.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CPU_OPENMP_H
#define MP_RUNTIME_CPU_OPENMP_H

#ifdef _OPENMP
#include <omp.h>
#else
inline int omp_get_max_threads() { return 1; }
inline int omp_get_num_threads() { return 1; }
inline int omp_get_thread_num() { return 0; }
inline int omp_in_parallel() { return 0; }
inline void omp_set_num_threads(int) {}
inline void omp_set_dynamic(int) {}
inline int omp_get_thread_limit() { return 1; }
inline int omp_get_max_active_levels() { return 1; }
#endif

namespace mp::rt::cpu {

/// Holds OpenMP at one thread while it lives (then restores the count it
/// found): oneDNN plans and runs a primitive made meanwhile on the calling
/// thread alone, inside a parallel region or not.
struct OneThreadScope {
  int saved = omp_get_max_threads();
  OneThreadScope() { omp_set_num_threads(1); }
  ~OneThreadScope() { omp_set_num_threads(saved); }
  OneThreadScope(const OneThreadScope &) = delete;
  OneThreadScope &operator=(const OneThreadScope &) = delete;
};

} // namespace mp::rt::cpu

#endif // MP_RUNTIME_CPU_OPENMP_H
