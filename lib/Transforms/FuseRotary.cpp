//===- FuseRotary.cpp - rotary position embedding as one op ---------------===//
//
// mp-fuse-rotary: exporters write rotary position embedding as
// `x * cos + rotate(x) * sin` in elementwise and shape ops: two slices of
// x, a neg and a concat for `rotate_half` (Llama, GPT-NeoX, Phi, Qwen),
// strided slices, reshapes and a concat for GPT-J's interleaved pairs, the
// two products and their sum; a partial rotary (GPT-NeoX's quarter of each
// head, Phi's, GPT-J's half) slices x first and concatenates the channels
// it leaves. Each is a pass over the heads' memory; one mp.rotary reads
// each element once and gives the same bits. Like mp-fuse-epilogues it
// runs last, on inference programs (a train step is left as it is).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Shape.h"
#include "mp/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mp {
#define GEN_PASS_DEF_MPFUSEROTARY
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// A match: the op whose result becomes `mp.rotary(input, cos, sin)`, and
/// the ops it replaces.
struct Rotary {
  Operation *root;
  AddOp add; // the sum of the products, whose attributes the op takes
  Value input, cos, sin;
  int64_t rotaryDim;
  bool interleaved;
  SmallVector<Operation *> replaced;
};

/// `value`'s source when it is a slice of the last dim of it, `size`
/// channels from `start` by `stride`, the other dims whole.
Value lastDimSlice(Value value, int64_t start, int64_t stride, int64_t size,
                   SmallVectorImpl<Operation *> &ops) {
  auto slice = value.getDefiningOp<SliceOp>();
  if (!slice)
    return {};
  ArrayRef<int64_t> in = shapeOf(slice.getInput()), out = shapeOf(value);
  if (in.empty() || out.size() != in.size())
    return {};
  const size_t last = in.size() - 1;
  if (out[last] != size || slice.getStarts()[last] != start ||
      slice.getStrides()[last] != stride)
    return {};
  for (size_t i = 0; i < last; ++i)
    if (slice.getStarts()[i] != 0 || slice.getStrides()[i] != 1 ||
        out[i] != in[i])
      return {};
  ops.push_back(slice);
  return slice.getInput();
}

/// `value` without the reshapes (adding or dropping trailing unit dims) and
/// the one neg around it; `negated` says whether there was a neg.
Value peel(Value value, bool &negated, SmallVectorImpl<Operation *> &ops) {
  negated = false;
  while (Operation *def = value.getDefiningOp()) {
    if (auto neg = dyn_cast<NegOp>(def); neg && !negated) {
      negated = true;
    } else if (!isa<ReshapeOp>(def)) {
      break;
    }
    ops.push_back(def);
    value = def->getOperand(0);
  }
  return value;
}

/// `x` when `value` is `rotate_half(x)`: concat(-x[h:], x[:h]) along the
/// last dim, h half of x's last dim.
Value rotateHalfOf(Value value, SmallVectorImpl<Operation *> &ops) {
  auto concat = value.getDefiningOp<ConcatOp>();
  ArrayRef<int64_t> shape = shapeOf(value);
  if (!concat || concat.getInputs().size() != 2 || shape.empty() ||
      concat.getAxis() != static_cast<int64_t>(shape.size()) - 1 ||
      shape.back() % 2 != 0)
    return {};
  const int64_t half = shape.back() / 2;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  if (!neg)
    return {};
  SmallVector<Operation *> found{concat, neg};
  Value upper = lastDimSlice(neg.getInput(), half, 1, half, found);
  Value lower = lastDimSlice(concat.getInputs()[1], 0, 1, half, found);
  if (!upper || upper != lower || upper.getType() != value.getType())
    return {};
  ops.append(found);
  return upper;
}

/// `x` when `value` is GPT-J's `rotate_every_two(x)`: pairs (a, b) become
/// (-b, a): stack(-x[1::2], x[0::2]) along a new last dim, reshaped back.
Value rotateEveryTwoOf(Value value, SmallVectorImpl<Operation *> &ops) {
  auto back = value.getDefiningOp<ReshapeOp>();
  if (!back)
    return {};
  auto concat = back.getInput().getDefiningOp<ConcatOp>();
  ArrayRef<int64_t> shape = shapeOf(value);
  if (!concat || concat.getInputs().size() != 2 || shape.empty() ||
      shape.back() % 2 != 0)
    return {};
  ArrayRef<int64_t> stacked = shapeOf(concat.getResult());
  const int64_t half = shape.back() / 2;
  SmallVector<int64_t> expected(shape.drop_back());
  expected.append({half, 2});
  if (stacked != ArrayRef<int64_t>(expected) ||
      concat.getAxis() != static_cast<int64_t>(stacked.size()) - 1)
    return {};
  SmallVector<Operation *> found{back, concat};
  bool oddNegated, evenNegated;
  Value odd = peel(concat.getInputs()[0], oddNegated, found);
  Value even = peel(concat.getInputs()[1], evenNegated, found);
  if (!oddNegated || evenNegated)
    return {};
  Value fromOdd = lastDimSlice(odd, 1, 2, half, found);
  Value fromEven = lastDimSlice(even, 0, 2, half, found);
  if (!fromOdd || fromOdd != fromEven || fromOdd.getType() != value.getType())
    return {};
  ops.append(found);
  return fromOdd;
}

