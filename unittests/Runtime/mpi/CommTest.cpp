//===- CommTest.cpp - MPI communicators on a 2x2 grid ---------------------===//
//
// Run under `mpirun -np 4`: checks the collectives and point-to-point
// transfers on the sub-communicator of each grid axis against values every
// rank can compute by itself.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Device.h"
#include "mp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <fcntl.h>
#include <sys/resource.h>

using namespace mp::rt;

namespace {

std::unique_ptr<Communicator> world;
const std::vector<int64_t> kGrid = {2, 2};

Tensor view(std::vector<float> &v, std::vector<int64_t> shape) {
  return Tensor{v.data(), DType::F32, std::move(shape)};
}

TEST(MPIComm, WorldHasFourRanks) {
  ASSERT_EQ(world->size(), 4) << "run with mpirun -np 4";
  EXPECT_STREQ(world->backend(), "MPI");
}

TEST(MPIComm, AllReduceSumsAlongEachAxisOnly) {
  std::vector<int64_t> me = gridCoordinates(kGrid, world->rank());
  for (int64_t axis : {0, 1}) {
    std::unique_ptr<Communicator> group;
    ASSERT_TRUE(world->split(kGrid, axis, group));
    ASSERT_EQ(group->size(), 2);
    EXPECT_EQ(group->rank(), me[axis]);
    std::vector<float> x = {static_cast<float>(world->rank()), 1.0f}, y(2);
    Tensor out = view(y, {2});
    ASSERT_TRUE(group->allReduceSum(view(x, {2}), out));
    // The two ranks of the group differ only in coordinate `axis`.
    int64_t stride = axis == 0 ? 2 : 1;
    int64_t base = world->rank() - me[axis] * stride;
    EXPECT_EQ(y[0], static_cast<float>(2 * base + stride));
    EXPECT_EQ(y[1], 2.0f);
  }
}

TEST(MPIComm, AllGatherAndReduceScatterAlongAMiddleAxis) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  int r = group->rank();
  // Local [2, 1, 2] with values 100*r + i; gathered along axis 1 -> [2, 2, 2].
  std::vector<float> local(4), full(8);
  for (int i = 0; i < 4; ++i)
    local[i] = 100.0f * r + i;
  Tensor out = view(full, {2, 2, 2});
  ASSERT_TRUE(group->allGather(view(local, {2, 1, 2}), out, 1));
  EXPECT_EQ(full, (std::vector<float>{0, 1, 100, 101, 2, 3, 102, 103}));

  // Reduce-scatter of the same full tensor from both ranks: rank r keeps
  // slice r of axis 1, doubled.
  std::vector<float> mine(4);
  Tensor shard = view(mine, {2, 1, 2});
  ASSERT_TRUE(group->reduceScatterSum(view(full, {2, 2, 2}), shard, 1));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(mine[i], 2 * local[i]);

  std::vector<float> sliced(4);
  Tensor slice = view(sliced, {2, 1, 2});
  ASSERT_TRUE(group->allSlice(view(full, {2, 2, 2}), slice, 1));
  EXPECT_EQ(sliced, local);
}

