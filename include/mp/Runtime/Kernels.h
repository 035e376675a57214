//===- Kernels.h - CPU kernels ------------------------------------*- C++
//-*-===//
//
// One function per mp op. Output tensors are allocated by the caller with
// the op's result shape; shapes were checked by the compiler and the loader.
// A kernel returns an error Status only for an element type it does not
// handle. Large kernels run on OpenMP threads; f32 GEMMs go to oneDNN or
// OpenBLAS (lib/Runtime/cpu/Dnnl.h says which, and why).
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_KERNELS_H
#define MP_RUNTIME_KERNELS_H

#include "mp/Runtime/Tensor.h"
#include "mp/Support/OpContract.h"

#include <functional>
#include <string>
#include <vector>

namespace mp::rt::cpu {

enum class BinaryKind { Add, Sub, Mul, Div, Pow };
/// The predicates and reductions of the op contract (the values an
/// artifact's 'predicate' and 'kind' attributes hold).
using CompareKind = contract::ComparePredicate;
using ReduceKind = contract::ReduceKind;
enum class UnaryKind {
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  Silu,
  Gelu,
  GeluTanh,
  Cos,
  Sin
};

/// Elementwise with numpy broadcasting. a, b and out share the element type
/// (f32, f64, i64, i32, i8). Integer Div truncates; integer Pow is exact.
Status binary(BinaryKind kind, const Tensor &a, const Tensor &b, Tensor &out);
/// out is Bool; a and b share any element type.
Status compare(CompareKind kind, const Tensor &a, const Tensor &b, Tensor &out);
/// cond is Bool; a, b and out share the element type; three-way broadcast.
Status where(const Tensor &cond, const Tensor &a, const Tensor &b, Tensor &out);
/// Float element types (f32, f64); Neg, Relu also integers.
Status unary(UnaryKind kind, const Tensor &x, Tensor &out);
/// Any element type to any (float->int truncates toward zero; to Bool: != 0).
Status cast(const Tensor &x, Tensor &out);

/// numpy.matmul: rank-1 operands promoted, batch dims broadcast.
/// f32 (cblas_sgemm), f64 (cblas_dgemm), integers (plain loops).
Status matmul(const Tensor &a, const Tensor &b, Tensor &out);
/// out[..., n] = sum_k x[..., k] * W[k, n] (+ bias[n]); W is [N, K] when
/// transposeWeight. f32 only (one sgemm).
Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out);
/// A kernel planned once at load for operands whose memory stays where it
/// is, so that a run only executes it.
struct PlannedKernel {
  /// Empty: the plain kernel serves as well.
  std::function<Status()> run;
  /// Where the plan holds a packed copy of its weight: call after the
  /// weight changed. Empty otherwise.
  std::function<Status()> refresh;
  /// Bytes of that copy.
  size_t packedBytes = 0;
};
/// `linear` through oneDNN where Dnnl.h chooses it, `activation` applied
/// to its result as the GEMM's epilogue; `packWeight` asks for a packed
/// copy of the weight (for weights that rarely change).
PlannedKernel planLinear(
    const Tensor &x, const Tensor &weight, const Tensor *bias,
    bool transposeWeight, const Tensor &out, bool packWeight,
    contract::LinearActivation activation = contract::LinearActivation::None);
/// Whether a bf16 linear of x [..., K] and a rank-2 weight runs in bf16
/// (oneDNN, f32 accumulation: neither empty, and oneDNN's bf16 GEMM here);
/// otherwise its operands are widened to f32 around it.
bool runsInBf16(const Tensor &x, const Tensor &weight);
/// `linearWeightGrad` through oneDNN where Dnnl.h chooses it.
PlannedKernel planLinearWeightGrad(const Tensor &x, const Tensor &dy,
                                   bool transposeWeight, const Tensor &dw);
/// Checks the CPU's GEMM library choice (MP_CPU_GEMM); run once at load.
Status prepareCpu();
/// The CPU's GEMM library in a few words, for mp-run's load line.
std::string describeCpu();

