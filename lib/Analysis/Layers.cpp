//===- Layers.cpp - transformer blocks and their layer indices ------------===//
#include "mp/Analysis/Layers.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Regex.h"

#include <functional>

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
static bool isSelfAttention(Value query, Value key) {
  llvm::SmallPtrSet<Value, 4> q = streamSources(query);
  for (Value k : streamSources(key))
    if (q.contains(k))
      return true;
  return false;
}

/// Attention left decomposed (soft-capped scores, a mask computed from
/// parameters): softmax(scores) · v, the scores computed through
/// elementwise ops (scale, mask, cap) from a product of two activations.
/// Returns that product, q · kᵀ.
static MatmulOp decomposedScores(MatmulOp op) {
  Value p = op.getLhs();
  while (auto cast = p.getDefiningOp<CastOp>())
    p = cast.getInput();
  auto softmax = p.getDefiningOp<SoftmaxOp>();
  if (!softmax)
    return {};
  // Back through elementwise ops, along operands of the scores' type (a
  // mask added either side may have it too: each is tried).
  std::function<MatmulOp(Value, int)> find = [&](Value v,
                                                 int depth) -> MatmulOp {
    Operation *def = v.getDefiningOp();
    if (!def || depth > 12)
      return {};
    if (auto scores = dyn_cast<MatmulOp>(def))
      return scores.getLhs().getDefiningOp<GetParamOp>() ? MatmulOp() : scores;
    if (!def->hasTrait<mlir::OpTrait::Elementwise>() &&
        !def->hasTrait<mlir::OpTrait::ResultsBroadcastableShape>())
      return {};
    for (Value operand : def->getOperands())
      if (operand.getType() == def->getResult(0).getType() &&
          !operand.getDefiningOp<ConstantOp>())
        if (MatmulOp scores = find(operand, depth + 1))
          return scores;
    return {};
  };
  return find(softmax.getInput(), 0);
}

/// The ops that start a block: each self-attention, and with `decomposed`
/// each one left decomposed too (its product with v).
static SmallVector<Operation *> blockAnchors(Block &body, bool decomposed) {
  SmallVector<Operation *> anchors;
  for (Operation &op : body.without_terminator()) {
    if (auto a = dyn_cast<AttentionOp>(&op);
        a && isSelfAttention(a.getQuery(), a.getKey()))
      anchors.push_back(a);
    if (auto m = dyn_cast<MatmulOp>(&op); m && decomposed)
      if (MatmulOp scores = decomposedScores(m);
          scores && isSelfAttention(scores.getLhs(), scores.getRhs()))
        anchors.push_back(m);
  }
  return anchors;
}

// Each self-attention starts a block. Its block input is the stream operand
// of the first residual add its result reaches; the block then follows the
// residual stream through further residual adds (the MLP's; a parallel
// residual's second add) and norms (post-LN) until the next self-attention.
SmallVector<std::pair<int64_t, int64_t>>
mp::findTransformerBlocks(Block &body, bool decomposed) {
  llvm::DenseMap<Operation *, int64_t> pos;
  for (auto [i, op] : llvm::enumerate(body.without_terminator()))
    pos[&op] = static_cast<int64_t>(i);
  SmallVector<Operation *> attentions = blockAnchors(body, decomposed);
  auto posOf = [&](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    return def && pos.count(def) ? pos.lookup(def) : -1;
  };
  const int64_t endOfBody = static_cast<int64_t>(pos.size());
  SmallVector<std::pair<int64_t, int64_t>> blocks;
  bool postNorm = false;
  for (auto [k, attention] : llvm::enumerate(attentions)) {
    // Heads written one by one: the block's later heads start no block.
    if (!blocks.empty() && pos.lookup(attention) <= blocks.back().second)
      continue;
    // What depends on the attention, in program order.
    llvm::DenseSet<Value> after;
    after.insert(attention->getResult(0));
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
    // The block ends before the next attention after its residual add.
    int64_t limit = endOfBody;
    for (Operation *next : attentions)
      if (pos.lookup(next) > pos.lookup(residual)) {
        limit = pos.lookup(next);
        break;
      }
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
  // Blocks by structure, from raised attention and the attention left
  // decomposed beside it (a model alternating soft-capped and plain
  // layers); a model whose attention is all decomposed takes the layers its
  // names give, when they give any.
  bool raised = llvm::any_of(body.without_terminator(), [](Operation &op) {
    return isa<AttentionOp>(op);
  });
  bool named = llvm::any_of(body.without_terminator(), [](Operation &op) {
    return isa<MPDialect>(op.getDialect()) && layerOf(&op);
  });
  SmallVector<std::pair<int64_t, int64_t>> blocks;
  if (raised || !named)
    blocks = findTransformerBlocks(body, /*decomposed=*/true);
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
