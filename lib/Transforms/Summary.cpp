//===- Summary.cpp - one-screen summary of an mp module -------------------===//
#include "ShardInputs.h"
#include "SplitAnalysis.h"
#include "mp/Analysis/Cost.h"
#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/PipelineSchedule.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <optional>

namespace mp {
#define GEN_PASS_DEF_MPSUMMARY
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

/// The named transformer ops (TransformerOp trait) are reported by name;
/// everything else is counted as shape/elementwise glue.
static bool isNamedOp(Operation *op) {
  return op->hasTrait<mp::OpTrait::TransformerOp>();
}

static std::string typeString(Type type) {
  auto t = cast<RankedTensorType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  for (int64_t d : t.getShape())
    os << d << "x";
  os << t.getElementType();
  return s;
}

static std::string byteString(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.1f ", bytes) << units[unit];
  return s;
}

struct OpCounts {
  std::map<std::string, int64_t> named, collectives;
  int64_t other = 0;

  void add(Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "shard")
      ++collectives[op->getName().stripDialect().str() +
                    (op->hasAttr(MPDialect::getNormStatisticsAttrName())
                         ? " (norm statistics)"
                         : "")];
    else if (isNamedOp(op))
      ++named[op->getName().stripDialect().str()];
    else if (!isa<GetParamOp, ConstantOp>(op))
      ++other;
    for (const FusedCollective &fused : fusedCollectives(op))
      ++collectives[fused.kind.str()]; // (its norm named above)
  }
  void print(llvm::raw_ostream &os) const {
    bool first = true;
    for (auto &[name, count] : named) {
      os << (first ? "" : ", ") << count << " " << name;
      first = false;
    }
    if (other)
      os << (first ? "" : " ") << "(+" << other << " shape/elementwise ops)";
    bool firstCollective = true;
    for (auto &[name, count] : collectives) {
      os << (firstCollective ? " | " : ", ") << count << " " << name;
      firstCollective = false;
    }
  }
};

