//===- KeyValueHeads.cpp - key/value heads fewer than the ranks -----------===//
#include "KeyValueHeads.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mp;
using namespace mp::tensor_parallel;

/// Marks (kReplicateKeyValueAttr) each attention whose key/value heads,
/// more than one (one is read whole by every query head already), are
/// fewer than the ranks and divide them, its query heads dividing them too.
void tensor_parallel::markReplicatedKeyValues(func::FuncOp func, int64_t t) {
  func.walk([&](AttentionOp attention) {
    int64_t q = tensorType(attention.getQuery()).getDimSize(1);
    int64_t kv = tensorType(attention.getKey()).getDimSize(1);
    if (kv > 1 && kv < t && t % kv == 0 && q % t == 0 &&
        tensorType(attention.getValue()).getDimSize(1) == kv)
      attention->setAttr(kReplicateKeyValueAttr,
                         UnitAttr::get(func.getContext()));
  });
}

/// The linears whose splits reach a replicated key or value, or a repeat of
/// key/value heads fewer than the ranks: they stay whole, so that each
/// rank computes every key/value head.
llvm::BitVector
tensor_parallel::fewHeadSplits(func::FuncOp func, int64_t t, const Split &split,
                               llvm::DenseMap<unsigned, Stop> &stops) {
  llvm::BitVector conflict;
  func.walk([&](AttentionOp attention) {
    if (!attention->hasAttr(kReplicateKeyValueAttr))
      return;
    Dims dims = split.operandDims(attention);
    auto query = split.origin.find(attention.getQuery());
    for (Value kv : {attention.getKey(), attention.getValue()}) {
      auto origin = split.origin.find(kv);
      if (!split.dim.count(kv) || origin == split.origin.end())
        continue;
      conflict |= origin->second;
      // A fused linear that is not cut apart (Falcon-40B's QKV grouped per
      // key/value head) takes the query heads whole with it.
      bool withQuery = query != split.origin.end() &&
                       query->second.anyCommon(origin->second);
      for (unsigned i : origin->second.set_bits())
        stops.try_emplace(
            i, Stop{attention, dims,
                    withQuery
                        ? "whose key/value heads, fewer than the ranks, come "
                          "from the same linear as its query heads: the "
                          "attention runs whole"
                        : "whose key/value heads are fewer than the ranks: "
                          "every rank computes them all and takes the one "
                          "its query heads read",
                    1});
    }
  });
  // Decomposed attention's repeat_kv of as few heads: the repeated heads
  // are cut instead (each rank's block of the copies).
  func.walk([&](ReshapeOp repeat) {
    auto it = split.dim.find(repeat.getResult());
    auto origin = split.origin.find(repeat.getResult());
    if (it == split.dim.end() || origin == split.origin.end())
      return;
    int64_t dim = it->second;
    if (headRepeat(repeat.getResult(), dim) != repeat)
      return;
    int64_t heads = tensorType(repeat.getResult()).getDimSize(dim);
    int64_t kv = tensorType(repeat.getInput()).getDimSize(dim);
    if (kv % t == 0 || t % kv || heads % t)
      return;
    conflict |= origin->second;
    Dims dims = {dim};
    for (unsigned i : origin->second.set_bits())
      stops.try_emplace(i, Stop{repeat, dims,
                                "which repeats heads fewer than the ranks "
                                "(repeat_kv): every rank computes them all "
                                "and takes its block of the copies",
                                dim});
  });
  return conflict;
}

/// Whether `cut` takes a head of a replicated key or value, fewer than the
/// ranks.
bool tensor_parallel::repeatsHeads(const Cut &cut) {
  return isa<AttentionOp>(cut.op) && cut.op->hasAttr(kReplicateKeyValueAttr) &&
         (cut.operand == 1 || cut.operand == 2) && cut.dim == 1;
}

/// `heads` [B, H, S, D] with each head repeated `times` times in place:
/// [B, H * times, S, D], head h * times + i being head h.
Value tensor_parallel::repeatHeads(OpBuilder &b, Value heads, int64_t times,
                                   Operation *like) {
  RankedTensorType t = tensorType(heads);
  Location loc = heads.getLoc();
  SmallVector<int64_t> one(t.getShape()), many;
  one.insert(one.begin() + 2, 1);
  many = one;
  many[2] = times;
  SmallVector<int64_t> repeated(t.getShape());
  repeated[1] *= times;
  Operation *ops[3];
  ops[0] = ReshapeOp::create(b, loc, t.clone(one), heads);
  ops[1] = ExpandOp::create(b, loc, t.clone(many), ops[0]->getResult(0));
  ops[2] = ReshapeOp::create(b, loc, t.clone(repeated), ops[1]->getResult(0));
  if (Attribute layer = like->getAttr(MPDialect::getLayerAttrName()))
    for (Operation *op : ops)
      op->setAttr(MPDialect::getLayerAttrName(), layer);
  return ops[2]->getResult(0);
}
