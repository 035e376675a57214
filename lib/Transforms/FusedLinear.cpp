//===- FusedLinear.cpp - cutting a fused linear into its parts ------------===//
//
// See FusedLinear.h. The parts are found from how the output is read, not
// from names: slices with unit strides (mp-raise makes gathers of
// consecutive constant indices slices) and splits, along the feature axis
// or along the outermost axis of a reshape that views the features as
// [heads, head_dim] (or [parts, heads, head_dim]), that axis possibly moved
// on by transposes and reshapes that keep it a dim of its own (timm's ViT:
// qkv.reshape(B, N, 3, H, D).permute(2, 0, 3, 1, 4), then qkv[0..2];
// Baichuan's W_pack: view(B, S, 3, E).unsqueeze(0).transpose(0, -2)
// .squeeze(-2), then [0..2]), possibly after elementwise ops with scalar
// operands (MPT's and DBRX's clip_qkv), which each part then runs.
//
//===----------------------------------------------------------------------===//
#include "FusedLinear.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

using namespace mlir;
using namespace mp;

std::optional<std::pair<int64_t, int64_t>> mp::blockRead(Operation *op,
                                                         int64_t axis) {
  if (auto slice = dyn_cast<SliceOp>(op)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(slice.getInput().getType()).getShape();
    for (auto [d, dim] : llvm::enumerate(shape)) {
      int64_t start = slice.getStarts()[d], limit = slice.getLimits()[d];
      if (slice.getStrides()[d] != 1 || start < 0 || limit > dim ||
          start >= limit)
        return std::nullopt;
      if (static_cast<int64_t>(d) != axis && (start != 0 || limit != dim))
        return std::nullopt;
    }
    return std::make_pair(slice.getStarts()[axis], slice.getLimits()[axis]);
  }
  return std::nullopt;
}

namespace {

/// One reader of a part: `result` holds features [start, start + size) of
/// the linear's output.
struct PartRead {
  Operation *taker;
  Value result;
  int64_t start, size;
};

/// How a linear's output is read in parts.
struct Parts {
  // Elementwise ops the output goes through before the parts are taken
  // (featureWiseOps), in block order; the last one's result is what the
  // view, or the parts, read.
  SmallVector<Operation *> elementwise;
  // The [..., heads, head_dim] view, then the reshapes and transposes that
  // carry its heads axis on, each with where that axis is in its result;
  // empty when the parts are read from the linear's output.
  SmallVector<std::pair<Operation *, int64_t>> chain;
  int64_t unit = 1; // features per index of the parts axis
  SmallVector<PartRead> reads;
  SmallVector<std::pair<int64_t, int64_t>> ranges; // (start, size): distinct,
                                                   // in order
};

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Where dim `axis` of `op`'s input is in its result, when it stays a dim
/// of its own there (a transpose moves it; a reshape keeps it when the
/// dims before it hold as many elements on both sides); -1 otherwise.
int64_t carriedAxis(Operation *op, int64_t axis) {
  if (auto t = dyn_cast<TransposeOp>(op))
    return llvm::find(t.getPermutation(), axis) - t.getPermutation().begin();
  auto reshape = dyn_cast<ReshapeOp>(op);
  if (!reshape)
    return -1;
  ArrayRef<int64_t> in =
      cast<RankedTensorType>(reshape.getInput().getType()).getShape();
  ArrayRef<int64_t> out = reshape.getType().getShape();
  int64_t before = product(in.take_front(axis));
  for (int64_t j = 0; j < static_cast<int64_t>(out.size()); ++j)
    if (out[j] == in[axis] && product(out.take_front(j)) == before)
      return j;
  return -1;
}

/// Whether `v`, an operand of an elementwise op on a linear's output of
/// type `full`, is the same along the features (a scalar: MPT's clamp
/// bounds), so that the op runs on a part of the features as on the whole.
bool sameAlongFeatures(Value v, RankedTensorType full) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && (t.getRank() == 0 ||
               (t.getRank() <= full.getRank() && t.getShape().back() == 1 &&
                full.getShape().back() != 1));
}

