//===- CudaTestUtil.h - host/device tensor pairs for CUDA tests -*- C++ -*-===//
//
// A host tensor with its device copy, and the fixture of the CUDA kernel
// tests: random inputs, comparison with the CPU kernel's result, and a
// skip that says why where no GPU is visible.
//
//===----------------------------------------------------------------------===//
#ifndef MP_UNITTESTS_RUNTIME_CUDA_CUDATESTUTIL_H
#define MP_UNITTESTS_RUNTIME_CUDA_CUDATESTUTIL_H

#include "mp/Runtime/CudaKernels.h"
#include "mp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace mp::rt::cudatest {

/// A host tensor and its device copy.
struct Pair {
  std::vector<uint8_t> host;
  Tensor h, d;
  Pair(DType t, std::vector<int64_t> shape) {
    h = Tensor{nullptr, t, shape};
    host.resize(h.bytes());
    h.data = host.data();
    d = Tensor{nullptr, t, shape};
    EXPECT_TRUE(cuda::allocate(h.bytes(), &d.data));
  }
  ~Pair() { cuda::release(d.data); }
  void upload() { EXPECT_TRUE(cuda::copyToDevice(d.data, h.data, h.bytes())); }
  std::vector<uint8_t> download() {
    std::vector<uint8_t> out(h.bytes());
    EXPECT_TRUE(cuda::synchronize());
    EXPECT_TRUE(cuda::copyToHost(out.data(), d.data, h.bytes()));
    return out;
  }
};

class CudaKernels : public ::testing::Test {
public:
  void SetUp() override {
    std::string reason;
    if (cuda::deviceCount(reason) == 0)
      GTEST_SKIP() << "GPU test skipped: " << reason;
  }
  std::unique_ptr<Pair> random(std::vector<int64_t> shape, float lo = -2,
                               float hi = 2) {
    auto p = std::make_unique<Pair>(DType::F32, shape);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < p->h.numel(); ++i)
      p->h.as<float>()[i] = dist(rng);
    p->upload();
    return p;
  }
  /// Compares the device result with the CPU result in `expected`.
  void expectNear(Pair &got, const Tensor &expected, double tol) {
    std::vector<uint8_t> bytes = got.download();
    const float *g = reinterpret_cast<const float *>(bytes.data());
    for (int64_t i = 0; i < expected.numel(); ++i)
      ASSERT_NEAR(g[i], expected.as<float>()[i],
                  tol * (1 + std::abs(expected.as<float>()[i])))
          << "element " << i;
  }
  /// Gathers rows `ids` of a random table of `shape` on the GPU and on the
  /// CPU, and expects the same rows.
  template <typename Id>
  void expectGatherMatchesCpu(std::vector<int64_t> shape,
                              const std::vector<Id> &values) {
    auto table = random(shape);
    DType type = sizeof(Id) == 8 ? DType::I64 : DType::I32;
    int64_t count = static_cast<int64_t>(values.size());
    Pair ids(type, {count});
    std::memcpy(ids.h.data, values.data(), values.size() * sizeof(Id));
    ids.upload();
    Pair rows(DType::F32, {count, shape[1]}),
        rowsRef(DType::F32, {count, shape[1]});
    ASSERT_TRUE(cuda::gather(table->d, ids.d, 0, rows.d));
    ASSERT_TRUE(cpu::gather(table->h, ids.h, 0, rowsRef.h));
    expectNear(rows, rowsRef.h, 0);
  }
  std::mt19937 rng{7};
};

} // namespace mp::rt::cudatest

#endif // MP_UNITTESTS_RUNTIME_CUDA_CUDATESTUTIL_H
