//===- Cost.cpp - the work and traffic of ops -----------------------------===//
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace mp {

Cost costOf(Operation *op) {
  Cost cost;
  if (isa<GetParamOp, ConstantOp, ParamOp>(op) || op->getNumResults() == 0)
    return cost;
  for (Value v : op->getOperands())
    cost.bytes += static_cast<double>(storageBytes(v.getType()));
  // A lookup reads the rows it returns, not its whole table.
  if (auto lookup = dyn_cast<EmbeddingOp>(op))
    cost.bytes -=
        static_cast<double>(storageBytes(lookup.getTable().getType()) -
                            storageBytes(lookup.getType()));
  for (Value v : op->getResults()) {
    cost.bytes += static_cast<double>(storageBytes(v.getType()));
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (type && isa<FloatType>(type.getElementType()))
      cost.flops += static_cast<double>(type.getNumElements());
  }
  if (auto costed = dyn_cast<CostOpInterface>(op))
    cost.flops = costed.getFlops();
  return cost;
}

std::vector<Cost> chunkCosts(ModuleOp module, int64_t chunks) {
  std::vector<Cost> costs(chunks);
  module.walk([&](Operation *op) {
    if (auto stage =
            op->getAttrOfType<IntegerAttr>(MPDialect::getStageAttrName()))
      if (stage.getInt() >= 0 && stage.getInt() < chunks)
        costs[stage.getInt()] += costOf(op);
  });
  return costs;
}

pipeline::Costs plannedCosts(const std::vector<Cost> &chunks, bool trainStep) {
  pipeline::Costs costs;
  for (const Cost &c : chunks) {
    double ms = 1e3 * c.seconds(Machine::h100());
    if (trainStep)
      ms /= 3;
    costs.forward.push_back(ms);
    costs.backward.push_back(2 * ms);
  }
  return costs;
}

bool isTrainStep(ModuleOp module) {
  bool train = false;
  module.walk([&](func::FuncOp f) {
    // (mp-autodiff records the forward pass's own arena peak.)
    train |= f->hasAttr("mp.forward_arena_bytes");
  });
  return train;
}

} // namespace mp
