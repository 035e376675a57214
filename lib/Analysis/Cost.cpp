//===- Cost.cpp - the work and traffic of ops -----------------------------===//
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"

using namespace mlir;

namespace mp {

Cost costOf(Operation *op) {
  Cost cost;
  // (A view of a parameter is its bytes: nothing runs.)
  if (isa<GetParamOp, ConstantOp, ParamOp>(op) || op->getNumResults() == 0 ||
      MemoryPlan::viewsParameter(op))
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

std::optional<Gpu> gpuPreset(llvm::StringRef name) {
  if (name == "a100")
    return Gpu{"a100", 312e12, 2.039e12, 300e9, 25e9};
  if (name == "h100")
    return Gpu{"h100", 989e12, 3.35e12, 450e9, 50e9};
  if (name == "h200")
    return Gpu{"h200", 989e12, 4.8e12, 450e9, 50e9};
  return std::nullopt;
}

std::vector<ChunkCost> chunkCosts(ModuleOp module, int64_t chunks) {
  std::vector<ChunkCost> costs(chunks);
  module.walk([&](Operation *op) {
    auto stage = op->getAttrOfType<IntegerAttr>(MPDialect::getStageAttrName());
    if (!stage || stage.getInt() < 0 || stage.getInt() >= chunks)
      return;
    ChunkCost &chunk = costs[stage.getInt()];
    (op->hasAttr(MPDialect::getBackwardAttrName()) ? chunk.backward
                                                   : chunk.forward) +=
        costOf(op);
  });
  return costs;
}

pipeline::Costs plannedCosts(const std::vector<ChunkCost> &chunks) {
  pipeline::Costs costs;
  for (const ChunkCost &c : chunks) {
    const double forward = 1e3 * c.forward.seconds(Machine::h100());
    const double backward = 1e3 * c.backward.seconds(Machine::h100());
    costs.forward.push_back(forward);
    costs.backward.push_back(backward > 0 ? backward : 2 * forward);
  }
  return costs;
}

} // namespace mp
