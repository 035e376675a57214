//===- AutoPlan.cpp - choose tp, pp, vp, dp, micro-batch, sp, recompute ---===//
//
// Searches every layout of a model over a cluster and ranks those that fit
// in memory by predicted step time. The model is measured once, unsplit:
// each transformer layer's and the rest's FLOPs and bytes (the cost model of
// mp/Analysis/Cost.h, as the pipeline cut and the report use) and
// parameters, per token of the pinned shape; each layout is then priced in
// closed form: compute on the GPU's peak and memory bandwidth (backward
// twice the forward, recompute adding what it re-runs), tensor-parallel
// collectives over NVLink, pipeline transfers and the data-parallel
// gradient all-reduce over the network, the schedule's bubble, and memory
// as mp-report counts it (mixed-precision Adam, ZeRO-1 over dp, the
// activations of Korthikanti's forms as mp keeps a layer, with the
// micro-batches in flight). Layouts: tp a divisor of the heads within a
// node (8 GPUs), pp and vp cutting the layers evenly, dp the rest of the
// GPUs, micro-batches that divide each replica's batch (1F1B needs at least
// pp of them, interleaving a multiple of pp; one stage accumulates), sp
// with tp, recompute none,
// selective or full. The search is exhaustive (thousands of layouts, each
// priced in O(1)).
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/ActivationMemory.h"
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/Layers.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mp {
#define GEN_PASS_DEF_MPAUTOPLAN
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// The model, measured once.
struct Model {
  int64_t b0 = 1, s = 0, h = 0, a = 0, kvHeads = 0, layers = 0, vocab = 0;
  double layerFlops = 0, layerBytes = 0, attentionFlops = 0; // per token
  double restFlops = 0, restBytes = 0;                       // per token
  /// Parameter reads: per micro-batch whatever its size.
  double layerWeightBytes = 0, restWeightBytes = 0;
  double layerParams = 0, restParams = 0, allParams = 0;
};

Model measure(ModuleOp module, func::FuncOp func) {
  Model m;
  bool tagged = false;
  func.walk([&](Operation *op) {
    tagged |= op->hasAttr(MPDialect::getLayerAttrName());
  });
  if (!tagged)
    tagLayers(func);
  std::set<int64_t> layers;
  for (BlockArgument arg : func.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() == 2 && type.getElementType().isInteger(64) &&
        m.s == 0) {
      m.b0 = type.getDimSize(0);
      m.s = type.getDimSize(1);
    }
  }
  func.walk([&](Operation *op) {
    if (auto layer = intAttr(op, MPDialect::getLayerAttrName()))
      layers.insert(*layer);
  });
  m.layers = static_cast<int64_t>(layers.size());
  const int64_t mid = m.layers / 2;
  std::set<std::string> layerParams;
  func.walk([&](Operation *op) {
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      auto table = embedding.getTable().getType();
      if (table.getDimSize(0) > m.vocab) {
        m.vocab = table.getDimSize(0);
        m.h = table.getDimSize(1);
      }
    }
    if (auto attention = dyn_cast<AttentionOp>(op); attention && m.a == 0) {
      m.a =
          cast<RankedTensorType>(attention.getQuery().getType()).getDimSize(1);
      m.kvHeads =
          cast<RankedTensorType>(attention.getKey().getType()).getDimSize(1);
    }
    auto layer = intAttr(op, MPDialect::getLayerAttrName());
    if (auto get = dyn_cast<GetParamOp>(op)) {
      if (layer == mid)
        layerParams.insert(get.getName().str());
      return;
    }
    Cost cost = costOf(op);
    // The bytes an op reads from parameters do not grow with the batch.
    double weights = 0;
    for (Value operand : op->getOperands())
      if (MemoryPlan::viewedParameter(operand))
        weights += double(storageBytes(operand.getType()));
    weights = std::min(weights, cost.bytes);
    if (!layer) {
      m.restFlops += cost.flops;
      m.restBytes += cost.bytes - weights;
      m.restWeightBytes += weights;
    } else if (*layer == mid) {
      m.layerFlops += cost.flops;
      m.layerBytes += cost.bytes - weights;
      m.layerWeightBytes += weights;
      if (op->hasTrait<mp::OpTrait::CoreAttention>())
        m.attentionFlops += cost.flops;
    }
  });
  for (auto param : module.getOps<ParamOp>()) {
    const double n = double(param.getTensorType().getNumElements());
    m.allParams += n;
    if (layerParams.count(param.getSymName().str()))
      m.layerParams += n;
  }
  m.restParams = m.allParams - m.layerParams * double(m.layers);
  const double tokens = double(m.b0 * m.s);
  for (double *per : {&m.layerFlops, &m.layerBytes, &m.attentionFlops,
                      &m.restFlops, &m.restBytes})
    *per /= tokens;
  return m;
}

