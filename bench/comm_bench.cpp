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
// bytes each rank's output holds per second. MP_SHM_COLLECTIVES=0 runs the
// same through MPI. Not a test: run it by hand.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/HostMemory.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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

void benchSize(Communicator &comm, int iterations, size_t bytes) {
  const int n = comm.size();
  const int64_t count = static_cast<int64_t>(bytes / sizeof(float)) / n * n;
  Buffer full(count * sizeof(float)), local(count / n * sizeof(float));
  Tensor whole{full.data, DType::F32, {count}};
  Tensor part{local.data, DType::F32, {count / n}};
  struct Case {
    const char *name;
    std::function<Status()> run;
  } cases[] = {
      {"all_reduce", [&] { return comm.allReduceSum(whole, whole); }},
      {"all_gather", [&] { return comm.allGather(part, whole, 0); }},
      {"reduce_scatter", [&] { return comm.reduceScatterSum(whole, part, 0); }},
  };
  for (const Case &c : cases) {
    const double s = medianSeconds(comm, iterations, c.run);
    if (comm.rank() == 0)
      std::printf("  %-15s %10.1f KiB %10.1f us %8.2f GB/s\n", c.name,
                  count * sizeof(float) / 1024.0, s * 1e6,
                  count * sizeof(float) / s / 1e9);
  }
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
