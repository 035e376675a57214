//===- MPGradOps.cpp - verifiers of the gradient ops ----------------------===//
//
// The gradient ops mp-autodiff's rules build: each checks the rule of the
// forward op it differentiates (mp/Support/Shape.h, shared with the
// runtime's loader) and that its results have the forward operands' types.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Shape.h"

#include "OpHelpers.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mp;
using mp::detail::checkRule;
using mp::detail::shapeOf;
using mp::detail::tensorType;

static std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

LogicalResult LinearWeightGradOp::verify() {
  Shape expected;
  std::string error;
  if (failed(checkRule(
          *this,
          shape::linearWeightGrad(shapeOf(getInput()), shapeOf(getResultGrad()),
                                  getTransposeWeight(), expected, error),
          error)))
    return failure();
  if (shapeOf(getResult()) != expected)
    return emitOpError() << "expected result shape " << formatShape(expected)
                         << " but found " << formatShape(shapeOf(getResult()));
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  std::string error;
  return checkRule(*this,
                   shape::layerNormGrad(shapeOf(getInput()), getAxis(),
                                        shapeOf(getScale()),
                                        shapeOf(getResultGrad()), error),
                   error);
}

LogicalResult RMSNormGradOp::verify() {
  if (getEpsilon().convertToFloat() <= 0.0f)
    return emitOpError() << "epsilon must be positive";
  std::string error;
  return checkRule(*this,
                   shape::rmsNormGrad(shapeOf(getInput()), shapeOf(getScale()),
                                      shapeOf(getResultGrad()), error),
                   error);
}

LogicalResult AttentionGradOp::verify() {
  if (getScale().convertToFloat() <= 0.0f)
    return emitOpError() << "scale must be positive";
  Shape mask;
  if (getMask())
    mask = shapeOf(getMask());
  std::string error;
  return checkRule(*this,
                   shape::attentionGrad(shapeOf(getQuery()), shapeOf(getKey()),
                                        shapeOf(getValue()),
                                        shapeOf(getResult()),
                                        shapeOf(getResultGrad()),
                                        getMask() ? &mask : nullptr, error),
                   error);
}

LogicalResult EmbeddingGradOp::verify() {
  if (tensorType(getResult()).getRank() != 2)
    return emitOpError() << "result must be a [V, H] table";
  if (getElementTypeOrSelf(getResult()) !=
      getElementTypeOrSelf(getResultGrad()))
    return emitOpError() << "result element type must match the gradient's";
  if (auto grid = getGridAttr()) {
    auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        getOperation(), grid);
    if (!gridOp)
      return emitOpError() << "grid " << grid << " is not a shard.grid";
  }
  std::string error;
  return checkRule(*this,
                   shape::embeddingGrad(shapeOf(getResult()),
                                        shapeOf(getIndices()),
                                        shapeOf(getResultGrad()), error),
                   error);
}

LogicalResult CrossEntropyGradOp::verify() {
  std::string error;
  return checkRule(*this,
                   shape::crossEntropyGrad(shapeOf(getLogits()),
                                           shapeOf(getTargets()),
                                           shapeOf(getLossGrad()), error),
                   error);
}

LogicalResult SliceGradOp::verify() {
  std::string error;
  return checkRule(*this,
                   shape::sliceGrad(shapeOf(getResult()), toVector(getStarts()),
                                    toVector(getLimits()),
                                    toVector(getStrides()),
                                    shapeOf(getResultGrad()), error),
                   error);
}

/// The vocab-parallel loss and its gradient: the cross-entropy rule on the
/// local slice, a log-sum-exp per target, a grid that exists.
static LogicalResult verifyVocabParallel(Operation *op, Value logits,
                                         Value targets, Value logsumexp,
                                         FlatSymbolRefAttr grid) {
  if (!SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, grid))
    return op->emitOpError() << "grid " << grid << " is not a shard.grid";
  Shape loss;
  std::string error;
  if (failed(checkRule(
          op,
          shape::crossEntropy(shapeOf(logits), shapeOf(targets), loss, error),
          error)))
    return failure();
  if (shapeOf(logsumexp) != shapeOf(targets))
    return op->emitOpError()
           << "expected logsumexp shape " << formatShape(shapeOf(targets))
           << " but found " << formatShape(shapeOf(logsumexp));
  return success();
}

LogicalResult VocabParallelCrossEntropyOp::verify() {
  return verifyVocabParallel(*this, getLogits(), getTargets(), getLogsumexp(),
                             getGridAttr());
}

LogicalResult VocabParallelCrossEntropyGradOp::verify() {
  return verifyVocabParallel(*this, getLogits(), getTargets(), getLogsumexp(),
                             getGridAttr());
}
