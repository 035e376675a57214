//===- SplitAnalysis.h - where tensor parallelism splits --------*- C++ -*-===//
//
// The analysis half of mp-tensor-parallel (TensorParallel.cpp rewrites what
// it finds): which linears are column- and row-parallel, which values are
// split along which dim, which whole operands are cut, which norms are
// distributed, and for each linear left whole where and why its split
// stopped.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_SPLITANALYSIS_H
#define MP_TRANSFORMS_SPLITANALYSIS_H

#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <string>

namespace mp::tensor_parallel {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

/// A whole operand that an op's split rule needs split (a bias added to
/// per-head scores): each rank takes its block of it with shard.all_slice.
struct Cut {
  mlir::Operation *op;
  unsigned operand;
  int64_t dim;
};

/// A split dimension seen by an op: operand i is split along dims[i] (-1:
/// whole).
using Dims = llvm::SmallVector<int64_t>;

/// The result of propagating splits through the function.
struct Split {
  llvm::MapVector<mlir::Value, int64_t> dim; // value -> split dimension
  llvm::DenseSet<mlir::Value>
      mixed; // split values past a Mixing op (see mixes)
  // Linears that refused a row-parallel split as a factorized pair's wide
  // factor (see mixes).
  llvm::SmallPtrSet<mlir::Operation *, 8> factorized;
  llvm::DenseMap<mlir::Value, llvm::BitVector> origin; // seeding linears
  llvm::SmallVector<LinearOp> columns, rows;
  llvm::DenseMap<mlir::Operation *, int64_t> groups; // column linear -> parts
  // The ops that take a grouped linear's output in its equal parts (slices,
  // and a view of the output they read).
  llvm::SmallPtrSet<mlir::Operation *, 8> partReaders;
  llvm::SmallVector<Cut> cuts;
  llvm::SmallVector<mlir::Operation *>
      norms; // norms over a split dim (distributed)