TEST(MPIComm, CollectivesPackInTheLentScratchOnly) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  std::vector<float> local = {1, 2, 3, 4}, full(8), lent(8);
  Tensor in = view(local, {2, 1, 2}), out = view(full, {2, 2, 2});
  if (!group->packsBlocks()) {
    // Ranks sharing memory write the gathered layout directly: no scratch.
    EXPECT_EQ(group->packingBytes(in, out, 1), 0u);
    group->lendScratch(lent.data(), 0);
    ASSERT_TRUE(group->allGather(in, out, 1));
    EXPECT_EQ(full, (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
    return;
  }
  // Too small: every rank fails before communicating, so none waits.
  group->lendScratch(lent.data(), 7 * sizeof(float));
  Status s = group->allGather(in, out, 1);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find("MPI communicator: packing needs 32 bytes of "
                           "scratch but the executable reserved 28"),
            std::string::npos)
      << s.message;
  group->lendScratch(lent.data(), 8 * sizeof(float));
  ASSERT_TRUE(group->allGather(in, out, 1));
  EXPECT_EQ(full, (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(lent, (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4})); // rank-major
}

/// Memory from the CPU's allocator (shareable in a multi-rank job) holding
/// `count` values of T.
template <typename T> struct HostArray {
  explicit HostArray(size_t count) : count(count) {
    EXPECT_TRUE(cpuKernelTable().allocate(count * sizeof(T), &raw));
  }
  ~HostArray() { cpuKernelTable().release(raw); }
  T *data() { return static_cast<T *>(raw); }
  T &operator[](size_t i) { return data()[i]; }
  void *raw = nullptr;
  size_t count;
};

template <typename T> void checkAllReduce(Communicator &group, DType dtype) {
  // An odd count, so the ranks' slices are uneven; in place and not.
  const int64_t n = 10007;
  HostArray<T> a(n), b(n);
  for (int64_t i = 0; i < n; ++i)
    a[i] = static_cast<T>(i % 97 + group.rank());
  Tensor x{a.data(), dtype, {n}}, y{b.data(), dtype, {n}};
  ASSERT_TRUE(group.allReduceSum(x, y));
  ASSERT_TRUE(group.allReduceSum(x, x));
  // Every rank writes the slice it summed into every other rank's buffer.
  const int ranks = group.size();
  for (int64_t i = 0; i < n; ++i) {
    T expected = static_cast<T>(ranks * (i % 97) + ranks * (ranks - 1) / 2);
    ASSERT_EQ(b[i], expected) << dtypeName(dtype) << " element " << i;
    ASSERT_EQ(a[i], expected) << dtypeName(dtype) << " element " << i;
  }
}

TEST(MPIComm, CollectivesOfEveryTypeOnTheRuntimesMemory) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  checkAllReduce<float>(*group, DType::F32);
  checkAllReduce<double>(*group, DType::F64);
  checkAllReduce<int32_t>(*group, DType::I32);
  checkAllReduce<int64_t>(*group, DType::I64);
  checkAllReduce<float>(*world, DType::F32);
  // A gather and a reduce-scatter along the middle axis of [3, 2*5, 7].
  const int r = group->rank();
  HostArray<float> local(3 * 5 * 7), full(3 * 10 * 7), shard(3 * 5 * 7);
  for (int i = 0; i < 3 * 5 * 7; ++i)
    local[i] = 1000.0f * r + i;
  Tensor in{local.data(), DType::F32, {3, 5, 7}};
  Tensor out{full.data(), DType::F32, {3, 10, 7}};
  ASSERT_TRUE(group->allGather(in, out, 1));
  for (int o = 0; o < 3; ++o)
    for (int q = 0; q < 2; ++q)
      for (int i = 0; i < 35; ++i)
        ASSERT_EQ(full[(o * 2 + q) * 35 + i], 1000.0f * q + o * 35 + i);
  Tensor mine{shard.data(), DType::F32, {3, 5, 7}};
  ASSERT_TRUE(group->reduceScatterSum(out, mine, 1));
  for (int i = 0; i < 3 * 5 * 7; ++i)
    ASSERT_EQ(shard[i], 2 * local[i]);
}

