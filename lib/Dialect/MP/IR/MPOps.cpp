//===- MPOps.cpp - mp dialect ops -----------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Einsum.h"
#include "mp/Support/OpContract.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mp;

#include "mp/Dialect/MP/IR/MPEnums.cpp.inc"

// The artifact carries these enums as integers: the runtime reads them with
// the op contract's enums, which must have the same values.
namespace {
template <class Ods, class Contract>
constexpr bool sameValue(Ods ods, Contract contract) {
  return static_cast<int64_t>(ods) == static_cast<int64_t>(contract);
}
namespace c = contract;
static_assert(sameValue(ReduceKind::sum, c::ReduceKind::Sum) &&
              sameValue(ReduceKind::mean, c::ReduceKind::Mean) &&
              sameValue(ReduceKind::max, c::ReduceKind::Max) &&
              sameValue(ReduceKind::min, c::ReduceKind::Min) &&
              getMaxEnumValForReduceKind() + 1 ==
                  c::enumCount<c::ReduceKind>());
static_assert(sameValue(ComparePredicate::eq, c::ComparePredicate::Eq) &&
              sameValue(ComparePredicate::ne, c::ComparePredicate::Ne) &&
              sameValue(ComparePredicate::lt, c::ComparePredicate::Lt) &&
              sameValue(ComparePredicate::le, c::ComparePredicate::Le) &&
              sameValue(ComparePredicate::gt, c::ComparePredicate::Gt) &&
              sameValue(ComparePredicate::ge, c::ComparePredicate::Ge) &&
              getMaxEnumValForComparePredicate() + 1 ==
                  c::enumCount<c::ComparePredicate>());
static_assert(sameValue(GeluApproximation::none, c::GeluApproximation::None) &&
              sameValue(GeluApproximation::tanh, c::GeluApproximation::Tanh) &&
              getMaxEnumValForGeluApproximation() + 1 ==
                  c::enumCount<c::GeluApproximation>());
} // namespace

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Formats a shape as 2x3x4 (a scalar as "scalar").
static std::string formatShape(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

/// Normalizes a possibly negative axis; fails when out of [-rank, rank).
static FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis,
                                        int64_t rank, StringRef what = "axis") {
  if (axis < -rank || axis >= rank)
    return op->emitOpError()
           << what << " " << axis << " is out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

/// Checks that `result` is exactly the numpy broadcast of `operands`.
static LogicalResult verifyBroadcast(Operation *op, ValueRange operands,
                                     Value result) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(shape, tensorType(v).getShape(),
                                            next))
      return op->emitOpError()
             << "operand shapes " << formatShape(shape) << " and "
             << formatShape(tensorType(v).getShape())
             << " are not broadcastable";
    shape = next;
  }
  if (tensorType(result).getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError()
           << "result shape " << formatShape(tensorType(result).getShape())
           << " does not match the broadcast shape " << formatShape(shape);
  return success();
}

static LogicalResult expectShape(Operation *op, StringRef what, Value v,
                                 ArrayRef<int64_t> expected) {
  if (tensorType(v).getShape() == expected)
    return success();
  return op->emitOpError() << "expected " << what << " shape "
                           << formatShape(expected) << " but found "
                           << formatShape(tensorType(v).getShape());
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError() << "parameter shape must be static";
  if (getOffset().has_value() != getLength().has_value())
    return emitOpError() << "'offset' and 'length' must be given together";
  if (getOffset() && !getFile())
    return emitOpError() << "'offset' needs a 'file'";
  if (getOffset() && static_cast<int64_t>(*getOffset()) < 0)
    return emitOpError() << "offset " << static_cast<int64_t>(*getOffset())
                         << " is negative";
  // The data is stored in `source_type` when the parameter was narrowed.
  RankedTensorType stored =
      getSourceType() ? type.clone(*getSourceType()) : type;
  if (getLength()) {
    int64_t bits = stored.getElementTypeBitWidth();
    int64_t expected = stored.getNumElements() * ((bits + 7) / 8);
    int64_t length = static_cast<int64_t>(*getLength());
    if (length != expected)
      return emitOpError() << "data length " << length
                           << " does not match the " << expected << " bytes of "
                           << stored;
  }
  if (auto preview = getPreview()) {
    if (preview->getElementType() != stored.getElementType())
      return emitOpError() << "preview element type "
                           << preview->getElementType()
                           << " differs from the parameter's "
                           << stored.getElementType();
    if (preview->getNumElements() > type.getNumElements())
      return emitOpError() << "preview has more values than the parameter";
  }
  return success();
}