struct Layout {
  int64_t t = 1, p = 1, v = 1, d = 1, b = 1, m = 1;
  bool sp = false;
  std::string recompute = "none";
  double seconds = 0, memory = 0, mfu = 0;

  std::string options() const {
    std::string out = "tp=" + std::to_string(t);
    if (sp)
      out += " sp=true";
    if (p > 1 || v > 1)
      out += " pp=" + std::to_string(p) +
             (v > 1 ? " vp=" + std::to_string(v) : std::string());
    if (p > 1 || v > 1 || m > 1)
      out += " microbatches=" + std::to_string(m) +
             (v > 1 ? " schedule=interleaved" : "");
    if (d > 1)
      out += " dp=" + std::to_string(d) + " zero=1";
    out += " dtype=bf16";
    if (recompute != "none")
      out += " recompute=" + recompute;
    return out;
  }
};

/// One layer's activation bytes as mp keeps it (mp-report's reconciled
/// Korthikanti form; 16-bit), for micro-batch size b.
double layerActivations(const Model &m, const Layout &l) {
  return keptLayerBytes({double(m.s), double(l.b), double(m.h), double(m.a),
                         double(l.t), l.sp, l.recompute},
                        /*activationBytes=*/2);
}

/// Prices `l` (sets seconds, memory and MFU); false when it cannot run.
bool price(const Model &m, const Gpu &c, int64_t globalBatch, Layout &l) {
  const double tokens = double(l.b) * double(m.s);
  const double layersPerStage = double(m.layers) / double(l.p);
  // Compute of one micro-batch on the busiest stage (the first, with the
  // embedding; the last's head is counted there too, a bound).
  double forward = layersPerStage * m.layerFlops + m.restFlops;
  double recomputed = l.recompute == "full" ? layersPerStage * m.layerFlops
                      : l.recompute == "selective"
                          ? layersPerStage * m.attentionFlops
                          : 0;
  const double flops = tokens * (3 * forward + recomputed) / double(l.t);
  const double bytes =
      3 *
      (tokens * (layersPerStage * m.layerBytes + m.restBytes) +
       layersPerStage * m.layerWeightBytes + m.restWeightBytes) /
      double(l.t);
  double microbatch = flops / c.peakFlops + bytes / c.memoryBandwidth;
  // Tensor-parallel traffic per layer, forward and backward: 8bsh(t-1)/t
  // 16-bit elements (Narayanan).
  if (l.t > 1)
    microbatch += layersPerStage * 8 * tokens * double(m.h) * 2 *
                  double(l.t - 1) / double(l.t) / c.linkBandwidth;
  // Pipeline transfers: an activation and a gradient of bsh/t per
  // micro-batch and chunk boundary (scatter/gather), v per stage.
  if (l.p > 1)
    microbatch += 2 * double(l.v) * tokens * double(m.h) * 2 / double(l.t) /
                  c.networkBandwidth;
  const double bubble = double(l.p - 1) / (double(l.v) * double(l.m));
  double seconds = double(l.m) * microbatch * (1 + bubble);
  // The data-parallel gradient all-reduce (16-bit) of a stage's shard.
  const double stageParams =
      (layersPerStage * m.layerParams + m.restParams) / double(l.t);
  if (l.d > 1)
    seconds += 2 * double(l.d - 1) / double(l.d) * stageParams * 2 /
               c.networkBandwidth;
  // Memory: mixed-precision Adam (ZeRO-1 over dp) and the first stage's
  // activations in flight.
  const double weights = stageParams * (2 + 2 + 12 / double(l.d));
  double inFlight = layersPerStage * double(std::min(l.p, l.m));
  if (l.v > 1)
    inFlight *= 1 + double(l.p - 1) / double(l.p * l.v);
  const double logits = 4 * tokens * double(m.vocab) / double(l.t);
  l.memory = weights + inFlight * layerActivations(m, l) + logits;
  l.seconds = seconds;
  const double L = double(m.layers), h = double(m.h), s = double(m.s);
  const double modelFlops = 72 * double(globalBatch) * L * s * h * h *
                            (1 + s / (6 * h) + double(m.vocab) / (12 * h * L));
  l.mfu = modelFlops / (seconds * double(l.t * l.p * l.d) * c.peakFlops);
  return true;
}

