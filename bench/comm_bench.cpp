//===- comm_bench.cpp - the collectives' cost on this host ----------------===//
//
// Times mp-run's collectives alone, on buffers from the runtime's own host
// allocator (shareable when several ranks share the host, as an arena is):
//
//   mpirun -np 2 build/bin/mp-comm-bench [--iterations N] [BYTES ...]
//
// For each size (default: 1.5 MiB, a GPT-2-small all_reduce of 512 x 768
// floats, and 64 KiB and 12 MiB beside it) and each collective, rank 0
// prints the median time per call over N calls (after one warm-up) and the
// bytes each rank's output holds per second. Where the size is rows of 768
// floats, it also times an all_reduce followed by a bias add and a residual
// add-and-layer_norm on every rank ("... then norm", as mp-run runs them
// without mp-fuse-reduced-norms) against the same fused, each rank
// finishing 1/n of the rows (allReduceRows); and sequence parallelism's
// reduce_scatter, bias, add-and-layer_norm of the rank's rows and
// all_gather of the norm, separate and fused (reduceScatterRows).
// MP_SHM_COLLECTIVES=0 runs the same through MPI. Not a test: run it by
// hand.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/HostMemory.h"
#include "mp/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

using namespace mp::rt;

namespace {

struct Buffer {
  void *data = nullptr;
  explicit Buffer(size_t bytes) {
    if (!allocateHost(bytes, &data)) {
      std::fprintf(stderr, "mp-comm-bench: cannot allocate %zu bytes\n", bytes);
      std::exit(1);
    }
    std::memset(data, 0, bytes);
  }
  ~Buffer() { releaseHost(data); }
};

/// Median seconds per call of `collective` over `iterations` calls.
double medianSeconds(Communicator &comm, int iterations,
                     const std::function<Status()> &collective) {
  std::vector<double> seconds;
  for (int i = -1; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (Status s = collective(); !s) {
      std::fprintf(stderr, "mp-comm-bench: rank %d: %s\n", comm.rank(),
                   s.message.c_str());
      abortCommunication(1);
    }
    if (i >= 0)
      seconds.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

struct Case {
  const char *name;
  std::function<Status()> run;
};

void benchCases(Communicator &comm, int iterations, int64_t count,
                const Case *cases, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double s = medianSeconds(comm, iterations, cases[i].run);
    if (comm.rank() == 0)
      std::printf("  %-32s %10.1f KiB %10.1f us %8.2f GB/s\n", cases[i].name,
                  count * sizeof(float) / 1024.0, s * 1e6,
                  count * sizeof(float) / s / 1e9);
  }
}

/// A row-parallel linear's all_reduce, bias, residual add and layer_norm,
/// as separate kernels on every rank and fused (rows of 768 floats).
void benchReducedNorm(Communicator &comm, int iterations, int64_t count) {
  constexpr int64_t kWidth = 768;
  if (count % kWidth != 0)
    return;
  const int64_t rows = count / kWidth;
  const size_t bytes = count * sizeof(float);
  Buffer partialBytes(bytes), residualBytes(bytes), sumBytes(bytes),
      normBytes(bytes), vectorBytes(3 * kWidth * sizeof(float));
  auto *vectors = static_cast<float *>(vectorBytes.data);
  std::fill(vectors, vectors + kWidth, 1.0f); // the norm's scale
  Tensor partial{partialBytes.data, DType::F32, {rows, kWidth}};
  Tensor residual{residualBytes.data, DType::F32, {rows, kWidth}};
  Tensor sum{sumBytes.data, DType::F32, {rows, kWidth}};
  Tensor norm{normBytes.data, DType::F32, {rows, kWidth}};
  Tensor scale{vectors, DType::F32, {kWidth}};
  Tensor shift{vectors + kWidth, DType::F32, {kWidth}};
  Tensor bias{vectors + 2 * kWidth, DType::F32, {kWidth}};
  auto rowsOf = [&](const Tensor &t, int64_t begin, int64_t end) {
    return Tensor{static_cast<float *>(t.data) + begin * kWidth,
                  DType::F32,
                  {end - begin, kWidth}};
  };
  auto finish = [&](int64_t begin, int64_t end) {
    Tensor reduced = rowsOf(norm, begin, end), s = rowsOf(sum, begin, end);
    if (Status st = cpu::binary(cpu::BinaryKind::Add, reduced, bias, reduced);
        !st)
      return st;
    return cpu::addLayerNorm(rowsOf(residual, begin, end), reduced, scale,
                             &shift, 1, 1e-5f, s, reduced);
  };
  // Sequence parallelism's: this rank's rows of the residual and sums.
  const int64_t slice = rows / comm.size(), me = comm.rank();
  Buffer localBytes(3 * slice * kWidth * sizeof(float));
  auto *locals = static_cast<float *>(localBytes.data);
  Tensor localResidual{locals, DType::F32, {slice, kWidth}};
  Tensor localSum{locals + slice * kWidth, DType::F32, {slice, kWidth}};
  Tensor localNorm{locals + 2 * slice * kWidth, DType::F32, {slice, kWidth}};
  auto finishSlice = [&](const Tensor &reduced, int64_t begin, int64_t end) {
    Tensor r = reduced, s = rowsOf(localSum, begin, end);
    if (Status st = cpu::binary(cpu::BinaryKind::Add, r, bias, r); !st)
      return st;
    return cpu::addLayerNorm(rowsOf(localResidual, begin, end), r, scale,
                             &shift, 1, 1e-5f, s, r);
  };
  const Case cases[] = {
      {"all_reduce then norm",
       [&] {
         if (Status s = comm.allReduceSum(partial, norm); !s)
           return s;
         return finish(0, rows);
       }},
      {"all_reduce fused with norm (rows)",
       [&] {
         return comm.allReduceRows(partial, norm, rows, finish, {sum, norm});
       }},
      {"reduce_scatter, norm, all_gather",
       [&] {
         if (Status s = comm.reduceScatterSum(partial, localNorm, 0); !s)
           return s;
         if (Status s = finishSlice(localNorm, 0, slice); !s)
           return s;
         return comm.allGather(localNorm, norm, 0);
       }},
      {"the same fused (rows)",
       [&] {
         auto finishRows = [&](int64_t begin, int64_t end) {
           return finishSlice(rowsOf(norm, begin, end), begin - me * slice,
                              end - me * slice);
         };
         return comm.reduceScatterRows(partial, norm, rows, 1, finishRows,
                                       {norm});
       }},
  };
  // (Sequence parallelism's two need rows that divide among the ranks.)
  const size_t n = rows % comm.size() == 0 ? std::size(cases) : 2;
  benchCases(comm, iterations, count, cases, n);
}

void benchSize(Communicator &comm, int iterations, size_t bytes) {
  const int n = comm.size();
  const int64_t count = static_cast<int64_t>(bytes / sizeof(float)) / n * n;
  Buffer full(count * sizeof(float)), local(count / n * sizeof(float));
  Tensor whole{full.data, DType::F32, {count}};
  Tensor part{local.data, DType::F32, {count / n}};
  const Case cases[] = {
      {"all_reduce", [&] { return comm.allReduceSum(whole, whole); }},
      {"all_gather", [&] { return comm.allGather(part, whole, 0); }},
      {"reduce_scatter", [&] { return comm.reduceScatterSum(whole, part, 0); }},
  };
  benchCases(comm, iterations, count, cases, std::size(cases));
  benchReducedNorm(comm, iterations, count);
}

} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<Communicator> comm;
  if (Status s = initCommunication(&argc, &argv, comm); !s) {
    std::fprintf(stderr, "mp-comm-bench: %s\n", s.message.c_str());
    return 1;
  }
  int iterations = 200;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc)
      iterations = std::max(1, std::atoi(argv[++i]));
    else
      sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  }
  if (sizes.empty())
    sizes = {64 << 10, 3 << 19, 12 << 20};
  if (comm->rank() == 0)
    std::printf("mp-comm-bench: %d ranks (%s), median of %d calls\n",
                comm->size(), comm->describe().c_str(), iterations);
  for (size_t bytes : sizes)
    benchSize(*comm, iterations, bytes);
  comm.reset();
  finalizeCommunication();
  return 0;
}