FailureOr<RankedTensorType>
ParamOp::getLocalType(SymbolTableCollection &symbolTable, bool emitErrors) {
  RankedTensorType type = getTensorType();
  if (!getGrid())
    return type;
  auto emitOpError = [&]() -> InFlightDiagnostic {
    InFlightDiagnostic diag = this->emitOpError();
    if (!emitErrors)
      diag.abandon();
    return diag;
  };
  auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(
      *this, getGridAttr());
  if (!grid)
    return emitOpError() << "grid '" << *getGrid() << "' is not a shard.grid";
  int64_t ranks = 1;
  for (int64_t d : grid.getShape())
    ranks *= d;
  int64_t axis = getShardAxis() ? static_cast<int64_t>(*getShardAxis()) : 0;
  int64_t groups =
      getShardGroups() ? static_cast<int64_t>(*getShardGroups()) : 1;
  if (axis < 0 || axis >= type.getRank() || groups < 1)
    return emitOpError() << "invalid shard_axis " << axis
                         << " or shard_groups " << groups;
  if (type.getDimSize(axis) % (ranks * groups) != 0)
    return emitOpError() << "dimension " << axis << " ("
                         << type.getDimSize(axis) << ") is not divisible by "
                         << groups << " group(s) x " << ranks << " ranks";
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] /= ranks;
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return getLocalType(symbolTable);
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param =
      symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError() << "'@" << getName()
                         << "' does not reference an mp.param";
  // The parameter's own verifier explains a bad sharding; this is only
  // reached first when the reader comes before the declaration.
  FailureOr<RankedTensorType> local =
      param.getLocalType(symbolTable, /*emitErrors=*/false);
  if (failed(local))
    return emitOpError() << "parameter '@" << getName()
                         << "' has an invalid sharding";
  if (*local != getType())
    return emitOpError() << "result type " << getType()
                         << " differs from the type " << *local
                         << " of parameter '@" << getName() << "'"
                         << (param.getGrid() ? " (local shard)" : "");
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define MP_BINARY_VERIFIER(OP)                                                 \
  LogicalResult OP::verify() {                                                 \
    return verifyBroadcast(*this, getOperands(), getResult());                 \
  }
MP_BINARY_VERIFIER(AddOp)
MP_BINARY_VERIFIER(SubOp)
MP_BINARY_VERIFIER(MulOp)
MP_BINARY_VERIFIER(DivOp)
MP_BINARY_VERIFIER(PowOp)
MP_BINARY_VERIFIER(CompareOp)
MP_BINARY_VERIFIER(WhereOp)
#undef MP_BINARY_VERIFIER

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  ArrayRef<int64_t> lhs = tensorType(getLhs()).getShape();
  ArrayRef<int64_t> rhs = tensorType(getRhs()).getShape();
  if (lhs.empty() || rhs.empty())
    return emitOpError() << "operands must have rank >= 1";
  SmallVector<int64_t> a(lhs), b(rhs);
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t k = a.back(), kRhs = b[b.size() - 2];
  if (k != kRhs)
    return emitOpError() << "contracting dimensions differ: lhs has " << k
                         << ", rhs has " << kRhs;
  SmallVector<int64_t> batch;
  if (!OpTrait::util::getBroadcastedShape(ArrayRef(a).drop_back(2),
                                          ArrayRef(b).drop_back(2), batch))
    return emitOpError() << "batch dimensions of " << formatShape(lhs)
                         << " and " << formatShape(rhs)
                         << " are not broadcastable";
  SmallVector<int64_t> expected(batch);
  if (!lhsVector)
    expected.push_back(a[a.size() - 2]);
  if (!rhsVector)
    expected.push_back(b.back());
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult LinearOp::verify() {
  ArrayRef<int64_t> x = tensorType(getInput()).getShape();
  ArrayRef<int64_t> w = tensorType(getWeight()).getShape();
  if (x.empty())
    return emitOpError() << "input must have rank >= 1";
  if (w.size() != 2)
    return emitOpError() << "weight must have rank 2 but has rank " << w.size();
  int64_t k = getTransposeWeight() ? w[1] : w[0];
  int64_t n = getTransposeWeight() ? w[0] : w[1];
  if (x.back() != k)
    return emitOpError() << "input feature size " << x.back()
                         << " does not match weight input size " << k;
  if (getBias() && failed(expectShape(*this, "bias", getBias(), {n})))
    return failure();
  SmallVector<int64_t> expected(x.drop_back());
  expected.push_back(n);
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType type = tensorType(getInput());
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), type.getRank());
  if (failed(axis))
    return failure();
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
  if (failed(expectShape(*this, "scale", getScale(), normalized)))
    return failure();
  if (getBias() && failed(expectShape(*this, "bias", getBias(), normalized)))
    return failure();
  if (getResult().getType() != type)
    return emitOpError() << "result type must equal the input type";
  return success();
}

