//===- Report.cpp - per-rank memory, FLOPs and traffic of a plan ----------===//
//
// What a partitioned program (a train step, after mp-train) costs each rank:
// parameter, gradient, optimizer-state and activation bytes, FLOPs per step,
// collective and point-to-point bytes, the pipeline bubble, and a predicted
// step time and MFU on a GPU; each exact figure from the IR beside the
// closed form of the Megatron papers (../shared/REFERENCE.md) in their
// setting (mixed-precision Adam: 2 + 2 + 12 bytes per parameter; 16-bit
// activations). Shape-only models (no weights) report alike.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/ActivationMemory.h"
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/Layers.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/PipelineSchedule.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>
#include <set>

namespace mp {
#define GEN_PASS_DEF_MPREPORT
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

bool isBackward(Operation *op) {
  return op->hasAttr(MPDialect::getBackwardAttrName());
}

double bytesOf(Type type) { return static_cast<double>(storageBytes(type)); }

/// The model's dimensions in the papers' notation, read off the program.
struct Dims {
  int64_t b = 0, s = 0, h = 0, a = 0, layers = 0, vocab = 0;
  int64_t t = 1, p = 1, v = 1, m = 1, d = 1;
  bool sp = false, zero = false;
  std::string recompute = "none";
  std::string recomputeMethod = "uniform";
  int64_t recomputeLayers = 1;
  int64_t activationBytes = 4; // of one element
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
};

Dims dimsOf(ModuleOp module, func::FuncOp func) {
  Dims d;
  for (auto grid : module.getOps<shard::GridOp>())
    for (int64_t n : grid.getShape())
      d.t *= n;
  if (auto dp = module->getAttrOfType<IntegerAttr>(
          MPDialect::getDataParallelAttrName()))
    d.d = std::max<int64_t>(dp.getInt(), 1);
  if (auto zero =
          module->getAttrOfType<IntegerAttr>(MPDialect::getZeroAttrName()))
    d.zero = zero.getInt() == 1;
  if (auto plan = module->getAttrOfType<DictionaryAttr>(
          MPDialect::getPipelineAttrName())) {
    d.p = plan.getAs<IntegerAttr>("pp").getInt();
    d.v = plan.getAs<IntegerAttr>("vp").getInt();
    d.m = plan.getAs<IntegerAttr>("microbatches").getInt();
    if (auto kind = pipeline::parseSchedule(
            plan.getAs<StringAttr>("schedule").getValue()))
      d.schedule = *kind;
  }
  if (auto policy = module->getAttrOfType<DictionaryAttr>(
          MPDialect::getRecomputeAttrName())) {
    if (auto g = policy.getAs<StringAttr>("granularity"))
      d.recompute = g.str().empty() ? "kinds" : g.str();
    if (auto m = policy.getAs<StringAttr>("method"))
      d.recomputeMethod = m.str();
    if (auto l = policy.getAs<IntegerAttr>("layers"))
      d.recomputeLayers = l.getInt();
  }
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getElementType().isInteger(64) ||
        type.getElementType().isInteger(32))
      if (type.getRank() == 2 && d.b == 0) {
        d.b = type.getDimSize(0);
        d.s = type.getDimSize(1);
      }
  }
  std::set<int64_t> layers;
  func.walk([&](Operation *op) {
    if (auto layer = intAttr(op, MPDialect::getLayerAttrName()))
      layers.insert(*layer);
    if (isa<shard::ReduceScatterOp>(op))
      d.sp = true;
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      auto table = embedding.getTable().getType();
      if (d.vocab == 0 || table.getDimSize(0) > d.vocab) {
        d.vocab = table.getDimSize(0) * (embedding.getGrid() ? d.t : 1);
        d.h = table.getDimSize(1);
      }
    }
    if (auto attention = dyn_cast<AttentionOp>(op))
      if (d.a == 0 && !isBackward(op)) {
        auto q = cast<RankedTensorType>(attention.getQuery().getType());
        d.a = q.getDimSize(1) * d.t;
        d.activationBytes = std::max<int64_t>(
            q.getElementType().getIntOrFloatBitWidth() / 8, 1);
      }
  });
  d.layers = static_cast<int64_t>(layers.size());
  return d;
}