  /// The split dimension of each of `op`'s operands (-1: whole).
  Dims operandDims(mlir::Operation *op) const {
    Dims dims;
    for (mlir::Value operand : op->getOperands()) {
      auto it = dim.find(operand);
      dims.push_back(it == dim.end() ? -1 : it->second);
    }
    return dims;
  }
};

/// Why the narrow factor of a factorized pair (two linears with only linear
/// maps and norms between them) stays whole.
inline constexpr const char *kFactorizedReason =
    "through linear maps and norms alone: the two linears are one factorized "
    "linear (a low-rank projection, such as MLA's), whose wide factor splits "
    "instead";

/// Where the split of a linear that stays whole stopped, for telling the
/// user: the op that could not take it and the dim it came split along.
struct Stop {
  mlir::Operation *op;
  Dims dims;          // the split of each of its operands (-1: whole)
  const char *reason; // why, where the op's split rule does not say
  int64_t dim = -1;   // the dim the stopped linear's split arrived along
  /// A parameter shared with another call of its module (dims empty): the
  /// linear reads it (op: the reader that differs), or feeds the
  /// row-parallel linear `op` that does; `reason` says what the other
  /// reader does with it ("reads it whole").
  enum class Shared { No, Reads, Feeds } shared = Shared::No;
  /// The whole description, where none of the above makes it.
  std::string text;
};

/// Marks an attention whose key/value heads are fewer than the ranks (and
/// divide them): its key and value stay whole, computed on every rank, and
/// each rank takes the head its query heads read (a cut that repeats the
/// heads first), as vLLM replicates them.
inline constexpr llvm::StringLiteral kReplicateKeyValueAttr = "mp.replicate_kv";

/// Whether `v` is an expand that broadcasts along `dim`, which a split
/// along `dim` cuts to the local block for free.
bool broadcastsAlong(mlir::Value v, int64_t dim);

/// The reshape that makes `v` (possibly through transposes) heads repeated
/// along `dim`: [..., n, 1, ...] expanded to [..., n, r, ...] and merged
/// into [..., n * r, ...] (HF's repeat_kv of grouped-query attention left
/// decomposed), `dim` then being the merged dim of the reshape's result;
/// null when `v` is not that.
ReshapeOp headRepeat(mlir::Value v, int64_t &dim);

/// The dim of the parameter `v` reads (MemoryPlan::viewedParameter: the
/// mp.get_param, or a view of it such as an einsum's [d, heads, head_dim]
/// weight as [d, heads * head_dim], RaiseEinsum.cpp) that a split of `v`'s dim
/// `axis` into `parts` blocks splits: `axis` itself when `v` is the
/// parameter; through a view, the first dim other than 1 of those merged
/// into `axis`, which must divide into `parts` (the blocks are then the
/// same elements); -1 when no dim does.
int64_t paramAxis(mlir::Value v, int64_t axis, int64_t parts);

/// Whether `op` belongs to a repeated transformer layer (mp.layer).
inline bool inLayer(mlir::Operation *op) {
  return op->hasAttr(MPDialect::getLayerAttrName());
}

/// Records on each of `linears` that `split` leaves whole why
/// (`mp.replicated`, for the summary), and warns for those in the layers.
void reportWhole(llvm::ArrayRef<LinearOp> linears, const Split &split,
                 const llvm::DenseMap<unsigned, Stop> &stops, int64_t tp);
/// The same for the contractions reading a parameter that are not linears
/// (an einsum with a 3-D weight, a pointwise Conv1d): they stay whole.
void reportWeightsNotInLinears(mlir::func::FuncOp func, int64_t tp);
/// The linears outside the layers whose split would not divide by `tp`
/// (to drop: they stay whole, where a block's is an error), each with its
/// stop.
llvm::BitVector indivisibleOutsideLayers(llvm::ArrayRef<LinearOp> linears,
                                         const Split &split,
                                         llvm::DenseMap<unsigned, Stop> &stops,
                                         int64_t tp);

/// The split linears to drop because they read a parameter through a view
/// (MemoryPlan::viewedParameter) whose split dim is no split of one of the
/// parameter's dims by `tp` (and the linear's groups); each with its stop.
llvm::BitVector unsplittableViews(llvm::ArrayRef<LinearOp> linears,
                                  const Split &split,
                                  llvm::DenseMap<unsigned, Stop> &stops,
                                  int64_t tp);

/// Propagates splits from every linear in `allowed`; returns the linears to
/// drop (those whose split reaches an op that cannot take it), or an empty
/// vector when the split is consistent. The first stop of each linear
/// dropped is recorded in `stops`. `pairable` holds the wide factors of
/// factorized pairs that pair column/row after all; a split reaching one of
/// `heads` (the LM heads, split along the vocabulary instead) stops there.
llvm::BitVector
analyze(mlir::func::FuncOp func, llvm::ArrayRef<LinearOp> linears,
        const llvm::BitVector &allowed,
        const llvm::SmallPtrSetImpl<mlir::Operation *> &pairable,
        const llvm::SmallPtrSetImpl<mlir::Operation *> &heads, Split &split,
        llvm::DenseMap<unsigned, Stop> &stops);

/// The linears to drop because a linear of `split` reads a weight or bias
/// that another op reads whole or split another way (the calls of one
/// module, which share their weights: one call's split stopped, or a
/// parameter of it read elsewhere): a parameter is sharded one way or kept
/// whole. A row-parallel linear is dropped by the linears its input's split
/// comes from; a column-parallel one is dropped itself, unless the reader
/// that differs is row-parallel (dropping that one's sources may let both
/// split alike). Why is recorded in `stops` (Stop::shared).
llvm::BitVector unevenlySharedParams(llvm::ArrayRef<LinearOp> linears,
                                     const Split &split,
                                     llvm::DenseMap<unsigned, Stop> &stops);

/// Why a split stopped at `stop.op`, in the user's terms.
std::string describeStop(const Stop &stop);

} // namespace mp::tensor_parallel

#endif // MP_TRANSFORMS_SPLITANALYSIS_H
