//===- WholeLinears.cpp - what tensor parallelism leaves whole, and why ---===//
//
// Part of mp-tensor-parallel (see SplitAnalysis.h): the linears left whole
// get `mp.replicated` with why (the summary lists them) and, in the
// repeated layers, a warning; so do the contractions with a parameter that
// are not linears. Outside the layers, a split that would not divide by tp
// leaves its linears whole instead of failing.
//
//===----------------------------------------------------------------------===//
#include "KeyValueHeads.h"
#include "SplitAnalysis.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Analysis/Routing.h"
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Support/Shape.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir;
using namespace mp;
using namespace mp::tensor_parallel;

/// Why a router stays whole, for the summary.
static constexpr const char *kRouterReason =
    "its outputs are scores a top-k selects among (a mixture-of-experts "
    "router): whole on every rank, as Megatron keeps routers";

/// A transformer-block linear that stays whole costs the parallelism the
/// user asked for: a warning says so, naming the op that stopped its split,
/// and `mp.replicated` records it for the summary (which lists the linears
/// outside the layers left whole too). Some are whole by nature (a router,
/// a one-feature gate): the summary lists them, without a warning.
void tensor_parallel::reportWhole(ArrayRef<LinearOp> linears,
                                  const Split &split,
                                  const llvm::DenseMap<unsigned, Stop> &stops,
                                  int64_t tp) {
  llvm::SmallPtrSet<Operation *, 16> splitOnes;
  for (LinearOp l : split.columns)
    splitOnes.insert(l);
  for (LinearOp l : split.rows)
    splitOnes.insert(l);
  for (auto [i, linear] : llvm::enumerate(linears)) {
    if (splitOnes.contains(linear))
      continue;
    std::string why = "no split reaches it";
    Operation *at = nullptr;
    if (auto stop = stops.find(i); stop != stops.end()) {
      at = stop->second.op;
      why = describeStop(stop->second);
      // (Outside the layers, the narrow side of such a pair is an input's
      // projection more often than a low-rank factor.)
      if (!inLayer(linear) && stop->second.reason == kFactorizedReason)
        why = "only linear maps and norms lie between it and block linears "
              "that split (a projection of the embeddings or patches, or a "
              "low-rank factor): they split instead";
    }
    // Whole by nature, said without a warning: a router, and a linear with
    // one output feature (Qwen2-MoE's shared-expert gate).
    bool byNature = true;
    if (inLayer(linear) && isRouter(linear))
      why = kRouterReason;
    else if (tensorType(linear->getResult(0)).getShape().back() == 1)
      why = "it has one output feature (a gate or a score): nothing to split";
    else
      byNature = false;
    linear->setAttr(MPDialect::getReplicatedAttrName(),
                    StringAttr::get(linear->getContext(), why));
    // (Outside the layers, whole is common and cheap: an embedding's
    // projection, a pooler; the summary lists them.)
    if (!inLayer(linear) || byNature)
      continue;
    InFlightDiagnostic diag = linear->emitWarning()
                              << "this linear stays whole (replicated on all "
                              << tp << " ranks): " << why;
    if (at)
      diag.attachNote(at->getLoc()) << "the split stops here";
  }
}

/// The parameter `v` is, through shape ops and casts (a weight transposed
/// or viewed before a contraction), or null.
static GetParamOp paramThroughViews(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto read = dyn_cast<GetParamOp>(def))
      return read;
    if (!isa<ReshapeOp, TransposeOp, CastOp>(def))
      return {};
    v = def->getOperand(0);
  }
  return {};
}

/// Contractions with a parameter that are not linears (an einsum that is
/// not one, such as a weight whose contracted dim lies between its kept
/// ones; a MatMul against a 3-D weight; a pointwise Conv1d): tensor
/// parallelism splits only linears, so these stay whole, which a warning
/// (in the layers) and the summary say.
void tensor_parallel::reportWeightsNotInLinears(func::FuncOp func, int64_t tp) {
  func.walk([&](Operation *op) {
    if (!isa<MatmulOp, EinsumOp>(op))
      return;
    for (Value operand : op->getOperands()) {
      GetParamOp read = paramThroughViews(operand);
      if (!read)
        continue;
      std::string why = ("it reads parameter '" + read.getName() +
                         "' as a weight, and tensor parallelism splits "
                         "linears only (mp-raise makes them of a MatMul or "
                         "Gemm with a 2-D weight, and of an einsum that "
                         "contracts a weight's leading or trailing dims): "
                         "this contraction is not one")
                            .str();
      op->setAttr(MPDialect::getReplicatedAttrName(),
                  StringAttr::get(op->getContext(), why));
      if (inLayer(op))
        op->emitWarning() << "this '" << op->getName()
                          << "' stays whole (replicated on all " << tp
                          << " ranks): " << why;
      return;
    }
  });
}