struct Figures {
  Dims dims;
  /// Whether the program is a train step (mp-train ran); an inference
  /// program is reported against the forward third of the formulas.
  bool train = false;
  double parameters = 0, parametersFormula = 0;
  double layerPlan = 0, layerFormula = 0, layerReconciled = 0;
  std::string layerFormulaName;
  struct Rank {
    int64_t stage;
    double parameterBytes = 0, gradientBytes = 0, optimizerBytes = 0;
    double activationPlan = 0, activationFormula = 0, peakLayers = 0;
    std::map<std::string, double> collectives; // bytes sent per step
    double traffic() const {
      double sum = 0;
      for (auto &[kind, bytes] : collectives)
        sum += bytes;
      return sum;
    }
  };
  std::vector<Rank> ranks;
  double modelFlops = 0, hardwareFlops = 0; // per step, all GPUs (the IR)
  double modelFlopsFormula = 0, hardwareFlopsFormula = 0;
  std::map<std::string, double> collectiveBytes; // the busiest rank's
  double p2pBytes = 0; // per step, the busiest stage boundary, both ways
  double bubble = 0;
  double predictedSeconds = 0;
  Gpu gpu{};
};

/// Each chunk's forward values its backward reads (per micro-batch, this
/// rank's), and its layers.
void stashOf(func::FuncOp func, std::vector<double> &bytes,
             std::vector<std::set<int64_t>> &layers) {
  func.walk([&](Operation *op) {
    if (isBackward(op) || isa<GetParamOp, ConstantOp>(op) ||
        MemoryPlan::viewsParameter(op) || op->getNumResults() == 0)
      return;
    const int64_t chunk =
        intAttr(op, MPDialect::getStageAttrName()).value_or(0);
    if (chunk < 0 || chunk >= static_cast<int64_t>(bytes.size()))
      return;
    if (auto layer = intAttr(op, MPDialect::getLayerAttrName()))
      layers[chunk].insert(*layer);
    for (Value v : op->getResults())
      if (llvm::any_of(v.getUsers(), isBackward))
        bytes[chunk] += bytesOf(v.getType());
  });
}

/// The forward values of layer `layer` its backward reads (one micro-batch,
/// this rank's).
double layerStash(func::FuncOp func, int64_t layer) {
  double bytes = 0;
  func.walk([&](Operation *op) {
    if (isBackward(op) || isa<GetParamOp, ConstantOp>(op) ||
        MemoryPlan::viewsParameter(op) ||
        intAttr(op, MPDialect::getLayerAttrName()) != layer)
      return;
    for (Value v : op->getResults())
      if (llvm::any_of(v.getUsers(), isBackward))
        bytes += bytesOf(v.getType());
  });
  return bytes;
}

/// Collective traffic one rank sends per run of `op` (ring algorithms), by
/// kind: a fused op's collectives each count as their own kind.
SmallVector<std::pair<std::string, double>> collectiveBytes(Operation *op,
                                                            int64_t t) {
  const double share = double(t - 1) / double(t);
  auto traffic = [&](StringRef kind, Type moved) {
    const double factor = kind == "all_reduce" ? 2 * share : share;
    return std::make_pair(kind.str(), factor * bytesOf(moved));
  };
  SmallVector<std::pair<std::string, double>> sent;
  if (auto r = dyn_cast<shard::AllReduceOp>(op))
    sent.push_back(traffic("all_reduce", r.getInput().getType()));
  if (auto g = dyn_cast<shard::AllGatherOp>(op))
    sent.push_back(traffic("all_gather", g.getResult().getType()));
  if (auto rs = dyn_cast<shard::ReduceScatterOp>(op))
    sent.push_back(traffic("reduce_scatter", rs.getInput().getType()));
  for (const FusedCollective &fused : fusedCollectives(op))
    sent.push_back(traffic(fused.kind, fused.moved));
  return sent;
}

