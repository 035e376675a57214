//===- MemoryPlan.cpp - the static arena plan of a program ----------------===//
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mp;

static constexpr llvm::StringLiteral kArenaBytes = "mp.arena_bytes";
static constexpr llvm::StringLiteral kArgOffset = "mp.arena_offset";
static constexpr llvm::StringLiteral kResultOffsets = "mp.arena_offsets";

int64_t mp::storageBytes(Type type) {
  auto t = cast<RankedTensorType>(type);
  int64_t bits = t.getElementTypeBitWidth();
  return t.getNumElements() * (bits == 1 ? 1 : bits / 8);
}

static int64_t aligned(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

ArenaPlacement mp::placeFirstFit(const std::vector<LiveRange> &ranges,
                                 int64_t alignment) {
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].start < ranges[b].start;
  });
  struct Live {
    int64_t offset, end, lastUse;
  };
  std::vector<Live> live;
  ArenaPlacement placement;
  placement.offsets.assign(ranges.size(), 0);
  for (size_t i : order) {
    const LiveRange &r = ranges[i];
    live.erase(
        std::remove_if(live.begin(), live.end(),
                       [&](const Live &l) { return l.lastUse < r.start; }),
        live.end());
    std::sort(live.begin(), live.end(),
              [](const Live &a, const Live &b) { return a.offset < b.offset; });
    int64_t size = aligned(r.size, alignment);
    int64_t offset = 0;
    for (const Live &l : live) {
      if (l.offset - offset >= size)
        break;
      offset = std::max(offset, l.end);
    }
    live.push_back({offset, offset + size, r.end});
    placement.offsets[i] = offset;
    placement.peak = std::max(placement.peak, offset + size);
    placement.unplanned += r.size;
  }
  return placement;
}

Value MemoryPlan::viewSource(Operation *op) {
  if (auto view = dyn_cast<ViewLikeOpInterface>(op))
    return view.getViewSource();
  if (auto dropout = dyn_cast<DropoutOp>(op))
    return dropout.getSeedId() ? Value() : dropout.getInput();
  return nullptr;
}

GetParamOp MemoryPlan::viewedParameter(Value v) {
  while (auto view = v.getDefiningOp<ReshapeOp>())
    v = view.getInput();
  return v.getDefiningOp<GetParamOp>();
}

bool MemoryPlan::viewsParameter(Operation *op) {
  return isa_and_nonnull<ReshapeOp>(op) && viewedParameter(op->getResult(0));
}

/// Ops whose results have storage of their own, outside the arena.
static bool ownsStorage(Operation *op) {
  return isa<GetParamOp, ConstantOp>(op);
}

LogicalResult MemoryPlan::collect(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "'" << func.getSymName()
                            << "' must have a single block to plan its memory";
  Block &body = func.getBody().front();
  auto addBuffer = [&](Value v, int64_t position) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape())
      return emitError(v.getLoc())
             << "a value of type " << v.getType()
             << " has no static size: the memory plan needs tensors of "
                "static shape";
    bufferOf[v] = buffers.size();
    buffers.push_back({v, {storageBytes(type), position, position}, 0});
    return success();
  };
  auto use = [&](Value v, int64_t position) {
    auto it = bufferOf.find(v);
    if (it != bufferOf.end())
      buffers[it->second].range.end =
          std::max(buffers[it->second].range.end, position);
  };
  for (BlockArgument arg : body.getArguments())
    if (failed(addBuffer(arg, -1)))
      return failure();
  int64_t position = 0;
  SmallVector<InPlaceCandidate> candidates;
  for (Operation &op : body.without_terminator()) {
    int64_t here = position++;
    if (ownsStorage(&op))
      continue;
    Value source = viewSource(&op);
    if (source && inArena(source) && op.getNumResults() == 1) {
      bufferOf[op.getResult(0)] = bufferOf.lookup(source);
      continue;
    }
    // A view of a parameter is the parameter's bytes: no arena storage (a
    // linear's weight viewed 2-D would otherwise hold a copy of it, live
    // until the backward reads it).
    if (viewsParameter(&op)) {
      parameterViews.insert(op.getResult(0));
      continue;
    }
    for (Value operand : op.getOperands())
      use(operand, here);
    for (Value result : op.getResults())
      if (failed(addBuffer(result, here)))
        return failure();
    if (auto inPlace = dyn_cast<InPlaceOpInterface>(&op))
      for (OpResult result : op.getResults())
        if (std::optional<unsigned> operand =
                inPlace.getInPlaceOperand(result.getResultNumber()))
          candidates.push_back({here, result, op.getOperand(*operand), &op});
  }
  for (Value returned : body.getTerminator()->getOperands())
    use(returned, std::numeric_limits<int64_t>::max());
  placeInPlace(candidates);
  return success();
}