/// The elementwise ops `output` (a linear's) goes through before it is read
/// in parts (MPT's and DBRX's clip_qkv clamp the fused QKV, which mp-raise
/// makes compares and wheres), in block order: each of the output's shape,
/// its other operands the same along the features, and every value of
/// them read only by them but the last one's. Empty when there are none,
/// or they are not such.
SmallVector<Operation *> featureWiseOps(Value output) {
  auto full = cast<RankedTensorType>(output.getType());
  llvm::SetVector<Operation *> ops;
  SmallVector<Value> work{output};
  while (!work.empty()) {
    for (Operation *user : work.pop_back_val().getUsers()) {
      bool elementwise =
          user->hasTrait<mlir::OpTrait::Elementwise>() ||
          user->hasTrait<mlir::OpTrait::ResultsBroadcastableShape>();
      auto type = user->getNumResults() == 1
                      ? dyn_cast<RankedTensorType>(user->getResult(0).getType())
                      : RankedTensorType();
      if (!elementwise || !type || type.getShape() != full.getShape() ||
          ops.contains(user))
        continue;
      ops.insert(user);
      work.push_back(user->getResult(0));
    }
  }
  if (ops.empty())
    return {};
  auto inside = [&](Value v) {
    return v == output || ops.contains(v.getDefiningOp());
  };
  Value exit;
  for (Operation *op : ops) {
    for (Value operand : op->getOperands())
      if (!inside(operand) && !sameAlongFeatures(operand, full))
        return {};
    for (Value result : {op->getResult(0)})
      if (llvm::any_of(result.getUsers(),
                       [&](Operation *u) { return !ops.contains(u); })) {
        if (exit)
          return {};
        exit = result;
      }
  }
  if (!exit || llvm::any_of(output.getUsers(),
                            [&](Operation *u) { return !ops.contains(u); }))
    return {};
  SmallVector<Operation *> ordered(ops.begin(), ops.end());
  llvm::sort(ordered,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  if (ordered.back()->getResult(0) != exit)
    return {};
  return ordered;
}

/// The parts `linear`'s output is read in, when they tile it.
std::optional<Parts> partsOf(LinearOp linear) {
  Parts parts;
  Value base = linear.getResult();
  auto outType = cast<RankedTensorType>(base.getType());
  int64_t axis = outType.getRank() - 1;
  parts.elementwise = featureWiseOps(base);
  if (!parts.elementwise.empty())
    base = parts.elementwise.back()->getResult(0);
  if (base.hasOneUse())
    if (auto view = dyn_cast<ReshapeOp>(*base.getUsers().begin())) {
      // The parts axis: the outermost factor the features are viewed as.
      ArrayRef<int64_t> viewShape = view.getType().getShape();
      int64_t rows = product(outType.getShape().drop_back());
      for (int64_t j = 0; j < static_cast<int64_t>(viewShape.size()); ++j)
        if (viewShape[j] != 1 && product(viewShape.take_front(j)) == rows) {
          if (viewShape.size() > outType.getShape().size()) {
            parts.chain.push_back({view, j});
            base = view.getResult();
            parts.unit = product(viewShape.drop_front(j + 1));
            axis = j;
          }
          break;
        }
    }
  while (!parts.chain.empty() && base.hasOneUse()) {
    Operation *next = *base.getUsers().begin();
    int64_t moved = carriedAxis(next, axis);
    if (moved < 0)
      break;
    parts.chain.push_back({next, moved});
    base = next->getResult(0);
    axis = moved;
  }
  const int64_t unit = parts.unit;
  for (Operation *user : base.getUsers()) {
    if (auto split = dyn_cast<SplitOp>(user)) {
      if (split.getNormalizedAxis() != axis)
        return std::nullopt;
      int64_t start = 0;
      for (Value r : split.getResults()) {
        int64_t size = cast<RankedTensorType>(r.getType()).getDimSize(axis);
        parts.reads.push_back({user, r, start * unit, size * unit});
        start += size;
      }
      continue;
    }
    std::optional<std::pair<int64_t, int64_t>> block = blockRead(user, axis);
    if (!block)
      return std::nullopt;
    parts.reads.push_back({user, user->getResult(0), block->first * unit,
                           (block->second - block->first) * unit});
  }
  for (const PartRead &read : parts.reads)
    parts.ranges.push_back({read.start, read.size});
  llvm::sort(parts.ranges);
  parts.ranges.erase(llvm::unique(parts.ranges), parts.ranges.end());
  int64_t covered = 0;
  for (auto [start, size] : parts.ranges) {
    if (start != covered)
      return std::nullopt; // a gap or an overlap
    covered += size;
  }
  if (covered != outType.getShape().back() || parts.ranges.size() < 2)
    return std::nullopt;
  return parts;
}

/// The user parameter `v` reads (not a part already, nor the source of a
/// transposed copy) when only linears read it, as their weight (`asBias`:
/// bias), listed in `readers`: one linear, or the calls of one module (the
/// copies of its weight were tied at import).
ParamOp cuttableParameter(Value v, bool asBias,
                          SmallVectorImpl<LinearOp> &readers) {
  auto get = v ? v.getDefiningOp<GetParamOp>() : GetParamOp();
  if (!get)
    return ParamOp();
  auto param =
      SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
  auto module = get->getParentOfType<ModuleOp>();
  if (!param || param.getPart() ||
      param->hasAttr(MPDialect::getTiedCopiesAttrName()))
    return ParamOp();
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(param.getSymNameAttr(), module);
  if (!uses)
    return ParamOp();
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto read = dyn_cast<GetParamOp>(use.getUser());
    if (!read)
      return ParamOp();
    for (Operation *user : read->getUsers()) {
      auto linear = dyn_cast<LinearOp>(user);
      if (!linear || (asBias ? linear.getBias() : linear.getWeight()) != read ||
          linear.getInput() == read)
        return ParamOp();
      if (!llvm::is_contained(readers, linear))
        readers.push_back(linear);
    }
  }
  return param;
}

