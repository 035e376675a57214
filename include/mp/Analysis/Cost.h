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

#include "mlir/IR/Operation.h"

namespace mp {

struct Cost {
  double flops = 0, bytes = 0;
  Cost &operator+=(const Cost &o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
  /// Seconds on a machine of `peakFlops` FLOP/s and `bandwidth` bytes/s,
  /// work and traffic not overlapped (a bound, and what balancing needs).
  double seconds(double peakFlops, double bandwidth) const {
    return flops / peakFlops + bytes / bandwidth;
  }
};

/// One run of `op`. Parameter reads and constants cost nothing of their
/// own (their readers count the bytes); shape ops move their bytes.
Cost costOf(mlir::Operation *op);

} // namespace mp

#endif // MP_ANALYSIS_COST_H
