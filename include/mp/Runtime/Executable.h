//===- Executable.h - a loaded artifact, ready to run -------------*- C++
//-*-===//
#ifndef MP_RUNTIME_EXECUTABLE_H
#define MP_RUNTIME_EXECUTABLE_H

#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Device.h"
#include "mp/Runtime/Safetensors.h"
#include "mp/Runtime/Tensor.h"

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace mp::rt {

/// Version of program.pb this runtime reads.
constexpr uint32_t kProgramVersion = 3; // 3: linear's 'activation'

/// program.pb is the serialized Program followed by a trailer: the zlib
/// crc32 of those bytes (4 bytes, little-endian) and "MPCK", so that a
/// corrupt program is refused like a corrupt parameter file. `seal` gives
/// the file's bytes; `unseal` checks them and gives the Program's bytes and
/// checksum, or why they cannot be trusted (`path` names the file).
std::string sealProgram(const std::string &programBytes);
Status unsealProgram(const std::string &file, const std::string &path,
                     std::string &programBytes, uint32_t &checksum);

struct IOSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// An output that is this rank's shard of a tensor split like a sharded
  /// parameter: dimension `shardAxis` (-1: whole) viewed as `shardGroups`
  /// blocks, each split over the ranks.
  int64_t shardAxis = -1;
  int64_t shardGroups = 1;
  /// Its size along `shardAxis` once gathered, when less than the shards
  /// hold (a padded vocabulary); 0: all of it.
  int64_t shardSize = 0;
  /// An output the program does not compute (a constant: the gradient of a
  /// parameter the loss does not read).
  bool constant = false;
  /// A term of a gradient computed in parts by several pipeline stages.
  bool partial = false;
};

/// An artifact loaded and validated: buffers resolved to memory (one arena
/// for intermediates, parameters from safetensors, constants from the
/// program) and each instruction bound to its kernel.
class Executable {
public:
  /// Loads the artifact directory `dir`. Every inconsistency (version,
  /// sizes, checksums, operands, shapes) is an error naming what is wrong.
  /// `comm` (not owned; null: one process) must have as many ranks as the
  /// artifact's grid. A pipeline chunk's backward shares the parameters of
  /// its forward, `parametersFrom` (which must outlive it).
  /// `parametersChange`: the caller updates the parameters between runs
  /// (training), so kernels read weights in place rather than from packed
  /// copies; implied by a train step's program (one with gradient ops) and
  /// by `parametersFrom`.
  static Status load(const std::string &dir, std::unique_ptr<Executable> &out,
                     Communicator *comm = nullptr, Device device = Device::CPU,
                     const Executable *parametersFrom = nullptr,
                     bool parametersChange = false);
  /// Ranks the artifact was compiled for (one replica's).
  int64_t gridSize() const { return ranks; }
  /// Data parallelism (training): the number of replicas of the grid, this
  /// replica's ranks (the program's communicator), the communicator of
  /// this rank's peers in the other replicas (null: one replica), and
  /// whether the optimizer state is sharded over them (ZeRO-1).
  int64_t dataParallelSize() const { return replicas; }
  Communicator &gridComm() const { return *comm; }
  /// How this executable's collectives run: its first grid axis's
  /// communicator's description (the program's without one).
  std::string describeCollectives() const;
  Communicator *dataParallelComm() const { return dataComm.get(); }
  bool shardedOptimizer() const { return zero == 1; }

