//===- Modes.h - mp-run's options and what its run modes share ---*- C++
//-*-===//
//
// mp-run runs a plain artifact (mp-run.cpp: one program on every rank) or a
// pipeline artifact (PipelineRun.cpp: each stage its chunk programs); both
// read inputs and write outputs alike.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TOOLS_MP_RUN_MODES_H
#define MP_TOOLS_MP_RUN_MODES_H

#include "Run.h"
#include "Train.h"

#include "mp/Runtime/Device.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mprun {

using mp::rt::Executable;
using mp::rt::HostBuffer;
using mp::rt::IOSpec;
using mp::rt::Tensor;

struct Options {
  std::string artifact, outputDir, verify, device, timeline;
  TrainOptions train;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, warmup = 1, iterations = 3;
  bool timedRunsGiven = false; // --warmup or --iterations
  double collectiveTimeout = 600;
  /// --verify fails when an output's max error relative to the reference's
  /// largest magnitude exceeds it (< 0: not given, only printed).
  double verifyTolerance = -1;
  bool quiet = false, profile = false;

  /// The options every rank must share (they decide the collectives run).
  std::string shared() const {
    return "--warmup " + std::to_string(warmup) + " --iterations " +
           std::to_string(iterations) + (verify.empty() ? "" : " --verify") +
           (profile ? " --profile" : "") +
           // (sharded outputs are gathered, collectively, to be written)
           (outputDir.empty() ? "" : " --output-dir") +
           (timeline.empty() ? "" : " --timeline") + train.shared();
  }
};

/// An output name as a path that stays inside the output directory.
std::string relativePathOf(const std::string &name);
/// Creates the directories of `path` below `root` (which exists).
Status makeParents(const std::string &root, const std::string &path);
/// The whole tensor of which `local` is this rank's shard, split as `spec`
/// says, gathered from every rank of `comm` (called by every rank).
Status gatherWhole(Communicator &comm, const Tensor &local, const IOSpec &spec,
                   HostBuffer &whole);
/// The executable's parameters and output names (outputsToWrite's view).
std::vector<const Executable::Parameter *> parametersOf(const Executable &exe);
std::vector<std::string> outputNames(const Executable &exe);
/// The outputs to write, by name: the gradients of a cut fused weight's
/// parts (`params` say which) joined into the gradient of the parameter
/// the user wrote, held in `joined`.
Status outputsToWrite(const std::vector<const Executable::Parameter *> &params,
                      const std::vector<std::string> &names,
                      const std::vector<Tensor> &outputs,
                      std::map<std::string, HostBuffer> &joined,
                      std::vector<std::pair<std::string, Tensor>> &named);
/// Writes `named` as DIR/NAME.npy (rank 0's or a stage lead's call).
void writeOutputs(const Options &o,
                  const std::vector<std::pair<std::string, Tensor>> &named);
/// Prints each of `outputs`' max error against the reference output of the
/// same name (`refSpecs`, `refOutputs`); false when an output has NaN or
/// infinite values where the reference's are finite (a max error would
/// hide them), or, given a `tolerance` >= 0, a relative error above it.
[[nodiscard]] bool
compareOutputs(const std::vector<std::pair<std::string, Tensor>> &outputs,
               const std::vector<IOSpec> &refSpecs,
               const std::vector<Tensor> &refOutputs, double tolerance);
/// "NAME (f32 [2, 8])".
std::string describe(const IOSpec &spec);
/// Reads the inputs `specs` name from the --input files (rank 0 does, for
/// every rank), with errors naming what was expected.
Status readInputs(const Options &o, const std::vector<IOSpec> &specs,
                  std::vector<HostBuffer> &buffers);
/// Every rank gets the inputs rank 0 read (`specs` size the others'), but
/// for those read as each rank's block (localInputs hands those out).
Status shareInputs(Communicator &world, const std::vector<IOSpec> &specs,
                   std::vector<HostBuffer> &buffers);
/// The inputs as the user gives them: one the program reads as each rank's
/// block (mp-shard-inputs: a decoder's cache, split by heads) whole.
std::vector<IOSpec> wholeInputs(const Executable &exe);
/// What this rank's program reads (`local`) of the inputs `whole` (shared
/// by shareInputs): a sharded input's block, which rank 0 cuts from the
/// whole it read and sends to each rank (held in `blocks`; no other rank
/// holds the whole), the others as they are. Called by every rank.
Status localInputs(Communicator &world, const Executable &exe,
                   std::vector<HostBuffer> &whole,
                   std::vector<HostBuffer> &blocks, std::vector<Tensor> &local);

/// Runs a pipeline artifact: one step on the inputs (outputs written as a
/// plain artifact's), or --train. Every rank calls it; returns the exit
/// code.
int runPipeline(const Options &o, Communicator &world, mp::rt::Device device);

} // namespace mprun

#endif // MP_TOOLS_MP_RUN_MODES_H
