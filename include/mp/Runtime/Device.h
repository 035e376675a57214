//===- Device.h - where a program runs: kernel tables -------------*- C++
//-*-===//
//
// The executor binds each instruction to a kernel through a table, one per
// device, with the same signatures (mp/Runtime/Kernels.h). The CPU table is
// always there; the CUDA table when the runtime was built with CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_DEVICE_H
#define MP_RUNTIME_DEVICE_H

#include "mp/Runtime/Kernels.h"

#include <string>

namespace mp::rt {

enum class Device { CPU, CUDA };

const char *deviceName(Device device);
/// Parses "cpu" / "cuda"; false otherwise.
bool parseDevice(const std::string &name, Device &device);

struct KernelTable {
  const char *name;
  /// The most dimensions a tensor may have (0: no limit).
  size_t maxRank;
  /// Whether the device can be used here; `reason` says why not.
  bool (*available)(std::string &reason);
  // Memory.
  Status (*allocate)(size_t bytes, void **ptr);
  void (*release)(void *ptr);
  Status (*toDevice)(void *dst, const void *src, size_t bytes);
  Status (*toHost)(void *dst, const void *src, size_t bytes);
  Status (*synchronize)();
  // Kernels.
  decltype(&cpu::binary) binary;
  decltype(&cpu::compare) compare;
  decltype(&cpu::where) where;
  decltype(&cpu::unary) unary;
  decltype(&cpu::cast) cast;
  decltype(&cpu::matmul) matmul;
  decltype(&cpu::linear) linear;
  decltype(&cpu::layerNorm) layerNorm;
  decltype(&cpu::rmsNorm) rmsNorm;
  decltype(&cpu::softmax) softmax;
  decltype(&cpu::reduce) reduce;
  decltype(&cpu::attention) attention;
  decltype(&cpu::gather) gather;
  decltype(&cpu::crossEntropy) crossEntropy;
  decltype(&cpu::einsum) einsum;
  decltype(&cpu::trilu) trilu;
  decltype(&cpu::transpose) transpose;
  decltype(&cpu::slice) slice;
  decltype(&cpu::concat) concat;
  decltype(&cpu::split) split;
  decltype(&cpu::expand) expand;
  decltype(&cpu::copy) copy;
  /// Rows of `ids` within [offset, offset + rows) of a vocab-parallel table,
  /// zeros for the others; negative ids count from the end of the whole
  /// table of `vocab` rows, as in gather.
  Status (*vocabEmbedding)(const Tensor &table, const Tensor &ids,
                           int64_t offset, int64_t vocab, Tensor &out);
  // Scratch and setup (null where kernels need none): what attention and
  // crossEntropy need beyond their operands for these tensors; `prepare`,
  // called once at load so that running creates nothing (streams, library
  // handles); and the scratch an executable lends the kernels while it runs
  // (memory from `allocate`, sized for its program's largest need).
  size_t (*attentionScratch)(const Tensor &q, const Tensor &k, const Tensor &v);
  size_t (*crossEntropyScratch)(const Tensor &out);
  Status (*prepare)();
  void (*lendScratch)(void *ptr, size_t bytes);
  void (*withdrawScratch)();
  /// The device in a few words (e.g. "NVIDIA H200, 139.8 GiB, sm_90"), for
  /// mp-run's load line; null where the name says enough.
  std::string (*describe)();
  // Gradient kernels (null where the device has none yet: a train step is
  // then an error at load naming the op).
  decltype(&cpu::linearWeightGrad) linearWeightGrad = nullptr;
  decltype(&cpu::layerNormGrad) layerNormGrad = nullptr;
  decltype(&cpu::rmsNormGrad) rmsNormGrad = nullptr;
  decltype(&cpu::geluGrad) geluGrad = nullptr;
  decltype(&cpu::attentionGrad) attentionGrad = nullptr;
  decltype(&cpu::embeddingGrad) embeddingGrad = nullptr;
  decltype(&cpu::crossEntropyGrad) crossEntropyGrad = nullptr;
  decltype(&cpu::sliceGrad) sliceGrad = nullptr;
  decltype(&cpu::vocabParallelStats) vocabParallelStats = nullptr;
  decltype(&cpu::vocabParallelLoss) vocabParallelLoss = nullptr;
  decltype(&cpu::vocabParallelCrossEntropyGrad) vocabParallelCrossEntropyGrad =
      nullptr;
  decltype(&cpu::dropout) dropout = nullptr;
  /// A linear planned at load (null, or an empty result: use `linear`).
  decltype(&cpu::planLinear) planLinear = nullptr;
  decltype(&cpu::planLinearWeightGrad) planLinearWeightGrad = nullptr;
  /// A residual add and its norm in one pass (null: the add and the norm
  /// run one after the other).
  decltype(&cpu::addLayerNorm) addLayerNorm = nullptr;
  decltype(&cpu::addRmsNorm) addRmsNorm = nullptr;
  /// The scratch of attentionGrad and of layerNormGrad/rmsNormGrad (over the
  /// dims of x from `axis`), as attentionScratch (null: none).
  size_t (*attentionGradScratch)(const Tensor &q, const Tensor &k,
                                 const Tensor &v) = nullptr;
  size_t (*normGradScratch)(const Tensor &x, int64_t axis) = nullptr;
  /// Rotary position embedding (mp.rotary; null: the device has none, and
  /// a program that holds one is refused at load).
  decltype(&cpu::rotary) rotary = nullptr;
  /// Ops whose kernels here compute only in f32: a 16-bit program runs them
  /// on f32 copies of their operands (Widen.cpp; the CPU's own rule
  /// there). Null: none.
  bool (*widens)(contract::OpKind kind) = nullptr;
};

const KernelTable &cpuKernelTable();
/// The CUDA backend's kernels, loaded on first use (CudaBackend.h). Null
/// when this runtime was built without CUDA or the backend cannot be
/// loaded; `why`, if given, then says which.
const KernelTable *cudaKernelTable(std::string *why = nullptr);
/// Whether this machine shows an NVIDIA device node (/dev/nvidia0, ...): the
/// cheap test for a GPU before loading the CUDA backend to look for one.
bool nvidiaDeviceNodesPresent();

} // namespace mp::rt

#endif // MP_RUNTIME_DEVICE_H
