//===- MPSplit.cpp - how a split passes through each op -------------------===//
//-===//
//
// The rules tensor parallelism asks each op: given which operand dims are
// split over the ranks, which dims of the other operands and of the results
// are (or that the split cannot pass). Elementwise and broadcasting ops get
// theirs from their traits; the others define propagateSplit.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/OpContract.h"

#include "OpHelpers.h"

#include "mlir/Dialect/Traits.h"

using namespace mlir;
using namespace mp;
using mp::detail::tensorType;

/// Every operand and result split along `dim`.
static SplitMapping uniform(Operation *op, int64_t dim) {
  return {SmallVector<int64_t>(op->getNumOperands(), dim),
          SmallVector<int64_t>(op->getNumResults(), dim)};
}

/// The split of a numpy-broadcasting op: split operands must agree on the
/// result dim; a whole operand spanning that dim (not size 1 there) must be
/// split too; operands that broadcast along it stay whole.
static FailureOr<SplitMapping> broadcastSplit(Operation *op,
                                              ArrayRef<int64_t> dims) {
  int64_t rank = tensorType(op->getResult(0)).getRank(), common = -1;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (dims[i] < 0)
      continue;
    int64_t d = dims[i] + rank - tensorType(operand).getRank();
    if (common >= 0 && common != d)
      return failure();
    common = d;
  }
  SplitMapping mapping;
  for (Value operand : op->getOperands()) {
    int64_t local = common - (rank - tensorType(operand).getRank());
    bool spans =
        common >= 0 && local >= 0 && tensorType(operand).getDimSize(local) != 1;
    mapping.operands.push_back(spans ? local : -1);
  }
  mapping.results.assign(op->getNumResults(), common);
  return mapping;
}

FailureOr<SplitMapping>
mp::detail::propagateSplitByTraits(Operation *op, ArrayRef<int64_t> dims) {
  if (op->hasTrait<mlir::OpTrait::ResultsBroadcastableShape>())
    return broadcastSplit(op, dims);
  if (op->hasTrait<mlir::OpTrait::Elementwise>()) {
    int64_t dim = -1;
    for (int64_t d : dims) {
      if (d >= 0 && dim >= 0 && d != dim)
        return failure();
      dim = std::max(dim, d);
    }
    return uniform(op, dim);
  }
  return failure();
}

int64_t mp::detail::reshapeDim(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                               int64_t dim) {
  int64_t before = 1;
  for (int64_t i = 0; i < dim; ++i)
    before *= in[i];
  int64_t acc = 1;
  for (int64_t j = 0; j < static_cast<int64_t>(out.size()); ++j) {
    if (acc == before && out[j] != 1)
      return j;
    acc *= out[j];
  }
  return -1;
}

/// A rule for ops whose first operand alone may be split: `resultDim` maps
/// its split dim to the result's (-1: cannot pass); the other operands stay
/// whole.
static FailureOr<SplitMapping>
firstOperandSplit(Operation *op, ArrayRef<int64_t> dims,
                  llvm::function_ref<int64_t(int64_t)> resultDim) {
  if (llvm::any_of(dims.drop_front(), [](int64_t d) { return d >= 0; }))
    return failure();
  SplitMapping mapping = uniform(op, -1);
  if (dims[0] < 0)
    return mapping;
  int64_t d = resultDim(dims[0]);
  if (d < 0)
    return failure();
  mapping.operands[0] = dims[0];
  mapping.results.assign(op->getNumResults(), d);
  return mapping;
}

FailureOr<SplitMapping> ReshapeOp::propagateSplit(ArrayRef<int64_t> dims) {
  return firstOperandSplit(*this, dims, [&](int64_t d) {
    return detail::reshapeDim(tensorType(getInput()).getShape(),
                              getType().getShape(), d);
  });
}

FailureOr<SplitMapping> TransposeOp::propagateSplit(ArrayRef<int64_t> dims) {
  return firstOperandSplit(*this, dims, [&](int64_t d) -> int64_t {
    for (auto [j, p] : llvm::enumerate(getPermutation()))
      if (p == d)
        return static_cast<int64_t>(j);
    return -1;
  });
}

