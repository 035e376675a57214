//===- mp-run.cpp - run an mp artifact ------------------------------------===//
//
// mp-run DIR --input NAME=FILE.npy ... [--output-dir OUT] [--threads N]
//            [--warmup N] [--iterations N]
//
// Loads the artifact, checks the inputs against what it expects, runs it,
// writes every output as OUT/NAME.npy and prints timing and throughput.
// Links no LLVM/MLIR.
//
// Under mpirun, no rank is left waiting: each phase that can fail on one
// rank only (options, loading, inputs) ends in an agreement where every
// rank learns every rank's error, rank 0 prints them naming the ranks, and
// all stop; a rank that stops answering makes the collective it was awaited
// in fail after --collective-timeout, naming it.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Device.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Pipeline.h"
#include "mp/Runtime/Shards.h"
#include "mp/Support/AtomicFile.h"

#include "Modes.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace mp::rt;

namespace mprun {

int rankId = 0, rankCount = 1;

/// The end of a phase that may fail on some ranks only: every rank learns
/// every rank's error; if any failed, rank 0 prints each distinct error
/// once, naming the ranks it came from, and every rank exits. Called by
/// every rank at the same point.
void stopIfAnyRankFailed(Communicator &world, const Status &local) {
  std::vector<std::string> errors =
      allGatherStrings(world, local ? std::string() : local.message);
  if (std::all_of(errors.begin(), errors.end(),
                  [](const std::string &e) { return e.empty(); }))
    return;
  if (rankId == 0) {
    std::vector<std::pair<std::string, std::vector<int>>> distinct;
    for (int r = 0; r < static_cast<int>(errors.size()); ++r) {
      if (errors[r].empty())
        continue;
      auto it =
          std::find_if(distinct.begin(), distinct.end(),
                       [&](const auto &d) { return d.first == errors[r]; });
      if (it == distinct.end())
        distinct.push_back({errors[r], {r}});
      else
        it->second.push_back(r);
    }
    for (const auto &[message, ranks] : distinct) {
      std::string who;
      if (rankCount > 1 && static_cast<int>(ranks.size()) < rankCount) {
        who = ranks.size() == 1 ? " (rank " : " (ranks ";
        for (size_t i = 0; i < ranks.size(); ++i)
          who += (i ? ", " : "") + std::to_string(ranks[i]);
        who += ")";
      }
      std::fprintf(stderr, "mp-run: error%s: %s\n", who.c_str(),
                   message.c_str());
    }
  }
  finalizeCommunication();
  std::exit(1);
}

/// An error during a run, which other ranks may not share: stop them all.
[[noreturn]] void abortRun(const std::string &message) {
  std::fprintf(
      stderr, "mp-run: error%s: %s\n",
      rankCount > 1 ? (" (rank " + std::to_string(rankId) + ")").c_str() : "",
      message.c_str());
  abortCommunication(1);
}

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The communicator of this rank's grid over which outputs (in host
/// memory) are gathered: the executable's, unless that is a GPU's (NCCL
/// takes device memory), then the same ranks over MPI.
static Communicator &outputGrid(const Executable &exe, Communicator &world,
                                bool onDevice,
                                std::unique_ptr<Communicator> &owned) {
  return onDevice ? hostCommOf(exe, world, GridAxis::TensorParallel, owned)
                  : exe.gridComm();
}

Communicator &hostCommOf(const Executable &exe, Communicator &world,
                         GridAxis axis, std::unique_ptr<Communicator> &owned) {
  // mp-run lays ranks out [replica][grid position].
  const std::vector<int64_t> ranks = {exe.dataParallelSize(), exe.gridSize()};
  const int keep = axis == GridAxis::TensorParallel ? 1 : 0;
  if (ranks[1 - keep] == 1)
    return world; // the axis is every rank
  stopIfAnyRankFailed(world, world.split(ranks, keep, owned));
  return *owned;
}

} // namespace mprun