void MemoryPlan::placeInPlace(ArrayRef<InPlaceCandidate> candidates) {
  std::vector<bool> merged(buffers.size(), false);
  llvm::DenseMap<size_t, int64_t> takenAt; // owner -> position it was taken
  for (const InPlaceCandidate &c : candidates) {
    auto found = bufferOf.find(c.operand);
    if (found == bufferOf.end())
      continue; // (a parameter or a constant)
    const size_t owner = found->second, own = bufferOf.lookup(c.result);
    Buffer &bytes = buffers[owner];
    // Not an argument (the caller's input), read by nothing after the op,
    // nor by the op through another operand (a scale that is the left
    // operand, a right operand that is a view of it), the same size, and
    // not taken by another result of the same op.
    auto readElsewhere = [&](OpOperand &other) {
      auto it = bufferOf.find(other.get());
      return other.get() != c.operand && it != bufferOf.end() &&
             it->second == owner;
    };
    if (isa<BlockArgument>(bytes.value) || bytes.range.end != c.position ||
        bytes.range.size != buffers[own].range.size ||
        takenAt.lookup_or(owner, -1) == c.position ||
        llvm::any_of(c.op->getOpOperands(), readElsewhere) ||
        llvm::count(c.op->getOperands(), c.operand) > 1)
      continue;
    takenAt[owner] = c.position;
    bytes.range.end = std::max(bytes.range.end, buffers[own].range.end);
    for (auto &entry : bufferOf)
      if (entry.second == own)
        entry.second = owner; // (the result, and views of it)
    merged[own] = true;
    inPlaceOf[c.result] = c.operand;
  }
  if (inPlaceOf.empty())
    return;
  std::vector<size_t> renumbered(buffers.size());
  std::vector<Buffer> kept;
  for (size_t i = 0; i < buffers.size(); ++i) {
    renumbered[i] = kept.size();
    if (!merged[i])
      kept.push_back(buffers[i]);
  }
  for (auto &entry : bufferOf)
    entry.second = renumbered[entry.second];
  buffers = std::move(kept);
}

FailureOr<MemoryPlan> MemoryPlan::compute(func::FuncOp func) {
  MemoryPlan plan;
  if (failed(plan.collect(func)))
    return failure();
  std::vector<LiveRange> ranges;
  for (const Buffer &b : plan.buffers)
    ranges.push_back(b.range);
  ArenaPlacement placement = placeFirstFit(ranges, kAlignment);
  for (auto [buffer, offset] : llvm::zip(plan.buffers, placement.offsets))
    buffer.offset = offset;
  plan.peak = placement.peak;
  plan.unplanned = placement.unplanned;
  return plan;
}

void MemoryPlan::attach(func::FuncOp func) const {
  Builder b(func.getContext());
  func->setAttr(kArenaBytes, b.getI64IntegerAttr(peak));
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    func.setArgAttr(arg.getArgNumber(), kArgOffset,
                    b.getI64IntegerAttr(offset(arg)));
  for (Operation &op : body.without_terminator()) {
    if (op.getNumResults() == 0 || !inArena(op.getResult(0)))
      continue;
    SmallVector<int64_t> offsets;
    for (Value result : op.getResults())
      offsets.push_back(offset(result));
    op.setAttr(kResultOffsets, b.getDenseI64ArrayAttr(offsets));
  }
}

