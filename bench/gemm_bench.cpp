//===- gemm_bench.cpp - the CPU's GEMM libraries, shape by shape ----------===//
//
// Times one f32 GEMM shape through each library the CPU kernels can use:
// OpenBLAS as mp calls it (output tiles over OpenMP threads, Gemm.h), and
// oneDNN's matmul with B read in place and with B packed once (Dnnl.h).
// bench/gemm_table.py drives it for every GEMM of the benchmark models and
// puts PyTorch's rates beside it.
//
//   mp-gemm-bench [--threads N] [--repeats R] M N K TRANS_A TRANS_B ...
//
// prints one line per shape and library: `M N K ta tb library GFLOP/s`.
//
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "Gemm.h"
#include "mp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace mp::rt;
using namespace mp::rt::cpu;

namespace {

double medianSeconds(const std::function<Status()> &run, int repeats) {
  std::vector<double> times;
  for (int i = 0; i < repeats + 1; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (Status s = run(); !s) {
      std::fprintf(stderr, "mp-gemm-bench: %s\n", s.message.c_str());
      std::exit(1);
    }
    std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    if (i > 0) // the first call warms caches and pages
      times.push_back(d.count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void benchShape(int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                int repeats) {
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float &v : a)
    v = d(rng);
  for (float &v : b)
    v = d(rng);
  const double flop = 2.0 * double(m) * double(n) * double(k);
  auto report = [&](const char *library, const std::function<Status()> &run) {
    if (!run)
      return;
    double s = medianSeconds(run, repeats);
    std::printf("%lld %lld %lld %d %d %s %.1f\n", (long long)m, (long long)n,
                (long long)k, int(ta), int(tb), library, flop / s / 1e9);
    std::fflush(stdout);
  };
  report("openblas", [&]() {
    batchedGemm<float>(1, m, n, k, a.data(), {0}, b.data(), {0}, c.data(), ta,
                       tb);
    return Status::success();
  });
  const DnnlGemm::Problem problem{m, n, k, ta, tb};
  report("onednn",
         planGemm(a.data(), b.data(), nullptr, c.data(), problem, false).run);
  PlannedKernel packed =
      planGemm(a.data(), b.data(), nullptr, c.data(), problem, true);
  report("onednn-packed", packed.run);
  // B packed again before every run: what a GEMM whose B changes between
  // runs (a weight in training, an activation) pays for the packed layout.
  if (packed.refresh)
    report("onednn-repacked", [&]() {
      if (Status s = packed.refresh(); !s)
        return s;
      return packed.run();
    });
}

} // namespace

int main(int argc, char **argv) {
  int threads = 0, repeats = 5;
  std::vector<int64_t> values;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if ((arg == "--threads" || arg == "--repeats") && i + 1 < argc)
      (arg == "--threads" ? threads : repeats) = std::atoi(argv[++i]);
    else
      values.push_back(std::atoll(argv[i]));
  }
  if (values.empty() || values.size() % 5 != 0 || repeats < 1) {
    std::fprintf(stderr, "usage: mp-gemm-bench [--threads N] [--repeats R] "
                         "M N K TRANS_A TRANS_B ...\n");
    return 2;
  }
  if (threads > 0)
    setNumThreads(threads);
  std::printf("# %s, %d threads\n", describeCpu().c_str(), getNumThreads());
  for (size_t i = 0; i < values.size(); i += 5)
    benchShape(values[i], values[i + 1], values[i + 2], values[i + 3] != 0,
               values[i + 4] != 0, repeats);
  return 0;
}