using namespace mprun;

namespace {

const char *kUsage = R"(usage: mp-run ARTIFACT_DIR [options]
       mpirun -np N mp-run ARTIFACT_DIR [options]   (a partitioned artifact)

Runs an artifact written by `mp-opt MODEL.onnx --artifact ARTIFACT_DIR`.
A partitioned artifact runs one process per rank: rank 0 reads the inputs
and sends them to every rank, prints, and writes the (gathered) outputs.
Every rank must be given the same options and run the same program.

options:
  --input NAME=FILE.npy   an input (repeat for each; --input NAME FILE also works)
  --output-dir DIR        write each output as DIR/NAME.npy, whole (a sharded
                          one, such as tensor-parallel logits, gathered
                          once, after the timed runs; a train step's:
                          DIR/loss.npy and DIR/grads/PARAM.npy)
  --device cpu|cuda       where to run (default: cuda when this mp-run has
                          CUDA and a GPU is visible, else cpu); several
                          ranks on GPUs communicate through NCCL
  --threads N             threads for kernels and BLAS (default: all cores)
  --warmup N              untimed runs before timing (default 1)
  --iterations N          timed runs (default 3)
  --profile               print the time spent in each op kind
  --timeline FILE.svg     (a pipeline artifact) draw the last step's measured
                          timeline: a row per stage, forward, backward and
                          transfers coloured, micro-batch numbers on the
                          boxes; prints its bubble fraction
  --collective-timeout S  seconds a collective waits for every rank before
                          the run stops naming the ranks that never arrived
                          (default 600, at least 1; 0 waits forever; on
                          GPUs NCCL's are aborted after it, unnamed)
  --verify [REF_DIR]      also run the unpartitioned program (default
                          ARTIFACT_DIR/reference) on rank 0 and print the
                          max error of every output; fails on NaN or
                          infinite outputs where the reference is finite
  --verify-tolerance X    with --verify, also fail when an output's max
                          error relative to the reference's largest value
                          exceeds X (e.g. 1e-5 for f32, 2e-2 for bf16)
  --quiet                 print only errors
  --help                  this text

environment:
  MP_CPU_GEMM=openblas|onednn   the library of the CPU's linears (default:
                          oneDNN where it has AVX-512 kernels for this CPU,
                          else OpenBLAS); the load line says which
  MP_SHM_COLLECTIVES=0    ranks on one host run their collectives through
                          MPI instead of reading each other's memory (the
                          default; the load line then says shared memory)
  MP_CUDA_BACKEND=PATH    the CUDA backend plugin to load (default:
                          libmp-cuda.so beside mp-run or in ../lib); it is
                          loaded only for a GPU run
)";

/// Prints and compares every output with the reference program's output of
/// the same name (the reference is unpartitioned: a fused weight's gradient
/// is whole there, joined here); `matched` is false when an output is not
/// finite where the reference is, or differs beyond `tolerance`. An error
/// when the reference cannot be loaded or run: rank 0 verifies after the
/// ranks have finished together, so it is reported without aborting them.
Status verify(const std::string &refDir, const std::vector<Tensor> &inputs,
              const std::vector<std::pair<std::string, Tensor>> &outputs,
              const Executable &exe, double tolerance, bool &matched) {
  std::unique_ptr<Executable> ref;
  if (Status s = Executable::load(refDir, ref); !s)
    return Status::error("--verify: " + s.message);
  std::vector<Tensor> refOutputs;
  if (Status s = ref->run(inputs, refOutputs); !s)
    return Status::error("--verify: the reference: " + s.message);
  std::printf("mp-run: verify against %s (%lld rank(s) vs 1):\n",
              refDir.c_str(), static_cast<long long>(exe.gridSize()));
  matched = compareOutputs(outputs, ref->outputs(), refOutputs, tolerance);
  return Status::success();
}

