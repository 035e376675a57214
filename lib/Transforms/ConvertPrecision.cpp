//===- ConvertPrecision.cpp - fp32 -> bf16/f16 storage --------------------===//
//
// Retypes every fp32 value of the entry function (and the parameters and
// constants it reads) to the target type. The ops are elementwise in their
// element type, so retyping values keeps every op valid; fp32 enters and
// leaves the function through casts so that callers (mp-run's .npy files)
// keep fp32. A mixture-of-experts router's choice stays fp32, as Megatron
// computes it: scores a few bf16 ulps apart would pick other experts.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Routing.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mp {
#define GEN_PASS_DEF_MPCONVERTPRECISION
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

bool isF32Tensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && tensor.getElementType().isF32();
}

RankedTensorType retype(Type t, Type elem) {
  return cast<RankedTensorType>(t).clone(elem);
}

/// The ops a router's choice is made of: each router linear and the ops
/// computed from its scores alone (and from constants, parameters,
/// integers, booleans):
/// the softmax, the top-k, the gates table, up to where the gates meet the
/// experts' outputs.
DenseSet<Operation *> routingOps(Block &body) {
  DenseSet<Operation *> routing;
  SmallVector<Operation *> work;
  body.walk([&](LinearOp linear) {
    if (isRouter(linear)) {
      routing.insert(linear);
      work.push_back(linear);
    }
  });
  auto fromRouting = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !isF32Tensor(v.getType()) ||
           (def && (routing.contains(def) ||
                    isa<ConstantOp, GetParamOp>(def))); // (a selection bias)
  };
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Operation *user : op->getUsers())
      if (!isa<func::ReturnOp>(user) && !routing.contains(user) &&
          llvm::all_of(user->getOperands(), fromRouting)) {
        routing.insert(user);
        work.push_back(user);
      }
  }
  return routing;
}

/// Keeps `routing` fp32 in a converted body: fp32 copies of the operands
/// that were converted, and converted copies of its results for the ops
/// outside it.
void castAround(const DenseSet<Operation *> &routing, Type target) {
  DenseMap<Value, Value> wide;
  for (Operation *op : routing) {
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (!type || type.getElementType() != target)
        continue;
      Value &copy = wide[v];
      if (!copy) {
        // (Right after `v`: one copy serves every routing op that reads
        // it, a constant shared by the layers' routers too.)
        OpBuilder b(op->getContext());
        b.setInsertionPointAfterValue(v);
        copy = CastOp::create(b, op->getLoc(), retype(type, b.getF32Type()), v);
      }
      operand.set(copy);
    }
  }
  for (Operation *op : routing) {
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    for (Value result : op->getResults()) {
      if (!isF32Tensor(result.getType()))
        continue;
      Value narrow;
      for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
        Operation *user = use.getOwner();
        if (routing.contains(user) || isa<func::ReturnOp>(user))
          continue;
        if (!narrow)
          narrow = CastOp::create(b, op->getLoc(),
                                  retype(result.getType(), target), result);
        use.set(narrow);
      }
    }
  }
}

struct ConvertPrecisionPass
    : public mp::impl::MPConvertPrecisionBase<ConvertPrecisionPass> {
  using MPConvertPrecisionBase::MPConvertPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OpBuilder b(&getContext());
    if (dtype == StorageType::F32)
      return;
    Type target =
        dtype == StorageType::BF16 ? Type(b.getBF16Type()) : b.getF16Type();
    FailureOr<func::FuncOp> entry = getEntryFunction(module);
    if (failed(entry))
      return signalPassFailure();
    func::FuncOp func = *entry;

    for (ParamOp param : module.getOps<ParamOp>())
      if (isF32Tensor(param.getType())) {
        param.setSourceTypeAttr(TypeAttr::get(b.getF32Type()));
        param.setTypeAttr(TypeAttr::get(retype(param.getType(), target)));
      }

    Block &body = func.getBody().front();
    DenseSet<Operation *> routing = routingOps(body);
    // Inputs stay fp32 at the boundary.
    b.setInsertionPointToStart(&body);
    for (BlockArgument arg : body.getArguments()) {
      if (!isF32Tensor(arg.getType()))
        continue;
      auto castOp =
          CastOp::create(b, arg.getLoc(), retype(arg.getType(), target), arg);
      arg.replaceAllUsesExcept(castOp.getResult(), castOp);
    }
    body.walk([&](Operation *op) {
      if (isa<CastOp>(op) && op->getBlock() == &body &&
          op->getOperand(0).getDefiningOp() == nullptr)
        return; // the boundary casts just made
      if (isa<CrossEntropyOp>(op))
        return; // the loss stays fp32
      if (op->hasAttr(MPDialect::getExactF32AttrName()))
        return; // integer arithmetic done in fp32
      if (routing.contains(op))
        return;
      // (A constant only the routing reads stays fp32 with it.)
      if (isa<ConstantOp>(op) && !op->use_empty() &&
          llvm::all_of(op->getUsers(),
                       [&](Operation *u) { return routing.contains(u); }))
        return;
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (attr && attr.getElementType().isF32()) {
          auto type = retype(attr.getType(), target);
          const llvm::fltSemantics &sem =
              cast<FloatType>(target).getFloatSemantics();
          DenseElementsAttr converted =
              attr.mapValues(target, [&](const APFloat &v) {
                APFloat f = v;
                bool lost;
                f.convert(sem, APFloat::rmNearestTiesToEven, &lost);
                // A finite value past the range saturates rather than
                // becoming infinite: HF's finfo(float32).min mask fill
                // would give 0 * -inf = NaN where a key is kept.
                if (f.isInfinity() && v.isFinite())
                  f = APFloat::getLargest(sem, v.isNegative());
                return f.bitcastToAPInt();
              });
          constant.setValueAttr(converted);
          constant.getResult().setType(type);
        }
        return;
      }
      for (Value result : op->getResults())
        if (isF32Tensor(result.getType()))
          result.setType(retype(result.getType(), target));
    });
    castAround(routing, target);
    // Outputs go back to fp32.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Type declared = func.getResultTypes()[operand.getOperandNumber()];
      if (operand.get().getType() != declared && isF32Tensor(declared))
        operand.set(CastOp::create(b, ret.getLoc(), declared, operand.get()));
    }
  }
};

} // namespace