/// A fused linear and the other calls of its module: each takes its output
/// in the same parts, with one weight (and bias) that only they read.
struct FusedCalls {
  ParamOp weight, bias;
  SmallVector<LinearOp> linears;
  SmallVector<Parts> parts; // how each of `linears` is read
};

std::optional<FusedCalls> fusedCalls(LinearOp linear) {
  FusedCalls calls;
  calls.weight = cuttableParameter(linear.getWeight(), false, calls.linears);
  if (!calls.weight)
    return std::nullopt;
  if (linear.getBias()) {
    SmallVector<LinearOp> biasReaders;
    calls.bias = cuttableParameter(linear.getBias(), true, biasReaders);
    if (!calls.bias || biasReaders.size() != calls.linears.size() ||
        !llvm::all_of(biasReaders, [&](LinearOp l) {
          return llvm::is_contained(calls.linears, l);
        }))
      return std::nullopt;
  }
  for (LinearOp call : calls.linears) {
    std::optional<Parts> parts = partsOf(call);
    if (!parts || call.getTransposeWeight() != linear.getTransposeWeight() ||
        static_cast<bool>(call.getBias()) !=
            static_cast<bool>(linear.getBias()) ||
        (!calls.parts.empty() && parts->ranges != calls.parts[0].ranges))
      return std::nullopt;
    calls.parts.push_back(std::move(*parts));
  }
  return calls;
}

/// A read of `part` where `get` read the whole.
Value readPart(ParamOp part, GetParamOp get) {
  OpBuilder b(get);
  auto read = GetParamOp::create(b, get.getLoc(), part.getTensorType(),
                                 part.getSymName());
  read->setDiscardableAttrs(get->getDiscardableAttrDictionary());
  return read;
}

/// A part's output (features `size` wide) taken through the same
/// elementwise ops as the whole (cloned at `b`'s point).
Value applyElementwise(OpBuilder &b, Value value, Value whole,
                       ArrayRef<Operation *> elementwise, int64_t size) {
  if (elementwise.empty())
    return value;
  IRMapping mapping;
  mapping.map(whole, value);
  for (Operation *op : elementwise) {
    Operation *copy = b.clone(*op, mapping);
    auto type = cast<RankedTensorType>(copy->getResult(0).getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() = size;
    copy->getResult(0).setType(type.clone(shape));
  }
  return mapping.lookup(elementwise.back()->getResult(0));
}

/// A part's output (`count` indices of the parts axis) taken through the
/// same view, transposes and reshapes as the whole, that axis `count` long.
Value carryPart(OpBuilder &b, Value value,
                ArrayRef<std::pair<Operation *, int64_t>> chain,
                int64_t count) {
  for (auto [op, axis] : chain) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = count;
    Operation *copy =
        isa<TransposeOp>(op)
            ? TransposeOp::create(b, op->getLoc(), value,
                                  cast<TransposeOp>(op).getPermutationAttr())
            : ReshapeOp::create(b, op->getLoc(), type.clone(shape), value);
    copy->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    value = copy->getResult(0);
  }
  return value;
}

