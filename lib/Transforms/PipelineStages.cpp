//===- PipelineStages.cpp - cutting the layers into pipeline stages -------===//
//
// The layer sequence E t0 t1 ... L (embedding, transformer layers, head and
// loss) is cut into pp·vp contiguous chunks, by hand (`layout`) or by a
// balanced cut of the cost model; ops get `mp.stage`, the module the plan,
// and the schedule is generated and proved deadlock-free (PipelineSchedule).
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/Layers.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/AtomicFile.h"
#include "mp/Support/PipelineSchedule.h"
#include "mp/Support/TimelineSvg.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <set>

namespace mp {
#define GEN_PASS_DEF_MPPIPELINE
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// More layers than any model has: a bound on what mp.layer may say.
constexpr int64_t kMaxLayers = 1 << 20;

/// The units of the layer sequence, each a letter of a layout string:
/// E (index 0), layer i (index i + 1), L (index layers + 1).
struct Units {
  int64_t layers = 0;
  llvm::DenseMap<Operation *, int64_t> unitOf; // staged ops
  std::vector<double> seconds;                 // per unit
  int64_t count() const { return layers + 2; }
  char letter(int64_t unit) const {
    return unit == 0 ? 'E' : unit == layers + 1 ? 'L' : 't';
  }
};

/// Each staged op's unit: its layer's; before the first layer E, after the
/// last L, and between layers the preceding layer's.
FailureOr<Units> findUnits(func::FuncOp func) {
  Units units;
  // Ops on parameters and constants alone get no stage: each stage that
  // reads them computes them itself.
  llvm::DenseSet<Operation *> staged = inputDependentOps(func);
  Operation *lastLayered = nullptr;
  std::set<int64_t> seen;
  for (Operation &op : func.getBody().front().without_terminator())
    if (auto layer =
            op.getAttrOfType<IntegerAttr>(MPDialect::getLayerAttrName())) {
      if (layer.getInt() < 0 || layer.getInt() >= kMaxLayers)
        return op.emitError() << "mp.layer " << layer.getInt()
                              << " is out of range [0, " << kMaxLayers << ")";
      seen.insert(layer.getInt());
      units.layers = std::max(units.layers, layer.getInt() + 1);
      lastLayered = &op;
    }
  if (static_cast<int64_t>(seen.size()) != units.layers)
    return func.emitError()
           << "the layers are numbered 0 to " << units.layers - 1 << " with "
           << units.layers - static_cast<int64_t>(seen.size())
           << " missing (mp.layer)";
  if (!lastLayered)
    return func.emitError()
           << "pipeline parallelism cuts the transformer layers, and this "
              "program has none (no op carries mp.layer; run mp-raise)";
  units.seconds.assign(units.count(), 0.0);
  int64_t current = 0;
  bool afterLast = false;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto layer =
            op.getAttrOfType<IntegerAttr>(MPDialect::getLayerAttrName()))
      current = layer.getInt() + 1;
    else if (afterLast)
      current = units.layers + 1;
    afterLast |= &op == lastLayered;
    if (!staged.contains(&op))
      continue;
    units.unitOf[&op] = current;
    units.seconds[current] += costOf(&op).seconds(Machine::h100());
  }
  return units;
}

/// Where each chunk ends: end[k] is one past its last unit.
using Cut = SmallVector<int64_t>;