/// The linears outside the layers whose split would not divide by tp (a
/// classifier's ten classes, a cross-attention's heads): they stay whole,
/// where a block's would be an error (checkDivisible).
llvm::BitVector tensor_parallel::indivisibleOutsideLayers(
    ArrayRef<LinearOp> linears, const Split &split,
    llvm::DenseMap<unsigned, Stop> &stops, int64_t t) {
  llvm::BitVector drop(linears.size());
  auto stopAt = [&](Operation *op, const llvm::BitVector &from,
                    const std::string &what, int64_t size) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "its split would cut " << what << " (" << size << ") of '"
       << op->getName() << "'";
    if (auto name = dyn_cast<NameLoc>(op->getLoc()))
      os << " ('" << name.getName() << "')";
    os << ", which does not divide by the " << t << " ranks";
    for (unsigned i : from.set_bits())
      if (!inLayer(linears[i]) && !drop.test(i)) {
        drop.set(i);
        Stop stop{op, split.operandDims(op), nullptr};
        stop.text = text;
        stops.try_emplace(i, stop);
      }
  };
  for (auto [v, d] : split.dim) {
    if (int64_t size = tensorType(v).getDimSize(d); size % t)
      if (Operation *def = v.getDefiningOp())
        stopAt(def, split.origin.lookup(v),
               "dim " + std::to_string(d) + " of the result", size);
    for (Operation *user : v.getUsers())
      if (auto attention = dyn_cast<AttentionOp>(user)) {
        int64_t q = tensorType(attention.getQuery()).getDimSize(1);
        int64_t kv = tensorType(attention.getKey()).getDimSize(1);
        if (q % t)
          stopAt(attention, split.origin.lookup(v), "the query heads", q);
        else if (split.dim.count(attention.getKey()) && kv % t)
          stopAt(attention, split.origin.lookup(v), "the key/value heads", kv);
      }
  }
  for (const Cut &cut : split.cuts) {
    int64_t size =
        tensorType(cut.op->getOperand(cut.operand)).getDimSize(cut.dim);
    if (size % t && !repeatsHeads(cut))
      for (Value operand : cut.op->getOperands())
        if (split.dim.count(operand))
          stopAt(cut.op, split.origin.lookup(operand),
                 "dim " + std::to_string(cut.dim) + " of operand " +
                     std::to_string(cut.operand),
                 size);
  }
  return drop;
}

llvm::BitVector tensor_parallel::unsplittableViews(
    ArrayRef<LinearOp> linears, const Split &split,
    llvm::DenseMap<unsigned, Stop> &stops, int64_t tp) {
  llvm::BitVector drop(linears.size());
  auto shapeText = [](Value v) {
    ArrayRef<int64_t> shape = tensorType(v).getShape();
    return formatShape(Shape(shape.begin(), shape.end()));
  };
  for (auto [i, constLinear] : llvm::enumerate(linears)) {
    LinearOp linear = constLinear;
    Value weight = linear.getWeight();
    auto view = weight.getDefiningOp<ReshapeOp>();
    bool row = llvm::is_contained(split.rows, linear);
    if (!view || !MemoryPlan::viewedParameter(weight) ||
        (!row && !llvm::is_contained(split.columns, linear)))
      continue;
    bool transposed = linear.getTransposeWeight();
    int64_t axis = row == transposed ? 1 : 0;
    int64_t parts = tp * std::max<int64_t>(1, split.groups.lookup(linear));
    if (paramAxis(weight, axis, parts) >= 0)
      continue;
    drop.set(i);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "it reads parameter '"
       << MemoryPlan::viewedParameter(weight).getName() << "' "
       << shapeText(view.getInput()) << " viewed as " << shapeText(weight)
       << ", and no dim of the "
       << "parameter splits like dim " << axis << " of the view into " << parts
       << " blocks";
    Stop stop{linear, split.operandDims(linear), nullptr};
    stop.text = text;
    stops.try_emplace(i, stop);
  }
  return drop;
}