  const std::vector<IOSpec> &inputs() const { return inputSpecs; }
  const std::vector<IOSpec> &outputs() const { return outputSpecs; }
  int64_t arenaBytes() const { return arenaSize; }
  int64_t parameterBytes() const { return paramBytes; }
  /// Scratch allocated at load beyond the arena, as one block sized for the
  /// program's largest needs: attention scores on a GPU, and the packing of
  /// collectives along inner axes. Lent to the kernels while this runs and
  /// to its communicators; freed with the executable. Includes the f32
  /// copies of a 16-bit program's values on the CPU (Widen.cpp).
  int64_t scratchBytes() const {
    return static_cast<int64_t>(scratchSize + widenBytes);
  }
  /// Parameters are deterministic random values (no weight files).
  bool syntheticWeights() const { return synthetic; }
  size_t numInstructions() const { return steps.size(); }
  /// FLOPs of one run (GEMMs, attention and einsums: mp/Support/Flops.h),
  /// for throughput.
  double flopsPerRun() const { return flops; }
  /// This rank's parameters (in the device's memory), by the names of the
  /// program's parameter table: an optimizer updates them in place between
  /// runs, through download and upload.
  struct Parameter {
    std::string name;
    Tensor tensor;
    /// A block of the parameter the user wrote (a cut fused linear's
    /// part): elements from `partStart` along `partAxis` of `partOf`, whose
    /// dimension `partAxis` is `partWhole`.
    std::string partOf;
    int64_t partAxis = 0, partStart = 0, partWhole = 0;
  };
  const std::vector<Parameter> &parameters() const { return paramTable; }
  /// Copies a tensor of this executable's device memory to host memory of
  /// its size, and back.
  Status download(const Tensor &device, void *host) const;
  /// (Also refreshes the packed copies this executable's kernels hold of
  /// that tensor: upload a parameter through the executable that reads it.)
  Status upload(const void *host, const Tensor &device) const;
  /// Bytes of the copies of weights that kernels hold packed in the layout
  /// their GEMM prefers (oneDNN on the CPU; only where the parameters do
  /// not change between runs).
  int64_t packedWeightBytes() const { return packedBytes; }
  /// The random state of the next runs (dropout masks are a function of
  /// it): a seed and a step, set by the training loop before each step.
  void setRandomState(uint64_t seed, uint64_t step) {
    rngSeed = seed;
    rngStep = step;
  }
  uint64_t randomSeed() const { return rngSeed; }
  uint64_t randomStep() const { return rngStep; }
  /// The crc32 of the program (every rank of a job must run the same one).
  uint32_t programChecksum() const { return checksum; }

  /// Runs on `inputs` (host memory, in the order of inputs(); dtypes and
  /// shapes must match). `outputs` receives host views (into the arena on
  /// the CPU, into staging copies on a GPU), valid until the next run.
  Status run(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs);

  /// When enabled, run() accumulates the seconds spent in each op kind.
  void enableProfiling(bool on) { profiling = on; }
  /// (op, seconds, calls) summed over the profiled runs, slowest first.
  std::vector<std::tuple<std::string, double, int64_t>> profile() const;

  ~Executable();

private:
  struct Step {
    std::string op, location;
    std::function<Status()> kernel;
  };
  friend class Binder;

  std::vector<IOSpec> inputSpecs, outputSpecs;
  std::vector<Parameter> paramTable;
  std::vector<Tensor> buffers;
  std::vector<int> inputBuffers, outputBuffers;
  std::vector<Step> steps;
  /// A kernel's packed copy of a parameter, refreshed by upload().
  struct PackedWeight {
    Tensor weight;
    std::function<Status()> refresh;
  };
  std::vector<PackedWeight> packedWeights;
  /// The f32 shadows of 16-bit float values (Widen.cpp), one block shared
  /// by all steps.
  uint8_t *widenArena = nullptr;
  size_t widenBytes = 0;
  int64_t packedBytes = 0;
  bool parametersChange = false;
  bool isParameter(const Tensor &t) const;
  std::vector<std::string> constants;
  std::vector<std::string> syntheticStorage; // parameters of synthetic runs
  bool synthetic = false;
  std::unique_ptr<SafetensorsFile> params;
  const KernelTable *kernels = nullptr;
  uint8_t *arena = nullptr;
  void *deviceParams = nullptr, *deviceConstants = nullptr;
  std::vector<std::vector<uint8_t>> outputStaging; // device runs only
  int64_t arenaSize = 0, paramBytes = 0;
  double flops = 0;
  uint32_t checksum = 0;
  bool profiling = false;
  uint64_t rngSeed = 0, rngStep = 0;
  int64_t ranks = 1, replicas = 1;
  int zero = 0;
  Communicator *comm = nullptr;
  std::unique_ptr<Communicator> dataComm;
  std::unique_ptr<Communicator> ownedComm;
  std::vector<std::unique_ptr<Communicator>> axisComms; // one per grid axis
  size_t kernelScratch = 0;        // the largest need of a kernel
  std::vector<size_t> commScratch; // the largest need per grid axis
  void *scratch = nullptr;         // [kernels | axis 0 | axis 1 | ...]
  size_t scratchSize = 0;
  Status allocateScratch();
  /// Index checks of program inputs (token ids, targets): run on the host
  /// values before they are uploaded, not from a device copy in the step.
  struct InputIndexCheck {
    size_t input;
    int64_t dim;
    bool allowNegative;
    std::string where;
  };
  std::vector<InputIndexCheck> inputIndexChecks;
  std::vector<double> stepSeconds;
  std::vector<int64_t> stepCalls;
};

} // namespace mp::rt

#endif // MP_RUNTIME_EXECUTABLE_H