/// `add` as `x * cos + rotate(x) * sin`, the products in either order.
std::optional<Rotary> matchFull(AddOp add) {
  Type type = add.getType();
  if (!getElementTypeOrSelf(type).isF32())
    return std::nullopt;
  for (unsigned rotatedSide : {0u, 1u}) {
    auto rotatedMul = add->getOperand(rotatedSide).getDefiningOp<MulOp>();
    auto plainMul = add->getOperand(1 - rotatedSide).getDefiningOp<MulOp>();
    if (!rotatedMul || !plainMul || rotatedMul.getType() != type ||
        plainMul.getType() != type)
      continue;
    for (unsigned side : {0u, 1u}) {
      Value rotated = rotatedMul->getOperand(side);
      Value sin = rotatedMul->getOperand(1 - side);
      Rotary match{add,   add,
                   {},    {},
                   sin,   shapeOf(add).back(),
                   false, {add, rotatedMul, plainMul}};
      Value x = rotateHalfOf(rotated, match.replaced);
      if (!x) {
        x = rotateEveryTwoOf(rotated, match.replaced);
        match.interleaved = true;
      }
      if (!x || x.getType() != type)
        continue;
      Value cos = otherOperand(plainMul, x);
      if (!cos || cos.getType() != sin.getType())
        continue;
      Shape result;
      std::string error;
      if (!shape::rotary(shapeOf(x), shapeOf(cos), match.rotaryDim, result,
                         error))
        continue;
      match.input = x;
      match.cos = cos;
      return match;
    }
  }
  return std::nullopt;
}

/// `match` widened to a partial rotary when its result is concatenated,
/// along the last dim, with the rest of the channels of the tensor its
/// input is the first channels of.
void widenToPartial(Rotary &match) {
  Value result = match.root->getResult(0);
  if (!result.hasOneUse())
    return;
  auto concat = dyn_cast<ConcatOp>(*result.getUsers().begin());
  if (!concat || concat.getInputs().size() != 2 ||
      concat.getInputs()[0] != result ||
      concat.getAxis() != static_cast<int64_t>(shapeOf(result).size()) - 1)
    return;
  const int64_t rotated = match.rotaryDim;
  const int64_t whole = shapeOf(concat.getResult()).back();
  SmallVector<Operation *> found{concat};
  Value source = lastDimSlice(match.input, 0, 1, rotated, found);
  Value rest =
      lastDimSlice(concat.getInputs()[1], rotated, 1, whole - rotated, found);
  if (!source || source != rest || source.getType() != concat.getType())
    return;
  match.root = concat;
  match.input = source;
  match.replaced.append(found);
}

/// Replaces `match.root` with one mp.rotary and erases the ops it made dead.
/// `fused` maps the results of the roots fused before to their rotaries (a
/// rotation of a rotation reads the first one's).
void fuse(Rotary &match, IRMapping &fused) {
  OpBuilder b(match.root);
  Value input = fused.lookupOrDefault(match.input);
  auto rotary = RotaryOp::create(
      b, match.root->getLoc(), input.getType(), input,
      fused.lookupOrDefault(match.cos), fused.lookupOrDefault(match.sin),
      b.getI64IntegerAttr(match.rotaryDim),
      match.interleaved ? b.getUnitAttr() : UnitAttr());
  rotary->setDiscardableAttrs(match.add->getDiscardableAttrDictionary());
  fused.map(match.root->getResult(0), rotary.getResult());
  match.root->getResult(0).replaceAllUsesWith(rotary.getResult());
  // The ops replaced may share operands (x's slices), or have readers
  // outside the match: erase each once nothing reads it.
  llvm::SmallPtrSet<Operation *, 16> live(match.replaced.begin(),
                                          match.replaced.end());
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *op : match.replaced)
      if (live.contains(op) && op->use_empty()) {
        live.erase(op);
        op->erase();
        erased = true;
      }
  }
}

struct FuseRotaryPass : public mp::impl::MPFuseRotaryBase<FuseRotaryPass> {
  using MPFuseRotaryBase::MPFuseRotaryBase;

  void runOnOperation() override {
    if (isTrainStep(getOperation()))
      return;
    SmallVector<Rotary> matches;
    getOperation().walk([&](AddOp add) {
      if (std::optional<Rotary> match = matchFull(add)) {
        widenToPartial(*match);
        matches.push_back(std::move(*match));
      }
    });
    IRMapping fused;
    for (Rotary &match : matches)
      fuse(match, fused);
  }
};

} // namespace