LogicalResult RMSNormOp::verify() {
  RankedTensorType type = tensorType(getInput());
  if (type.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  if (failed(
          expectShape(*this, "scale", getScale(), type.getShape().take_back())))
    return failure();
  if (getResult().getType() != type)
    return emitOpError() << "result type must equal the input type";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return normalizeAxis(*this, getAxis(), tensorType(getInput()).getRank());
}

LogicalResult ReduceOp::verify() {
  ArrayRef<int64_t> shape = tensorType(getInput()).getShape();
  SmallVector<bool> reduced(shape.size(), false);
  for (int64_t axis : getAxes()) {
    FailureOr<int64_t> a = normalizeAxis(*this, axis, shape.size());
    if (failed(a))
      return failure();
    if (reduced[*a])
      return emitOpError() << "axis " << axis << " is repeated";
    reduced[*a] = true;
  }
  SmallVector<int64_t> expected;
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (!reduced[i])
      expected.push_back(dim);
    else if (getKeepdims())
      expected.push_back(1);
  }
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult AttentionOp::verify() {
  ArrayRef<int64_t> q = tensorType(getQuery()).getShape();
  ArrayRef<int64_t> k = tensorType(getKey()).getShape();
  ArrayRef<int64_t> v = tensorType(getValue()).getShape();
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return emitOpError() << "query, key and value must be [B, H, S, D]";
  if (q[0] != k[0] || q[0] != v[0])
    return emitOpError() << "batch sizes differ: " << q[0] << ", " << k[0]
                         << ", " << v[0];
  if (k[1] != v[1] || k[2] != v[2])
    return emitOpError() << "key " << formatShape(k) << " and value "
                         << formatShape(v)
                         << " must agree in heads and sequence";
  if (q[3] != k[3])
    return emitOpError() << "query head size " << q[3]
                         << " differs from key head size " << k[3];
  if (k[1] == 0 || q[1] % k[1] != 0)
    return emitOpError() << "query heads (" << q[1]
                         << ") must be a multiple of key/value heads (" << k[1]
                         << ")";
  if (getScale().convertToFloat() <= 0.0f)
    return emitOpError() << "scale must be positive";
  if (Value mask = getMask()) {
    SmallVector<int64_t> scores = {q[0], q[1], q[2], k[2]}, out;
    if (!OpTrait::util::getBroadcastedShape(scores, tensorType(mask).getShape(),
                                            out) ||
        ArrayRef<int64_t>(out) != ArrayRef<int64_t>(scores))
      return emitOpError() << "mask shape "
                           << formatShape(tensorType(mask).getShape())
                           << " does not broadcast to the scores shape "
                           << formatShape(scores);
  }
  return expectShape(*this, "result", getResult(), {q[0], q[1], q[2], v[3]});
}

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> table = tensorType(getTable()).getShape();
  if (table.size() != 2)
    return emitOpError() << "table must have rank 2 but has rank "
                         << table.size();
  SmallVector<int64_t> expected(tensorType(getIndices()).getShape());
  expected.push_back(table[1]);
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> input = tensorType(getInput()).getShape();
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), input.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> expected(input.take_front(*axis));
  llvm::append_range(expected, tensorType(getIndices()).getShape());
  llvm::append_range(expected, input.drop_front(*axis + 1));
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult DropoutOp::verify() {
  float ratio = getRatio().convertToFloat();
  if (ratio < 0.0f || ratio >= 1.0f)
    return emitOpError() << "ratio " << ratio << " is not in [0, 1)";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  ArrayRef<int64_t> logits = tensorType(getLogits()).getShape();
  if (logits.empty())
    return emitOpError() << "logits must have rank >= 1";
  return expectShape(*this, "targets", getTargets(), logits.drop_back());
}

