//===- Binder.h - binding instructions to kernels -----------------*- C++
//-*-===//
//
// Private to the runtime: the loader binds each instruction of a program to
// a kernel call (a Step) after checking it against the op contract and the
// ops' shape rules, so that a corrupt or hand-edited artifact is an error at
// load, never a stray read in a kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_BINDER_H
#define MP_LIB_RUNTIME_BINDER_H

#include "mp/Program/program.pb.h"
#include "mp/Runtime/Device.h"
#include "mp/Runtime/Executable.h"
#include "mp/Support/OpContract.h"

#include <optional>

namespace mp::rt {

/// Indices come from user input: out-of-range ones are an error, not a stray
/// read. Gather indices may count from the end ([-dim, dim)); class targets
/// may not (`allowNegative` false: [0, dim), or -100, which PyTorch
/// ignores). Device indices are checked
/// from a host copy.
Status checkIndices(const KernelTable *kernels, const Tensor &indices,
                    int64_t dim, const std::string &where,
                    bool allowNegative = true);

/// A step's check of its indices: none when they are a program input, as
/// run() checks those on their host values before uploading them.
struct StepIndexCheck {
  const KernelTable *kernels = nullptr; // null: nothing to check here
  Tensor indices;
  int64_t dim = 0;
  bool allowNegative = true;
  std::string where;
  Status operator()() const {
    return kernels ? checkIndices(kernels, indices, dim, where, allowNegative)
                   : Status::success();
  }
};

/// What a layer or RMS norm kernel needs besides its input and result.
struct NormParams {
  bool layer = true;
  Tensor scale;
  std::optional<Tensor> bias;
  int64_t axis = 0; // non-negative
  float epsilon = 0;

  Status run(const KernelTable &kernels, const Tensor &x, Tensor &out) const;
  /// sum = a + b, out = the norm of sum (fused where the device can).
  Status runAdd(const KernelTable &kernels, const Tensor &a, const Tensor &b,
                Tensor &sum, Tensor &out) const;
};

/// Binds one instruction: checks its operands and builds its kernel call.
class Binder {
public:
  Binder(Executable &exe, const program::Instruction &inst)
      : exe(exe), inst(inst) {}

  Status bind(Executable::Step &step);
  /// Bytes of the f32 shadows `inst` needs on its executable's device (0:
  /// its kernel takes its operands as they are; Widen.cpp).
  static size_t widenedBytes(const Executable &exe,
                             const program::Instruction &inst);

private:
  /// Binds the f32 kernel on f32 shadows of the 16-bit float operands and
  /// results, converting around it (Widen.cpp).
  Status bindWidened(Executable::Step &step);
  using OpKind = contract::OpKind;
  using AttrName = contract::AttrName;

  Status fail(const std::string &msg) const;
  /// Operand and result counts, buffer ids and attributes, as the contract
  /// says for the op.
  Status checkContract(const contract::OpInfo &info);
  Status checkAttributes(const contract::OpInfo &info);
  /// Every operand and result within the device's kernel rank limit.
  Status checkRanks();

  const Tensor &in(int i) const { return exe.buffers[inst.operands(i)]; }
  const Tensor *optIn(int i) const {
    return i < inst.operands_size() && inst.operands(i) >= 0 ? &in(i) : nullptr;
  }
  Tensor &out(int i = 0) { return exe.buffers[inst.results(i)]; }
  std::vector<Shape> operandShapes() const;

  // Attributes (present and typed, as checkAttributes made sure).
  const program::Attribute &attr(AttrName name) const;
  int64_t intAttr(AttrName name) const { return attr(name).i(); }
  double floatAttr(AttrName name) const { return attr(name).f(); }
  Shape intsAttr(AttrName name) const;
  Status axisAttr(AttrName name, int64_t rank, int64_t &axis);
  template <class Enum> Status enumAttr(AttrName name, Enum &value) {
    int64_t raw = intAttr(name);
    std::optional<Enum> e = contract::enumFromInt<Enum>(raw);
    if (!e)
      return fail(std::string(contract::attrName(name)) + " " +
                  std::to_string(raw) + " is not a known value");
    value = *e;
    return Status::success();
  }

