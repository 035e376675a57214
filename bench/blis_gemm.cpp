//===- blis_gemm.cpp - BLIS on the forward GEMM shapes (not built) --------===//
//
// The issue asked whether BLIS (Debian's libblis-dev) wins on any shape.
// Not part of the build (mp does not use BLIS); to measure:
//   apt-get install libblis-dev
//   g++ -O2 -I/usr/include/x86_64-linux-gnu -fopenmp bench/blis_gemm.cpp \
//       -lblis -o /tmp/blis_gemm && /tmp/blis_gemm
// and compare with build/bin/mp-gemm-bench M N K 0 1 on the same shapes.
//
//===----------------------------------------------------------------------===//
#include <blis.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>
double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int main() {
  bli_thread_set_num_threads(2);
  // M x N x K: C = A (M x K, row-major) · Wᵀ (W: N x K, row-major), as a
  // linear; 2 threads, best of 3 timings.
  long shapes[][3] = {{512, 2304, 768},
                      {512, 768, 768},
                      {512, 3072, 768},
                      {512, 768, 3072},
                      {512, 50304, 768}};
  for (auto &s : shapes) {
    long M = s[0], N = s[1], K = s[2];
    std::vector<float> a(M * K), w(N * K), c(M * N);
    for (size_t i = 0; i < a.size(); i++)
      a[i] = std::sin(i * 0.3f);
    for (size_t i = 0; i < w.size(); i++)
      w[i] = std::cos(i * 0.1f);
    float one = 1, zero = 0;
    auto run = [&] {
      bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, M, N, K, &one, a.data(), K,
                1, w.data(), K, 1, &zero, c.data(), N, 1);
    };
    run();
    run();
    int it = N > 10000 ? 3 : 20;
    double best = 1e9;
    for (int r = 0; r < 3; r++) {
      double t = now();
      for (int i = 0; i < it; i++)
        run();
      best = std::min(best, (now() - t) / it);
    }
    printf("%ldx%ldx%ld BLIS %.1f GFLOP/s\n", M, N, K,
           2.0 * M * N * K / best / 1e9);
  }
}