Figures measure(ModuleOp module, func::FuncOp func, const Gpu &gpu) {
  Figures f;
  f.gpu = gpu;
  Dims &d = f.dims;
  d = dimsOf(module, func);
  f.train = isTrainStep(module);
  const int64_t chunks = d.p * d.v;
  const double microbatchesPerStep = double(d.m) * double(d.d);
  // Parameters: each counted once (a tied embedding and head are one).
  for (auto param : module.getOps<ParamOp>())
    f.parameters += double(param.getTensorType().getNumElements());
  const double l = double(d.layers), h = double(d.h);
  // The closed forms need a transformer's dimensions (0 without them).
  const bool shaped = d.layers > 0 && d.h > 0 && d.a > 0 && d.s > 0;
  f.parametersFormula =
      shaped ? 12 * l * h * h *
                   (1 + 13 / (12 * h) + double(d.vocab + d.s) / (12 * l * h))
             : 0;

  // Per stage: its parameters (as its ops read them), the optimizer's
  // share, and what its forward keeps for its backward.
  f.ranks.resize(static_cast<size_t>(d.p));
  for (auto [s, rank] : llvm::enumerate(f.ranks))
    rank.stage = static_cast<int64_t>(s);
  func.walk([&](GetParamOp get) {
    // The stages of its readers (through views: an einsum's weight read
    // 2-D by its linear).
    std::set<int64_t> stages;
    SmallVector<Operation *> readers(get->getUsers());
    while (!readers.empty()) {
      Operation *user = readers.pop_back_val();
      if (MemoryPlan::viewsParameter(user))
        llvm::append_range(readers, user->getUsers());
      else if (auto chunk = intAttr(user, MPDialect::getStageAttrName()))
        stages.insert(*chunk % d.p);
    }
    if (stages.empty())
      stages.insert(0);
    const double elements =
        double(cast<RankedTensorType>(get.getType()).getNumElements());
    for (int64_t s : stages) {
      Figures::Rank &rank = f.ranks[static_cast<size_t>(s)];
      rank.parameterBytes += 2 * elements; // 16-bit weights
      if (!f.train)
        continue;
      rank.gradientBytes += 2 * elements; // 16-bit gradients
      rank.optimizerBytes += 12 * elements / (d.zero ? double(d.d) : 1.0);
    }
  });
  std::vector<double> stash(static_cast<size_t>(chunks), 0);
  std::vector<std::set<int64_t>> chunkLayers(static_cast<size_t>(chunks));
  stashOf(func, stash, chunkLayers);
  LayerSetting setting{double(d.s), double(d.b), double(d.h), double(d.a),
                       double(d.t), d.sp,        d.recompute};
  LayerForm form = shaped ? korthikantiLayer(setting) : LayerForm{0, "none"};
  const double perLayer = form.bytes;
  f.layerFormula = perLayer;
  f.layerFormulaName = form.name;
  if (d.recompute == "full" &&
      (d.recomputeMethod != "uniform" || d.recomputeLayers != 1))
    f.layerFormulaName += ", for a layer recomputed alone; this plan "
                          "recomputes method=" +
                          d.recomputeMethod +
                          " layers=" + std::to_string(d.recomputeLayers);
  if (d.recompute == "kinds")
    f.layerFormulaName += ", without recompute; this plan recomputes the "
                          "op kinds given";
  f.layerReconciled =
      shaped ? keptLayerBytes(setting, double(d.activationBytes)) : 0;
  // A middle layer: no embedding or head beside it.
  f.layerPlan = d.layers ? layerStash(func, d.layers / 2) : 0;
  // In flight on each stage: the schedule walked, each chunk's stash and
  // layers held from its forward to its backward.
  pipeline::Dims pdims{d.p, d.v, d.m};
  pipeline::Schedule schedule =
      chunks > 1 ? pipeline::generate(d.schedule, pdims)
                 : pipeline::Schedule{{{pipeline::ActionKind::Forward, 0, 0},
                                       {pipeline::ActionKind::Backward, 0, 0}}};
  for (int64_t s = 0; s < d.p; ++s) {
    double bytes = 0, layersHeld = 0;
    Figures::Rank &rank = f.ranks[static_cast<size_t>(s)];
    for (const pipeline::Action &a : schedule[static_cast<size_t>(s)]) {
      const size_t k = static_cast<size_t>(pdims.virtualStage(s, a.chunk));
      const double sign = a.kind == pipeline::ActionKind::Forward    ? 1.0
                          : a.kind == pipeline::ActionKind::Backward ? -1.0
                                                                     : 0.0;
      bytes += sign * stash[k];
      layersHeld += sign * double(chunkLayers[k].size());
      rank.activationPlan = std::max(rank.activationPlan, bytes);
      rank.peakLayers = std::max(rank.peakLayers, layersHeld);
    }
    rank.activationFormula = perLayer * rank.peakLayers;
    if (!f.train) // nothing is kept for a backward
      rank.activationFormula = rank.peakLayers = 0;
  }
  if (!f.train)
    f.layerFormula = f.layerReconciled = 0;

  // FLOPs: the contractions and attention the IR runs (per rank, one
  // micro-batch), times the tensor-parallel ranks sharing them and the
  // micro-batches of a step; hardware FLOPs count recomputed copies too.
  // Collectives likewise, per rank.
  func.walk([&](Operation *op) {
    if (auto costed = dyn_cast<CostOpInterface>(op)) {
      const double flops =
          costed.getFlops() * double(d.t) * microbatchesPerStep;
      f.hardwareFlops += flops;
      if (!op->hasAttr(MPDialect::getRecomputedAttrName()))
        f.modelFlops += flops;
    }
    for (auto &[kind, bytes] : collectiveBytes(op, d.t)) {
      const int64_t stage =
          intAttr(op, MPDialect::getStageAttrName()).value_or(0) % d.p;
      f.ranks[static_cast<size_t>(stage)].collectives[kind] +=
          bytes * double(d.m);
    }
  });
  const Figures::Rank *busiest = &f.ranks.front();
  for (Figures::Rank &rank : f.ranks) {
    if (d.d > 1 && f.train)
      rank.collectives["data_parallel_gradients"] =
          2 * double(d.d - 1) / double(d.d) * rank.gradientBytes;
    if (rank.traffic() > busiest->traffic())
      busiest = &rank;
  }
  f.collectiveBytes = busiest->collectives;
  const double B = double(d.b) * microbatchesPerStep, s = double(d.s);
  const double base = 72 * B * l * s * h * h;
  f.modelFlopsFormula =
      shaped ? base * (1 + s / (6 * h) + double(d.vocab) / (12 * h * l)) : 0;
  // The forward is a third of the train step's FLOPs (the backward twice
  // the forward), and recomputes nothing.
  if (!f.train)
    f.modelFlopsFormula /= 3;
  f.hardwareFlopsFormula =
      !shaped || !f.train ? f.modelFlopsFormula
      : d.recompute == "full"
          ? 96 * B * s * l * h * h *
                (1 + s / (6 * h) + double(d.vocab) / (16 * l * h))
      : d.recompute == "selective"
          ? base * (1 + s / (3 * h) + double(d.vocab) / (12 * h * l))
          : f.modelFlopsFormula;

  // Point-to-point: input-dependent values crossing chunk boundaries
  // (relayed through every chunk between), forward and backward.
  if (chunks > 1) {
    llvm::DenseSet<Operation *> dependent = inputDependentOps(func);
    std::vector<double> boundary(static_cast<size_t>(chunks), 0);
    func.walk([&](Operation *op) {
      auto from = intAttr(op, MPDialect::getStageAttrName());
      if (!from || !dependent.contains(op))
        return;
      for (Value v : op->getResults()) {
        int64_t lo = *from, hi = *from;
        for (Operation *user : v.getUsers())
          if (auto to = intAttr(user, MPDialect::getStageAttrName())) {
            lo = std::min(lo, *to);
            hi = std::max(hi, *to);
          }
        for (int64_t k = lo; k < hi; ++k)
          boundary[static_cast<size_t>(k)] += bytesOf(v.getType());
      }
    });
    f.p2pBytes =
        *std::max_element(boundary.begin(), boundary.end()) * double(d.m);
  }

  // The bubble and a predicted step: each chunk's compute and memory time
  // on the GPU, the schedule simulated, plus the tensor-parallel
  // collectives and the data-parallel gradient reduction over links.
  std::vector<ChunkCost> costs = chunkCosts(module, chunks);
  if (chunks == 1) {
    costs.assign(1, ChunkCost());
    func.walk([&](Operation *op) {
      (isBackward(op) ? costs[0].backward : costs[0].forward) += costOf(op);
    });
  }
  Machine machine = gpu.machine();
  pipeline::Costs timed;
  for (const ChunkCost &c : costs) {
    timed.forward.push_back(c.forward.seconds(machine));
    timed.backward.push_back(!f.train || c.backward.seconds(machine) > 0
                                 ? c.backward.seconds(machine)
                                 : 2 * c.forward.seconds(machine));
  }
  std::string error;
  double makespan = 0;
  if (chunks > 1) {
    if (auto simulated = pipeline::simulate(schedule, pdims, timed, error)) {
      f.bubble = simulated->bubble;
      makespan = simulated->makespan;
    }
  } else {
    makespan = (timed.forward[0] + timed.backward[0]) * double(d.m);
  }
  // Tensor-parallel collectives over the node's links; the gradient
  // all-reduce and the pipeline's transfers over the network.
  double network = f.p2pBytes;
  auto gradients = busiest->collectives.find("data_parallel_gradients");
  if (gradients != busiest->collectives.end())
    network += gradients->second;
  f.predictedSeconds =
      makespan +
      (busiest->traffic() - (network - f.p2pBytes)) / gpu.linkBandwidth +
      network / gpu.networkBandwidth;
  return f;
}

