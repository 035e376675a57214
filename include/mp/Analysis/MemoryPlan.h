//===- MemoryPlan.h - the static arena plan of a program --------*- C++ -*-===//
//
// Every value a program computes lives in one arena at an offset fixed at
// compile time: the runtime allocates once and never during a run. The plan
// is a list of live ranges (a value's bytes are needed from the position that
// defines it to its last use) placed first-fit, so that values whose ranges
// do not overlap share bytes.
//
// Live ranges are positions in a schedule, not in one block: the plan of a
// train step (forward then backward in one function) keeps activations live
// across into the backward by their uses there; a value recomputed in the
// backward is another value with its own range; several microbatches in
// flight are several ranges per value, one per microbatch instance, built
// from the pipeline schedule. placeFirstFit only sees ranges.
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_MEMORYPLAN_H
#define MP_ANALYSIS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace mp {

class GetParamOp;

/// A buffer needed over positions [start, end] (inclusive) of a schedule.
struct LiveRange {
  int64_t size = 0;
  int64_t start = 0;
  int64_t end = 0;
};

struct ArenaPlacement {
  std::vector<int64_t> offsets; // one per range, in the ranges' order
  int64_t peak = 0;             // bytes the arena needs
  int64_t unplanned = 0;        // bytes without any reuse
};

/// Places ranges in order of start (ties in the given order), each at the
/// lowest offset that overlaps no range still live (first fit); sizes are
/// rounded up to `alignment`.
ArenaPlacement placeFirstFit(const std::vector<LiveRange> &ranges,
                             int64_t alignment);

/// The arena plan of a function's (single-block) body, in program order:
/// arguments are live from before the first op, results returned until the
/// end. Parameters and constants have storage of their own; a value that is
/// a view of an arena value (a reshape, or an inference dropout) shares its
/// bytes, and so does a result an op may write over an operand
/// (InPlaceOpInterface) when nothing reads that operand after the op.
class MemoryPlan {
public:
  static constexpr int64_t kAlignment = 64;

  struct Buffer {
    mlir::Value value; // the value that owns the bytes
    LiveRange range;
    int64_t offset = 0;
  };

  /// Computes the plan (fails with a diagnostic on a body it cannot plan).
  static mlir::FailureOr<MemoryPlan> compute(mlir::func::FuncOp func);

  /// The value whose bytes `op`'s result is, when `op` only reinterprets
  /// them: a view (ViewLikeOpInterface: reshape), or a dropout, which is the
  /// identity in inference. (A train step's plan must not alias dropout.)
  static mlir::Value viewSource(mlir::Operation *op);

  /// The parameter `v` reads: its mp.get_param, through any reshapes (a
  /// view of its bytes in another shape); null for anything else.
  static GetParamOp viewedParameter(mlir::Value v);
  /// Whether `op` is a view of a parameter: a reshape of an mp.get_param,
  /// or of such a view. It has no arena storage (isParameterView).
  static bool viewsParameter(mlir::Operation *op);

  /// Whether `v` lives in the arena (not a parameter or constant).
  bool inArena(mlir::Value v) const { return bufferOf.count(v); }
  /// `v`'s arena offset (a view's is its source's); `v` must be in the arena.
  int64_t offset(mlir::Value v) const {
    return buffers[bufferOf.lookup(v)].offset;
  }
  /// Whether `v` is a view of a parameter (a reshape of its mp.get_param,
  /// an einsum's or a pointwise convolution's weight viewed 2-D): the
  /// parameter's bytes, outside the arena.
  bool isParameterView(mlir::Value v) const {
    return parameterViews.contains(v);
  }
  /// Whether `v` is a view sharing another value's bytes.
  bool isView(mlir::Value v) const {
    return inArena(v) && buffers[bufferOf.lookup(v)].value != v &&
           !inPlaceOf.count(v);
  }
  /// The operand whose bytes `v`, a result written in place
  /// (InPlaceOpInterface), took; null for other values.
  mlir::Value inPlaceOperand(mlir::Value v) const {
    return inPlaceOf.lookup(v);
  }
  const std::vector<Buffer> &getBuffers() const { return buffers; }
  int64_t peakBytes() const { return peak; }
  int64_t unplannedBytes() const { return unplanned; }

  /// Records the plan on the function: `mp.arena_bytes` on it,
  /// `mp.arena_offset` on each argument, `mp.arena_offsets` (one per result)
  /// on each op whose results live in the arena.
  void attach(mlir::func::FuncOp func) const;
  /// Whether `func` carries a plan (attach ran).
  static bool isAttached(mlir::func::FuncOp func);
  /// Fails, with an error on the first function of `module` that carries a
  /// plan, for `pass`, which must run before mp-plan-memory (a plan would
  /// no longer fit the program it changes).
  static mlir::LogicalResult refuseIfPlanned(mlir::ModuleOp module,
                                             llvm::StringRef pass);
  /// The plan recorded on `func`, checked against its values (sizes, live
  /// ranges that would overlap): a hand-edited plan that would corrupt data
  /// is an error.
  static mlir::FailureOr<MemoryPlan> read(mlir::func::FuncOp func);

private:
  /// An op's result that may take an operand's bytes, at the op's position.
  struct InPlaceCandidate {
    int64_t position;
    mlir::Value result, operand;
    mlir::Operation *op;
  };

  mlir::LogicalResult collect(mlir::func::FuncOp func);
  /// Whether every result's recorded offset is its bytes' owner's: a view's
  /// or an in-place result's edited apart from its operand is an error.
  mlir::LogicalResult checkSharedOffsets(mlir::func::FuncOp func) const;
  /// Gives each candidate's result its operand's bytes where the op is the
  /// operand's last reader (the ranges are complete by then).
  void placeInPlace(llvm::ArrayRef<InPlaceCandidate> candidates);

  std::vector<Buffer> buffers;
  llvm::DenseMap<mlir::Value, size_t> bufferOf; // value -> its bytes' owner
  llvm::DenseMap<mlir::Value, mlir::Value> inPlaceOf; // result -> operand
  llvm::DenseSet<mlir::Value> parameterViews;         // (viewsParameter)
  int64_t peak = 0, unplanned = 0;
};

/// Bytes of a tensor value (i1 as one byte per element).
int64_t storageBytes(mlir::Type type);

} // namespace mp

#endif // MP_ANALYSIS_MEMORYPLAN_H
