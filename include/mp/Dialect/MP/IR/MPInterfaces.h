//===- MPInterfaces.h - facts the passes ask the ops ------------*- C++ -*-===//
#ifndef MP_DIALECT_MP_IR_MPINTERFACES_H
#define MP_DIALECT_MP_IR_MPINTERFACES_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"

namespace mp {

/// How a split passes through an op (SplitOpInterface): the dimension each
/// operand must be split along and the dimension each result is then split
/// along; -1 for whole.
struct SplitMapping {
  llvm::SmallVector<int64_t> operands;
  llvm::SmallVector<int64_t> results;
};

namespace detail {
/// The split rule of `Elementwise` and `ResultsBroadcastableShape` ops;
/// failure for any other op.
mlir::FailureOr<SplitMapping>
propagateSplitByTraits(mlir::Operation *op,
                       llvm::ArrayRef<int64_t> operandDims);
/// The LeadingDimOpInterface rule of `Elementwise` and
/// `ResultsBroadcastableShape` ops; failure for any other op.
mlir::FailureOr<llvm::SmallVector<unsigned>>
leadingDimOperandsByTraits(mlir::Operation *op);
/// `op` created again on `operands` with its attributes, each result's
/// dimension 0 unfolded into `leading`.
mlir::Operation *buildUnfoldedClone(mlir::Operation *op,
                                    mlir::OpBuilder &builder,
                                    mlir::ValueRange operands,
                                    llvm::ArrayRef<int64_t> leading);
/// `axis` of a tensor like `v` made non-negative (verifiers have checked it
/// is in range).
int64_t nonNegativeAxis(int64_t axis, mlir::Value v);
/// The dimension of `result` that holds the same elements as dimension
/// `dim` of `input` when reshaping one to the other (a split along it
/// stays contiguous blocks), or -1.
int64_t reshapeDim(llvm::ArrayRef<int64_t> input,
                   llvm::ArrayRef<int64_t> result, int64_t dim);
/// The operand whose bytes result `result` of `op` may be written over,
/// as the op contract lists it (MP_IN_PLACE in OpContract.def).
std::optional<unsigned> contractInPlaceOperand(mlir::Operation *op,
                                               unsigned result);
} // namespace detail

/// Named transformer ops (linear, attention, norms, activations, ...): the
/// summary reports them by name and counts everything else as glue.
namespace OpTrait {
template <typename ConcreteType>
class TransformerOp
    : public mlir::OpTrait::TraitBase<ConcreteType, TransformerOp> {};
/// Ops whose results are the same on every rank of their grid though their
/// operands are rank-local (they reduce over the grid themselves).
template <typename ConcreteType>
class ReplicatedResults
    : public mlir::OpTrait::TraitBase<ConcreteType, ReplicatedResults> {};
/// Ops a fusion pass makes, after partitioning and differentiation, which
/// refuse them (they have no split or derivative rule of their own).
template <typename ConcreteType>
class Fused : public mlir::OpTrait::TraitBase<ConcreteType, Fused> {};
/// Ops that mix their input's features nonlinearly (activations, softmax,
/// attention): tensor parallelism pairs a column-parallel linear with a
/// row-parallel one only across such an op (or a product of two split
/// values); linear maps and norms alone between two linears make them one
/// factorized linear (MLA's low-rank projections), whose wide factor splits.
template <typename ConcreteType>
class Mixing : public mlir::OpTrait::TraitBase<ConcreteType, Mixing> {};

/// Its results are its operands' elements moved, repeated or converted
/// (reshape, transpose, slice, concat, split, expand, cast): no arithmetic.
template <typename ConcreteType>
class MovesData : public mlir::OpTrait::TraitBase<ConcreteType, MovesData> {};
/// Core attention (QKᵀ, its softmax, ·V): what selective activation
/// recompute re-runs in the backward rather than keeping its large results
/// (Korthikanti et al. 2022; mp-recompute granularity=selective).
template <typename ConcreteType>
class CoreAttention
    : public mlir::OpTrait::TraitBase<ConcreteType, CoreAttention> {};
} // namespace OpTrait

} // namespace mp

#include "mp/Dialect/MP/IR/MPInterfaces.h.inc"

#endif // MP_DIALECT_MP_IR_MPINTERFACES_H
