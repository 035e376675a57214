//===- Fold.h - evaluating ONNX nodes on known inputs -----------*- C++ -*-===//
//
// The host-side half of an ONNX op's definition: how a node whose inputs are
// known at import (integer initializers, Constant nodes, static shapes) is
// evaluated into HostTensors. Folder carries one node's inputs and outputs
// and the helpers the fold functions share; the fold functions themselves
// live in FoldMath.cpp and FoldShape.cpp, and the op table (ONNXOps.cpp)
// says which one each op type uses. Exactness matters more than speed here:
// the tensors are small.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_FOLD_H
#define MP_LIB_IMPORT_ONNX_FOLD_H

#include "HostTensor.h"

#include "mp/Support/IntegerArithmetic.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace mp::onnx_import {

/// One node being folded. A fold function reads `in` (nullptr: an absent
/// optional input, or for ops folded without known inputs, one not known)
/// and `shapes` (every present input's shape), appends one HostTensor per
/// output to `out` and returns true; or returns false, with `error` set when
/// the inputs are invalid for the op and empty when the node is simply not
/// folded (it is then imported as mp ops).
struct Folder {
  const onnx::NodeProto &node;
  const std::vector<const HostTensor *> &in;
  const std::vector<Shape> &shapes;
  std::vector<HostTensor> &out;
  std::string &error;

  bool fail(const std::string &msg) {
    error = msg;
    return false;
  }
  /// `a` within [-rank, rank) made non-negative, else fails naming it.
  bool axis(int64_t a, int64_t rank, int64_t &out) {
    std::optional<int64_t> n = normalizeAxis(a, rank);
    if (!n)
      return fail("axis " + std::to_string(a) + " is out of range for rank " +
                  std::to_string(rank));
    out = *n;
    return true;
  }
  const HostTensor &input(size_t i) const { return *in[i]; }
  bool has(size_t i) const { return i < in.size() && in[i]; }

  /// Inputs 0 and 1 broadcast against each other into a tensor of `outType`:
  /// `fi` on integers when both are integers and `fi` is given, else `fd`.
  bool elementwise(DType outType,
                   const std::function<double(double, double)> &fd,
                   const std::function<int64_t(int64_t, int64_t)> &fi);
  /// `f` on every element of input 0, keeping its type; `fi` instead on
  /// integers where given (exact beyond 2^53).
  bool unary(const std::function<double(double)> &f,
             const std::function<int64_t(int64_t)> &fi = nullptr);
  /// Appends a tensor of `shape` whose element i is `src`'s `source(i)`;
  /// false when a tensor of `shape` cannot be held.
  bool gatherInto(const HostTensor &src, const std::vector<int64_t> &shape,
                  const std::function<int64_t(int64_t)> &source);
  /// Appends `src` with a new shape of the same number of elements.
  bool reshapeTo(const HostTensor &src, std::vector<int64_t> shape);
};

/// The elements of `t` as int64.
std::vector<int64_t> intsOf(const HostTensor &t);
/// The index in an operand of shape `inShape` that output index `outIndex`
/// of the broadcast shape `outShape` reads.
int64_t broadcastIndex(int64_t outIndex, const std::vector<int64_t> &outShape,
                       const std::vector<int64_t> &inShape);

/// An elementwise binary op whose result has the first operand's type: `Fn`
/// on floats, `Int` (the runtime's wrapping arithmetic) on integers.
template <template <typename> class Fn, int64_t (*Int)(int64_t, int64_t)>
bool foldArithmetic(Folder &f) {
  return f.elementwise(f.input(0).dtype, Fn<double>(), Int);
}
/// An elementwise comparison (a bool result).
template <template <typename> class Fn> bool foldComparison(Folder &f) {
  return f.elementwise(DType::Bool, Fn<double>(), Fn<int64_t>());
}

/// And, Or, Xor: Fn on two boolean inputs.
template <template <typename> class Fn> bool foldLogical(Folder &f) {
  for (size_t i : {0, 1})
    if (f.input(i).dtype != DType::Bool)
      return f.fail("input " + std::to_string(i) + " must be boolean");
  return foldComparison<Fn>(f);
}

// Arithmetic and reductions (FoldMath.cpp).
bool foldDiv(Folder &f);
bool foldPow(Folder &f);
bool foldWhere(Folder &f);
bool foldClip(Folder &f);
/// Max (`largest`) or Min of one or two inputs.
bool foldExtremum(Folder &f, bool largest);
bool foldCast(Folder &f);
/// ArgMax (`largest`) or ArgMin.
bool foldArgExtremum(Folder &f, bool largest);
bool foldMatMul(Folder &f);
bool foldEinsum(Folder &f);
bool foldSoftmax(Folder &f);
bool foldTrilu(Folder &f);
bool foldCumSum(Folder &f);
/// `kind` is "sum", "mean", "max" or "min".
bool foldReduce(Folder &f, const std::string &kind);
bool foldRange(Folder &f);

// Shapes, data movement and constants (FoldShape.cpp).
bool foldIdentity(Folder &f);
bool foldReshape(Folder &f);
bool foldTranspose(Folder &f);
bool foldUnsqueeze(Folder &f);
bool foldSqueeze(Folder &f);
bool foldFlatten(Folder &f);
bool foldTile(Folder &f);
bool foldConcat(Folder &f);
bool foldSlice(Folder &f);
bool foldGather(Folder &f);
bool foldGatherElements(Folder &f);
bool foldExpand(Folder &f);
bool foldSplit(Folder &f);
bool foldConstant(Folder &f);
bool foldConstantOfShape(Folder &f);
bool foldShape(Folder &f);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_FOLD_H