/// Replaces `linear`, read in `parts`, by a linear per part reading
/// `weightParts` (and `biasParts`, one per range of `parts`).
void cutCall(LinearOp linear, const Parts &parts, ArrayRef<ParamOp> weightParts,
             ArrayRef<ParamOp> biasParts) {
  auto weightRead = linear.getWeight().getDefiningOp<GetParamOp>();
  auto biasRead = linear.getBias()
                      ? linear.getBias().getDefiningOp<GetParamOp>()
                      : GetParamOp();
  auto outType = linear.getType();
  OpBuilder b(linear);
  for (auto [i, range] : llvm::enumerate(parts.ranges)) {
    auto [start, size] = range;
    Value w = readPart(weightParts[i], weightRead);
    Value bv = biasRead ? readPart(biasParts[i], biasRead) : Value();
    SmallVector<int64_t> shape(outType.getShape());
    shape.back() = size;
    b.setInsertionPoint(linear);
    auto part =
        LinearOp::create(b, linear.getLoc(), outType.clone(shape),
                         linear.getInput(), w, bv, linear.getTransposeWeight());
    part->setDiscardableAttrs(linear->getDiscardableAttrDictionary());
    // (The elementwise ops' other operands may be defined after the linear,
    // never after the last of them.)
    if (!parts.elementwise.empty())
      b.setInsertionPoint(parts.elementwise.back());
    Value taken = applyElementwise(b, part.getResult(), linear.getResult(),
                                   parts.elementwise, size);
    for (PartRead read : parts.reads) { // (a copy: Value's uses change)
      if (read.start != start || read.size != size)
        continue;
      Value value = taken;
      if (parts.chain.size() > 1)
        value = carryPart(b, value, parts.chain, size / parts.unit);
      if (value.getType() != read.result.getType()) {
        auto reshape = ReshapeOp::create(b, read.taker->getLoc(),
                                         read.result.getType(), value);
        reshape->setDiscardableAttrs(
            read.taker->getDiscardableAttrDictionary());
        value = reshape;
      }
      read.result.replaceAllUsesWith(value);
    }
  }
  llvm::SmallPtrSet<Operation *, 4> takers;
  for (const PartRead &read : parts.reads)
    takers.insert(read.taker);
  for (Operation *taker : takers)
    taker->erase();
  for (auto &link : llvm::reverse(parts.chain))
    link.first->erase();
  for (Operation *op : llvm::reverse(parts.elementwise))
    op->erase();
  linear.erase();
  for (GetParamOp read : {weightRead, biasRead})
    if (read && read->use_empty())
      read.erase();
}

} // namespace

bool mp::takesPartOfFusedLinear(LinearOp linear, Operation *op) {
  std::optional<FusedCalls> calls = fusedCalls(linear);
  if (!calls)
    return false;
  const Parts &parts =
      calls->parts[llvm::find(calls->linears, linear) - calls->linears.begin()];
  return llvm::any_of(parts.reads,
                      [&](const PartRead &r) { return r.taker == op; });
}

bool mp::isCuttableFusedLinear(LinearOp linear) {
  return fusedCalls(linear).has_value();
}

LogicalResult mp::cutFusedLinear(LinearOp linear,
                                 SmallVectorImpl<Operation *> &cut) {
  std::optional<FusedCalls> calls = fusedCalls(linear);
  if (!calls)
    return failure();
  ParamOp weight = calls->weight, bias = calls->bias;
  const int64_t featureAxis = linear.getTransposeWeight() ? 0 : 1;
  const auto &ranges = calls->parts[0].ranges;
  // The parts' names must be free (a model could hold one already).
  auto module = linear->getParentOfType<ModuleOp>();
  for (auto [start, size] : ranges)
    if (module.lookupSymbol(weight.getPartName(featureAxis, start, size)) ||
        (bias && module.lookupSymbol(bias.getPartName(0, start, size))))
      return failure();
  SmallVector<ParamOp> weightParts, biasParts;
  for (auto [start, size] : ranges) {
    weightParts.push_back(weight.clonePart(featureAxis, start, size));
    if (bias)
      biasParts.push_back(bias.clonePart(0, start, size));
  }
  for (auto [call, parts] : llvm::zip(calls->linears, calls->parts)) {
    cut.push_back(call);
    cutCall(call, parts, weightParts, biasParts);
  }
  weight.erase();
  if (bias)
    bias.erase();
  return success();
}
