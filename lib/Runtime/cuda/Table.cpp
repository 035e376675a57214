//===- Table.cpp - the CUDA kernel table ----------------------------------===//
#include "mp/Runtime/CudaKernels.h"
#include "mp/Runtime/Device.h"

#include "Plans.h"

namespace mp::rt {

static bool gpuAvailable(std::string &reason) {
  return cuda::deviceCount(reason) > 0;
}

const KernelTable *cuda::kernelTable() {
  static const KernelTable table = {"cuda",
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
                                    cuda::describeDevice};
  return &table;
}

} // namespace mp::rt