/// A row-parallel linear's all_reduce, bias, residual add and layer_norm
/// over `rows` rows of kWidth, fused (allReduceRows) and as separate
/// collective and kernels: every rank must get the same bits either way.
class ReducedNorm {
public:
  static constexpr int64_t kWidth = 5;
  ReducedNorm(Communicator &group, int64_t rows)
      : group(group), rows(rows), n(rows * kWidth), partial(n), residual(n),
        sum(n), norm(n), vectors(3 * kWidth) {
    for (int64_t i = 0; i < n; ++i) { // sums that depend on their order
      partial[i] = std::sin(0.37f * i + group.rank()) * 1e3f;
      residual[i] = std::cos(0.11f * i);
    }
    for (int64_t i = 0; i < 3 * kWidth; ++i)
      vectors[i] = 0.5f + 0.25f * i;
  }
  /// The fused collective, with the results where `at` says: separate
  /// arrays, in place (the sum in the residual's bytes, the norm in the
  /// partial sums'), or in memory other ranks cannot map.
  enum class Results { Apart, InPlace, Unshareable };
  Status fused(Results at, std::vector<float> &sumOut,
               std::vector<float> &normOut, int failingRank = -1) {
    std::vector<float> ownPartial(partial.data(), partial.data() + n),
        ownResidual(residual.data(), residual.data() + n);
    float *p = partial.data(), *res = residual.data(), *s = sum.data(),
          *o = norm.data();
    if (at == Results::InPlace) {
      s = res;
      o = p;
    } else if (at == Results::Unshareable) {
      p = ownPartial.data();
      res = ownResidual.data();
      sumOut.assign(n, 0.0f);
      normOut.assign(n, 0.0f);
      s = sumOut.data();
      o = normOut.data();
    }
    Tensor tp = rowsOf(p, 0, rows), tr = rowsOf(res, 0, rows),
           ts = rowsOf(s, 0, rows), to = rowsOf(o, 0, rows);
    auto finish = [&](int64_t begin, int64_t end) {
      if (group.rank() == failingRank)
        return Status::error("this rank's norm failed");
      return finishRows(tr, to, ts, begin, end);
    };
    Status st = group.allReduceRows(tp, to, rows, finish, {ts, to});
    sumOut.assign(s, s + n);
    normOut.assign(o, o + n);
    std::memcpy(partial.data(), ownPartial.data(), n * sizeof(float));
    std::memcpy(residual.data(), ownResidual.data(), n * sizeof(float));
    return st;
  }
  Status unfused(std::vector<float> &sumOut, std::vector<float> &normOut) {
    Tensor tp = rowsOf(partial.data(), 0, rows),
           tr = rowsOf(residual.data(), 0, rows),
           ts = rowsOf(sum.data(), 0, rows), to = rowsOf(norm.data(), 0, rows);
    if (Status st = group.allReduceSum(tp, to); !st)
      return st;
    Status st = finishRows(tr, to, ts, 0, rows);
    sumOut.assign(sum.data(), sum.data() + n);
    normOut.assign(norm.data(), norm.data() + n);
    return st;
  }

private:
  Tensor rowsOf(float *base, int64_t begin, int64_t end) {
    return Tensor{base + begin * kWidth, DType::F32, {end - begin, kWidth}};
  }
  Status finishRows(const Tensor &res, const Tensor &reduced, const Tensor &s,
                    int64_t begin, int64_t end) {
    Tensor scale{vectors.data(), DType::F32, {kWidth}};
    Tensor shift{vectors.data() + kWidth, DType::F32, {kWidth}};
    Tensor bias{vectors.data() + 2 * kWidth, DType::F32, {kWidth}};
    Tensor r = rowsOf(reduced.as<float>(), begin, end);
    if (Status st = cpu::binary(cpu::BinaryKind::Add, r, bias, r); !st)
      return st;
    Tensor sumRows = rowsOf(s.as<float>(), begin, end);
    return cpu::addLayerNorm(rowsOf(res.as<float>(), begin, end), r, scale,
                             &shift, 1, 1e-5f, sumRows, r);
  }
  Communicator &group;
  int64_t rows, n;
  HostArray<float> partial, residual, sum, norm, vectors;
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(MPIComm, AllReduceRowsGivesEveryRankTheUnfusedBits) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  using Results = ReducedNorm::Results;
  // Rows that divide, that do not, and fewer rows than ranks (some ranks
  // finish none); on the 2-rank group and on all 4 ranks.
  for (Communicator *comm : {group.get(), world.get()})
    for (int64_t rows : {8, 7, 3, 1}) {
      ReducedNorm op(*comm, rows);
      std::vector<float> sum, norm;
      ASSERT_TRUE(op.unfused(sum, norm));
      for (Results at :
           {Results::Apart, Results::InPlace, Results::Unshareable}) {
        std::vector<float> fusedSum, fusedNorm;
        SCOPED_TRACE(std::to_string(rows) + " rows over " +
                     std::to_string(comm->size()) + " ranks, results " +
                     std::to_string(static_cast<int>(at)));
        ASSERT_TRUE(op.fused(at, fusedSum, fusedNorm));
        EXPECT_TRUE(sameBits(fusedSum, sum));
        EXPECT_TRUE(sameBits(fusedNorm, norm));
      }
    }
}