Status parseCount(const std::string &flag, const char *value, int min,
                  int &out) {
  char *end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (!*value || *end || n < min || n > 1000000)
    return Status::error(flag + " expects an integer >= " +
                         std::to_string(min) + ", got '" + value + "'");
  out = static_cast<int>(n);
  return Status::success();
}

Status parseSeconds(const std::string &flag, const char *value, double &out) {
  char *end = nullptr;
  double v = std::strtod(value, &end);
  // Below a second, ranks that are merely busy (loading, a long step)
  // would be taken for dead.
  if (!*value || *end || !(v == 0 || v >= 1) || v > 1e7)
    return Status::error(flag +
                         " expects seconds >= 1 (or 0: wait "
                         "forever), got '" +
                         std::string(value) + "'");
  out = v;
  return Status::success();
}

/// `path` made absolute and free of "." and ".." (its directory resolved,
/// as the file may not exist yet); empty when its directory does not.
std::string resolvedPath(const std::string &path) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash + 1);
  char buffer[PATH_MAX];
  if (!::realpath(dir.c_str(), buffer))
    return "";
  return std::string(buffer) + "/" +
         (slash == std::string::npos ? path : path.substr(slash + 1));
}

/// --log must not overwrite what the run reads or writes otherwise: the
/// token file, the artifact, or (swapped in whole at each save) the
/// checkpoint directory.
Status checkTrainPaths(const Options &o) {
  const std::string log = o.train.log.empty() ? "" : resolvedPath(o.train.log);
  if (log.empty())
    return Status::success();
  auto inside = [&](const std::string &dir) {
    return mp::liesWithin(o.train.log, dir);
  };
  if (!o.train.data.empty() && log == resolvedPath(o.train.data))
    return Status::error("--log '" + o.train.log + "' is the --data file");
  if (inside(o.artifact))
    return Status::error("--log '" + o.train.log +
                         "' is inside the artifact directory");
  if (!o.train.save.empty() && inside(o.train.save))
    return Status::error("--log '" + o.train.log +
                         "' is inside the --save directory, which each save "
                         "replaces whole");
  return Status::success();
}

