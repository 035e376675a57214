//===- DistributedNorm.cpp - a norm over a split dimension ----------------===//
//
// See DistributedNorm.h.
//
//===----------------------------------------------------------------------===//
#include "DistributedNorm.h"

#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mp;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Builds the decomposition at the norm, each op tagged as the norm is.
class NormBuilder {
public:
  NormBuilder(Operation *norm, FlatSymbolRefAttr grid)
      : b(norm), loc(norm->getLoc()), grid(grid),
        tags(norm->getDiscardableAttrDictionary()) {}

  Value tag(Value v) {
    v.getDefiningOp()->setDiscardableAttrs(tags);
    return v;
  }
  Value cast(Value x, Type elem) {
    if (tensorType(x).getElementType() == elem)
      return x;
    return tag(CastOp::create(b, loc, tensorType(x).clone(elem), x));
  }
  Value scalar(double value) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return tag(ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(type, b.getFloatAttr(b.getF32Type(), value))));
  }
  Value add(Value x, Value y) { return tag(AddOp::create(b, loc, x, y)); }
  Value sub(Value x, Value y) { return tag(SubOp::create(b, loc, x, y)); }
  Value mul(Value x, Value y) { return tag(MulOp::create(b, loc, x, y)); }
  Value rsqrt(Value x) { return tag(RsqrtOp::create(b, loc, x)); }
  /// The mean over the whole (split) last dim of `x`, kept as a dim of 1:
  /// this rank's sum, all-reduced, over the whole size.
  Value mean(Value x, int64_t whole) {
    int64_t last = tensorType(x).getRank() - 1;
    Value sum = tag(ReduceOp::create(b, loc, ReduceKind::sum, x,
                                     ArrayRef<int64_t>{last},
                                     /*keepdims=*/true));
    auto reduce = shard::AllReduceOp::create(b, loc, sum, grid.getValue(),
                                             ArrayRef<shard::GridAxis>{0},
                                             shard::ReductionKind::Sum);
    reduce->setDiscardableAttrs(tags);
    // Sequence parallelism leaves it: it sums statistics, not activations.
    reduce->setAttr(MPDialect::getNormStatisticsAttrName(), b.getUnitAttr());
    return mul(reduce.getResult(), scalar(1.0 / static_cast<double>(whole)));
  }

private:
  OpBuilder b;
  Location loc;
  FlatSymbolRefAttr grid;
  DictionaryAttr tags;
};

} // namespace

bool mp::isNormOverSplit(Operation *op, ArrayRef<int64_t> dims) {
  if (!isa<LayerNormOp, RMSNormOp>(op) || dims.empty())
    return false;
  int64_t last = tensorType(op->getOperand(0)).getRank() - 1;
  if (auto norm = dyn_cast<LayerNormOp>(op);
      norm && norm.getNormalizedAxis() != last)
    return false;
  if (dims[0] != last)
    return false;
  return llvm::all_of(dims.drop_front(), [](int64_t d) { return d < 0; });
}

void mp::distributeNorm(Operation *norm, int64_t ranks,
                        FlatSymbolRefAttr grid) {
  NormBuilder nb(norm, grid);
  Value input = norm->getOperand(0);
  RankedTensorType type = tensorType(input);
  Type f32 = Float32Type::get(norm->getContext());
  int64_t whole = type.getShape().back() * ranks;
  Value x = nb.cast(input, f32), y;
  if (auto ln = dyn_cast<LayerNormOp>(norm)) {
    Value centered = nb.sub(x, nb.mean(x, whole));
    Value variance = nb.mean(nb.mul(centered, centered), whole);
    Value eps = nb.scalar(ln.getEpsilon().convertToDouble());
    y = nb.mul(nb.mul(centered, nb.rsqrt(nb.add(variance, eps))),
               nb.cast(ln.getScale(), f32));
    if (ln.getBias())
      y = nb.add(y, nb.cast(ln.getBias(), f32));
  } else {
    auto rms = cast<RMSNormOp>(norm);
    Value meanSquare = nb.mean(nb.mul(x, x), whole);
    Value eps = nb.scalar(rms.getEpsilon().convertToDouble());
    y = nb.mul(nb.mul(x, nb.rsqrt(nb.add(meanSquare, eps))),
               nb.cast(rms.getScale(), f32));
  }
  y = nb.cast(y, type.getElementType());
  norm->getResult(0).replaceAllUsesWith(y);
  norm->erase();
}