/// A split along the split axis would cut the parts differently on each
/// rank: it does not pass (tensor parallelism shards a fused QKV linear per
/// part instead).
FailureOr<SplitMapping> SplitOp::propagateSplit(ArrayRef<int64_t> dims) {
  return firstOperandSplit(*this, dims, [&](int64_t d) {
    return d == getNormalizedAxis() ? -1 : d;
  });
}

/// A split of the data along a dim other than the gathered one passes, to
/// where that dim lands in the result (the indices' dims take the axis's
/// place); the indices are read whole (ids split on the data would pick
/// other rows on every rank).
FailureOr<SplitMapping> GatherOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t axis = getNormalizedAxis();
  int64_t extra = tensorType(getIndices()).getRank() - 1;
  return firstOperandSplit(*this, dims, [&](int64_t d) -> int64_t {
    if (d == axis)
      return -1;
    return d < axis ? d : d + extra;
  });
}

/// A dimension taken whole passes; so does one taken every `stride`-th
/// element from a start below the stride to its end (gate and up
/// interleaved in one projection, `x[..., ::2]` and `x[..., 1::2]`): each
/// rank's contiguous block, a multiple of the stride long, holds the
/// elements of its block of the result in the same pattern.
FailureOr<SplitMapping> SliceOp::propagateSplit(ArrayRef<int64_t> dims) {
  return firstOperandSplit(*this, dims, [&](int64_t d) -> int64_t {
    int64_t size = tensorType(getInput()).getDimSize(d);
    int64_t start = getStarts()[d], stride = getStrides()[d];
    bool whole = start == 0 && stride == 1 && getLimits()[d] == size;
    bool everyStride = stride > 1 && start < stride && size % stride == 0 &&
                       getLimits()[d] >= size - stride + start + 1;
    return whole || everyStride ? d : -1;
  });
}

/// A dimension kept passes (to where it lands when the reduced ones are
/// dropped); a reduced one would leave each rank a partial result.
FailureOr<SplitMapping> ReduceOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t rank = tensorType(getInput()).getRank();
  auto reduced = [&](int64_t d) {
    return llvm::any_of(getAxes(),
                        [&](int64_t a) { return (a < 0 ? a + rank : a) == d; });
  };
  return firstOperandSplit(*this, dims, [&](int64_t d) -> int64_t {
    if (reduced(d))
      return -1;
    if (getKeepdims())
      return d;
    int64_t dropped = 0;
    for (int64_t i = 0; i < d; ++i)
      dropped += reduced(i);
    return d - dropped;
  });
}

FailureOr<SplitMapping> ExpandOp::propagateSplit(ArrayRef<int64_t> dims) {
  return firstOperandSplit(*this, dims, [&](int64_t d) -> int64_t {
    int64_t offset = getType().getRank() - tensorType(getInput()).getRank();
    bool broadcasts = getType().getDimSize(d + offset) !=
                      tensorType(getInput()).getDimSize(d);
    return broadcasts ? -1 : d + offset;
  });
}

FailureOr<SplitMapping> SoftmaxOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t axis = getNormalizedAxis();
  return firstOperandSplit(*this, dims,
                           [&](int64_t d) { return d == axis ? -1 : d; });
}

/// Positions before the normalized dims pass; scale and bias stay whole.
FailureOr<SplitMapping> LayerNormOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t axis = getNormalizedAxis();
  return firstOperandSplit(*this, dims,
                           [&](int64_t d) { return d < axis ? d : -1; });
}

FailureOr<SplitMapping> RMSNormOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t last = getType().getRank() - 1;
  return firstOperandSplit(*this, dims,
                           [&](int64_t d) { return d < last ? d : -1; });
}

/// Operands split along one dimension other than the axis; a whole operand
/// must be split along it too (MLA's rotary key head, broadcast to every
/// head, concatenated with the split heads).
FailureOr<SplitMapping> ConcatOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t axis = getNormalizedAxis(), split = -1;
  for (int64_t d : dims) {
    if (d < 0)
      continue;
    if (split >= 0 && d != split)
      return failure();
    split = d;
  }
  if (split == axis)
    return failure();
  return uniform(*this, split);
}

