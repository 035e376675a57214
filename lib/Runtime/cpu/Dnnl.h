//===- Dnnl.h - oneDNN GEMMs for the CPU kernels ------------------*- C++
//-*-===//
//
// Private to lib/Runtime/cpu: f32 GEMMs through oneDNN's matmul primitive,
// planned once at load for operands whose memory is fixed (the arena and
// the parameters do not move), so that a run only executes. oneDNN picks
// its kernels by the CPU's features at run time (AVX-512, AVX512_BF16),
// where Debian's OpenBLAS is held to its AVX2 kernels on these machines
// (OPENBLAS_CORETYPE=Haswell, ../shared/TOOLCHAIN.md).
//
// Built only when CMake finds oneDNN (MP_HAVE_DNNL); without it every
// query says "not available" and the kernels use OpenBLAS.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_CPU_DNNL_H
#define MP_LIB_RUNTIME_CPU_DNNL_H

#include "mp/Runtime/Kernels.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mp::rt::cpu {

/// Which library runs the CPU's f32 GEMMs.
enum class GemmLibrary { OpenBLAS, OneDNN };

/// The library of the f32 and bf16 GEMMs: oneDNN where it was built in and
/// has AVX-512 kernels for this CPU, OpenBLAS otherwise. Measured on every
/// GEMM shape of the benchmark models (bench/gemm_table.py), the choice
/// does not depend on the shape. The environment variable
/// MP_CPU_GEMM=openblas|onednn overrides it (for benchmarks and
/// comparisons).
GemmLibrary gemmLibrary();
/// "oneDNN 2.6.3 (avx512_core_bf16)", or why oneDNN is not used.
std::string describeGemmLibrary();
/// An error naming MP_CPU_GEMM when it names no library.
Status checkGemmRequest();

/// C[m, n] = act(A · B (+ bias[n])), row-major and dense: A stored [m, k] or,
/// when transA, [k, m]; B stored [k, n] or, when transB, [n, k]. One oneDNN
/// matmul primitive with the operands' memory bound at creation. With
/// `packB` (B a weight), the primitive reads a copy of B reordered once into
/// the blocked layout its kernel prefers (about 4 % faster on GPT-2's GEMMs
/// here, for a second copy of the weight), and `refresh` must be called
/// whenever B changes.
class DnnlGemm {
public:
  struct Problem {
    int64_t m, n, k;
    bool transA, transB;
    /// Applied to C as the GEMM's epilogue (a oneDNN post-op).
    contract::LinearActivation activation = contract::LinearActivation::None;
    /// A, B, bias and C are bf16 (accumulated in f32); else f32.
    bool bf16 = false;
  };
  /// Null (and `error` set) when oneDNN cannot plan it.
  static std::unique_ptr<DnnlGemm> create(const void *a, const void *b,
                                          const void *bias, void *c,
                                          const Problem &problem, bool packB,
                                          std::string &error);
  Status run();
  /// Reorders B into the packed copy again (nothing when not packed).
  Status refresh();
  /// Bytes of the packed copy of B (0: B is read in place).
  size_t packedBytes() const;
  ~DnnlGemm();

private:
  struct Impl;
  explicit DnnlGemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// The fewest rows (and columns) smallGemm takes: below, the GEMM is
/// OpenBLAS's (a decoding step's one query row; its ever-growing key count
/// would keep planning new primitives).
inline constexpr int64_t kSmallGemmMinRows = 16;

/// C[m, n] = alpha · A · B (+ C when `accumulate`) for attention's
/// per-block GEMMs, f32, row-major with leading dims: A [m, k] or, when
/// transA, stored [k, m]; B [k, n] or, when transB, stored [n, k]. Through
/// oneDNN's (AVX-512) kernel where it is the GEMM library and m and n are
/// at least kSmallGemmMinRows; false otherwise, and the caller runs
/// OpenBLAS. Each thread plans a primitive per shape once and keeps it
/// (operands rebound per call), planned for and run on that thread alone,
/// so each result depends on its shape only, not on threads or the call's
/// place.
struct SmallGemm {
  int64_t m, n, k;
  float alpha;
  const float *a;
  int64_t lda;
  bool transA;
  const float *b;
  int64_t ldb;
  bool transB;
  float *c;
  int64_t ldc;
  bool accumulate = false;
};
bool smallGemm(const SmallGemm &g);

/// A kernel running `DnnlGemm::create(...)`'s plan; an empty one where
/// oneDNN cannot plan it (OpenBLAS computes it as well).
PlannedKernel planGemm(const void *a, const void *b, const void *bias, void *c,
                       const DnnlGemm::Problem &problem, bool packB);

} // namespace mp::rt::cpu

#endif // MP_LIB_RUNTIME_CPU_DNNL_H
