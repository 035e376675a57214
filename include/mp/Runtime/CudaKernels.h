//===- CudaKernels.h - CUDA kernels -------------------------------*- C++
//-*-===//
//
// The same operations and semantics as mp/Runtime/Kernels.h, on tensors whose
// data lives in device memory, queued on the rank's compute stream (NCCL
// uses a second, communication stream; see lib/Runtime/cuda/Streams.h).
// Float kernels take fp32, fp16 and bf16 tensors and compute in fp32; GEMMs
// use cuBLAS with fp32 accumulation. Where the CPU kernels also take fp64,
// integers or bools (elementwise, compare, cast, softmax, reduce, matmul),
// so do these, with the CPU's semantics: fp64 computes in fp64, integers
// wrap, casts saturate (IntegerArithmetic.h). This header needs no CUDA
// headers; the library exists when CMake found the CUDA toolkit
// (MP_ENABLE_CUDA).
//
// The executor binds them through the CUDA kernel table (mp-run --device
// cuda), which the runtime loads from the plugin libmp-cuda.so
// (CudaBackend.h). Not yet run on a GPU: see the CUDA issue.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDAKERNELS_H
#define MP_RUNTIME_CUDAKERNELS_H

#include "mp/Runtime/Kernels.h"

#include <memory>
#include <string>

namespace mp::rt {
class Communicator;
struct KernelTable;
} // namespace mp::rt

namespace mp::rt::cuda {

/// The kernel table of these kernels (what the plugin's cudaKernelTable
/// gives, CudaBackend.h).
const KernelTable *kernelTable();
/// The NCCL communicator of makeDeviceCommunicator (Comm.h), which calls
/// it through the plugin.
Status makeNcclCommunicator(Communicator &host,
                            std::unique_ptr<Communicator> &out);

/// Number of usable GPUs; 0 with `reason` set when there are none (no
/// driver, no device), so GPU tests can skip saying why.
int deviceCount(std::string &reason);
/// The current GPU: name, memory and compute capability.
std::string describeDevice();

Status allocate(size_t bytes, void **ptr);
void release(void *ptr);
Status copyToDevice(void *dst, const void *src, size_t bytes);
Status copyToHost(void *dst, const void *src, size_t bytes);
Status synchronize();

Status binary(cpu::BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &out);
Status compare(cpu::CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out);
Status where(const Tensor &cond, const Tensor &a, const Tensor &b, Tensor &out);
Status unary(cpu::UnaryKind kind, const Tensor &x, Tensor &out);
Status cast(const Tensor &x, Tensor &out);
Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out);
Status matmul(const Tensor &a, const Tensor &b, Tensor &out);
Status layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, float epsilon, Tensor &out);
Status rmsNorm(const Tensor &x, const Tensor &scale, float epsilon,
               Tensor &out);
Status softmax(const Tensor &x, int64_t axis, Tensor &out);
Status attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, float scale, bool causal, Tensor &out);
Status gather(const Tensor &x, const Tensor &indices, int64_t axis,
              Tensor &out);
Status transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 Tensor &out);
Status expand(const Tensor &x, Tensor &out);
Status copy(const Tensor &x, Tensor &out);
Status reduce(cpu::ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &out);
Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out);
/// The device scratch attention and crossEntropy need beyond their operands
/// for these tensors. An executable sizes one block for its program's
/// largest need at load and lends it to the kernels while it runs, so no
/// kernel allocates then; a kernel needing more than the block is an error.
/// Kernels called with nothing lent (tests) use scratch of their own, grown
/// on demand.
size_t attentionScratchBytes(const Tensor &q, const Tensor &k, const Tensor &v);
size_t crossEntropyScratchBytes(const Tensor &out);
/// Creates the streams and the cuBLAS handle (at load, not in the first
/// step).
Status prepare();
/// The kernels use `bytes` of device memory at `ptr` (not owned) for their
/// scratch until withdrawScratch().
void lendScratch(void *ptr, size_t bytes);
void withdrawScratch();
/// On the host through the CPU kernel (einsum only appears in small
/// constant-like subgraphs): fp32 and fp64.
Status einsum(const std::string &equation,
              const std::vector<const Tensor *> &inputs, Tensor &out);
Status trilu(const Tensor &x, bool upper, int64_t k, Tensor &out);
Status rotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
              int64_t rotaryDim, bool interleaved, Tensor &out);
Status slice(const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &strides, Tensor &out);
Status concat(const std::vector<const Tensor *> &inputs, int64_t axis,
              Tensor &out);
Status split(const Tensor &x, int64_t axis, const std::vector<Tensor *> &outs);
Status vocabEmbedding(const Tensor &table, const Tensor &ids, int64_t offset,
                      int64_t vocab, Tensor &out);

// Gradient ops (Kernels.h's semantics): fp32, fp16 and bf16 computing in
// fp32, except attentionGrad (fp32, as on the CPU) and dropout (also fp64).
// A 16-bit program runs attention's, the embedding's (which sums in its
// result's type) and the cross-entropies' gradients on f32 copies (the
// table's `widens`, Widen.cpp).
Status linearWeightGrad(const Tensor &x, const Tensor &dy, bool transposeWeight,
                        Tensor &dw);
Status layerNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                     int64_t axis, float epsilon, Tensor &dx, Tensor &dscale);
Status rmsNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                   float epsilon, Tensor &dx, Tensor &dscale);
Status geluGrad(const Tensor &x, const Tensor &dy, bool tanhForm, Tensor &dx);
Status attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *mask, const Tensor &out, const Tensor &dout,
                     float scale, bool causal, Tensor &dq, Tensor &dk,
                     Tensor &dv);
Status embeddingGrad(const Tensor &ids, const Tensor &dy, int64_t offset,
                     int64_t vocab, Tensor &dtable);
Status crossEntropyGrad(const Tensor &logits, const Tensor &targets,
                        const Tensor &dloss, Tensor &dlogits);
Status sliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &strides, Tensor &dx);
/// The vocab-parallel loss; `stats` and every operand in device memory (the
/// statistics are all-gathered over NCCL between the first two).
Status vocabParallelStats(const Tensor &logits, const Tensor &targets,
                          int64_t offset, Tensor &stats);
Status vocabParallelLoss(const Tensor &stats, const Tensor &targets,
                         Tensor &loss, Tensor &logsumexp);
Status vocabParallelCrossEntropyGrad(const Tensor &logits,
                                     const Tensor &targets,
                                     const Tensor &logsumexp,
                                     const Tensor &dloss, int64_t offset,
                                     Tensor &dlogits);
Status dropout(const Tensor &x, float ratio, uint64_t key, Tensor &out);
/// The scratch of the backward kernels, as attentionScratchBytes: P and dP
/// of attentionGrad's chunks; the row statistics and column partial sums
/// of a norm's gradient (over the dims of `x` from `axis`). The
/// cross-entropy gradients count their targets in crossEntropyScratchBytes.
size_t attentionGradScratchBytes(const Tensor &q, const Tensor &k,
                                 const Tensor &v);
size_t normGradScratchBytes(const Tensor &x, int64_t axis);

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDAKERNELS_H
