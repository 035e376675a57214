//===- Layers.cpp - transformer blocks and their layer indices ------------===//
#include "mp/Analysis/Layers.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mp;

//===----------------------------------------------------------------------===//
// Layer indices from names
//===----------------------------------------------------------------------===//

/// Extracts a block index from names like "/h.3/attn/MatMul",
/// "model.layers.3.mlp.up_proj.weight" or "/encoder/layer.3/...".
static std::optional<int64_t> layerFromName(StringRef name) {
  static llvm::Regex pattern(
      "(^|[/._])(h|layer|layers|block|blocks)[._]([0-9]+)([/._]|$)");
  SmallVector<StringRef> groups;
  if (!pattern.match(name, &groups))
    return std::nullopt;
  int64_t layer;
  if (groups[3].getAsInteger(10, layer))
    return std::nullopt;
  return layer;
}

static std::optional<int64_t> layerFromLoc(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return layerFromName(name.getName());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto layer = layerFromLoc(inner))
        return layer;
  return std::nullopt;
}

/// The layer of an op: its ONNX node name, else the parameters it reads.
static std::optional<int64_t> layerOf(Operation *op) {
  if (auto layer = layerFromLoc(op->getLoc()))
    return layer;
  if (auto get = dyn_cast<GetParamOp>(op))
    return layerFromName(get.getName());
  for (Value operand : op->getOperands())
    if (auto get = operand.getDefiningOp<GetParamOp>())
      if (auto layer = layerFromName(get.getName()))
        return layer;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Blocks by structure
//===----------------------------------------------------------------------===//

/// The values an activation is computed from within its sub-block: the
/// norms, arguments and attention results reached walking back through its
/// operands (parameters and constants aside).
static llvm::SmallPtrSet<Value, 4> streamSources(Value v) {
  llvm::SmallPtrSet<Value, 4> sources;
  SmallVector<Value> work = {v};
  llvm::SmallPtrSet<Value, 32> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def || isa<LayerNormOp, RMSNormOp, AttentionOp>(def)) {
      sources.insert(x);
      continue;
    }
    if (isa<GetParamOp, ConstantOp>(def))
      continue;
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return sources;
}

/// Self-attention (queries and keys from one stream), not cross-attention
/// (keys from another stack, as in an encoder-decoder's decoder).
static bool isSelfAttention(AttentionOp a) {
  llvm::SmallPtrSet<Value, 4> q = streamSources(a.getQuery());
  for (Value k : streamSources(a.getKey()))
    if (q.contains(k))
      return true;
  return false;
}

// Each self-attention starts a block. Its block input is the stream operand
// of the first residual add its result reaches; the block then follows the
// residual stream through further residual adds (the MLP's; a parallel
// residual's second add) and norms (post-LN) until the next self-attention.
SmallVector<std::pair<int64_t, int64_t>>
mp::findTransformerBlocks(Block &body) {
  llvm::DenseMap<Operation *, int64_t> pos;
  SmallVector<AttentionOp> attentions;
  for (auto [i, op] : llvm::enumerate(body.without_terminator())) {
    pos[&op] = static_cast<int64_t>(i);
    if (auto a = dyn_cast<AttentionOp>(&op); a && isSelfAttention(a))
      attentions.push_back(a);
  }
  auto posOf = [&](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    return def && pos.count(def) ? pos.lookup(def) : -1;
  };
  const int64_t endOfBody = static_cast<int64_t>(pos.size());
  SmallVector<std::pair<int64_t, int64_t>> blocks;
  bool postNorm = false;
  for (auto [k, attention] : llvm::enumerate(attentions)) {
    int64_t limit =
        k + 1 < attentions.size() ? pos.lookup(attentions[k + 1]) : endOfBody;
    // What depends on the attention, in program order.
    llvm::DenseSet<Value> after;
    after.insert(attention.getResult());
    AddOp residual;
    for (Operation &op : body.without_terminator()) {
      if (pos.lookup(&op) <= pos.lookup(attention))
        continue;
      bool depends = llvm::any_of(op.getOperands(),
                                  [&](Value v) { return after.contains(v); });
      if (!depends)
        continue;
      auto add = dyn_cast<AddOp>(&op);
      if (add && after.contains(add.getLhs()) != after.contains(add.getRhs())) {
        residual = add;
        break;
      }
      for (Value r : op.getResults())
        after.insert(r);
    }
    if (!residual)
      continue;
    Value input = after.contains(residual.getLhs()) ? residual.getRhs()
                                                    : residual.getLhs();
    // Follow the stream: residual adds whose other operand comes from this
    // block, and, in a post-LN model (the norm is the only use of the first
    // residual add: BERT), the norms after them.
    Value stream = residual.getResult();
    if (k == 0)
      postNorm = stream.hasOneUse() &&
                 isa<LayerNormOp, RMSNormOp>(*stream.getUsers().begin());
    for (bool moved = true; moved;) {
      moved = false;
      if (postNorm && stream.hasOneUse()) {
        Operation *user = *stream.getUsers().begin();
        if (isa<LayerNormOp, RMSNormOp>(user) && pos.lookup(user) < limit &&
            user->getOperand(0) == stream) {
          stream = user->getResult(0);
          moved = true;
          continue;
        }
      }
      for (Operation *user : stream.getUsers()) {
        auto add = dyn_cast<AddOp>(user);
        if (!add || pos.lookup(add) >= limit)
          continue;
        Value other = add.getLhs() == stream ? add.getRhs() : add.getLhs();
        if (posOf(other) > posOf(input) &&
            add.getType() == cast<RankedTensorType>(stream.getType())) {
          stream = add.getResult();
          moved = true;
          break;
        }
      }
    }
    blocks.push_back({posOf(input), posOf(stream)});
  }
  return blocks;
}

void mp::tagLayers(func::FuncOp func) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return;
  Builder b(func.getContext());
  Block &body = func.getBody().front();
  SmallVector<std::pair<int64_t, int64_t>> blocks = findTransformerBlocks(body);
  for (auto [i, op] : llvm::enumerate(body.without_terminator())) {
    if (!isa<MPDialect>(op.getDialect()))
      continue;
    std::optional<int64_t> layer;
    if (blocks.empty()) {
      layer = layerOf(&op);
    } else {
      int64_t at = static_cast<int64_t>(i);
      for (auto [k, range] : llvm::enumerate(blocks))
        if (at > range.first && at <= range.second)
          layer = static_cast<int64_t>(k);
    }
    if (layer)
      op.setAttr(MPDialect::getLayerAttrName(), b.getI64IntegerAttr(*layer));
  }
}

llvm::DenseSet<Operation *> mp::inputDependentOps(func::FuncOp func) {
  llvm::DenseSet<Value> dependent(func.getArguments().begin(),
                                  func.getArguments().end());
  llvm::DenseSet<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return dependent.contains(v); })) {
      ops.insert(&op);
      dependent.insert(op.result_begin(), op.result_end());
    }
  return ops;
}