/// Sequence parallelism's reduce_scatter (along dim 1 of [outer, ranks x
/// slice, kWidth]), bias, residual add, layer_norm and the norm's
/// all_gather, fused (reduceScatterRows) and as separate collectives and
/// kernels: every rank must get the same bits either way.
class ScatteredNorm {
public:
  static constexpr int64_t kWidth = 5;
  ScatteredNorm(Communicator &group, int64_t outer, int64_t slice)
      : group(group), outer(outer), slice(slice),
        rows(outer * group.size() * slice), localRows(outer * slice),
        partial(rows * kWidth), residual(localRows * kWidth),
        sum(localRows * kWidth), local(localRows * kWidth), norm(rows * kWidth),
        vectors(3 * kWidth) {
    for (int64_t i = 0; i < rows * kWidth; ++i) // sums that depend on order
      partial[i] = std::sin(0.37f * i + group.rank()) * 1e3f;
    for (int64_t i = 0; i < localRows * kWidth; ++i)
      residual[i] = std::cos(0.11f * i + group.rank());
    for (int64_t i = 0; i < 3 * kWidth; ++i)
      vectors[i] = 0.5f + 0.25f * i;
  }
  /// The fused collective, with the results apart, in place (the sum in
  /// the residual's bytes, the norm in the partial sums'), or in memory
  /// other ranks cannot map (the norm's rows from the others staged).
  using Results = ReducedNorm::Results;
  Status fused(Results at, std::vector<float> &sumOut,
               std::vector<float> &normOut) {
    std::vector<float> ownPartial(partial.data(),
                                  partial.data() + rows * kWidth),
        ownResidual(residual.data(), residual.data() + localRows * kWidth),
        unshareable((localRows + rows) * kWidth);
    float *s = sum.data(), *o = norm.data();
    if (at == Results::InPlace) {
      s = residual.data();
      o = partial.data();
    } else if (at == Results::Unshareable) {
      s = unshareable.data();
      o = unshareable.data() + localRows * kWidth;
    }
    Tensor tp = full(partial.data()), to = full(o);
    const int64_t blockRows = group.size() * slice;
    auto finish = [&](int64_t begin, int64_t end) {
      const int64_t first =
          begin / blockRows * slice + begin % blockRows - group.rank() * slice;
      return finishRows(rowsOf(residual.data(), first, first + end - begin),
                        rowsOf(o, begin, end),
                        rowsOf(s, first, first + end - begin));
    };
    Status st = group.reduceScatterRows(tp, to, rows, outer, finish, {to});
    sumOut.assign(s, s + localRows * kWidth);
    normOut.assign(o, o + rows * kWidth);
    std::copy(ownPartial.begin(), ownPartial.end(), partial.data());
    std::copy(ownResidual.begin(), ownResidual.end(), residual.data());
    return st;
  }
  Status unfused(std::vector<float> &sumOut, std::vector<float> &normOut) {
    Tensor tl = sliced(local.data()), tn = full(norm.data());
    if (Status st = group.reduceScatterSum(full(partial.data()), tl, 1); !st)
      return st;
    if (Status st = finishRows(rowsOf(residual.data(), 0, localRows),
                               rowsOf(local.data(), 0, localRows),
                               rowsOf(sum.data(), 0, localRows));
        !st)
      return st;
    if (Status st = group.allGather(tl, tn, 1); !st)
      return st;
    sumOut.assign(sum.data(), sum.data() + localRows * kWidth);
    normOut.assign(norm.data(), norm.data() + rows * kWidth);
    return Status::success();
  }

private:
  Tensor full(float *base) {
    return Tensor{base, DType::F32, {outer, group.size() * slice, kWidth}};
  }
  Tensor sliced(float *base) {
    return Tensor{base, DType::F32, {outer, slice, kWidth}};
  }
  Tensor rowsOf(float *base, int64_t begin, int64_t end) {
    return Tensor{base + begin * kWidth, DType::F32, {end - begin, kWidth}};
  }
  /// Bias, residual add and layer_norm of rows `reduced`, in place.
  Status finishRows(const Tensor &res, Tensor reduced, Tensor s) {
    Tensor scale{vectors.data(), DType::F32, {kWidth}};
    Tensor shift{vectors.data() + kWidth, DType::F32, {kWidth}};
    Tensor bias{vectors.data() + 2 * kWidth, DType::F32, {kWidth}};
    if (Status st = cpu::binary(cpu::BinaryKind::Add, reduced, bias, reduced);
        !st)
      return st;
    return cpu::addLayerNorm(res, reduced, scale, &shift, 1, 1e-5f, s, reduced);
  }
  Communicator &group;
  int64_t outer, slice, rows, localRows;
  HostArray<float> partial, residual, sum, local, norm, vectors;
};