Status parseArgs(int argc, char **argv, Options &o) {
  // An option given twice would silently keep one value (--steps 5 --steps
  // 50); --input repeats, once per input name.
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const std::string flag = arg.substr(0, arg.find('='));
    if (flag.size() > 2 && flag.compare(0, 2, "--") == 0 && flag != "--input" &&
        !given.insert(flag).second)
      return Status::error(flag + " is given twice");
    bool missing = false;
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) {
        missing = true;
        return "";
      }
      return argv[++i];
    };
    auto needsValue = [&]() { return Status::error(arg + " needs a value"); };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::fputs(kTrainUsage, stdout);
      finalizeCommunication();
      std::exit(0);
    } else if (arg == "--input") {
      std::string v = value();
      if (missing)
        return needsValue();
      size_t eq = v.find('=');
      if (eq != std::string::npos) {
        o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
      } else {
        std::string file = value();
        if (missing)
          return Status::error("--input expects NAME=FILE.npy, got '" + v +
                               "'");
        o.inputs.push_back({v, file});
      }
    } else if (arg.rfind("--input=", 0) == 0) {
      std::string v = arg.substr(8);
      size_t eq = v.find('=');
      if (eq == std::string::npos)
        return Status::error("--input expects NAME=FILE.npy, got '" + v + "'");
      o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
    } else if (arg == "--device") {
      o.device = value();
      Device d;
      if (missing)
        return needsValue();
      if (!parseDevice(o.device, d))
        return Status::error("--device expects cpu or cuda, got '" + o.device +
                             "'");
    } else if (arg == "--timeline") {
      o.timeline = value();
      if (missing)
        return needsValue();
      if (o.timeline.empty())
        return Status::error("--timeline expects a file (FILE.svg), got ''");
      // Checked now, not after the run that draws it.
      struct stat st;
      if (::stat(o.timeline.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return Status::error("--timeline '" + o.timeline +
                             "' is a directory (give FILE.svg)");
      if (resolvedPath(o.timeline).empty())
        return Status::error("--timeline '" + o.timeline +
                             "': its directory does not exist");
    } else if (arg == "--output-dir") {
      o.outputDir = value();
      if (missing)
        return needsValue();
      if (o.outputDir.empty())
        return Status::error("--output-dir expects a directory, got ''");
    } else if (arg == "--threads" || arg == "--warmup" ||
               arg == "--iterations") {
      const char *v = value();
      if (missing)
        return needsValue();
      int &target = arg == "--threads"  ? o.threads
                    : arg == "--warmup" ? o.warmup
                                        : o.iterations;
      if (Status s = parseCount(arg, v, arg == "--warmup" ? 0 : 1, target); !s)
        return s;
      o.timedRunsGiven = o.timedRunsGiven || arg != "--threads";
    } else if (arg == "--collective-timeout") {
      const char *v = value();
      if (missing)
        return needsValue();
      if (Status s = parseSeconds(arg, v, o.collectiveTimeout); !s)
        return s;
    } else if (arg == "--verify-tolerance") {
      const char *v = value();
      if (missing)
        return needsValue();
      char *end = nullptr;
      o.verifyTolerance = std::strtod(v, &end);
      if (!*v || *end || !std::isfinite(o.verifyTolerance) ||
          o.verifyTolerance < 0)
        return Status::error("--verify-tolerance expects a number >= 0, got '" +
                             std::string(v) + "'");
    } else if (arg == "--verify") {
      o.verify = "-";
      if (i + 1 < argc && argv[i + 1][0] != '-')
        o.verify = argv[++i];
      if (o.verify.empty())
        return Status::error("--verify expects a reference directory (or "
                             "nothing: the artifact's own), got ''");
    } else if (arg == "--train" || isTrainValueOption(arg)) {
      std::string v = arg == "--train" ? "" : value();
      if (missing)
        return needsValue();
      if (Status s = parseTrainOption(arg, v, o.train); !s)
        return s;
    } else if (arg == "--profile") {
      o.profile = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return Status::error("unknown option '" + arg + "' (see --help)");
    } else if (o.artifact.empty()) {
      o.artifact = arg;
    } else {
      return Status::error("unexpected argument '" + arg + "' (see --help)");
    }
  }
  if (o.artifact.empty())
    return Status::error("no artifact directory given (see --help)");
  if (o.verifyTolerance >= 0 && o.verify.empty())
    return Status::error("--verify-tolerance needs --verify");
  std::set<std::string> inputNames;
  for (const auto &input : o.inputs)
    if (!inputNames.insert(input.first).second)
      return Status::error("--input " + input.first + " is given twice");
  // Under --train, --input gives the step's inputs other than the tokens.
  if (o.train.enabled)
    o.train.inputs = o.inputs;
  if (o.train.enabled && (o.profile || !o.verify.empty() ||
                          !o.outputDir.empty() || o.timedRunsGiven))
    return Status::error(
        std::string(o.profile           ? "--profile"
                    : !o.verify.empty() ? "--verify"
                    : o.timedRunsGiven  ? "--warmup or --iterations"
                                        : "--output-dir") +
        " applies to runs of the program on --input, not to --train (each "
        "step prints its loss and speed; --log and --save keep them)");
  if (Status s = checkTrainPaths(o); !s)
    return s;
  // OpenMP cannot start a hundred thousand threads (it crashes trying).
  constexpr int kMaxThreads = 1024;
  if (o.threads > kMaxThreads)
    return Status::error("--threads " + std::to_string(o.threads) +
                         ": at most " + std::to_string(kMaxThreads));
  return checkTrainOptions(o.train);
}