std::string gib(double bytes) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (bytes >= double(1 << 30))
    os << llvm::format("%.2f GiB", bytes / double(1 << 30));
  else
    os << llvm::format("%.1f MiB", bytes / double(1 << 20));
  return out;
}

std::string relative(double plan, double formula) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::format("%+.2f%%", formula ? 100 * (plan - formula) / formula : 0);
  return out;
}

struct ReportPass : public mp::impl::MPReportBase<ReportPass> {
  using MPReportBase::MPReportBase;
  void runOnOperation() override;

private:
  void printText(const Figures &f, ModuleOp module, llvm::raw_ostream &os);
  void printJson(const Figures &f, llvm::raw_ostream &os);
  double utilization(const Figures &f, double flops) const {
    const Dims &d = f.dims;
    const double gpus = double(d.t * d.p * d.d);
    return flops / (iterationTime * gpus * f.gpu.peakFlops);
  }
};

void ReportPass::printText(const Figures &f, ModuleOp module,
                           llvm::raw_ostream &os) {
  const Dims &d = f.dims;
  auto source =
      module->getAttrOfType<StringAttr>(MPDialect::getSourceAttrName());
  os << "mp report of " << (source ? source.getValue() : "the module") << "\n";
  os << llvm::format("  layout       tp=%lld%s pp=%lld vp=%lld dp=%lld%s, "
                     "%lld micro-batch(es) of %lldx%lld per step, "
                     "recompute %s, %lld-byte activations\n",
                     (long long)d.t, d.sp ? " sp" : "", (long long)d.p,
                     (long long)d.v, (long long)d.d, d.zero ? " zero=1" : "",
                     (long long)d.m, (long long)d.b, (long long)d.s,
                     d.recompute.c_str(), (long long)d.activationBytes);
  os << llvm::format("  model        h=%lld a=%lld layers=%lld V=%lld\n",
                     (long long)d.h, (long long)d.a, (long long)d.layers,
                     (long long)d.vocab);
  os << llvm::format("  parameters   %.4g (formula 12lh^2(1 + 13/(12h) + "
                     "(V+s)/(12lh)): %.4g, %s)\n",
                     f.parameters, f.parametersFormula,
                     relative(f.parameters, f.parametersFormula).c_str());
  if (!f.train)
    os << "  step         forward only (an inference program: give --mp-train "
          "for the train step); FLOPs against the forward's third of the "
          "formula, no gradients, optimizer state or kept activations\n";
  else
    os << "  per layer    activations kept for the backward: "
       << llvm::format("%.0f", f.layerPlan) << " bytes planned, "
       << llvm::format("%.0f", f.layerFormula) << " by the formula ("
       << f.layerFormulaName << ", 16-bit), "
       << relative(f.layerPlan, f.layerFormula)
       << "; reconciled with how mp "
          "keeps a layer (no stored attention scores, softmax or dropout "
          "masks; "
          "the attention output in two layouts unless recomputed): "
       << llvm::format("%.0f", f.layerReconciled) << ", "
       << relative(f.layerPlan, f.layerReconciled) << "\n";
  for (const Figures::Rank &r : f.ranks)
    if (!f.train)
      os << "  stage " << r.stage << "      parameters "
         << gib(r.parameterBytes) << "\n";
    else
      os << "  stage " << r.stage << "      parameters "
         << gib(r.parameterBytes) << ", gradients " << gib(r.gradientBytes)
         << ", optimizer " << gib(r.optimizerBytes) << ", activations "
         << gib(r.activationPlan) << " planned (" << gib(r.activationFormula)
         << " by the formula, " << llvm::format("%.0f", r.peakLayers)
         << " layers in flight)\n";
  os << llvm::format("  FLOPs/step   model %.4g (formula %.4g), hardware %.4g "
                     "(formula %.4g)\n",
                     f.modelFlops, f.modelFlopsFormula, f.hardwareFlops,
                     f.hardwareFlopsFormula);
  os << "  traffic      per step, the busiest rank:";
  for (auto &[kind, bytes] : f.collectiveBytes)
    os << " " << kind << " " << gib(bytes) << ";";
  if (d.p > 1)
    os << " point-to-point " << gib(f.p2pBytes) << " (busiest boundary)";
  os << "\n";
  if (d.p > 1)
    os << llvm::format("  bubble       %.1f%%\n", 100 * f.bubble);
  if (f.predictedSeconds > 0)
    os << llvm::format(
        "  predicted    %.3g s per step on %s, MFU %.1f%%\n",
        f.predictedSeconds, f.gpu.name,
        100 * f.modelFlopsFormula /
            (f.predictedSeconds * double(d.t * d.p * d.d) * f.gpu.peakFlops));
  if (iterationTime > 0)
    os << llvm::format("  measured     %.4g s per step on %lld %s: MFU %.1f%%, "
                       "HFU %.1f%%\n",
                       double(iterationTime), (long long)(d.t * d.p * d.d),
                       f.gpu.name, 100 * utilization(f, f.modelFlopsFormula),
                       100 * utilization(f, f.hardwareFlopsFormula));
}