TEST(MPIComm, ReduceScatterRowsGivesEveryRankTheUnfusedBits) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  // One block or several (each rank's rows in several places), slices of
  // one row or more; on the 2-rank group, lent exactly the scratch
  // scatterRowsBytes asks for (as an executable lends it), and on all 4
  // ranks.
  for (Communicator *comm : {group.get(), world.get()})
    for (int64_t outer : {1, 3})
      for (int64_t slice : {1, 2}) {
        ScatteredNorm op(*comm, outer, slice);
        const int64_t elements =
            outer * comm->size() * slice * ScatteredNorm::kWidth;
        std::vector<float> fullRows(elements);
        Tensor full{fullRows.data(), DType::F32, {elements}};
        // (Followed by bytes that must stay as they are.)
        const size_t lentBytes = comm->scatterRowsBytes({full}, outer);
        std::vector<uint8_t> lent(lentBytes + 64, 0xab);
        if (comm == group.get())
          comm->lendScratch(lent.data(), lentBytes);
        std::vector<float> sum, norm;
        ASSERT_TRUE(op.unfused(sum, norm));
        for (ScatteredNorm::Results at :
             {ScatteredNorm::Results::Apart, ScatteredNorm::Results::InPlace,
              ScatteredNorm::Results::Unshareable}) {
          std::vector<float> fusedSum, fusedNorm;
          SCOPED_TRACE(std::to_string(outer) + " blocks of " +
                       std::to_string(slice) + "-row slices over " +
                       std::to_string(comm->size()) + " ranks, results " +
                       std::to_string(static_cast<int>(at)));
          ASSERT_TRUE(op.fused(at, fusedSum, fusedNorm));
          EXPECT_TRUE(sameBits(fusedSum, sum));
          EXPECT_TRUE(sameBits(fusedNorm, norm));
        }
        EXPECT_TRUE(std::all_of(lent.begin() + lentBytes, lent.end(),
                                [](uint8_t b) { return b == 0xab; }));
      }
}

TEST(MPIComm, RanksThatDisagreeOnTheBlocksAllFailThenGoOn) {
  using Results = ScatteredNorm::Results;
  if (world->packsBlocks())
    GTEST_SKIP() << "MPI's own collectives cannot tell (the ranks do not "
                    "share memory here)";
  // 8 rows over 4 ranks: rank 0 in one block of 2-row slices, the others
  // in two blocks of 1-row slices. Every rank fails; then all run the one
  // rank 0 ran (which a rank still reading rank 0's first announcement
  // would have taken for the first, and run alone, waiting for the others
  // until the timeout: 30 s here).
  const double timeout = collectiveTimeout();
  setCollectiveTimeout(30);
  for (int attempt = 0; attempt < 20; ++attempt) {
    const bool first = world->rank() == 0;
    ScatteredNorm disagreeing(*world, first ? 1 : 2, first ? 2 : 1);
    std::vector<float> sum, norm;
    Status s = disagreeing.fused(Results::Apart, sum, norm);
    ASSERT_FALSE(s);
    EXPECT_NE(s.message.find("the ranks disagree on a collective"),
              std::string::npos)
        << s.message;
    ScatteredNorm agreeing(*world, 1, 2);
    std::vector<float> fusedSum, fusedNorm;
    ASSERT_TRUE(agreeing.fused(Results::Apart, fusedSum, fusedNorm));
    ASSERT_TRUE(agreeing.unfused(sum, norm));
    EXPECT_TRUE(sameBits(fusedSum, sum));
    EXPECT_TRUE(sameBits(fusedNorm, norm));
  }
  setCollectiveTimeout(timeout);
}