/// Tokens per run: the element count of the first integer input (token ids).
int64_t tokensPerRun(const Executable &exe) {
  for (const IOSpec &s : exe.inputs())
    if (s.dtype == DType::I64 || s.dtype == DType::I32)
      return Tensor{nullptr, s.dtype, s.shape}.numel();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<Communicator> comm;
  if (Status s = initCommunication(&argc, &argv, comm); !s) {
    std::fprintf(stderr, "mp-run: error: %s\n", s.message.c_str());
    return 1;
  }
  rankId = comm->rank();
  rankCount = comm->size();
  Options o;
  stopIfAnyRankFailed(*comm, parseArgs(argc, argv, o));
  // Options that decide which collectives run must agree, or ranks would
  // wait in different ones.
  const std::string rank0Options = allGatherStrings(*comm, o.shared())[0];
  stopIfAnyRankFailed(
      *comm, o.shared() == rank0Options
                 ? Status::success()
                 : Status::error("options '" + o.shared() +
                                 "' differ from rank 0's '" + rank0Options +
                                 "': every rank needs the same options"));
  setCollectiveTimeout(o.collectiveTimeout);
  if (rankId != 0)
    o.quiet = true;
  cpu::setNumThreads(o.threads);

  Device device = Device::CPU;
  if (!o.device.empty()) {
    parseDevice(o.device, device);
  } else if (nvidiaDeviceNodesPresent()) {
    // A GPU is there: use it, or say why not (a backend that does not load,
    // a driver too old) rather than fall back to the CPU unseen.
    std::string reason;
    const KernelTable *gpu = cudaKernelTable(&reason);
    if (gpu && gpu->available(reason))
      device = Device::CUDA;
    else if (rankId == 0 && !o.quiet)
      std::printf("mp-run: note: running on the cpu: %s\n", reason.c_str());
  }
  // All ranks must run on one kind of device (they would otherwise wait in
  // different collectives). anyRankFailed is an OR over the ranks.
  if (rankCount > 1) {
    const bool someCuda = anyRankFailed(*comm, device == Device::CUDA);
    const bool someCpu = anyRankFailed(*comm, device == Device::CPU);
    if (someCuda && someCpu) {
      if (!o.device.empty()) {
        std::fprintf(stderr,
                     "mp-run: error (rank %d): the ranks were given different "
                     "devices (this one: --device %s)\n",
                     rankId, o.device.c_str());
        finalizeCommunication();
        return 1;
      }
      if (rankId == 0)
        std::fprintf(stderr, "mp-run: note: not every rank sees a GPU, so all "
                             "run on the CPU (--device cuda makes that an "
                             "error)\n");
      device = Device::CPU;
    }
  }

  // Multi-rank GPU runs talk through NCCL, bootstrapped over MPI.
  std::unique_ptr<Communicator> deviceComm;
  if (device == Device::CUDA && rankCount > 1) {
    Status made = makeDeviceCommunicator(*comm, deviceComm);
    if (anyRankFailed(*comm, !made)) {
      if (!made)
        std::fprintf(stderr, "mp-run: error (rank %d): %s\n", rankId,
                     made.message.c_str());
      finalizeCommunication();
      return 1;
    }
  }

  // Every rank must see the same kind of artifact.
  const bool pipelined = isPipelineArtifact(o.artifact);
  if (rankCount > 1 && anyRankFailed(*comm, pipelined) &&
      anyRankFailed(*comm, !pipelined))
    stopIfAnyRankFailed(*comm,
                        Status::error("'" + o.artifact + "' is " +
                                      (pipelined ? "" : "not ") +
                                      "a pipeline artifact on this rank, "
                                      "unlike on others"));
  if (pipelined) {
    int rc = runPipeline(o, *comm, device);
    deviceComm.reset();
    comm.reset();
    finalizeCommunication();
    return rc;
  }
  stopIfAnyRankFailed(*comm,
                      o.timeline.empty()
                          ? Status::success()
                          : Status::error("--timeline draws the steps "
                                          "of a pipeline artifact (mp-opt "
                                          "... pp=N --artifact DIR)"));
  double t0 = seconds();
  std::unique_ptr<Executable> exe;
  Status loaded = Executable::load(
      o.artifact, exe, deviceComm ? deviceComm.get() : comm.get(), device);
  // Every rank validates its own shard; all stop if any failed (no hang).
  stopIfAnyRankFailed(*comm, loaded);
  // One program on every rank (each loads its own copy of the artifact).
  const std::string checksum = std::to_string(exe->programChecksum());
  const std::string rank0Checksum = allGatherStrings(*comm, checksum)[0];
  stopIfAnyRankFailed(*comm,
                      checksum == rank0Checksum
                          ? Status::success()
                          : Status::error("artifact '" + o.artifact +
                                          "' holds another program (crc32 " +
                                          checksum + ") than rank 0's (crc32 " +
                                          rank0Checksum + ")"));
  double loadSeconds = seconds() - t0;
  if (o.train.enabled) {
    if (!o.quiet)
      std::printf("mp-run: %s: %zu instructions, arena %.1f MiB, parameters "
                  "%.1f MiB, loaded in %.2f s, %d rank(s): training %lld "
                  "steps\n",
                  o.artifact.c_str(), exe->numInstructions(),
                  exe->arenaBytes() / 1048576.0,
                  exe->parameterBytes() / 1048576.0, loadSeconds, rankCount,
                  static_cast<long long>(o.train.steps));
    int rc = train(o.train, o.quiet, *exe, *comm);
    exe.reset();
    deviceComm.reset();
    comm.reset();
    finalizeCommunication();
    return rc;
  }
  std::vector<HostBuffer> inputBuffers, inputBlocks;
  const std::vector<IOSpec> givenInputs = wholeInputs(*exe);
  stopIfAnyRankFailed(*comm, rankId == 0
                                 ? readInputs(o, givenInputs, inputBuffers)
                                 : Status::success());
  if (Status s = shareInputs(*comm, givenInputs, inputBuffers); !s)
    abortRun(s.message);
  // (A test hook: this rank stops responding, as a hung node would.)
  if (const char *stall = std::getenv("MP_RUN_TEST_STALL_RANK"))
    if (std::atoi(stall) == rankId && rankCount > 1)
      std::raise(SIGSTOP);
  // The whole inputs for --verify's unpartitioned run, each rank's own
  // for the program.
  std::vector<Tensor> inputs, outputs;
  for (HostBuffer &b : inputBuffers)
    inputs.push_back(b.view());
  std::vector<Tensor> localIns;
  if (Status s = localInputs(*comm, *exe, inputBuffers, inputBlocks, localIns);
      !s)
    abortRun(s.message);

  if (!o.quiet && exe->syntheticWeights())
    std::printf("mp-run: note: synthetic (random) weights: outputs are "
                "meaningless, timings are not\n");
  if (!o.quiet) {
    const KernelTable *table =
        device == Device::CUDA ? cudaKernelTable() : &cpuKernelTable();
    std::string deviceLabel = deviceName(device);
    if (table && table->describe)
      deviceLabel += " (" + table->describe() + ")";
    char scratch[96] = "";
    const double scratchBytes = static_cast<double>(exe->scratchBytes());
    int used = 0;
    if (exe->packedWeightBytes() > 0)
      used = std::snprintf(scratch, sizeof scratch, " (+%.1f MiB packed)",
                           exe->packedWeightBytes() / 1048576.0);
    if (scratchBytes >= 1048576.0)
      std::snprintf(scratch + used, sizeof scratch - used, ", scratch %.1f MiB",
                    scratchBytes / 1048576.0);
    else if (scratchBytes > 0)
      std::snprintf(scratch + used, sizeof scratch - used, ", scratch %.1f KiB",
                    scratchBytes / 1024.0);
    std::printf("mp-run: %s: %zu instructions, arena %.1f MiB, parameters "
                "%.1f MiB%s, loaded in %.2f s, %s, %d threads, %d rank(s) "
                "(%s)\n",
                o.artifact.c_str(), exe->numInstructions(),
                exe->arenaBytes() / 1048576.0,
                exe->parameterBytes() / 1048576.0, scratch, loadSeconds,
                deviceLabel.c_str(), cpu::getNumThreads(), rankCount,
                deviceComm ? "MPI, NCCL" : exe->describeCollectives().c_str());
  }
  for (int i = 0; i < o.warmup; ++i)
    if (Status s = exe->run(localIns, outputs); !s)
      abortRun(s.message);
  std::vector<double> times;
  exe->enableProfiling(o.profile);
  for (int i = 0; i < o.iterations; ++i) {
    double start = seconds();
    if (Status s = exe->run(localIns, outputs); !s)
      abortRun(s.message);
    times.push_back(seconds() - start);
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  if (!o.quiet) {
    std::printf("mp-run: %d runs: %.3f ms/run (median, min %.3f ms)",
                o.iterations, median * 1e3, times.front() * 1e3);
    if (int64_t tokens = tokensPerRun(*exe))
      std::printf(", %.0f tokens/s", tokens / median);
    if (exe->flopsPerRun() > 0)
      std::printf(", %.1f GFLOP/s", exe->flopsPerRun() / median / 1e9);
    std::printf("\n");
  }

  if (o.profile) {
    double total = 0;
    for (const auto &row : exe->profile())
      total += std::get<1>(row);
    std::printf(
        "mp-run: profile over %d runs (op, ms/run, share, calls/run):\n",
        o.iterations);
    for (const auto &[op, secs, calls] : exe->profile())
      std::printf("  %-14s %9.3f ms %5.1f%% %6lld\n", op.c_str(),
                  secs * 1e3 / o.iterations,
                  total > 0 ? 100 * secs / total : 0.0,
                  static_cast<long long>(calls / o.iterations));
  }

  // Sharded outputs (a train step's gradients, logits mp-shard-outputs
  // left vocab-parallel) are gathered whole, once: every rank takes part.
  std::vector<HostBuffer> gathered(outputs.size());
  if ((!o.outputDir.empty() || !o.verify.empty()) && rankCount > 1) {
    std::unique_ptr<Communicator> hostGrid;
    Communicator &grid =
        outputGrid(*exe, *comm, deviceComm != nullptr, hostGrid);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const IOSpec &spec = exe->outputs()[i];
      if (spec.shardAxis < 0)
        continue;
      if (Status s = gatherWhole(grid, outputs[i], spec, gathered[i]); !s)
        abortRun(s.message);
      outputs[i] = gathered[i].view();
    }
  }

  std::map<std::string, HostBuffer> joined;
  std::vector<std::pair<std::string, Tensor>> named;
  if (rankId == 0 && (!o.verify.empty() || !o.outputDir.empty()))
    if (Status s = outputsToWrite(parametersOf(*exe), outputNames(*exe),
                                  outputs, joined, named);
        !s)
      abortRun(s.message);
  bool verified = true;
  Status verifyError = Status::success();
  if (!o.verify.empty() && rankId == 0)
    verifyError = verify(o.verify == "-" ? o.artifact + "/reference" : o.verify,
                         inputs, named, *exe, o.verifyTolerance, verified);

  if (!o.outputDir.empty() && rankId == 0)
    writeOutputs(o, named);
  // Communicators must be freed before MPI ends.
  exe.reset();
  deviceComm.reset();
  comm.reset();
  finalizeCommunication();
  if (!verifyError) {
    std::fprintf(stderr, "mp-run: error: %s\n", verifyError.message.c_str());
    return 1;
  }
  if (!verified) {
    std::fprintf(stderr, "mp-run: error: --verify: outputs differ from the "
                         "reference (see above)\n");
    return 1;
  }
  return 0;
}