struct SummaryPass : public mp::impl::MPSummaryBase<SummaryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::raw_ostream &os = llvm::outs();
    auto source =
        module->getAttrOfType<StringAttr>(MPDialect::getSourceAttrName());
    auto opset =
        module->getAttrOfType<IntegerAttr>(MPDialect::getOpsetAttrName());
    os << "mp summary";
    if (source)
      os << " of " << source.getValue();
    if (opset)
      os << " (ONNX opset " << opset.getInt() << ")";
    os << "\n";
    for (auto func : module.getOps<func::FuncOp>())
      summarizeFunction(func, os);
    summarizeParams(module, os);

    std::map<int64_t, OpCounts> layers;
    OpCounts outside;
    module.walk([&](Operation *op) {
      bool shardOp = op->getDialect() &&
                     op->getDialect()->getNamespace() == "shard" &&
                     op->getNumResults() > 0;
      if ((op->getDialect() != getContext().getLoadedDialect<MPDialect>() &&
           !shardOp) ||
          isa<ParamOp>(op))
        return;
      if (auto layer =
              op->getAttrOfType<IntegerAttr>(MPDialect::getLayerAttrName()))
        layers[layer.getInt()].add(op);
      else
        outside.add(op);
    });
    os << "  layers      " << layers.size() << " transformer layer"
       << (layers.size() == 1 ? "" : "s") << "\n";
    for (auto &[layer, counts] : layers) {
      os << llvm::format("  layer %-5d ", static_cast<int>(layer));
      counts.print(os);
      os << "\n";
    }
    os << "  outside     ";
    outside.print(os);
    os << "\n";
    summarizeReplicated(module, os);
    summarizePipeline(module, os);
    os.flush();
  }

  /// The pipeline plan (mp-pipeline): each chunk's layers, rank and cost,
  /// and the bubble of the schedule run on those costs (a backward twice
  /// its forward, transfers free).
  void summarizePipeline(ModuleOp module, llvm::raw_ostream &os) {
    auto plan =
        module->getAttrOfType<DictionaryAttr>(MPDialect::getPipelineAttrName());
    if (!plan)
      return;
    auto get = [&](StringRef key) {
      auto attr = plan.getAs<IntegerAttr>(key);
      return attr ? attr.getInt() : 1;
    };
    auto text = [&](StringRef key) {
      auto attr = plan.getAs<StringAttr>(key);
      return attr ? attr.getValue() : StringRef();
    };
    pipeline::Dims dims{get("pp"), get("vp"), get("microbatches")};
    std::optional<pipeline::ScheduleKind> kind =
        pipeline::parseSchedule(text("schedule"));
    SmallVector<StringRef> layout;
    text("layout").split(layout, '|');
    if (!kind || !pipeline::checkDims(*kind, dims).empty() ||
        static_cast<int64_t>(layout.size()) != dims.virtualStages()) {
      os << "  pipeline    (an invalid mp.pipeline plan)\n";
      return;
    }
    std::vector<ChunkCost> chunks = chunkCosts(module, dims.virtualStages());
    auto flops = [](const ChunkCost &c) {
      return c.forward.flops + c.backward.flops;
    };
    auto bytes = [](const ChunkCost &c) {
      return c.forward.bytes + c.backward.bytes;
    };
    double total = 0;
    for (const ChunkCost &c : chunks)
      total += flops(c);
    std::string error;
    std::optional<pipeline::Timeline> timeline = pipeline::simulate(
        pipeline::generate(*kind, dims), dims, plannedCosts(chunks), error);
    os << "  pipeline    " << dims.text() << ", " << text("schedule")
       << ", layout " << text("layout");
    if (timeline)
      os << llvm::format("; planned bubble %.1f%%", 100 * timeline->bubble);
    os << "\n";
    int64_t layer = 0;
    for (int64_t k = 0; k < dims.virtualStages(); ++k) {
      // "E t0 t1": the layout's letters with the layers numbered.
      std::string units;
      for (char c : layout[k])
        units += (units.empty() ? "" : " ") +
                 (c == 't' ? "t" + std::to_string(layer++) : std::string(1, c));
      os << llvm::format("  chunk %-5d ", static_cast<int>(k)) << "rank "
         << k % dims.stages << ": " << units
         << llvm::format(", %.3g GFLOP (%.0f%%), ", flops(chunks[k]) / 1e9,
                         total > 0 ? 100 * flops(chunks[k]) / total : 0.0)
         << byteString(bytes(chunks[k])) << " moved\n";
    }
  }

  /// The linears tensor parallelism left whole (mp.replicated), each with
  /// why: less parallelism than asked is never silent. The block linears
  /// first, then those outside the repeated layers.
  void summarizeReplicated(ModuleOp module, llvm::raw_ostream &os) {
    SmallVector<Operation *> block, outside;
    module.walk([&](Operation *op) {
      if (op->hasAttr(MPDialect::getReplicatedAttrName()))
        (op->hasAttr(MPDialect::getLayerAttrName()) ? block : outside)
            .push_back(op);
    });
    bool blockLinears = llvm::all_of(block, llvm::IsaPred<LinearOp>);
    bool outsideLinears = llvm::all_of(outside, llvm::IsaPred<LinearOp>);
    listReplicated(block, blockLinears ? "block linear" : "block op",
                   blockLinears ? "block linears" : "block ops", os);
    listReplicated(outside,
                   outsideLinears ? "linear outside the layers"
                                  : "op outside the layers",
                   outsideLinears ? "linears outside the layers"
                                  : "ops outside the layers",
                   os);
  }

  void listReplicated(ArrayRef<Operation *> whole, StringRef one,
                      StringRef many, llvm::raw_ostream &os) {
    if (whole.empty())
      return;
    os << "  replicated  " << whole.size() << " "
       << (whole.size() == 1 ? one : many)
       << " left whole by tensor parallelism:\n";
    constexpr size_t kShown = 8;
    for (Operation *op : whole.take_front(kShown)) {
      os << "    ";
      auto linear = dyn_cast<LinearOp>(op);
      GetParamOp weight = linear
                              ? MemoryPlan::viewedParameter(linear.getWeight())
                              : GetParamOp();
      if (weight) {
        os << "@" << weight.getName() << ": ";
      } else {
        if (auto name = dyn_cast<NameLoc>(op->getLoc()))
          os << name.getName() << " ";
        os << "('" << op->getName() << "'): ";
      }
      os << op->getAttrOfType<StringAttr>(MPDialect::getReplicatedAttrName())
                .getValue()
         << "\n";
    }
    if (whole.size() > kShown)
      os << "    ... and " << whole.size() - kShown << " more\n";
  }

  void summarizeFunction(func::FuncOp func, llvm::raw_ostream &os) {
    auto describe = [&](StringRef label, TypeRange types,
                        llvm::function_ref<StringAttr(unsigned)> name) {
      os << "  " << label;
      for (auto [i, type] : llvm::enumerate(types)) {
        StringAttr n = name(i);
        os << (i ? ", " : "") << (n ? n.getValue() : "#" + std::to_string(i))
           << ": " << typeString(type);
      }
      os << "\n";
    };
    describe("inputs      ", func.getArgumentTypes(), [&](unsigned i) {
      return func.getArgAttrOfType<StringAttr>(i, MPDialect::getNameAttrName());
    });
    describe("outputs     ", func.getResultTypes(), [&](unsigned i) {
      return func.getResultAttrOfType<StringAttr>(i,
                                                  MPDialect::getNameAttrName());
    });
    // Inputs tensor parallelism reads as each rank's block (a decoder's
    // cache, by heads; mp-shard-inputs then hands out only the blocks).
    std::string sliced;
    SymbolTableCollection symbols;
    for (BlockArgument arg : func.getArguments()) {
      std::optional<int64_t> axis = slicedInputAxis(arg, symbols);
      auto name = func.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), MPDialect::getNameAttrName());
      if (axis)
        sliced +=
            (sliced.empty() ? "" : ", ") +
            (name ? name.str() : "#" + std::to_string(arg.getArgNumber())) +
            " along dim " + std::to_string(*axis);
    }
    if (!sliced.empty())
      os << "  split in    " << sliced << " (each rank reads its block)\n";
  }

  /// A train step's memory per rank beyond its arena, as mp-run --train
  /// holds it: the parameters, one fp32 gradient bucket, and the fp32
  /// master weights and two AdamW moments (12 bytes per parameter), sharded
  /// over the data-parallel replicas under ZeRO-1 (Megatron's 6 + 12/d for
  /// bf16 parameters).
  void summarizeOptimizer(ModuleOp module, double values, double paramBytes,
                          llvm::raw_ostream &os) {
    FailureOr<func::FuncOp> func = getEntryFunction(module);
    if (failed(func) ||
        !(*func)->hasAttr(MPDialect::getForwardArenaBytesAttrName()) ||
        values <= 0)
      return;
    auto attr = [&](StringRef name) {
      auto a = module->getAttrOfType<IntegerAttr>(name);
      return a ? a.getInt() : 0;
    };
    const int64_t dp =
        std::max<int64_t>(attr(MPDialect::getDataParallelAttrName()), 1);
    const bool zero = attr(MPDialect::getZeroAttrName()) == 1;
    const double perParam = paramBytes / values;
    const double state = zero ? 12.0 / dp : 12.0;
    const double total = perParam + 4 + state;
    os << llvm::format("  optimizer   %.4g bytes per parameter per rank "
                       "(parameters %.4g + fp32 gradients 4 + fp32 master "
                       "weights and moments ",
                       total, perParam);
    if (zero)
      os << "12/" << dp << ", ZeRO-1 over dp=" << dp;
    else
      os << "12" << (dp > 1 ? ", dp=" + std::to_string(dp) : std::string());
    os << "): " << byteString(total * values) << " per rank\n";
  }

  void summarizeParams(ModuleOp module, llvm::raw_ostream &os) {
    int64_t count = 0, values = 0;
    double bytes = 0, localBytes = 0, localValues = 0;
    bool shapeOnly = false, sharded = false;
    SymbolTableCollection symbols;
    auto sizeOf = [](RankedTensorType t) {
      return static_cast<double>(t.getNumElements()) *
             ((t.getElementTypeBitWidth() + 7) / 8);
    };
    for (auto param : module.getOps<ParamOp>()) {
      RankedTensorType type = param.getTensorType();
      ++count;
      values += type.getNumElements();
      bytes += sizeOf(type);
      FailureOr<RankedTensorType> local = param.getLocalType(symbols, false);
      localBytes += sizeOf(succeeded(local) ? *local : type);
      localValues += (succeeded(local) ? *local : type).getNumElements();
      sharded |= param.getGrid().has_value();
      shapeOnly |= !param.hasData();
    }
    os << "  parameters  " << count << " tensors, " << values << " values, "
       << byteString(bytes);
    if (sharded)
      os << "; " << byteString(localBytes) << " per rank";
    os << (shapeOnly ? " (shapes only)" : "") << "\n";
    summarizeOptimizer(module, localValues, localBytes, os);
    for (auto param : module.getOps<ParamOp>())
      if (auto copies = param->getAttrOfType<ArrayAttr>(
              MPDialect::getTiedCopiesAttrName()))
        for (Attribute copy : copies)
          os << "  tied        @" << param.getSymName()
             << " read transposed in place of '"
             << cast<StringAttr>(copy).getValue()
             << "', the copy constant folding made of it\n";
    // (The parts of a cut parameter carry its copies: said once, by it.)
    llvm::StringSet<> equalCopiesSaid;
    for (auto param : module.getOps<ParamOp>()) {
      StringRef name = param.getPartOf().value_or(param.getSymName());
      auto copies =
          param->getAttrOfType<ArrayAttr>(MPDialect::getEqualCopiesAttrName());
      if (!copies || !equalCopiesSaid.insert(name).second)
        continue;
      for (Attribute copy : copies)
        os << "  tied        @" << name << " read in place of '"
           << cast<StringAttr>(copy).getValue()
           << "', an equal copy constant folding made for another call of "
              "its module\n";
    }
    if (auto scalars = module->getAttrOfType<ArrayAttr>(
            MPDialect::getScalarConstantsAttrName())) {
      os << "  constants   " << scalars.size()
         << " one-element initializer(s) read as constants, not trained:";
      for (Attribute a : scalars)
        os << " " << cast<StringAttr>(a).getValue();
      os << "\n";
    }
    // Frozen by the user (mp-freeze): by the parameter the user wrote where
    // all of its parts are, else by part.
    llvm::StringMap<int64_t> partsLeft;
    for (auto param : module.getOps<ParamOp>())
      if (auto whole = param.getPartOf();
          whole && !param->hasAttr(MPDialect::getFrozenAttrName()))
        ++partsLeft[*whole];
    llvm::SetVector<StringRef> frozen;
    for (auto param : module.getOps<ParamOp>())
      if (param->hasAttr(MPDialect::getFrozenAttrName())) {
        auto whole = param.getPartOf();
        frozen.insert(whole && !partsLeft.count(*whole) ? *whole
                                                        : param.getSymName());
      }
    if (!frozen.empty()) {
      os << "  frozen      " << frozen.size() << " not trained (mp-freeze):";
      for (StringRef name : frozen)
        os << " @" << name;
      os << "\n";
    }
    // Fused linears tensor parallelism cut, by the parameter the user wrote.
    llvm::MapVector<StringRef, SmallVector<StringRef>> cuts;
    for (auto param : module.getOps<ParamOp>()) {
      auto whole = param.getPartOf();
      if (!whole)
        continue;
      // A part running past the end is the whole, padded.
      int64_t axis = (*param.getPart())[0], size = (*param.getPart())[2];
      int64_t padded = param.getTensorType().getDimSize(axis);
      if (padded > size) {
        os << "  padded      @" << *whole << " from " << size << " to "
           << padded << " along dim " << axis
           << " with zeros (a vocabulary that divides by the tensor-parallel "
              "size), as @"
           << param.getSymName() << "\n";
        continue;
      }
      cuts[*whole].push_back(param.getSymName());
    }
    for (auto &[whole, parts] : cuts) {
      // (Tensor parallelism cuts 2-D weights; mp-raise unstacks stacked
      // experts' weights, of 3 dims or more, into an expert each.)
      auto part = module.lookupSymbol<ParamOp>(parts.front());
      bool experts = part && part.getTensorType().getRank() >= 3;
      os << "  cut         @" << whole << " into " << parts.size()
         << (experts ? " experts (stacked experts' weights: a linear per "
                       "expert):"
                     : " parts (a fused linear whose parts split "
                       "differently):");
      for (StringRef part : parts)
        os << " @" << part;
      os << "\n";
    }
  }
};

} // namespace