TEST(MPIComm, ReduceScatterRowsOfNothingIsNothing) {
  std::vector<float> none(1);
  Tensor empty{none.data(), DType::F32, {0, 5}};
  int calls = 0;
  auto finish = [&](int64_t, int64_t) {
    ++calls;
    return Status::success();
  };
  ASSERT_TRUE(world->reduceScatterRows(empty, empty, 0, 1, finish, {empty}));
  EXPECT_EQ(calls, 0);
}

TEST(MPIComm, ARankWhoseRowsFailReleasesTheOthers) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  if (group->packsBlocks())
    GTEST_SKIP() << "without shared memory each rank finishes every row "
                    "after the all_reduce: only the failing rank fails";
  ReducedNorm op(*group, 8);
  std::vector<float> sum, norm;
  Status s = op.fused(ReducedNorm::Results::Apart, sum, norm, /*failing=*/0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find(group->rank() == 0
                               ? "this rank's norm failed"
                               : "rank 0 of the group failed in it"),
            std::string::npos)
      << s.message;
  // The group goes on working.
  ASSERT_TRUE(op.fused(ReducedNorm::Results::Apart, sum, norm));
}

TEST(MPIComm, RanksInDifferentCollectivesGetAnErrorNamingBoth) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  if (group->packsBlocks())
    GTEST_SKIP() << "MPI's own collectives cannot tell (the ranks do not "
                    "share memory here)";
  std::vector<float> x(4, 1.0f), y(8);
  Tensor in = view(x, {4}), reduced = view(x, {4}), gathered = view(y, {8});
  Status s = group->rank() == 0 ? group->allReduceSum(in, reduced)
                                : group->allGather(in, gathered, 0);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message.find("the ranks disagree on a collective"),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("all_reduce of 16 bytes of f32"), std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("all_gather of 16 bytes"), std::string::npos)
      << s.message;
}

/// The descriptor the next open() would get: a limit of it makes the next
/// open fail (a count of the open ones would not where earlier tests
/// closed descriptors below the highest).
int lowestFreeDescriptor() {
  int fd = 0;
  while (fcntl(fd, F_GETFD) != -1)
    ++fd;
  return fd;
}

TEST(MPIComm, ARankThatCannotTakePartReleasesTheOthersAtOnce) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 1, group));
  if (group->packsBlocks())
    GTEST_SKIP() << "the ranks do not share memory here";
  HostArray<float> warm(64);
  Tensor t{warm.data(), DType::F32, {64}};
  ASSERT_TRUE(group->allReduceSum(t, t));
  // Rank 0 of the group cannot open rank 1's new buffer (no descriptor
  // left); rank 1 must not wait for it until the collective timeout.
  rlimit saved;
  getrlimit(RLIMIT_NOFILE, &saved);
  HostArray<float> fresh(64);
  if (group->rank() == 0) {
    rlimit tight = saved;
    tight.rlim_cur = static_cast<rlim_t>(lowestFreeDescriptor());
    setrlimit(RLIMIT_NOFILE, &tight);
  }
  auto start = std::chrono::steady_clock::now();
  Tensor u{fresh.data(), DType::F32, {64}};
  Status s = group->allReduceSum(u, u);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  setrlimit(RLIMIT_NOFILE, &saved);
  ASSERT_FALSE(s);
  EXPECT_LT(seconds, 5.0);
  EXPECT_NE(s.message.find(group->rank() == 0
                               ? "cannot read rank 1's memory"
                               : "rank 0 of the group failed in it"),
            std::string::npos)
      << s.message;
  // The group goes on working.
  ASSERT_TRUE(group->allReduceSum(t, t));
}