/// The cut of `n` units of cost `seconds` into `chunks` non-empty runs whose
/// costliest run is cheapest (dynamic programming over prefix sums).
Cut balancedCut(ArrayRef<double> seconds, int64_t chunks) {
  const int64_t n = seconds.size();
  SmallVector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + seconds[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the first i units in k chunks; from[k][i]: where chunk k-1
  // starts.
  std::vector<std::vector<double>> best(chunks + 1,
                                        std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> from(chunks + 1,
                                         std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t k = 1; k <= chunks; ++k)
    for (int64_t i = k; i <= n; ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        // Ties go to the later start: earlier chunks take more.
        if (worst <= best[k][i]) {
          best[k][i] = worst;
          from[k][i] = j;
        }
      }
  Cut end(chunks);
  for (int64_t k = chunks, i = n; k > 0; i = from[k][i], --k)
    end[k - 1] = i;
  return end;
}

/// The cut a layout string gives, or an error naming what is wrong.
FailureOr<Cut> parseLayout(StringRef layout, const Units &units, int64_t chunks,
                           Location loc) {
  auto fail = [&](const Twine &why) {
    return emitError(loc) << "pipeline layout '" << layout << "': " << why;
  };
  SmallVector<StringRef> parts;
  layout.split(parts, '|');
  if (static_cast<int64_t>(parts.size()) != chunks)
    return fail(Twine(parts.size()) + " chunks, and pp x vp is " +
                Twine(chunks));
  std::string letters;
  Cut end;
  for (StringRef part : parts) {
    size_t before = letters.size();
    for (size_t i = 0; i < part.size(); ++i) {
      char c = part[i];
      if (c != 'E' && c != 't' && c != 'L')
        return fail(Twine("unknown letter '") + Twine(c) +
                    "' (E: embedding, t: a layer, L: head and loss)");
      int64_t repeat = 1;
      if (i + 1 < part.size() && part[i + 1] == '*') {
        size_t j = i + 2;
        while (j < part.size() && llvm::isDigit(part[j]))
          ++j;
        if (j == i + 2 ||
            part.substr(i + 2, j - i - 2).getAsInteger(10, repeat) ||
            repeat < 1 || repeat > kMaxLayers)
          return fail("'*' needs a count from 1 to " + Twine(kMaxLayers));
        i = j - 1;
      }
      letters.append(repeat, c);
    }
    if (letters.size() == before)
      return fail("a chunk is empty");
    end.push_back(letters.size());
  }
  std::string expected =
      "E" + std::string(static_cast<size_t>(units.layers), 't') + "L";
  if (letters.find('E') != 0 || letters.rfind('E') != 0)
    return fail("'E' must open the first chunk, once");
  if (letters.find('L') != letters.size() - 1)
    return fail("'L' must close the last chunk, once");
  if (letters != expected)
    return fail(Twine(letters.size() - 2) + " layers, and the model has " +
                Twine(units.layers));
  return end;
}

/// "Et|tt|tL" for a cut.
std::string layoutOf(const Units &units, ArrayRef<int64_t> end) {
  std::string out;
  int64_t begin = 0;
  for (int64_t e : end) {
    if (!out.empty())
      out += "|";
    for (int64_t u = begin; u < e; ++u)
      out += units.letter(u);
    begin = e;
  }
  return out;
}

struct PipelinePass : public mp::impl::MPPipelineBase<PipelinePass> {
  using MPPipelineBase::MPPipelineBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<pipeline::ScheduleKind> kind =
        pipeline::parseSchedule(schedule);
    if (!kind) {
      emitError(module.getLoc()) << "unknown pipeline schedule '" << schedule
                                 << "' (gpipe, 1f1b or interleaved)";
      return signalPassFailure();
    }
    pipeline::Dims dims{pp, vp, microbatches};
    if (std::string why = pipeline::checkDims(*kind, dims); !why.empty()) {
      emitError(module.getLoc()) << why;
      return signalPassFailure();
    }
    // (One stage and several micro-batches: gradient accumulation.)
    if (pp == 1 && vp == 1 && microbatches == 1)
      return;
    FailureOr<func::FuncOp> func = getEntryFunction(module);
    if (failed(func))
      return signalPassFailure();
    // One stage: every op that depends on the inputs runs per micro-batch,
    // whatever the model's layers (gradient accumulation needs no cut).
    if (pp == 1 && vp == 1) {
      Builder b(module.getContext());
      for (Operation *op : inputDependentOps(*func))
        op->setAttr(MPDialect::getStageAttrName(), b.getI64IntegerAttr(0));
      recordPlan(module, dims, *kind, "all");
      return;
    }
    if (failed(cut(module, *func, *kind, dims)))
      signalPassFailure();
  }

  /// The plan on the module (mp.pipeline), for the passes after.
  void recordPlan(ModuleOp module, const pipeline::Dims &dims,
                  pipeline::ScheduleKind kind, StringRef layoutText) {
    Builder b(module.getContext());
    module->setAttr(
        MPDialect::getPipelineAttrName(),
        b.getDictionaryAttr({
            b.getNamedAttr("pp", b.getI64IntegerAttr(dims.stages)),
            b.getNamedAttr("vp", b.getI64IntegerAttr(dims.chunks)),
            b.getNamedAttr("microbatches",
                           b.getI64IntegerAttr(dims.microbatches)),
            b.getNamedAttr("schedule",
                           b.getStringAttr(pipeline::scheduleName(kind))),
            b.getNamedAttr("layout", b.getStringAttr(layoutText)),
        }));
  }

  LogicalResult cut(ModuleOp module, func::FuncOp func,
                    pipeline::ScheduleKind kind, const pipeline::Dims &dims);
  LogicalResult writeTimeline(ModuleOp module,
                              const pipeline::Schedule &actions,
                              const pipeline::Dims &dims,
                              pipeline::ScheduleKind kind, StringRef layout);
};

/// The planned timeline of one step (the cost model's chunk times) as SVG,
/// with its bubble on stdout.
LogicalResult PipelinePass::writeTimeline(ModuleOp module,
                                          const pipeline::Schedule &actions,
                                          const pipeline::Dims &dims,
                                          pipeline::ScheduleKind kind,
                                          StringRef layout) {
  std::string error;
  std::optional<pipeline::Timeline> planned = pipeline::simulate(
      actions, dims, plannedCosts(chunkCosts(module, dims.virtualStages())),
      error);
  if (!planned)
    return emitError(module.getLoc()) << error;
  std::string title = "planned: " + dims.text() + ", " +
                      pipeline::scheduleName(kind) + ", layout " +
                      layout.str() + " (cost model, H100)";
  const std::string svg = pipeline::timelineSvg(*planned, dims, title, "ms");
  if (std::string why = writeFileAtomically(timeline, {svg}); !why.empty())
    return emitError(module.getLoc()) << why;
  llvm::outs() << llvm::format("mp-pipeline: wrote %s, planned bubble %.1f%%\n",
                               timeline.c_str(), 100 * planned->bubble);
  return success();
}

LogicalResult PipelinePass::cut(ModuleOp module, func::FuncOp func,
                                pipeline::ScheduleKind kind,
                                const pipeline::Dims &dims) {
  FailureOr<Units> units = findUnits(func);
  if (failed(units))
    return failure();
  const int64_t chunks = dims.virtualStages();
  if (units->count() < chunks)
    return func.emitError() << "cannot cut " << units->layers
                            << " layers with the embedding and the head ("
                            << units->count() << " pieces) into " << chunks
                            << " pipeline chunks (pp=" << dims.stages
                            << " x vp=" << dims.chunks << ")";
  FailureOr<Cut> end = layout.empty()
                           ? FailureOr<Cut>(balancedCut(units->seconds, chunks))
                           : parseLayout(layout, *units, chunks, func.getLoc());
  if (failed(end))
    return failure();

  // Stamp each staged op with its chunk (virtual stage).
  SmallVector<int64_t> stageOfUnit(units->count());
  for (int64_t k = 0, u = 0; k < chunks; ++k)
    for (; u < (*end)[k]; ++u)
      stageOfUnit[u] = k;
  Builder b(module.getContext());
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto unit = units->unitOf.find(&op);
    if (unit == units->unitOf.end())
      continue;
    int64_t stage = stageOfUnit[unit->second];
    for (Value operand : op.getOperands()) {
      auto from = operand.getDefiningOp()
                      ? units->unitOf.find(operand.getDefiningOp())
                      : units->unitOf.end();
      if (from != units->unitOf.end() && stageOfUnit[from->second] > stage)
        return op.emitError()
               << "this op of pipeline chunk " << stage
               << " reads a value of chunk " << stageOfUnit[from->second]
               << ": the layers do not run in their order";
    }
    op.setAttr(MPDialect::getStageAttrName(), b.getI64IntegerAttr(stage));
  }

  pipeline::Schedule actions = pipeline::generate(kind, dims);
  if (std::string why = pipeline::validate(actions, dims); !why.empty())
    return func.emitError() << "the " << pipeline::scheduleName(kind)
                            << " schedule is invalid: " << why;
  if (printSchedule)
    llvm::outs() << pipeline::describe(actions);
  if (!timeline.empty() && failed(writeTimeline(module, actions, dims, kind,
                                                layoutOf(*units, *end))))
    return failure();
  recordPlan(module, dims, kind, layoutOf(*units, *end));
  return success();
}

} // namespace
