//===- PipelineSchedule.h - pipeline schedules as data ----------*- C++ -*-===//
//
// A pipeline schedule is, for every rank (stage), the list of what it does in
// one training step: forward and backward of a model chunk on a microbatch,
// and the point-to-point transfers between neighbouring stages (activations
// forward, their gradients backward). The compiler generates and validates
// it; the runtime runs it as written. Plain C++17, shared by both.
//
// The transport a schedule assumes, which the runtime must provide: a send
// is posted and completes in the background (MPI_Isend; NCCL sends grouped
// with the rank's next receive, as Megatron's batched p2p does), a receive
// blocks until its data is there, and messages between two ranks arrive in
// the order they were sent (NCCL has no tags): validate() checks that every
// rank receives from each peer in the order that peer sends.
//
// Stages and chunks follow Megatron: with p stages and v chunks per stage,
// chunk c of rank r is virtual stage c·p + r, so with 8 layers, p=2, v=2,
// rank 0 holds layers [0,1] and [4,5] and rank 1 [2,3] and [6,7].
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_PIPELINESCHEDULE_H
#define MP_SUPPORT_PIPELINESCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mp::pipeline {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

std::optional<ScheduleKind> parseSchedule(std::string_view name);
const char *scheduleName(ScheduleKind kind);

/// The pipeline's dimensions: p stages (ranks), v chunks per stage, m
/// microbatches per step.
struct Dims {
  int64_t stages = 1, chunks = 1, microbatches = 1;
  int64_t virtualStages() const { return stages * chunks; }
  /// "pp=2 vp=1, 1 microbatch", as summaries write the sizes.
  std::string text() const;
  /// The virtual stage of chunk `chunk` on rank `rank`.
  int64_t virtualStage(int64_t rank, int64_t chunk) const {
    return chunk * stages + rank;
  }
};

enum class ActionKind {
  Forward,
  Backward,
  SendActivation, // this chunk's output to the next virtual stage
  RecvActivation, // this chunk's input from the previous one
  SendGradient,   // the gradient of this chunk's input to the previous one
  RecvGradient,   // the gradient of this chunk's output from the next one
};

const char *actionName(ActionKind kind);

struct Action {
  ActionKind kind;
  int64_t chunk;      // on this rank, 0 .. v-1
  int64_t microbatch; // 0 .. m-1
  int64_t peer = -1;  // the other rank of a transfer
  bool operator==(const Action &o) const {
    return kind == o.kind && chunk == o.chunk && microbatch == o.microbatch &&
           peer == o.peer;
  }
};

/// Each rank's actions, in order.
using Schedule = std::vector<std::vector<Action>>;

/// Why `kind` cannot run the pipeline `dims` (empty when it can):
/// interleaving needs two or more chunks and a microbatch count that is a
/// multiple of the stage count (as Megatron's interleaved schedule does);
/// GPipe and 1F1B one chunk. 1F1B with fewer microbatches than stages runs,
/// as Megatron's does (the warm-up is capped at the microbatches). Sizes
/// are bounded (kMaxStages, kMaxChunks, kMaxMicrobatches, and their product
/// kMaxActions), so that action lists fit in memory.
std::string checkDims(ScheduleKind kind, const Dims &dims);
constexpr int64_t kMaxStages = 4096, kMaxChunks = 256,
                  kMaxMicrobatches = 1 << 20, kMaxActions = 1 << 24;

/// The action lists of `kind` (checkDims must have passed): GPipe (every
/// forward, then every backward), 1F1B (rank r runs min(p-r-1, m) forwards,
/// then alternates one forward and one backward), or interleaved 1F1B
/// (warm-up 2(p-r-1) + (v-1)p forwards of chunk-microbatches, capped at
/// m·v, every one when m = p; Megatron's get_pp_rank_microbatches). Each
/// forward is preceded by the receive of its input and followed by the send
/// of its output, and each backward likewise for gradients, except at the
/// first and last virtual stage.
Schedule generate(ScheduleKind kind, const Dims &dims);

/// How long each virtual stage's forward and backward take, and a transfer.
struct Costs {
  std::vector<double> forward, backward; // per virtual stage
  double transfer = 0;
  /// Every virtual stage alike: a whole stage's forward takes 1 and its
  /// backward 2, split evenly over its v chunks.
  static Costs uniform(const Dims &dims, double transfer = 0);
};

/// One action placed in time.
struct TimedAction {
  Action action;
  double start, end;
};

struct Timeline {
  std::vector<std::vector<TimedAction>> ranks;
  double makespan = 0;
  /// The ranks' idle time over their compute, (p·makespan - Σ compute) /
  /// Σ compute: (p-1)/m for 1F1B and GPipe with equal stages, (p-1)/(v·m)
  /// interleaved; unequal stages add their imbalance.
  double bubble = 0;
};

/// Runs `schedule` in simulated time: each rank in order; a send takes no
/// time on its rank (it is posted, non-blocking) and its data arrives
/// `transfer` later; a receive waits for it. Also the deadlock check: when
/// no rank can go on before all are done, `error` says which wait on which
/// and the result is empty.
std::optional<Timeline> simulate(const Schedule &schedule, const Dims &dims,
                                 const Costs &costs, std::string &error);

/// Checks `schedule` before it is written: every rank runs the forward and
/// the backward of each of its chunks on each microbatch exactly once, the
/// forward first; every transfer a stage needs is there, at the right
/// place (an input received before its forward, an output sent after it,
/// likewise for gradients), every receive is matched by one send of the
/// neighbouring stage and the other way round, each rank receives from a
/// peer in the order the peer sends; and it cannot deadlock (simulate).
/// Returns the first problem found, or an empty string.
std::string validate(const Schedule &schedule, const Dims &dims);

/// A line per rank: "F0.3" the forward of chunk 0 on microbatch 3, "B"
/// backward, "sa"/"ra" send/receive activation, "sg"/"rg" gradient, with
/// the peer after '>' or '<' (for lit tests and --mp-report).
std::string describe(const Schedule &schedule);

} // namespace mp::pipeline

#endif // MP_SUPPORT_PIPELINESCHEDULE_H