TEST(MPIComm, SendAndReceiveAlongTheGroup) {
  std::unique_ptr<Communicator> group;
  ASSERT_TRUE(world->split(kGrid, 0, group));
  std::vector<float> msg = {static_cast<float>(world->rank())}, got = {-1};
  Tensor in = view(msg, {1}), out = view(got, {1});
  if (group->rank() == 0) {
    ASSERT_TRUE(group->send(in, 1));
    ASSERT_TRUE(group->recv(out, 1));
    EXPECT_EQ(got[0], static_cast<float>(world->rank() + 2));
  } else {
    ASSERT_TRUE(group->recv(out, 0));
    ASSERT_TRUE(group->send(in, 0));
    EXPECT_EQ(got[0], static_cast<float>(world->rank() - 2));
  }
}

TEST(MPIComm, EveryRankGetsEveryRanksString) {
  std::string mine(world->rank() * 3, 'a' + world->rank());
  std::vector<std::string> all = allGatherStrings(*world, mine);
  ASSERT_EQ(all.size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(all[r], std::string(r * 3, 'a' + r));
  // Long strings are cut to the record size, not overflowed.
  std::vector<std::string> long_ =
      allGatherStrings(*world, std::string(10000, 'x'));
  EXPECT_EQ(long_[3].size(), 4095u);
}

TEST(MPIComm, BroadcastCopiesRootBytesEverywhere) {
  std::vector<int64_t> data(1000, world->rank() == 2 ? 7 : -1);
  ASSERT_TRUE(broadcastBytes(*world, data.data(), data.size() * 8, 2));
  EXPECT_EQ(data, std::vector<int64_t>(1000, 7));
}

// MPI counts in ints: collectives over more than 2^31 - 1 elements go in
// pieces, tried here with pieces of 3 (bytes for gathers and broadcasts,
// elements for sums), none of which divides the sizes.
TEST(MPIComm, CollectivesLargerThanOneMessageGoInPieces) {
  setMPIMessageLimit(3);
  const float r = static_cast<float>(world->rank());
  std::vector<float> x(10), sum(10);
  for (int i = 0; i < 10; ++i)
    x[i] = 10 * r + i;
  Tensor summed = view(sum, {10});
  ASSERT_TRUE(world->allReduceSum(view(x, {10}), summed));
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(sum[i], 10 * (0 + 1 + 2 + 3) + 4 * i) << i;

  std::vector<float> local(7), full(28);
  for (int i = 0; i < 7; ++i)
    local[i] = 100 * r + i;
  Tensor gathered = view(full, {28});
  ASSERT_TRUE(world->allGather(view(local, {7}), gathered, 0));
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ(full[k * 7 + i], 100.0f * k + i) << k << "," << i;

  std::vector<float> whole(20), mine(5);
  for (int i = 0; i < 20; ++i)
    whole[i] = r + i;
  Tensor shard = view(mine, {5});
  ASSERT_TRUE(world->reduceScatterSum(view(whole, {20}), shard, 0));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(mine[i], 6 + 4 * (5 * r + i)) << i;

  std::vector<int64_t> data(11, world->rank() == 1 ? 5 : -1);
  ASSERT_TRUE(broadcastBytes(*world, data.data(), data.size() * 8, 1));
  EXPECT_EQ(data, std::vector<int64_t>(11, 5));
  setMPIMessageLimit(std::numeric_limits<int>::max());
}

TEST(MPIComm, SplittingAWrongGridIsAnError) {
  std::unique_ptr<Communicator> group;
  Status s = world->split({3}, 0, group);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("cannot split 4 ranks"), std::string::npos);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (Status s = initCommunication(&argc, &argv, world); !s) {
    std::fprintf(stderr, "%s\n", s.message.c_str());
    return 1;
  }
  int failed = RUN_ALL_TESTS();
  bool any = anyRankFailed(*world, failed != 0);
  world.reset();
  finalizeCommunication();
  return any ? 1 : 0;
}