void ReportPass::printJson(const Figures &f, llvm::raw_ostream &os) {
  const Dims &d = f.dims;
  llvm::json::Array ranks;
  for (const Figures::Rank &r : f.ranks)
    ranks.push_back(
        llvm::json::Object{{"rank", r.stage * d.d * d.t},
                           {"stage", r.stage},
                           {"parameter_bytes", r.parameterBytes},
                           {"gradient_bytes", r.gradientBytes},
                           {"optimizer_bytes", r.optimizerBytes},
                           {"activation_bytes_plan", r.activationPlan},
                           {"activation_bytes_formula", r.activationFormula}});
  llvm::json::Object collectives;
  for (auto &[kind, bytes] : f.collectiveBytes)
    collectives[kind] = bytes;
  if (d.p > 1)
    collectives["point_to_point"] = f.p2pBytes;
  llvm::json::Object report{
      {"step", f.train ? "train" : "forward"},
      {"parameters", f.parameters},
      {"parameters_formula", f.parametersFormula},
      {"layer", llvm::json::Object{{"activation_bytes_formula", f.layerFormula},
                                   {"activation_bytes_plan", f.layerPlan},
                                   {"activation_bytes_formula_reconciled",
                                    f.layerReconciled}}},
      {"ranks", std::move(ranks)},
      {"model_flops_per_step", f.modelFlops},
      {"model_flops_per_step_formula", f.modelFlopsFormula},
      {"hardware_flops_per_step", f.hardwareFlops},
      {"hardware_flops_per_step_formula", f.hardwareFlopsFormula},
      {"collective_bytes_per_step", std::move(collectives)},
      {"bubble", f.bubble},
      {"predicted_step_seconds", f.predictedSeconds},
      {"gpu", f.gpu.name}};
  if (iterationTime > 0) {
    report["mfu"] = utilization(f, f.modelFlopsFormula);
    report["hfu"] = utilization(f, f.hardwareFlopsFormula);
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
}

void ReportPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (format != "text" && format != "json") {
    emitError(module.getLoc())
        << "mp-report format must be text or json, got '" << format << "'";
    return signalPassFailure();
  }
  std::optional<Gpu> chosen = gpuPreset(gpu);
  if (!chosen) {
    emitError(module.getLoc())
        << "mp-report gpu must be a100, h100 or h200, got '" << gpu << "'";
    return signalPassFailure();
  }
  // 0 means "not given"; NaN, infinities and times below a microsecond (a
  // step cannot be that short; MFU would print 300 digits) are errors.
  auto given = [](double v, double least) {
    return v == 0 || (std::isfinite(v) && v >= least);
  };
  if (!given(iterationTime, 1e-6) || !given(peakFlops, 1) ||
      !given(memoryBandwidth, 1) || !given(linkBandwidth, 1)) {
    emitError(module.getLoc())
        << "mp-report iteration-time (at least 1e-6 s), peak-flops and "
           "bandwidths must be finite positive numbers";
    return signalPassFailure();
  }
  // A GPU of the options' figures, the preset's for those not given.
  if (peakFlops > 0)
    chosen->peakFlops = peakFlops;
  if (memoryBandwidth > 0)
    chosen->memoryBandwidth = memoryBandwidth;
  if (linkBandwidth > 0)
    chosen->linkBandwidth = linkBandwidth;
  FailureOr<func::FuncOp> func = getEntryFunction(module);
  if (failed(func))
    return signalPassFailure();
  Figures f = measure(module, *func, *chosen);
  if (f.dims.layers == 0 || f.dims.h == 0 || f.dims.a == 0) {
    emitError(module.getLoc())
        << "mp-report needs a raised transformer (mp.attention, mp.layer): "
           "give --mp-raise or --mp-parallelize before it";
    return signalPassFailure();
  }
  if (format == "json")
    printJson(f, llvm::outs());
  else
    printText(f, module, llvm::outs());
  llvm::outs().flush();
}

} // namespace
