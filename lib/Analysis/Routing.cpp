//===- Routing.cpp - mixture-of-experts routers ---------------------------===//
//
// A router is found by what is done with its outputs (a top-k or an argmax
// over them), not by its name: tensor parallelism keeps it whole
// (WholeLinears.cpp), the precision conversion keeps the routing fp32.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Routing.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mp;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool mp::isRouter(LinearOp linear) {
  auto lastDim = [](Value v) { return tensorType(v).getShape().back(); };
  if (lastDim(linear.getResult()) >= lastDim(linear.getInput()))
    return false;
  SmallVector<Value> work{linear.getResult()};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty() && seen.size() < 64) {
    Value v = work.pop_back_val();
    const int64_t features = tensorType(v).getRank() - 1;
    for (Operation *user : v.getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (auto reduce = dyn_cast<ReduceOp>(user)) {
        bool overFeatures = llvm::is_contained(reduce.getAxes(), features) ||
                            llvm::is_contained(reduce.getAxes(), -1);
        if (overFeatures && (reduce.getKind() == ReduceKind::max ||
                             reduce.getKind() == ReduceKind::min))
          return true;
        continue;
      }
      // Through ops that keep the features last.
      if (user->getNumResults() != 1 ||
          lastDim(user->getResult(0)) != lastDim(v))
        continue;
      if (auto softmax = dyn_cast<SoftmaxOp>(user);
          softmax && softmax.getNormalizedAxis() != features)
        continue;
      if (isa<SoftmaxOp, CompareOp, WhereOp, AddOp, SubOp, MulOp, DivOp, NegOp,
              SigmoidOp, TanhOp, ReluOp, ExpOp, LogOp, CastOp, ReshapeOp>(user))
        work.push_back(user->getResult(0));
    }
  }
  return false;
}