/// Normalizes over the trailing dims from `axis` (non-negative here); scale
/// and bias have those dims' shape. f32.
Status layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, float epsilon, Tensor &out);
/// x * rsqrt(mean(x^2, last dim) + eps) * scale. f32.
Status rmsNorm(const Tensor &x, const Tensor &scale, float epsilon,
               Tensor &out);
/// sum = a + b (operands of one shape) and out = layerNorm(sum), each row
/// normalized while it is in cache; bitwise what `binary` and `layerNorm`
/// give one after the other. f32, or bf16 or f16 (a, b, sum and out; scale
/// and bias f32 or 16-bit): then the sum is rounded to the type before it
/// is normalized, as those two kernels on f32 copies would round it.
Status addLayerNorm(const Tensor &a, const Tensor &b, const Tensor &scale,
                    const Tensor *bias, int64_t axis, float epsilon,
                    Tensor &sum, Tensor &out);
/// sum = a + b and out = rmsNorm(sum), as addLayerNorm (f32, bf16, f16).
Status addRmsNorm(const Tensor &a, const Tensor &b, const Tensor &scale,
                  float epsilon, Tensor &sum, Tensor &out);
/// Rotary position embedding of the first `rotaryDim` channels of x's last
/// dim (mp.rotary): pairs (c, c + rotaryDim/2), or (2i, 2i + 1) when
/// `interleaved`; cos and sin [..., rotaryDim] broadcast along x's leading
/// dims; the other channels copied. Bitwise the decomposed ops (a NaN's
/// sign aside). out may be x. f32.
Status rotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
              int64_t rotaryDim, bool interleaved, Tensor &out);
/// Softmax along `axis` (non-negative). f32, f64.
Status softmax(const Tensor &x, int64_t axis, Tensor &out);
/// Reduces over `axes` (non-negative, sorted); out has the kept dims (with or
/// without the 1s: only its element count matters). f32, f64, i64, i32.
Status reduce(ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &out);

/// softmax(q·kᵀ·scale (+ mask) (causal))·v per batch and head.
/// q [B, H, Sq, D], k and v [B, Hkv, Sk, D] with H % Hkv == 0 (query head h
/// reads kv head h / (H / Hkv)); mask (optional, f32) broadcasts to
/// [B, H, Sq, Sk] and is added; causal masks key j > i + (Sk - Sq). f32.
Status attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, float scale, bool causal, Tensor &out);

/// ONNX Gather along `axis` (non-negative); indices i64 or i32, negative
/// indices count from the end. Any element type. (Embedding = axis 0.)
Status gather(const Tensor &x, const Tensor &indices, int64_t axis,
              Tensor &out);
/// A class target that is ignored (PyTorch's default `ignore_index`).
constexpr int64_t kIgnoreIndex = -100;
/// Mean over positions of -log softmax(logits)[target]; logits [..., V] f32,
/// targets [...] i64/i32 (kIgnoreIndex: left out of the mean; NaN when
/// every target is, as PyTorch); out is a f32 scalar.
Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out);
/// Einstein summation (see mp/Support/Einsum.h). f32, f64.
Status einsum(const std::string &equation,
              const std::vector<const Tensor *> &inputs, Tensor &out);
/// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last
/// two dims, zeroing the rest. Any element type.
Status trilu(const Tensor &x, bool upper, int64_t k, Tensor &out);

/// out dim i = x dim perm[i]. Any element type.
Status transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 Tensor &out);
/// out[i] = x[starts + i * strides] per dim (out's shape gives the counts;
/// strides may be negative). Any element type.
Status slice(const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &strides, Tensor &out);
Status concat(const std::vector<const Tensor *> &inputs, int64_t axis,
              Tensor &out);
/// Splits along `axis` into outs (their shapes give the sizes).
Status split(const Tensor &x, int64_t axis, const std::vector<Tensor *> &outs);
/// Broadcasts x to out's shape (numpy rules).
Status expand(const Tensor &x, Tensor &out);
/// Copies the bytes (reshape).
Status copy(const Tensor &x, Tensor &out);