  /// An error unless `rule` held and gave `out(0)`'s shape.
  Status expectResult(bool rule, const std::string &error,
                      const Shape &expected);
  Status expectShape(const std::string &what, const Shape &found,
                     const Shape &expected);
  /// The vocabulary ids and targets index, of the `rows` a vocab-parallel
  /// table or logits hold over the ranks: the `vocab` attribute when set (a
  /// vocabulary padded to divide by the ranks), else `rows`.
  Status paddedVocabulary(int64_t &rows);
  /// The range check of operand `i`'s indices that its step makes.
  StepIndexCheck indexCheck(int i, int64_t dim, bool allowNegative,
                            const std::string &where);

  Status bindBinary(Executable::Step &step, OpKind kind);
  Status bindUnary(Executable::Step &step, OpKind kind);
  Status bindCopyLike(Executable::Step &step, OpKind kind);
  Status bindSoftmax(Executable::Step &step);
  Status bindTrilu(Executable::Step &step);
  Status bindRotary(Executable::Step &step);
  Status bindMatmul(Executable::Step &step);
  Status bindLinear(Executable::Step &step);
  // Norms (BindNorm.cpp).
  Status bindNorm(Executable::Step &step, bool layer);
  Status bindAddNorm(Executable::Step &step, bool layer);
  /// all_reduce_add_*_norm, or (`scattered`) reduce_scatter_add_*_norm.
  Status bindReducedNorm(Executable::Step &step, bool layer, bool scattered);
  /// Reads a norm's scale (operand `scaleAt`), bias (the next operand, for
  /// a layer norm), axis and epsilon, and checks them and `result` against
  /// the shape of the input it normalizes.
  Status readNorm(bool layer, int scaleAt, const Shape &input,
                  const Tensor &result, NormParams &params);
  Status bindAttention(Executable::Step &step);
  Status bindEmbedding(Executable::Step &step, bool gather);
  Status bindCrossEntropy(Executable::Step &step);
  Status bindCollective(Executable::Step &step, OpKind kind);
  /// The communicator of the instruction's grid_axis, checked to work on
  /// the executable's memory.
  Status groupOf(Communicator *&comm);
  Status bindTranspose(Executable::Step &step);
  Status bindSlice(Executable::Step &step);
  Status bindExpand(Executable::Step &step);
  Status bindConcat(Executable::Step &step);
  Status bindSplit(Executable::Step &step);
  Status bindReduce(Executable::Step &step);
  Status bindEinsum(Executable::Step &step);
  // Gradient ops (BindGrad.cpp).
  /// An error naming the op when the device has no such kernel.
  template <class Kernel> Status needKernel(Kernel *kernel) const {
    return kernel ? Status::success() : noKernel();
  }
  Status noKernel() const;
  Status positiveFloat(AttrName name, float &value) const;
  void reserveCountScratch(const Tensor &out);
  Status bindLinearWeightGrad(Executable::Step &step);
  Status bindNormGrad(Executable::Step &step, bool layer);
  Status bindGeluGrad(Executable::Step &step);
  Status bindAttentionGrad(Executable::Step &step);
  Status bindEmbeddingGrad(Executable::Step &step);
  Status bindCrossEntropyGrad(Executable::Step &step);
  Status bindSliceGrad(Executable::Step &step);
  Status bindDropout(Executable::Step &step);
  Status bindVocabParallelCrossEntropy(Executable::Step &step);
  Status bindVocabParallelCrossEntropyGrad(Executable::Step &step);

  Executable &exe;
  const program::Instruction &inst;
  bool widening = false; // binding the f32 kernel of bindWidened
};

} // namespace mp::rt

#endif // MP_LIB_RUNTIME_BINDER_H
