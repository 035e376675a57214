//===- Gemm.h - OpenBLAS GEMMs for the CPU kernels ----------------*- C++
//-*-===//
//
// Private to lib/Runtime/cpu: GEMMs as the forward and backward kernels
// call them (row-major, tiled over OpenMP threads, bitwise independent of
// the thread count).
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_CPU_GEMM_H
#define MP_LIB_RUNTIME_CPU_GEMM_H

#include "OpenMP.h"
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mp::rt::cpu {

/// Holds OpenBLAS at one thread while OpenMP threads each call it. Only the
/// pthreads build needs it: an OpenMP build runs serially inside parallel
/// regions by itself, and its openblas_set_num_threads would also change
/// omp_set_num_threads for the region about to start.
struct BlasSerialScope {
  int saved;
  BlasSerialScope()
      : saved(openblas_get_parallel() == OPENBLAS_THREAD
                  ? openblas_get_num_threads()
                  : 1) {
    if (saved > 1)
      openblas_set_num_threads(1);
  }
  ~BlasSerialScope() {
    if (saved > 1)
      openblas_set_num_threads(saved);
  }
  BlasSerialScope(const BlasSerialScope &) = delete;
  BlasSerialScope &operator=(const BlasSerialScope &) = delete;
};

/// The GEMM of a linear or of its weight gradient: m rows (x's leading
/// dims), n output features, k input features.
struct GemmDims {
  int64_t m, n, k;
};

inline int64_t leadingRows(const std::vector<int64_t> &x) {
  int64_t m = 1;
  for (size_t d = 0; d + 1 < x.size(); ++d)
    m *= x[d];
  return m;
}

/// A linear's: x [..., K] times a weight [K, N] ([N, K] when transposed).
inline GemmDims linearDims(const std::vector<int64_t> &x,
                           const std::vector<int64_t> &weight,
                           bool transposeWeight) {
  return {leadingRows(x), transposeWeight ? weight[0] : weight[1], x.back()};
}

/// Its weight gradient's: x [..., K] and the result's gradient [..., N],
/// over the same rows.
inline GemmDims linearWeightGradDims(const std::vector<int64_t> &x,
                                     const std::vector<int64_t> &dy) {
  return {leadingRows(x), dy.back(), x.back()};
}

inline blasint bi(int64_t v) { return static_cast<blasint>(v); }

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, bi(m), bi(n), bi(k), alpha, a,
              bi(std::max<int64_t>(lda, 1)), b, bi(std::max<int64_t>(ldb, 1)),
              beta, c, bi(std::max<int64_t>(ldc, 1)));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, bi(m), bi(n), bi(k), alpha, a,
              bi(std::max<int64_t>(lda, 1)), b, bi(std::max<int64_t>(ldb, 1)),
              beta, c, bi(std::max<int64_t>(ldc, 1)));
}

/// Output tiles of one GEMM. Their size depends on the GEMM's shape alone,
/// and each tile is one single-threaded BLAS call, so every element is
/// computed by the same call (same blocking, same order over K) whatever the
/// thread count: results are bitwise independent of it. (OpenBLAS's own
/// threading splits the work by thread count, and with the Haswell kernels
/// these machines use, its results then differ in the last bits.) The
/// tiles bound the parallelism (a 512x768 output is 4 tiles); smaller ones
/// re-pack operands more often (128x256 was 20% slower on GPT-2 here).
inline constexpr int64_t kTileRows = 256, kTileCols = 512;

/// C[i] = A[i] · B[i] for i < nb, C[i] contiguous [m, n] at i * m * n;
/// A[i] [m, k] at aOff[i] (stored [k, m] when ta), B[i] [k, n] at bOff[i]
/// (stored [n, k] when tb); row-major, dense. Work is spread over OpenMP
/// threads by (batch, tile).
template <class T>
void batchedGemm(int64_t nb, int64_t m, int64_t n, int64_t k, const T *a,
                 const std::vector<int64_t> &aOff, const T *b,
                 const std::vector<int64_t> &bOff, T *c, bool ta = false,
                 bool tb = false) {
  if (nb == 0 || m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(c, c + nb * m * n, T(0));
    return;
  }
  const int64_t rowTiles = (m + kTileRows - 1) / kTileRows;
  const int64_t colTiles = (n + kTileCols - 1) / kTileCols;
  const int64_t tiles = rowTiles * colTiles, items = nb * tiles;
  auto item = [&](int64_t it) {
    const int64_t i = it / tiles, t = it % tiles;
    const int64_t r0 = (t / colTiles) * kTileRows,
                  c0 = (t % colTiles) * kTileCols;
    const int64_t rows = std::min(kTileRows, m - r0);
    const int64_t cols = std::min(kTileCols, n - c0);
    const T *ai = a + aOff[size_t(i)] + (ta ? r0 : r0 * k);
    const T *bi = b + bOff[size_t(i)] + (tb ? c0 * k : c0);
    gemm(ta, tb, rows, cols, k, T(1), ai, ta ? m : k, bi, tb ? k : n, T(0),
         c + i * m * n + r0 * n + c0, n);
  };
  BlasSerialScope serial;
  const double work = double(nb) * double(m) * double(n) * double(k);
  if (items > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() &&
      work >= double(1 << 18)) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t it = 0; it < items; ++it)
      item(it);
  } else {
    for (int64_t it = 0; it < items; ++it)
      item(it);
  }
}

} // namespace mp::rt::cpu

#endif // MP_LIB_RUNTIME_CPU_GEMM_H
