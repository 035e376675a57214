//===- Table.cpp - the CUDA kernel table ----------------------------------===//
#include "mp/Runtime/CudaKernels.h"
#include "mp/Runtime/Device.h"

#include "Plans.h"

namespace mp::rt {

static bool gpuAvailable(std::string &reason) {
  return cuda::deviceCount(reason) > 0;
}

/// The kernels that take f32 only (as on the CPU) or sum in their result's
/// type: a 16-bit train step widens them (Widen.cpp).
static bool computesInF32Only(contract::OpKind kind) {
  using contract::OpKind;
  return kind == OpKind::AttentionGrad || kind == OpKind::EmbeddingGrad ||
         kind == OpKind::CrossEntropyGrad ||
         kind == OpKind::VocabParallelCrossEntropyGrad;
}

/// The table with the kernels named after its positional part: the
/// gradients' and the rotary embedding's.
static KernelTable withGradients(KernelTable t) {
  t.linearWeightGrad = cuda::linearWeightGrad;
  t.layerNormGrad = cuda::layerNormGrad;
  t.rmsNormGrad = cuda::rmsNormGrad;
  t.geluGrad = cuda::geluGrad;
  t.attentionGrad = cuda::attentionGrad;
  t.embeddingGrad = cuda::embeddingGrad;
  t.crossEntropyGrad = cuda::crossEntropyGrad;
  t.sliceGrad = cuda::sliceGrad;
  t.vocabParallelStats = cuda::vocabParallelStats;
  t.vocabParallelLoss = cuda::vocabParallelLoss;
  t.vocabParallelCrossEntropyGrad = cuda::vocabParallelCrossEntropyGrad;
  t.dropout = cuda::dropout;
  t.rotary = cuda::rotary;
  t.attentionGradScratch = cuda::attentionGradScratchBytes;
  t.normGradScratch = cuda::normGradScratchBytes;
  t.widens = computesInF32Only;
  return t;
}

const KernelTable *cuda::kernelTable() {
  static const KernelTable table =
      withGradients({"cuda",
                     cuda::kMaxRank,
                     gpuAvailable,
                     cuda::allocate,
                     cuda::release,
                     cuda::copyToDevice,
                     cuda::copyToHost,
                     cuda::synchronize,
                     cuda::binary,
                     cuda::compare,
                     cuda::where,
                     cuda::unary,
                     cuda::cast,
                     cuda::matmul,
                     cuda::linear,
                     cuda::layerNorm,
                     cuda::rmsNorm,
                     cuda::softmax,
                     cuda::reduce,
                     cuda::attention,
                     cuda::gather,
                     cuda::crossEntropy,
                     cuda::einsum,
                     cuda::trilu,
                     cuda::transpose,
                     cuda::slice,
                     cuda::concat,
                     cuda::split,
                     cuda::expand,
                     cuda::copy,
                     cuda::vocabEmbedding,
                     cuda::attentionScratchBytes,
                     cuda::crossEntropyScratchBytes,
                     cuda::prepare,
                     cuda::lendScratch,
                     cuda::withdrawScratch,
                     cuda::describeDevice});
  return &table;
}

} // namespace mp::rt