LogicalResult EinsumOp::verify() {
  std::vector<int64_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (Value v : getInputs()) {
    ranks.push_back(tensorType(v).getRank());
    shapes.emplace_back(tensorType(v).getShape().begin(),
                        tensorType(v).getShape().end());
  }
  EinsumSpec spec;
  std::string error;
  std::vector<int64_t> expected;
  if (!parseEinsum(getEquation().str(), ranks, spec, error) ||
      !inferEinsumShape(spec, shapes, expected, error))
    return emitOpError() << error;
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult TriluOp::verify() {
  if (tensorType(getInput()).getRank() < 2)
    return emitOpError() << "input must have rank >= 2";
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorType(getInput()), out = tensorType(getResult());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << formatShape(in.getShape())
                         << " (" << in.getNumElements() << " elements) to "
                         << formatShape(out.getShape()) << " ("
                         << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  return {};
}

LogicalResult TransposeOp::verify() {
  ArrayRef<int64_t> in = tensorType(getInput()).getShape();
  ArrayRef<int64_t> perm = getPermutation();
  if (perm.size() != in.size())
    return emitOpError() << "permutation has " << perm.size()
                         << " entries but the input has rank " << in.size();
  SmallVector<bool> seen(in.size(), false);
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError() << "invalid permutation entry " << p;
    seen[p] = true;
    expected.push_back(in[p]);
  }
  return expectShape(*this, "result", getResult(), expected);
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return getInput();
}

LogicalResult SliceOp::verify() {
  ArrayRef<int64_t> in = tensorType(getInput()).getShape();
  size_t rank = in.size();
  if (getStarts().size() != rank || getLimits().size() != rank ||
      getStrides().size() != rank)
    return emitOpError() << "starts, limits and strides must have " << rank
                         << " entries each";
  SmallVector<int64_t> expected;
  for (size_t i = 0; i < rank; ++i) {
    int64_t start = getStarts()[i], limit = getLimits()[i];
    int64_t stride = getStrides()[i], dim = in[i];
    if (stride == 0)
      return emitOpError() << "stride of dimension " << i << " is zero";
    bool ok = stride > 0 ? (start >= 0 && start <= limit && limit <= dim)
                         : (start < dim && limit >= -1 && limit <= start);
    if (!ok)
      return emitOpError() << "slice [" << start << ", " << limit << ") step "
                           << stride << " is out of bounds for dimension " << i
                           << " of size " << dim;
    int64_t span = stride > 0 ? limit - start : start - limit;
    int64_t step = stride > 0 ? stride : -stride;
    expected.push_back((span + step - 1) / step);
  }
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  RankedTensorType first = tensorType(getInputs().front());
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> expected(first.getShape());
  expected[*axis] = 0;
  for (Value v : getInputs()) {
    RankedTensorType t = tensorType(v);
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return emitOpError() << "inputs must share element type and rank";
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOpError()
               << "input shapes " << formatShape(first.getShape()) << " and "
               << formatShape(t.getShape()) << " differ outside axis " << *axis;
    expected[*axis] += t.getDimSize(*axis);
  }
  if (tensorType(getResult()).getElementType() != first.getElementType())
    return emitOpError() << "result element type differs from the inputs'";
  return expectShape(*this, "result", getResult(), expected);
}

LogicalResult SplitOp::verify() {
  RankedTensorType in = tensorType(getInput());
  if (getResults().empty())
    return emitOpError() << "needs at least one result";
  FailureOr<int64_t> axis = normalizeAxis(*this, getAxis(), in.getRank());
  if (failed(axis))
    return failure();
  int64_t total = 0;
  for (Value r : getResults()) {
    RankedTensorType t = tensorType(r);
    if (t.getElementType() != in.getElementType() ||
        t.getRank() != in.getRank())
      return emitOpError() << "results must match the input's element type "
                              "and rank";
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *axis && t.getDimSize(d) != in.getDimSize(d))
        return emitOpError()
               << "result shape " << formatShape(t.getShape())
               << " differs from the input outside axis " << *axis;
    total += t.getDimSize(*axis);
  }
  if (total != in.getDimSize(*axis))
    return emitOpError() << "split sizes add up to " << total
                         << " but the input dimension " << *axis << " is "
                         << in.getDimSize(*axis);
  return success();
}

LogicalResult ExpandOp::verify() {
  ArrayRef<int64_t> in = tensorType(getInput()).getShape();
  ArrayRef<int64_t> out = tensorType(getResult()).getShape();
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(in, out, shape) ||
      ArrayRef<int64_t>(shape) != out)
    return emitOpError() << "cannot broadcast " << formatShape(in) << " to "
                         << formatShape(out);
  return success();
}

bool mp::isUnaryElementwise(Operation *op) {
  return isa<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, ErfOp,
             SigmoidOp, ReluOp, SiluOp, CosOp, SinOp, GeluOp, CastOp,
             DropoutOp>(op);
}

bool mp::isBroadcastingElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, PowOp, WhereOp, CompareOp>(op);
}

#define GET_OP_CLASSES
#include "mp/Dialect/MP/IR/MPOps.cpp.inc"
