//===- Cost.h - the work and traffic of ops ---------------------*- C++ -*-===//
//
// A cost model for decisions that compare parts of a program (pipeline
// stages, the report): each op's FLOPs (CostOpInterface for contractions and
// attention, one per result element for other float ops) and the bytes it
// reads and writes, and a time from both on a machine given by its peak
// FLOP/s and memory bandwidth.
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_COST_H
#define MP_ANALYSIS_COST_H

#include "mp/Support/PipelineSchedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <vector>

namespace mp {

/// The machine a cost is timed on.
struct Machine {
  double peakFlops, bandwidth; // FLOP/s, bytes/s
  /// An H100 SXM: dense bf16 peak and HBM3 bandwidth (balancing needs only
  /// their ratio).
  static Machine h100() { return {989e12, 3.35e12}; }
};

/// A GPU of the report's and the planner's presets: dense 16-bit peak
/// FLOP/s, memory bandwidth, tensor-parallel link (NVLink) and network
/// bandwidths between nodes (bytes/s, one direction; a 200 Gb/s port per
/// A100, 400 Gb/s per H100/H200).
struct Gpu {
  const char *name;
  double peakFlops, memoryBandwidth, linkBandwidth, networkBandwidth;
  Machine machine() const { return {peakFlops, memoryBandwidth}; }
};
/// "a100", "h100" or "h200"; none for another name.
std::optional<Gpu> gpuPreset(llvm::StringRef name);

struct Cost {
  double flops = 0, bytes = 0;
  Cost &operator+=(const Cost &o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
  /// Seconds on a machine of `peakFlops` FLOP/s and `bandwidth` bytes/s,
  /// work and traffic not overlapped (a bound, and what balancing needs).
  double seconds(const Machine &m) const {
    return flops / m.peakFlops + bytes / m.bandwidth;
  }
};

/// One run of `op`. Parameter reads and constants cost nothing of their
/// own (their readers count the bytes); shape ops move their bytes.
Cost costOf(mlir::Operation *op);

/// A pipeline chunk's cost: its ops carrying mp.stage (mp-pipeline), the
/// forward's and the backward's (mp.backward, from mp-autodiff).
struct ChunkCost {
  Cost forward, backward;
};
std::vector<ChunkCost> chunkCosts(mlir::ModuleOp module, int64_t chunks);

/// The planned times, in milliseconds on an H100, of a schedule over those
/// chunks, transfers free; a program without its backward (inference) is
/// given one twice its forward.
pipeline::Costs plannedCosts(const std::vector<ChunkCost> &chunks);

} // namespace mp

#endif // MP_ANALYSIS_COST_H
