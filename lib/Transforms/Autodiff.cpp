//===- Autodiff.cpp - reverse-mode differentiation of the entry function --===//
//
// Appends the backward pass to the entry function: adjoints flow from the
// loss back through every active op (one that depends on a parameter and
// that the loss depends on), each op building its operands' adjoints by its
// own rule (AutodiffOpInterface). The pass knows no op but mp.get_param
// (where adjoints become gradients) and constants (which have none).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mp {
#define GEN_PASS_DEF_MPAUTODIFF
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

/// Values that depend on a parameter and that the loss depends on.
DenseSet<Value> activeValues(Block &body, Value loss) {
  DenseSet<Value> varied, useful, active;
  for (Operation &op : body.without_terminator()) {
    bool fromParam = isa<GetParamOp>(op) ||
                     llvm::any_of(op.getOperands(),
                                  [&](Value v) { return varied.contains(v); });
    if (fromParam)
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          varied.insert(r);
  }
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        useful.insert(v);
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

struct AutodiffPass : public mp::impl::MPAutodiffBase<AutodiffPass> {
  void runOnOperation() override;

private:
  /// Adds `adjoint` to the adjoint of `value`.
  void accumulate(OpBuilder &b, Value value, Value adjoint) {
    Value &slot = adjoints[value];
    slot = slot ? AddOp::create(b, adjoint.getLoc(), slot, adjoint).getResult()
                : adjoint;
  }
  /// Builds the adjoints of `op`'s active operands.
  LogicalResult differentiate(OpBuilder &b, Operation *op,
                              const DenseSet<Value> &active);

  DenseMap<Value, Value> adjoints;
};

LogicalResult AutodiffPass::differentiate(OpBuilder &b, Operation *op,
                                          const DenseSet<Value> &active) {
  SmallVector<Value> resultAdjoints;
  for (Value r : op->getResults())
    resultAdjoints.push_back(adjoints.lookup(r));
  if (llvm::all_of(resultAdjoints, [](Value v) { return !v; }))
    return success();
  SmallVector<bool> needed;
  for (Value v : op->getOperands())
    needed.push_back(active.contains(v));
  if (llvm::none_of(needed, [](bool n) { return n; }))
    return success();
  auto rule = dyn_cast<AutodiffOpInterface>(op);
  if (!rule)
    return op->emitOpError()
           << "has no derivative rule, but lies between a parameter and the "
              "loss";
  SmallVector<Value> operandAdjoints;
  if (failed(rule.buildAdjoints(b, resultAdjoints, needed, operandAdjoints)))
    return failure();
  for (auto [operand, adjoint, need] :
       llvm::zip(op->getOperands(), operandAdjoints, needed))
    if (need && adjoint)
      accumulate(b, operand, adjoint);
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<func::FuncOp> entry = getEntryFunction(module);
  if (failed(entry))
    return signalPassFailure();
  func::FuncOp func = *entry;
  auto lossType = dyn_cast<RankedTensorType>(
      func.getNumResults() == 1 ? func.getResultTypes()[0] : Type());
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType())) {
    func.emitError() << "mp-autodiff differentiates a function with one "
                        "scalar float result (the loss); @"
                     << func.getSymName() << " returns "
                     << func.getFunctionType().getResults()
                     << ": append a loss first (mp-loss, or --mp-train)";
    return signalPassFailure();
  }
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  DenseSet<Value> active = activeValues(body, loss);

  OpBuilder b(ret);
  Location lossLoc = loss.getLoc();
  adjoints.clear();
  adjoints[loss] = ConstantOp::create(
      b, lossLoc,
      DenseElementsAttr::get(lossType,
                             FloatAttr::get(lossType.getElementType(), 1.0)));
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  // Gradients per parameter, summed over every read of it.
  llvm::MapVector<StringAttr, Value> gradients;
  for (Operation *op : llvm::reverse(forward)) {
    if (auto read = dyn_cast<GetParamOp>(op)) {
      if (Value adjoint = adjoints.lookup(read.getResult())) {
        Value &slot = gradients[read.getNameAttr().getAttr()];
        slot = slot ? AddOp::create(b, read.getLoc(), slot, adjoint).getResult()
                    : adjoint;
      }
      continue;
    }
    if (failed(differentiate(b, op, active)))
      return signalPassFailure();
  }

  // Results: the loss, then one gradient per parameter in declaration order.
  MLIRContext *ctx = &getContext();
  SymbolTableCollection symbols;
  SmallVector<Value> results{loss};
  SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
  for (auto param : module.getOps<ParamOp>()) {
    if (!isa<FloatType>(param.getTensorType().getElementType()))
      continue;
    FailureOr<RankedTensorType> local = param.getLocalType(symbols);
    if (failed(local))
      return signalPassFailure();
    Value grad = gradients.lookup(param.getSymNameAttr());
    if (!grad)
      grad = ConstantOp::create(
          b, param.getLoc(),
          DenseElementsAttr::get(*local,
                                 FloatAttr::get(local->getElementType(), 0.0)));
    results.push_back(grad);
    resultAttrs.push_back(DictionaryAttr::get(
        ctx,
        {NamedAttribute(MPDialect::getNameAttrName(),
                        StringAttr::get(ctx, "grads/" + param.getSymName()))}));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  func.setFunctionType(FunctionType::get(ctx, func.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  adjoints.clear();
}

} // namespace