/// The divisors of `n`, ascending (pairs k, n/k up to √n).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t k = 1; k <= n / k; ++k)
    if (n % k == 0) {
      low.push_back(k);
      if (k != n / k)
        high.push_back(n / k);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

/// Why a GPU count has no layout at all (as opposed to none that fits).
std::string noLayoutOf(int64_t gpus) {
  return "no layout of " + std::to_string(gpus) +
         " GPUs exists: the count must factor into tensor parallelism "
         "(dividing the heads and key/value heads, or divided by the "
         "latter), pipeline "
         "stages (dividing the layers) and data-parallel replicas (dividing "
         "the global batch); try another GPU count";
}

/// Every layout of `gpus` GPUs for the model, priced.
std::vector<Layout> search(const Model &m, const Gpu &c, int64_t gpus,
                           int64_t globalBatch) {
  std::vector<Layout> out;
  for (int64_t t : divisors(std::min<int64_t>(gpus, 8))) {
    // What tensor parallelism splits must divide: heads, key/value heads
    // (unless fewer than t and dividing it: repeated, one per rank); the
    // vocabulary is padded.
    if (m.a % t || gpus % t ||
        (m.kvHeads > 1 && m.kvHeads % t && t % m.kvHeads))
      continue;
    for (int64_t p : divisors(gpus / t)) {
      if (p > m.layers)
        continue;
      const int64_t d = gpus / (t * p);
      if (globalBatch % d)
        continue;
      for (int64_t v = 1; p * v <= m.layers; ++v) {
        if (m.layers % (p * v) || (v > 1 && p == 1))
          continue;
        for (int64_t b : divisors(globalBatch / d)) {
          const int64_t mb = globalBatch / d / b;
          if ((p > 1 && mb < p) || (v > 1 && mb % p))
            continue;
          for (bool sp : {false, true}) {
            if (sp && (t == 1 || m.s % t))
              continue;
            for (const char *recompute : {"none", "selective", "full"}) {
              Layout l{t, p, v, d, b, mb, sp, recompute};
              if (price(m, c, globalBatch, l))
                out.push_back(l);
            }
          }
        }
      }
    }
  }
  return out;
}

/// A layout from --mp-parallelize-style options (the baseline to compare):
/// tp, sp, pp, vp, recompute and mbs (the micro-batch size); the rest
/// follows from the GPUs and the batch. Why it is not one, else empty.
std::string parseLayout(StringRef text, int64_t gpus, int64_t globalBatch,
                        const Model &m, Layout &l) {
  l.b = m.b0;
  SmallVector<StringRef> words;
  text.split(words, ' ', -1, false);
  for (StringRef word : words) {
    auto [key, value] = word.split('=');
    int64_t n = 0;
    const bool number = !value.getAsInteger(10, n) && n >= 1 && n <= (1 << 20);
    if (key == "sp" && (value == "true" || value == "false" || value.empty()))
      l.sp = value != "false";
    else if (key == "recompute" &&
             (value == "none" || value == "selective" || value == "full"))
      l.recompute = value.str();
    else if (number &&
             (key == "tp" || key == "pp" || key == "vp" || key == "mbs"))
      (key == "tp" ? l.t : key == "pp" ? l.p : key == "vp" ? l.v : l.b) = n;
    else
      return "'" + word.str() +
             "' (takes tp=, sp=, pp=, vp=, recompute=none|selective|full, "
             "mbs=)";
  }
  if (gpus % (l.t * l.p))
    return "tp x pp does not divide the GPUs";
  l.d = gpus / (l.t * l.p);
  if (globalBatch % (l.d * l.b))
    return "micro-batch x dp does not divide the global batch";
  l.m = globalBatch / (l.d * l.b);
  if (m.layers % (l.p * l.v) || (l.p > 1 && l.m < l.p) ||
      (l.v > 1 && l.m % l.p))
    return "pp x vp must divide the layers, with at least pp micro-batches "
           "(a multiple of pp when interleaved)";
  return "";
}

double parseBytes(StringRef text) {
  double scale = 1;
  for (auto [suffix, factor] :
       {std::pair<StringRef, double>{"GiB", double(1 << 30)},
        {"GB", 1e9},
        {"MiB", double(1 << 20)}})
    if (text.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value = 0;
  return text.getAsDouble(value) ? -1 : value * scale;
}

struct AutoPlanPass : public mp::impl::MPAutoPlanBase<AutoPlanPass> {
  using MPAutoPlanBase::MPAutoPlanBase;
  void runOnOperation() override;
};

void printLayout(llvm::raw_ostream &os, const Layout &l) {
  os << llvm::format("%10.4g s/step  %7.2f GiB/rank  MFU %5.1f%%  "
                     "micro-batch %lld  ",
                     l.seconds, l.memory / double(1 << 30), 100 * l.mfu,
                     (long long)l.b)
     << l.options() << "\n";
}

void AutoPlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  std::optional<Gpu> cluster = gpuPreset(gpu);
  const double budget = parseBytes(memory);
  // Past a million GPUs the search (every divisor pair) would not end in
  // reasonable time, and no cluster is that large.
  constexpr int64_t kMaxGpus = int64_t(1) << 20;
  if (gpus > kMaxGpus) {
    emitError(module.getLoc()) << "mp-auto-plan gpus=" << std::to_string(gpus)
                               << ": at most " << std::to_string(kMaxGpus);
    return signalPassFailure();
  }
  if (!cluster || gpus < 1 || globalBatch < 1 || !(budget > 0) ||
      !std::isfinite(budget) || top < 1) {
    emitError(module.getLoc())
        << "mp-auto-plan needs gpus=N memory=SIZE (e.g. 80GiB) "
           "gpu=a100|h100|h200 global-batch=B (top=K, K >= 1), got gpus="
        << std::to_string(gpus) << " memory=" << memory << " gpu=" << gpu
        << " global-batch=" << std::to_string(globalBatch)
        << " top=" << std::to_string(top);
    return signalPassFailure();
  }
  // No GPU has less than a mebibyte: a number without a unit is bytes.
  if (budget < double(1 << 20)) {
    emitError(module.getLoc())
        << "mp-auto-plan memory=" << memory
        << " is under 1 MiB per GPU: give a unit (e.g. 80GiB)";
    return signalPassFailure();
  }
  // The plan is of the whole model: a partitioned program's parameters are
  // one rank's shards.
  for (auto param : module.getOps<ParamOp>())
    if (param.getGridAttr()) {
      emitError(module.getLoc())
          << "mp-auto-plan plans an unpartitioned model, but parameter '"
          << param.getSymName() << "' is already split over @"
          << param.getGridAttr().getValue()
          << " (give --mp-auto-plan before --mp-parallelize)";
      return signalPassFailure();
    }
  FailureOr<func::FuncOp> func = getEntryFunction(module);
  if (failed(func))
    return signalPassFailure();
  Model model = measure(module, *func);
  if (model.layers == 0 || model.s == 0 || model.a == 0 || model.h == 0) {
    emitError(module.getLoc()) << "mp-auto-plan needs a transformer with "
                                  "token ids [batch, sequence] (raised: "
                                  "mp.attention and mp.layer)";
    return signalPassFailure();
  }
  std::vector<Layout> all = search(model, *cluster, gpus, globalBatch);
  std::vector<Layout> fits;
  for (const Layout &l : all)
    if (l.memory <= budget)
      fits.push_back(l);
  // Fastest first; of equal times, the smaller memory.
  std::stable_sort(fits.begin(), fits.end(),
                   [](const Layout &x, const Layout &y) {
                     return x.seconds != y.seconds ? x.seconds < y.seconds
                                                   : x.memory < y.memory;
                   });
  llvm::raw_ostream &os = llvm::outs();
  // Nothing to run: an error (after the table, where one is printed), so a
  // script does not go on with no plan.
  auto failNoneFits = [&] {
    os.flush(); // the table, then the error
    if (all.empty()) {
      emitError(module.getLoc()) << "mp-auto-plan: " << noLayoutOf(gpus);
    } else {
      const Layout &least =
          *llvm::min_element(all, [](const Layout &x, const Layout &y) {
            return x.memory < y.memory;
          });
      std::string need;
      llvm::raw_string_ostream(need)
          << llvm::format("%.2f GiB per GPU", least.memory / double(1 << 30));
      emitError(module.getLoc())
          << "mp-auto-plan: no layout of " << std::to_string(gpus)
          << " GPUs fits in " << memory << " (the least memory a layout needs "
          << "is " << need << ", " << least.options()
          << "): give more GPUs or memory";
    }
    signalPassFailure();
  };
  if (bestOnly) {
    if (fits.empty())
      return failNoneFits();
    os << fits.front().options() << "\n";
    if (fits.front().b != model.b0)
      llvm::errs() << "mp-auto-plan: note: the plan's micro-batch is "
                   << fits.front().b << " sequences; pin it with "
                   << "--mp-shape=input_ids=" << fits.front().b << "x"
                   << model.s << "\n";
    return;
  }
  os << llvm::format("mp-auto-plan: %lld layouts of %lld %s GPUs searched, "
                     "%zu fit in %s per GPU; global batch %lld of %lld "
                     "tokens\n",
                     (long long)all.size(), (long long)(int64_t)gpus,
                     cluster->name, fits.size(), memory.c_str(),
                     (long long)(int64_t)globalBatch, (long long)model.s);
  os << llvm::format("model: layers=%lld heads=%lld hidden=%lld vocab=%lld "
                     "parameters=%.4g\n",
                     (long long)model.layers, (long long)model.a,
                     (long long)model.h, (long long)model.vocab,
                     model.allParams);
  for (size_t i = 0; i < fits.size() && i < static_cast<size_t>(top); ++i)
    printLayout(os, fits[i]);
  if (!baseline.empty()) {
    Layout base;
    if (std::string why = parseLayout(baseline, gpus, globalBatch, model, base);
        !why.empty()) {
      emitError(module.getLoc()) << "mp-auto-plan: baseline '" << baseline
                                 << "' is not a layout here: " << why;
      return signalPassFailure();
    }
    price(model, *cluster, globalBatch, base);
    os << "baseline  ";
    printLayout(os, base);
    if (!fits.empty())
      os << llvm::format("best/baseline step time: %.3f\n",
                         fits.front().seconds / base.seconds);
  }
  if (fits.empty())
    failNoneFits();
}

} // namespace
