//===- TrainState.h - the training loop's state ---------------------*- C++
//-*-===//
//
// Shared by the training loop (Train.cpp) and checkpoints (Checkpoint.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MP_TOOLS_MP_RUN_TRAINSTATE_H
#define MP_TOOLS_MP_RUN_TRAINSTATE_H

#include "Run.h"
#include "Train.h"

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/HostMemory.h"
#include "mp/Runtime/Npy.h"

#include <memory>
#include <string>
#include <vector>

namespace mprun {

using mp::rt::DType;
using mp::rt::Executable;
using mp::rt::HostBuffer;
using mp::rt::IOSpec;
using mp::rt::Tensor;

/// One parameter being trained: this rank's shard, at `offset` of the
/// optimizer's flat vectors; split over the grid as its gradient output
/// says (`shardAxis` -1: replicated).
struct Slot {
  std::string name;
  Tensor param;     // in the executable's device memory
  size_t gradIndex; // among the outputs
  bool sharded;     // else replicated: counted once in the norm
  bool decays;      // weight decay applies (2+ dims)
  bool frozen;      // the loss does not read it: no update, no decay (as
                    // torch.optim skips parameters without a gradient)
  int64_t shardAxis = -1, shardGroups = 1;
  int64_t offset = 0;
  /// A part of the parameter the user wrote (Executable::Parameter).
  std::string partOf;
  int64_t partAxis = 0, partStart = 0, partWhole = 0;
  /// More tensors holding the same parameter on this rank (a pipeline
  /// stage's chunks both reading it): updated alike.
  std::vector<Tensor> copies;
  /// Counted in the global norm here (a parameter several pipeline stages
  /// hold counts on the first).
  bool normHere = true;
};

/// Whom a rank reduces its gradients with, and where its parameters live.
struct TrainLayout {
  Executable *exe = nullptr;        // downloads and uploads (its device memory)
  Communicator *grid = nullptr;     // the tensor-parallel group
  Communicator *data = nullptr;     // data-parallel peers (null: one replica)
  Communicator *pipeline = nullptr; // the other stages (null: one stage)
  int64_t replicas = 1;
  bool zero = false; // ZeRO-1: the optimizer state sharded over `data`
  /// This rank's pipeline stage, of `stages` (checkpoints keep a file per
  /// stage and grid rank).
  int64_t stage = 0, stages = 1;
  /// Rows of the token file one step reads (batch x micro-batches x
  /// replicas): a resumed run must read alike.
  int64_t rowsPerStep = 0;
  /// Whether training started from --mp-synthetic-weights' random values
  /// (this run's artifact, or the checkpoint it resumed): saved in the
  /// manifest, so that an export says so.
  bool syntheticStart = false;
  /// The groups of `exe`'s program, as host-memory communicators: its own,
  /// or on a GPU (whose program communicates over NCCL, in device memory)
  /// the same ranks split from `world` (MPI) into hostGrid and hostData.
  /// Collective over `world`.
  static TrainLayout of(Executable &exe, Communicator &world);
  std::unique_ptr<Communicator> hostGrid, hostData;
};

/// Runs one train step on a batch (every input of the step in its order:
/// token ids, labels and any others, the whole batch of this replica):
/// sets `loss` (the mean over it) and `gradient(slot)` to each slot's
/// gradient (the parameter's dtype, valid until the next step).
class StepRunner {
public:
  virtual ~StepRunner() = default;
  virtual Status run(std::vector<HostBuffer> &batch, int64_t seed, int64_t step,
                     double &loss) = 0;
  virtual const void *gradient(const Slot &slot) = 0;
};

/// The training loop: `options.steps` steps of `runner` over the token
/// file, each replica taking its `batch` rows, the optimizer updating
/// `slots`; `exe` writes and reads checkpoints (null: none). Every rank
/// calls it; returns the process's exit code.
int trainLoop(const TrainOptions &options, bool quiet, TrainLayout &layout,
              std::vector<Slot> &slots, StepRunner &runner,
              const std::vector<IOSpec> &stepInputs, size_t idsInput,
              size_t labelsInput, Communicator &world);

/// The optimizer's state: every parameter value of this rank in one flat
/// fp32 vector (slot order), which data parallelism reduces in one
/// collective and ZeRO-1 shards. This rank updates [begin, end): all of
/// them, or its replica's shard.
struct Flat {
  int64_t total = 0, padded = 0, begin = 0, end = 0;
  mp::rt::HostVector<float> grad;  // [padded]: this rank's, then reduced
  std::vector<float> master, m, v; // [end - begin]: fp32 weights, moments
};

/// The whole of a state vector this rank holds [begin, end) of (ZeRO-1:
/// gathered from the replicas; else a copy).
Status wholeOf(const TrainLayout &layout, const Flat &flat,
               const std::vector<float> &mine, std::vector<float> &whole);
/// Element `i` of float data of `dtype` (f32, bf16, f16) as a float.
float toFloat(const void *data, DType dtype, int64_t i);
/// `n` floats as little-endian values of `dtype`.
void fromFloats(const float *values, int64_t n, DType dtype,
                std::vector<uint8_t> &out);
/// Writes every parameter back from the whole master weights `weights`
/// ([padded]), in its own dtype.
Status uploadWeights(Executable &exe, const std::vector<Slot> &slots,
                     const std::vector<float> &weights);

/// Writes a checkpoint of step `step` into `dir`: every parameter, its fp32
/// master weights and AdamW moments (gathered from the replicas' shards
/// under ZeRO-1), one safetensors file per grid rank (and pipeline stage:
/// stage<S>.rank<R>.safetensors; a tied parameter in its first stage's) and
/// a manifest naming the layout, the step and the optimizer. Written into
/// `dir.tmp`, flushed, and swapped into place once every rank has written:
/// a crash at any moment leaves the previous checkpoint whole. Every rank
/// calls it.
void saveCheckpoint(const std::string &dir, Communicator &world,
                    const TrainLayout &layout, const std::vector<Slot> &slots,
                    Flat &flat, int64_t step, int64_t seed,
                    const TrainOptions &options);
/// Whether a checkpoint can be written at `dir` (its parent is a writable
/// directory; `dir`, if it exists, a directory): checked before training,
/// so that a bad --save is not found after the last step.
Status checkSaveDirectory(const std::string &dir);

/// Reads the checkpoint `dir` into this rank's state (any layout: sharded
/// parameters are reassembled and split as this program splits them, from
/// whichever stage's files hold them); `step` is the step it was saved at
/// and `seed` its random seed. Every rank calls it.
Status loadCheckpoint(const std::string &dir, TrainLayout &layout,
                      const std::vector<Slot> &slots, Flat &flat, int64_t &step,
                      int64_t &seed, bool sgd);
} // namespace mprun

#endif // MP_TOOLS_MP_RUN_TRAINSTATE_H