bool MemoryPlan::isAttached(func::FuncOp func) {
  return func->hasAttr(kArenaBytes);
}

LogicalResult MemoryPlan::refuseIfPlanned(ModuleOp module, StringRef pass) {
  for (auto func : module.getOps<func::FuncOp>())
    if (isAttached(func))
      return func.emitError() << "carries a memory plan: " << pass
                              << " runs before mp-plan-memory, not after";
  return success();
}

LogicalResult MemoryPlan::checkSharedOffsets(func::FuncOp func) const {
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto recorded = op.getAttrOfType<DenseI64ArrayAttr>(kResultOffsets);
    if (!recorded)
      continue;
    if (recorded.size() != static_cast<int64_t>(op.getNumResults()))
      return op.emitError()
             << "has " << recorded.size() << " arena offsets for "
             << op.getNumResults() << " results (run mp-plan-memory again)";
    for (OpResult result : op.getResults()) {
      if (!inArena(result))
        continue;
      int64_t expected = offset(result);
      if (recorded[result.getResultNumber()] == expected)
        continue;
      // (An owner's offset is the one read; a view or an in-place result
      // has its owner's.)
      const char *what = inPlaceOf.count(result)
                             ? "written in place of its operand"
                             : "a view";
      return op.emitError()
             << "result #" << result.getResultNumber() << " has arena offset "
             << recorded[result.getResultNumber()] << ", but it is " << what
             << ", at offset " << expected
             << " in the memory plan (run mp-plan-memory again)";
    }
  }
  return success();
}

FailureOr<MemoryPlan> MemoryPlan::read(func::FuncOp func) {
  MemoryPlan plan;
  if (failed(plan.collect(func)))
    return failure();
  auto bytes = func->getAttrOfType<IntegerAttr>(kArenaBytes);
  if (!bytes || bytes.getInt() < 0)
    return func.emitError()
           << "'" << kArenaBytes << "' must be a non-negative integer";
  plan.peak = bytes.getInt();
  // Every owner's offset from the IR, in bounds.
  for (Buffer &b : plan.buffers) {
    std::optional<int64_t> offset;
    Operation *where = func;
    if (auto arg = dyn_cast<BlockArgument>(b.value)) {
      if (auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                         kArgOffset))
        offset = attr.getInt();
    } else {
      where = b.value.getDefiningOp();
      auto attr = where->getAttrOfType<DenseI64ArrayAttr>(kResultOffsets);
      unsigned n = cast<OpResult>(b.value).getResultNumber();
      if (attr && attr.size() == static_cast<int64_t>(where->getNumResults()))
        offset = attr[n];
    }
    if (!offset)
      return where->emitError() << "has no arena offset in the memory plan "
                                   "(run mp-plan-memory again)";
    if (*offset < 0 || *offset % kAlignment ||
        *offset + aligned(b.range.size, kAlignment) > plan.peak)
      return where->emitError()
             << "arena offset " << *offset << " of a " << b.range.size
             << "-byte value does not fit the " << plan.peak << "-byte arena";
    b.offset = *offset;
    plan.unplanned += b.range.size;
  }
  if (failed(plan.checkSharedOffsets(func)))
    return failure();
  // No two values live at once may share bytes: sweep the ranges in order
  // of start, checking each against those still live.
  std::vector<size_t> order(plan.buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.buffers[a].range.start < plan.buffers[b].range.start;
  });
  std::vector<const Buffer *> live;
  for (size_t i : order) {
    const Buffer &b = plan.buffers[i];
    llvm::erase_if(
        live, [&](const Buffer *l) { return l->range.end < b.range.start; });
    for (const Buffer *l : live) {
      bool overlap =
          b.offset < l->offset + aligned(l->range.size, kAlignment) &&
          l->offset < b.offset + aligned(b.range.size, kAlignment);
      if (overlap && b.range.size && l->range.size)
        return func.emitError()
               << "the memory plan places two values live at the same time "
                  "in the same bytes (offsets "
               << l->offset << " and " << b.offset << ")";
    }
    live.push_back(&b);
  }
  return plan;
}