/// A batch dimension, the rows of lhs (M) or the columns of rhs (N) pass;
/// the contracting dimension would leave partial sums, which are not a
/// split. The operand not split stays whole unless it spans a split batch
/// dimension (attention left decomposed: heads split in both products).
FailureOr<SplitMapping> MatmulOp::propagateSplit(ArrayRef<int64_t> dims) {
  int64_t rank = getType().getRank();
  int64_t lhsRank = tensorType(getLhs()).getRank();
  int64_t rhsRank = tensorType(getRhs()).getRank();
  if (dims[0] < 0 && dims[1] < 0)
    return uniform(*this, -1);
  if (lhsRank < 2 || rhsRank < 2)
    return failure();
  // The result dim each operand's split lands on; -1: cannot pass.
  auto lhsResult = [&](int64_t d) -> int64_t {
    if (d == lhsRank - 1)
      return -1;
    return d == lhsRank - 2 ? rank - 2 : d + rank - lhsRank;
  };
  auto rhsResult = [&](int64_t d) -> int64_t {
    if (d == rhsRank - 2)
      return -1;
    return d == rhsRank - 1 ? rank - 1 : d + rank - rhsRank;
  };
  int64_t fromLhs = dims[0] >= 0 ? lhsResult(dims[0]) : -2;
  int64_t fromRhs = dims[1] >= 0 ? rhsResult(dims[1]) : -2;
  if (fromLhs == -1 || fromRhs == -1 ||
      (fromLhs >= 0 && fromRhs >= 0 && fromLhs != fromRhs))
    return failure();
  int64_t result = std::max(fromLhs, fromRhs);
  SplitMapping mapping = {{-1, -1}, {result}};
  bool batch = result < rank - 2;
  int64_t operandRanks[] = {lhsRank, rhsRank};
  for (auto [i, operandRank] : llvm::enumerate(operandRanks)) {
    int64_t local = result - (rank - operandRank);
    if (dims[i] >= 0)
      mapping.operands[i] = dims[i];
    else if (batch && local >= 0 &&
             tensorType(getOperand(i)).getDimSize(local) != 1)
      mapping.operands[i] = local; // spans the split batch dim: cut too
  }
  return mapping;
}

/// Heads: query, key and value all split along dim 1 (so grouped-query
/// groups stay whole on each rank); an additive mask must not span the
/// heads.
FailureOr<SplitMapping> AttentionOp::propagateSplit(ArrayRef<int64_t> dims) {
  namespace position = contract::attention;
  if (llvm::all_of(dims, [](int64_t d) { return d < 0; }))
    return uniform(*this, -1);
  // Heads split; or, in multi-query attention, the query heads split and
  // the one key/value head whole: every query head reads it. A whole key or
  // value of several heads is asked to be cut (a broadcast one, or one
  // computed from parameters, can be).
  bool multiQuery = tensorType(getKey()).getDimSize(1) == 1 &&
                    tensorType(getValue()).getDimSize(1) == 1 &&
                    dims[position::Key] < 0 && dims[position::Value] < 0;
  int64_t kv = multiQuery ? -1 : 1;
  if (dims[position::Query] != 1 ||
      (dims[position::Key] >= 0 && dims[position::Key] != kv) ||
      (dims[position::Value] >= 0 && dims[position::Value] != kv))
    return failure();
  SplitMapping mapping = {{1, kv, kv}, {1}};
  if (Value mask = getMask()) {
    // A mask broadcast over the heads stays whole; one per head (ALiBi, a
    // relative position bias) splits with them.
    int64_t d = 1 - (4 - tensorType(mask).getRank());
    int64_t heads = d >= 0 && tensorType(mask).getDimSize(d) != 1 ? d : -1;
    if (dims[position::Mask] >= 0 && dims[position::Mask] != heads)
      return failure();
    mapping.operands.push_back(heads);
  }
  return mapping;
}
