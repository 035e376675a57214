//===- MPUnfold.cpp - batch dimensions unfolded (LeadingDimOpInterface) ---===//
//
// Which ops compute each slice along their results' dimension 0 from the
// matching slices of some operands, and how each is rebuilt with that
// dimension unfolded into several ([B*H, S, d] back to [B, H, S, d]).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mp;

static RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `type` with dimension 0 unfolded into `leading`.
static RankedTensorType unfoldedType(RankedTensorType type,
                                     ArrayRef<int64_t> leading) {
  SmallVector<int64_t> shape(leading);
  llvm::append_range(shape, type.getShape().drop_front());
  return RankedTensorType::get(shape, type.getElementType());
}

FailureOr<SmallVector<unsigned>>
mp::detail::leadingDimOperandsByTraits(Operation *op) {
  if (!op->hasTrait<mlir::OpTrait::Elementwise>() &&
      !op->hasTrait<mlir::OpTrait::ResultsBroadcastableShape>())
    return failure();
  RankedTensorType result = typeOf(op->getResult(0));
  if (result.getRank() == 0)
    return failure();
  SmallVector<unsigned> operands;
  for (OpOperand &operand : op->getOpOperands()) {
    RankedTensorType type = typeOf(operand.get());
    if (type.getRank() == result.getRank() && type.getDimSize(0) != 1)
      operands.push_back(operand.getOperandNumber());
  }
  return operands;
}

Operation *mp::detail::buildUnfoldedClone(Operation *op, OpBuilder &builder,
                                          ValueRange operands,
                                          ArrayRef<int64_t> leading) {
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operands);
  state.addAttributes(op->getAttrs());
  for (Value result : op->getResults())
    state.addTypes(unfoldedType(typeOf(result), leading));
  return builder.create(state);
}

/// The operands of a matmul whose dimension 0 is its result's: with a
/// batch (rank 3 or more), those of the result's rank that do not
/// broadcast along it; without (rank 2), the rows of `lhs`.
FailureOr<SmallVector<unsigned>> MatmulOp::getLeadingDimOperands() {
  int64_t rank = getType().getRank();
  int64_t lhsRank = typeOf(getLhs()).getRank();
  int64_t rhsRank = typeOf(getRhs()).getRank();
  if (lhsRank < 2 || rhsRank < 2)
    return failure();
  if (rank == 2)
    return SmallVector<unsigned>{0};
  SmallVector<unsigned> operands;
  for (unsigned i : {0u, 1u}) {
    RankedTensorType type = typeOf(getOperand(i));
    if (type.getRank() == rank && type.getDimSize(0) != 1)
      operands.push_back(i);
  }
  return operands;
}

FailureOr<SmallVector<unsigned>> SoftmaxOp::getLeadingDimOperands() {
  if (getNormalizedAxis() == 0)
    return failure();
  return SmallVector<unsigned>{0};
}

/// The op cloned with dimension 0 unfolded (its other attributes, such as
/// mp.exact_f32, kept), `axis` moved past the new dims.
template <typename OpT>
static Operation *unfoldAlongAxis(OpT op, OpBuilder &builder,
                                  ValueRange operands,
                                  ArrayRef<int64_t> leading) {
  int64_t axis =
      op.getNormalizedAxis() + static_cast<int64_t>(leading.size()) - 1;
  auto unfolded =
      cast<OpT>(mp::detail::buildUnfoldedClone(op, builder, operands, leading));
  unfolded.setAxis(axis);
  return unfolded;
}

Operation *SoftmaxOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                    ArrayRef<int64_t> leading) {
  return unfoldAlongAxis(*this, builder, operands, leading);
}

/// A concatenation along another dim than 0: every operand is batched.
FailureOr<SmallVector<unsigned>> ConcatOp::getLeadingDimOperands() {
  if (getNormalizedAxis() == 0)
    return failure();
  SmallVector<unsigned> operands;
  for (unsigned i = 0; i < getNumOperands(); ++i)
    operands.push_back(i);
  return operands;
}

Operation *ConcatOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                   ArrayRef<int64_t> leading) {
  return unfoldAlongAxis(*this, builder, operands, leading);
}

/// A gather along another dim than 0 (HF DeBERTa's relative positions,
/// taken from [B*H, ...] scores): dimension 0 is its input's.
FailureOr<SmallVector<unsigned>> GatherOp::getLeadingDimOperands() {
  if (getNormalizedAxis() == 0 || typeOf(getInput()).getRank() < 2)
    return failure();
  return SmallVector<unsigned>{0};
}

Operation *GatherOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                   ArrayRef<int64_t> leading) {
  return unfoldAlongAxis(*this, builder, operands, leading);
}

/// A slice that keeps dimension 0 whole (`x[:, 3]` on merged [B*H, S, S]
/// scores) is batched along it.
FailureOr<SmallVector<unsigned>> SliceOp::getLeadingDimOperands() {
  RankedTensorType input = typeOf(getInput());
  if (input.getRank() < 2 || getStarts()[0] != 0 || getStrides()[0] != 1 ||
      getLimits()[0] != input.getDimSize(0))
    return failure();
  return SmallVector<unsigned>{0};
}

Operation *SliceOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                  ArrayRef<int64_t> leading) {
  auto slice = cast<SliceOp>(
      detail::buildUnfoldedClone(*this, builder, operands, leading));
  SmallVector<int64_t> starts(leading.size(), 0), strides(leading.size(), 1);
  SmallVector<int64_t> limits(leading);
  llvm::append_range(starts, getStarts().drop_front());
  llvm::append_range(limits, getLimits().drop_front());
  llvm::append_range(strides, getStrides().drop_front());
  slice.setStarts(starts);
  slice.setLimits(limits);
  slice.setStrides(strides);
  return slice;
}

FailureOr<SmallVector<unsigned>> TransposeOp::getLeadingDimOperands() {
  if (getPermutation().empty() || getPermutation()[0] != 0)
    return failure();
  return SmallVector<unsigned>{0};
}

Operation *TransposeOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                      ArrayRef<int64_t> leading) {
  int64_t extra = static_cast<int64_t>(leading.size()) - 1;
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i <= extra; ++i)
    perm.push_back(i);
  for (int64_t p : getPermutation().drop_front())
    perm.push_back(p + extra);
  auto transpose = cast<TransposeOp>(
      detail::buildUnfoldedClone(*this, builder, operands, leading));
  transpose.setPermutation(perm);
  return transpose;
}

/// Ops over the last dimensions of their first operand: dimension 0 is a
/// batch dimension of any input of rank 2 or more.
static FailureOr<SmallVector<unsigned>> leadingDimOfInput(Value input) {
  if (typeOf(input).getRank() < 2)
    return failure();
  return SmallVector<unsigned>{0};
}

FailureOr<SmallVector<unsigned>> LinearOp::getLeadingDimOperands() {
  return leadingDimOfInput(getInput());
}

FailureOr<SmallVector<unsigned>> RMSNormOp::getLeadingDimOperands() {
  return leadingDimOfInput(getInput());
}

FailureOr<SmallVector<unsigned>> LayerNormOp::getLeadingDimOperands() {
  if (getNormalizedAxis() == 0)
    return failure();
  return leadingDimOfInput(getInput());
}

Operation *LayerNormOp::buildUnfolded(OpBuilder &builder, ValueRange operands,
                                      ArrayRef<int64_t> leading) {
  return unfoldAlongAxis(*this, builder, operands, leading);
}
