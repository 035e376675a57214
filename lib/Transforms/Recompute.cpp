//===- Recompute.cpp - activation recompute
//---------------------------------===//
//
// A train step keeps every forward value its backward reads alive from the
// forward to the backward. Recompute trades that memory for compute: a
// region of forward ops is run again in the backward, from the region's
// inputs, and the backward reads the copies; the originals die with their
// last forward use. The regions follow Megatron's policies (full: whole
// layers, in uniform groups or the first layers of each stage; selective:
// core attention) or a list of op kinds. A region's clones keep every
// attribute but `mp.recompute` (a dropout's seed_id among them, so its mask
// replays), and carry `mp.backward` (they run in the backward, in the
// backward function of their pipeline chunk) and `mp.recomputed`.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Layers.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <map>
#include <set>

namespace mp {
#define GEN_PASS_DEF_MPRECOMPUTE
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

bool isBackward(Operation *op) {
  return op->hasAttr(MPDialect::getBackwardAttrName());
}

/// Sequence parallelism's gather of activations [batch, sequence, ...]
/// along the sequence (not a gather of logits over the vocabulary).
bool isSequenceGather(Operation *op) {
  auto gather = dyn_cast<shard::AllGatherOp>(op);
  if (!gather)
    return false;
  auto type = cast<RankedTensorType>(gather.getResult().getType());
  return type.getRank() >= 3 && gather.getGatherAxis().getZExtValue() == 1;
}

/// A recompute policy, from the pass options or the module's record.
struct Policy {
  std::string granularity, method = "uniform";
  int64_t layers = 1;
  std::vector<std::string> ops;
  bool empty() const {
    return (granularity.empty() || granularity == "none") && ops.empty();
  }
};

DictionaryAttr record(Builder &b, const Policy &p) {
  SmallVector<Attribute> ops;
  for (const std::string &op : p.ops)
    ops.push_back(b.getStringAttr(op));
  return b.getDictionaryAttr(
      {b.getNamedAttr("granularity", b.getStringAttr(p.granularity)),
       b.getNamedAttr("method", b.getStringAttr(p.method)),
       b.getNamedAttr("layers", b.getI64IntegerAttr(p.layers)),
       b.getNamedAttr("ops", b.getArrayAttr(ops))});
}

Policy recorded(DictionaryAttr attr) {
  Policy p;
  if (auto g = attr.getAs<StringAttr>("granularity"))
    p.granularity = g.str();
  if (auto m = attr.getAs<StringAttr>("method"))
    p.method = m.str();
  if (auto l = attr.getAs<IntegerAttr>("layers"))
    p.layers = l.getInt();
  if (auto ops = attr.getAs<ArrayAttr>("ops"))
    for (auto op : ops.getAsRange<StringAttr>())
      p.ops.push_back(op.str());
  return p;
}

struct RecomputePass : public mp::impl::MPRecomputeBase<RecomputePass> {
  using MPRecomputeBase::MPRecomputeBase;
  void runOnOperation() override;

private:
  LogicalResult check(const Policy &p, Location loc);
  /// Sets mp.recompute on the forward ops `p` selects.
  LogicalResult mark(func::FuncOp func, const Policy &p);
  /// Clones each marked region into the backward.
  void apply(func::FuncOp func);
};

LogicalResult RecomputePass::check(const Policy &p, Location loc) {
  if (!p.ops.empty() && !p.granularity.empty() && p.granularity != "none")
    return emitError(loc) << "mp-recompute takes granularity= or ops=, not "
                             "both";
  if (p.ops.empty() && p.granularity != "none" &&
      p.granularity != "selective" && p.granularity != "full")
    return emitError(loc) << "mp-recompute granularity must be none, "
                             "selective or full, got '"
                          << p.granularity << "'";
  if (p.method != "uniform" && p.method != "block")
    return emitError(loc) << "mp-recompute method must be uniform or block, "
                             "got '"
                          << p.method << "'";
  if (p.layers < 1)
    return emitError(loc) << "mp-recompute layers must be at least 1, got "
                          << p.layers;
  return success();
}

LogicalResult RecomputePass::mark(func::FuncOp func, const Policy &p) {
  Block &body = func.getBody().front();
  Builder b(func.getContext());
  if (p.granularity == "full") {
    bool tagged = false;
    body.walk([&](Operation *op) {
      tagged |= op->hasAttr(MPDialect::getLayerAttrName());
    });
    if (!tagged)
      tagLayers(func);
  }
  // Block: the first `layers` layers of each pipeline stage (of the program
  // when it has none), by the layers' order.
  std::map<int64_t, std::set<int64_t>> layersOfStage;
  for (Operation &op : body.without_terminator())
    if (auto layer = intAttr(&op, MPDialect::getLayerAttrName()))
      layersOfStage[intAttr(&op, MPDialect::getStageAttrName()).value_or(0)]
          .insert(*layer);
  // More layers than a chunk has would recompute the same as the chunk's
  // count: an error, so that a typo is not a silent policy.
  size_t mostLayers = 0;
  for (auto &[stage, layers] : layersOfStage)
    mostLayers = std::max(mostLayers, layers.size());
  if (p.granularity == "full" && mostLayers > 0 &&
      p.layers > static_cast<int64_t>(mostLayers))
    return func.emitError()
           << "mp-recompute layers=" << p.layers << " is more than the "
           << mostLayers << " layers of "
           << (layersOfStage.size() > 1 ? "the largest pipeline chunk"
                                        : "the model")
           << " (at most " << mostLayers << ")";
  std::set<int64_t> blockLayers;
  for (auto &[stage, layers] : layersOfStage) {
    int64_t taken = 0;
    for (int64_t layer : layers)
      if (taken++ < p.layers)
        blockLayers.insert(layer);
  }
  // Uniform groups count layers within each pipeline chunk (as Megatron
  // groups per model chunk), so that no group spans two chunks.
  std::map<std::pair<int64_t, int64_t>, int64_t> indexInChunk;
  for (auto &[stage, layers] : layersOfStage) {
    int64_t index = 0;
    for (int64_t layer : layers)
      indexInChunk[{stage, layer}] = index++;
  }
  // A region is a set of ops of one chunk: by (chunk, key).
  std::map<std::pair<int64_t, int64_t>, int64_t> ids;
  auto regionOf = [&](int64_t stage, int64_t key) {
    auto [it, added] = ids.try_emplace({stage, key}, ids.size());
    return it->second;
  };
  std::set<std::string> kinds(p.ops.begin(), p.ops.end());
  int64_t marked = 0, loose = 1 << 30;
  for (Operation &op : body.without_terminator()) {
    if (isBackward(&op) || isa<GetParamOp, ConstantOp>(op))
      continue;
    const int64_t stage =
        intAttr(&op, MPDialect::getStageAttrName()).value_or(0);
    std::optional<int64_t> layer = intAttr(&op, MPDialect::getLayerAttrName());
    std::optional<int64_t> region;
    // Kinds by name and core attention: one region per layer, so that a
    // chain of marked ops is recomputed from its first op's inputs.
    if (!kinds.empty() || p.granularity == "selective") {
      const bool chosen = !kinds.empty()
                              ? kinds.count(op.getName().stripDialect().str())
                              : op.hasTrait<mp::OpTrait::CoreAttention>();
      if (chosen)
        region = regionOf(stage, layer ? *layer : loose++);
    } else if (layer) {
      if (p.method == "uniform")
        region = regionOf(stage, indexInChunk[{stage, *layer}] / p.layers);
      else if (blockLayers.count(*layer))
        region = regionOf(stage, *layer);
    }
    if (region) {
      op.setAttr(MPDialect::getRecomputeAttrName(),
                 b.getI64IntegerAttr(*region));
      ++marked;
    }
  }
  if (marked == 0)
    return func.emitError()
           << "mp-recompute found nothing to recompute: "
           << (!kinds.empty()                 ? "no op of the kinds given"
               : p.granularity == "selective" ? "no core attention op"
                                              : "no transformer layer");
  return success();
}

void RecomputePass::apply(func::FuncOp func) {
  Block &body = func.getBody().front();
  // Each region's ops, in program order.
  llvm::MapVector<int64_t, SmallVector<Operation *>> regions;
  int64_t regather = -1;
  for (Operation &op : body.without_terminator()) {
    if (isBackward(&op))
      continue;
    if (auto region = intAttr(&op, MPDialect::getRecomputeAttrName()))
      regions[*region].push_back(&op);
    // Sequence parallelism's gathers, gathered again in the backward
    // (Megatron keeps the sharded input, not the gathered one).
    else if (regatherInputs && isSequenceGather(&op) &&
             llvm::any_of(op.getUsers(), isBackward))
      regions[regather--].push_back(&op);
  }
  OpBuilder b(func.getContext());
  for (auto &[id, ops] : regions) {
    llvm::DenseSet<Operation *> inRegion(ops.begin(), ops.end());
    // The layers the region covers: the backward of those reads its copies;
    // a later layer's backward reading the region's output (the next
    // group's input, a checkpoint) keeps reading the original.
    std::set<int64_t> layers;
    for (Operation *op : ops)
      if (auto layer = intAttr(op, MPDialect::getLayerAttrName()))
        layers.insert(*layer);
    // (Copies run in the backward of the region's pipeline chunk: only
    // that chunk's backward may read them.)
    const std::optional<int64_t> stage =
        intAttr(ops.front(), MPDialect::getStageAttrName());
    auto readsCopies = [&](Operation *user) {
      if (!isBackward(user) ||
          user->hasAttr(MPDialect::getRecomputedAttrName()) ||
          intAttr(user, MPDialect::getStageAttrName()) != stage)
        return false;
      auto layer = intAttr(user, MPDialect::getLayerAttrName());
      return layers.empty() || (layer && layers.count(*layer) > 0);
    };
    // The region's values that backward reads, and the first reader.
    Operation *first = nullptr;
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> worklist;
    for (Operation *op : ops)
      for (Operation *user : op->getUsers())
        if (readsCopies(user)) {
          if (!first || user->isBeforeInBlock(first))
            first = user;
          if (needed.insert(op).second)
            worklist.push_back(op);
        }
    if (!first)
      continue;
    // ... and the region's ops those depend on.
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (inRegion.contains(def) && needed.insert(def).second)
            worklist.push_back(def);
    }
    IRMapping clones;
    b.setInsertionPoint(first);
    for (Operation *op : ops) {
      if (!needed.contains(op))
        continue;
      Operation *clone = b.clone(*op, clones);
      clone->removeAttr(MPDialect::getRecomputeAttrName());
      clone->setAttr(MPDialect::getBackwardAttrName(), b.getUnitAttr());
      clone->setAttr(MPDialect::getRecomputedAttrName(), b.getUnitAttr());
    }
    // The backward reads the copies.
    for (Operation *op : ops) {
      if (!needed.contains(op))
        continue;
      for (auto [original, copy] :
           llvm::zip(op->getResults(), clones.lookup(op)->getResults()))
        original.replaceUsesWithIf(
            copy, [&](OpOperand &use) { return readsCopies(use.getOwner()); });
    }
  }
}

void RecomputePass::runOnOperation() {
  ModuleOp module = getOperation();
  Builder b(module.getContext());
  Policy p;
  p.granularity = granularity;
  p.method = method;
  p.layers = layers;
  p.ops.assign(ops.begin(), ops.end());
  if (p.empty())
    if (auto saved = module->getAttrOfType<DictionaryAttr>(
            MPDialect::getRecomputeAttrName()))
      p = recorded(saved);
  bool gathers = false;
  module.walk([&](shard::AllGatherOp) { gathers = true; });
  if (p.empty() && !(regatherInputs && gathers))
    return;
  if (!p.empty() && failed(check(p, module.getLoc())))
    return signalPassFailure();
  FailureOr<func::FuncOp> func = getEntryFunction(module);
  if (failed(func))
    return signalPassFailure();
  bool marked = false, train = false;
  func->walk([&](Operation *op) {
    marked |= op->hasAttr(MPDialect::getRecomputeAttrName());
    train |= isBackward(op);
  });
  if (!p.empty()) {
    if (!marked && failed(mark(*func, p)))
      return signalPassFailure();
    module->setAttr(MPDialect::getRecomputeAttrName(), record(b, p));
  }
  if (train)
    apply(*func);
}

} // namespace
