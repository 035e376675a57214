//===- MPCost.cpp - the FLOPs of the heavy ops (CostOpInterface) ----------===//
//
// Each op's count is the runtime's formula (mp/Support/Flops.h), read from
// the op's types, so the compiler's cost model and mp-run's throughput
// agree.
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Flops.h"

using namespace mlir;
using namespace mp;

static Shape shapeOf(Value v) {
  return Shape(cast<RankedTensorType>(v.getType()).getShape());
}

double MatmulOp::getFlops() {
  return flops::contraction(shapeOf(getResult()), shapeOf(getLhs()).back());
}

double LinearOp::getFlops() {
  return flops::contraction(shapeOf(getResult()), shapeOf(getInput()).back());
}

double AttentionOp::getFlops() {
  return flops::attention(shapeOf(getQuery()), shapeOf(getKey()),
                          shapeOf(getValue()));
}

double LinearWeightGradOp::getFlops() {
  return flops::linearWeightGrad(shapeOf(getInput()),
                                 shapeOf(getResultGrad()).back());
}

double AttentionGradOp::getFlops() {
  return flops::attentionGrad(shapeOf(getQuery()), shapeOf(getKey()),
                              shapeOf(getValue()));
}

double EinsumOp::getFlops() {
  std::vector<Shape> inputs;
  for (Value v : getInputs())
    inputs.push_back(shapeOf(v));
  return flops::einsum(getEquation().str(), inputs);
}
