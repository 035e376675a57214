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
#endif

#endif // MP_RUNTIME_CPU_OPENMP_H
