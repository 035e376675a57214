//===- PlanMemory.cpp - the static arena plan as a pass -------------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

#define DEBUG_TYPE "mp-plan-memory"

namespace mp {
#define GEN_PASS_DEF_MPPLANMEMORY
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// One line per value: "%v = op: offset O, size S, live A..B" (a view:
/// "%v = op: view of %w"), then the peak.
void printPlan(func::FuncOp func, const MemoryPlan &plan,
               llvm::raw_ostream &os) {
  AsmState state(func);
  auto name = [&](Value v) {
    std::string s;
    llvm::raw_string_ostream out(s);
    v.printAsOperand(out, state);
    return s;
  };
  auto position = [](int64_t p) {
    if (p == std::numeric_limits<int64_t>::max())
      return std::string("end");
    return p < 0 ? std::string("start") : std::to_string(p);
  };
  os << "memory plan of @" << func.getSymName() << ": arena "
     << plan.peakBytes() << " bytes (" << plan.unplannedBytes()
     << " without reuse)\n";
  auto describe = [&](Value v) {
    Operation *def = v.getDefiningOp();
    os << "  " << name(v) << " = "
       << (def ? def->getName().getStringRef() : StringRef("argument")) << ": ";
  };
  for (const MemoryPlan::Buffer &b : plan.getBuffers()) {
    describe(b.value);
    os << "offset " << b.offset << ", size " << b.range.size << ", live "
       << position(b.range.start) << ".." << position(b.range.end) << "\n";
  }
  func.walk([&](Operation *op) {
    for (Value result : op->getResults()) {
      if (plan.isView(result)) {
        describe(result);
        os << "view of " << name(MemoryPlan::viewSource(op)) << "\n";
      } else if (Value operand = plan.inPlaceOperand(result)) {
        describe(result);
        os << "in place of " << name(operand) << "\n";
      }
    }
  });
}

struct PlanMemoryPass : public mp::impl::MPPlanMemoryBase<PlanMemoryPass> {
  using MPPlanMemoryBase::MPPlanMemoryBase;

  void runOnOperation() override {
    FailureOr<func::FuncOp> func = getEntryFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    FailureOr<MemoryPlan> plan = MemoryPlan::compute(*func);
    if (failed(plan))
      return signalPassFailure();
    plan->attach(*func);
    if (print) {
      printPlan(*func, *plan, llvm::outs());
      llvm::outs().flush();
    }
  }
};

} // namespace
