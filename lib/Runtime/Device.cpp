//===- Device.cpp - the CPU kernel table ----------------------------------===//
#include "mp/Runtime/Device.h"

#include "SharedMemory.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace mp::rt {

const char *deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

bool parseDevice(const std::string &name, Device &device) {
  if (name == "cpu")
    device = Device::CPU;
  else if (name == "cuda")
    device = Device::CUDA;
  else
    return false;
  return true;
}

bool nvidiaDeviceNodesPresent() {
  // (/dev/dxg: the GPU of WSL, where CUDA has no /dev/nvidia* nodes.)
  for (const char *node : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
    if (access(node, F_OK) == 0)
      return true;
  return false;
}

namespace {

Status hostCopy(void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::success();
}
Status nothing() { return Status::success(); }
bool always(std::string &) { return true; }

Status hostVocabEmbedding(const Tensor &table, const Tensor &ids,
                          int64_t offset, int64_t vocab, Tensor &out) {
  int64_t rows = table.shape[0];
  size_t rowBytes = table.bytes() / std::max<int64_t>(rows, 1);
  auto *dst = static_cast<uint8_t *>(out.data);
  const auto *src = static_cast<const uint8_t *>(table.data);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int64_t id =
        ids.dtype == DType::I64 ? ids.as<int64_t>()[i] : ids.as<int32_t>()[i];
    int64_t local = (id < 0 ? id + vocab : id) - offset;
    if (local >= 0 && local < rows)
      std::memcpy(dst + i * rowBytes, src + local * rowBytes, rowBytes);
    else
      std::memset(dst + i * rowBytes, 0, rowBytes);
  }
  return Status::success();
}

} // namespace

/// `table` with the kernels after the positional part.
static KernelTable withNamedKernels(KernelTable table) {
  table.rotary = cpu::rotary;
  return table;
}

const KernelTable &cpuKernelTable() {
  static const KernelTable table =
      withNamedKernels({"cpu",
                        0,
                        always,
                        allocateHost,
                        releaseHost,
                        hostCopy,
                        hostCopy,
                        nothing,
                        cpu::binary,
                        cpu::compare,
                        cpu::where,
                        cpu::unary,
                        cpu::cast,
                        cpu::matmul,
                        cpu::linear,
                        cpu::layerNorm,
                        cpu::rmsNorm,
                        cpu::softmax,
                        cpu::reduce,
                        cpu::attention,
                        cpu::gather,
                        cpu::crossEntropy,
                        cpu::einsum,
                        cpu::trilu,
                        cpu::transpose,
                        cpu::slice,
                        cpu::concat,
                        cpu::split,
                        cpu::expand,
                        cpu::copy,
                        hostVocabEmbedding,
                        nullptr,
                        nullptr,
                        cpu::prepareCpu,
                        nullptr,
                        nullptr,
                        cpu::describeCpu,
                        cpu::linearWeightGrad,
                        cpu::layerNormGrad,
                        cpu::rmsNormGrad,
                        cpu::geluGrad,
                        cpu::attentionGrad,
                        cpu::embeddingGrad,
                        cpu::crossEntropyGrad,
                        cpu::sliceGrad,
                        cpu::vocabParallelStats,
                        cpu::vocabParallelLoss,
                        cpu::vocabParallelCrossEntropyGrad,
                        cpu::dropout,
                        cpu::planLinear,
                        cpu::planLinearWeightGrad,
                        cpu::addLayerNorm,
                        cpu::addRmsNorm});
  return table;
}

} // namespace mp::rt
