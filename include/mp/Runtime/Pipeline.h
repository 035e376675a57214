//===- Pipeline.h - one stage of a pipeline artifact, ready to run --*- C++
//-*-===//
//
// A pipeline artifact (mp-opt ... pp=N --artifact DIR) is a program per
// chunk function and the action list each stage runs in one step
// (mp/Support/PipelineSchedule.h). A rank loads its stage: the forward (and
// backward) of each of its chunks, with one copy of their parameters, and
// runs its actions on a step's micro-batches: point-to-point transfers
// posted without waiting (a schedule's contract), what each chunk's
// forward keeps for its backward copied aside per micro-batch, the
// program's results combined over the micro-batches.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_PIPELINE_H
#define MP_RUNTIME_PIPELINE_H

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"
#include "mp/Support/PipelineSchedule.h"

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mp::rt {

/// Whether `dir` holds a pipeline artifact (pipeline.pb).
bool isPipelineArtifact(const std::string &dir);

class PipelineStage {
public:
  /// Loads this rank's stage of the pipeline artifact `dir`. Ranks are laid
  /// out [stage][replica][grid rank]; `world` spans them all. Every rank
  /// calls it; an error on one is an error on all.
  static Status load(const std::string &dir, Communicator &world, Device device,
                     std::unique_ptr<PipelineStage> &out);

  const pipeline::Dims &dims() const { return shape; }
  int64_t stage() const { return stageId; }
  int64_t ranks() const { return totalRanks; }
  bool training() const { return train; }
  const std::string &scheduleName() const { return schedule; }
  /// The program's inputs and results, one micro-batch's.
  const std::vector<IOSpec> &inputs() const { return inputSpecs; }
  const std::vector<IOSpec> &outputs() const { return outputSpecs; }

  /// Runs one step: the schedule over `microbatches[m]` (the inputs of
  /// micro-batch m, in the order of inputs()). Afterwards result(i) is
  /// result i combined over the micro-batches where this stage computes
  /// it: a scalar (a loss) averaged, a gradient averaged (the gradient of
  /// the mean loss; a tied parameter's terms summed over its stages
  /// first), anything else concatenated along its first axis.
  Status run(const std::vector<std::vector<Tensor>> &microbatches);
  /// Result i of the last run on this stage (null where it is not).
  const HostBuffer *result(size_t i) const;
  /// The output spec of result i as the function computing it has it (its
  /// sharding over the grid).
  const IOSpec *resultSpec(size_t i) const;

  /// This stage's parameters, one entry per name: the tensors of every
  /// chunk program holding it (a backward shares its forward's).
  struct Parameter {
    std::string name;
    std::vector<Tensor> copies;
    Executable *owner; // the first forward holding it
    const Executable::Parameter *info;
    /// Stages holding it (a tied embedding: the first and the last);
    /// this stage counts it in a global norm when it is the first.
    std::vector<int64_t> stages;
  };
  const std::vector<Parameter> &parameters() const { return params; }
  /// The executable of chunk `chunk` (on this stage), forward or backward.
  Executable &function(int64_t chunk, bool backward) const;
  /// The stage's tensor-parallel group and data-parallel peers (as a
  /// plain artifact's), and the ranks at this position of every stage.
  Communicator &gridComm() const { return firstForward().gridComm(); }
  Communicator *dataParallelComm() const {
    return firstForward().dataParallelComm();
  }
  Communicator &pipelineComm() const { return *pipeComm; }

  /// Every stage's action list.
  const pipeline::Schedule &actionLists() const { return actions; }
  /// The random state of the next runs: micro-batch m of step `step` draws
  /// its dropout masks from (seed, step · microbatches + m).
  void setRandomState(uint64_t seed, uint64_t step) {
    rngSeed = seed;
    rngStep = step;
  }
  /// What the last run did when: each action, on a clock all ranks of a
  /// host share (seconds).
  const std::vector<pipeline::TimedAction> &lastTimeline() const {
    return timeline;
  }
  /// The most micro-batches whose stashed values this rank held at once in
  /// the last run, and their bytes; the plan's bytes of one micro-batch.
  int64_t stashPeakMicrobatches() const { return peakStashed; }
  int64_t stashPeakBytes() const { return peakStashBytes; }
  int64_t plannedStashBytes(int64_t chunk) const;
  /// The peak the plan predicts for this stage: its action list walked
  /// with each chunk's planned bytes kept from its forward to its backward.
  int64_t plannedStashPeak() const;

  ~PipelineStage();

private:
  PipelineStage() = default;
  Executable &firstForward() const { return *chunks.front().forward; }
  Status loadChunks(const std::string &dir, Communicator &world, Device device);
  Status bindChunk(size_t c);
  Status runAction(const pipeline::Action &a,
                   const std::vector<std::vector<Tensor>> &microbatches);
  Status runForward(int64_t c, int64_t m,
                    const std::vector<std::vector<Tensor>> &microbatches);
  Status runBackward(int64_t c, int64_t m,
                     const std::vector<std::vector<Tensor>> &microbatches);
  /// Micro-batch m's dropout stream: (seed, step * microbatches + m).
  void seedMicrobatch(Executable &exe, int64_t m) const;
  Status accumulate(size_t output, const Tensor &value, int64_t microbatch,
                    bool gradient);
  Status finishResults();
  Status sumTiedGradients();

  /// Where a chunk function's input comes from and its outputs go.
  struct Port {
    enum Kind { Input, Transfer, Stash, Output } kind;
    int64_t index; // input/output index, position in the transfer, stash id
  };
  struct Chunk {
    std::unique_ptr<Executable> forward, backward;
    std::vector<Port> forwardIn, forwardOut, backwardIn, backwardOut;
    /// Bytes of the activations it receives and sends, and of the
    /// gradients, packed in the order of their ids.
    std::vector<int64_t> actInOffsets, actOutOffsets, gradInOffsets,
        gradOutOffsets;
    int64_t actInBytes = 0, actOutBytes = 0, gradInBytes = 0, gradOutBytes = 0;
  };

  pipeline::Dims shape;
  pipeline::Schedule actions; // [stage]
  std::string schedule;
  int64_t stageId = 0, totalRanks = 1;
  bool train = false;
  std::vector<IOSpec> inputSpecs, outputSpecs;
  std::vector<int64_t> stashBytes; // planned, per virtual stage
  std::vector<Chunk> chunks;       // this stage's, by local chunk
  std::vector<Parameter> params;
  std::map<std::string, std::vector<int64_t>> tiedStages;
  std::map<std::vector<int64_t>, std::unique_ptr<Communicator>> tiedComms;
  std::unique_ptr<Communicator> stageComm, pipeComm;

  // One step's state.
  std::map<std::pair<int64_t, int64_t>, std::vector<uint8_t>> received, toSend;
  std::map<std::pair<int64_t, int64_t>, std::vector<std::vector<uint8_t>>>
      stash;
  /// Sent buffers, until their sends complete: the communicator's send
  /// `firstPosted` is posted.front().
  std::deque<std::vector<uint8_t>> posted;
  int64_t firstPosted = 0;
  std::vector<HostBuffer> results;
  std::vector<bool> resultHere, resultIsGradient;
  std::vector<const IOSpec *> resultSpecs;
  std::vector<std::vector<float>> sums; // gradients and scalars, in fp32
  std::vector<pipeline::TimedAction> timeline;
  int64_t stashedBytesNow = 0, peakStashBytes = 0, peakStashed = 0;
  uint64_t rngSeed = 0, rngStep = 0;
};

} // namespace mp::rt

#endif // MP_RUNTIME_PIPELINE_H