// Gradient ops (the backward of a train step): f32; the gradients have the
// forward operands' shapes.

/// dW = Σ x[..., K]ᵀ · dy[..., N] over the leading dims: [K, N], or [N, K]
/// when `transposeWeight`.
Status linearWeightGrad(const Tensor &x, const Tensor &dy, bool transposeWeight,
                        Tensor &dw);
/// Input and scale gradients of layerNorm (statistics recomputed from x).
Status layerNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                     int64_t axis, float epsilon, Tensor &dx, Tensor &dscale);
/// Input and scale gradients of rmsNorm.
Status rmsNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                   float epsilon, Tensor &dx, Tensor &dscale);
/// dy · gelu'(x) (erf form, or tanh form when `tanhForm`).
Status geluGrad(const Tensor &x, const Tensor &dy, bool tanhForm, Tensor &dx);
/// Gradients of attention's q, k and v given its result `out` and the
/// result's gradient `dout`; probabilities are recomputed per query block,
/// never stored whole.
Status attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *mask, const Tensor &out, const Tensor &dout,
                     float scale, bool causal, Tensor &dq, Tensor &dk,
                     Tensor &dv);
/// Table gradient [rows, H]: rows of dy summed by id, for ids within
/// [offset, offset + rows) of a vocabulary of `vocab` rows (negative ids
/// count from its end); other ids add nothing (vocab-parallel).
Status embeddingGrad(const Tensor &ids, const Tensor &dy, int64_t offset,
                     int64_t vocab, Tensor &dtable);
/// dlogits = dloss · (softmax(logits) − onehot(target)) / n, n the targets
/// that are not kIgnoreIndex (their rows are zeros).
Status crossEntropyGrad(const Tensor &logits, const Tensor &targets,
                        const Tensor &dloss, Tensor &dlogits);
/// dx: zeros, with dy where slice(x, starts, strides) read. Any element type.
Status sliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &strides, Tensor &dx);

// Vocab-parallel cross-entropy (logits: this rank's slice [..., V/n] of the
// vocabulary, rows from `offset`).
/// Per position: the local row max, Σ exp(x − max), and the target's logit
/// when this rank holds it (else 0); stats is f32 [positions, 3].
Status vocabParallelStats(const Tensor &logits, const Tensor &targets,
                          int64_t offset, Tensor &stats);
/// From every rank's stats (f32 [ranks, positions, 3], rank-major): the
/// mean loss over the targets that are not kIgnoreIndex, and each
/// position's log-sum-exp over the whole vocabulary.
Status vocabParallelLoss(const Tensor &stats, const Tensor &targets,
                         Tensor &loss, Tensor &logsumexp);
/// dlogits = dloss · (exp(logits − logsumexp) − onehot(target)) / n on this
/// rank's slice (no communication).
Status vocabParallelCrossEntropyGrad(const Tensor &logits,
                                     const Tensor &targets,
                                     const Tensor &logsumexp,
                                     const Tensor &dloss, int64_t offset,
                                     Tensor &dlogits);

/// The key of a dropout mask: the run's seed and step, the op's stream id
/// and the rank (0: the stream every rank shares).
uint64_t dropoutKey(uint64_t seed, uint64_t step, uint64_t id, uint64_t rank);
/// out = x · keep / (1 − ratio), keep = (u ≥ ratio) for u uniform in [0, 1)
/// drawn from (key, element index) by a counter-based hash: the same key
/// gives the same mask (the backward replays the forward's). f32, f64.
Status dropout(const Tensor &x, float ratio, uint64_t key, Tensor &out);

/// Threads for kernels and OpenBLAS (0: leave the defaults).
void setNumThreads(int threads);
int getNumThreads();

} // namespace mp::rt::cpu

#endif // MP_RUNTIME_KERNELS_H
