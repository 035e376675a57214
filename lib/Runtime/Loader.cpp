//===- Loader.cpp - loading an artifact
//------------------------------------===//
//
// Loading validates everything a corrupt or hand-edited artifact could get
// wrong before any kernel runs: the program's version and structure, every
// buffer's size and place, parameter lengths and checksums, and (through the
// Binder) each instruction against the op contract and the shape rules.
//
//===----------------------------------------------------------------------===//
#include "Binder.h"
#include "Dataflow.h"

#include "mp/Program/program.pb.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Kernels.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <new>
#include <sys/stat.h>

namespace mp::rt {

static uint32_t crcOf(const void *data, size_t bytes) {
  return checksumOf(data, bytes);
}

static constexpr char kTrailerMagic[4] = {'M', 'P', 'C', 'K'};

std::string sealProgram(const std::string &programBytes) {
  uint32_t crc = crcOf(programBytes.data(), programBytes.size());
  std::string file = programBytes;
  for (int i = 0; i < 4; ++i)
    file.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  file.append(kTrailerMagic, 4);
  return file;
}

Status unsealProgram(const std::string &file, const std::string &path,
                     std::string &programBytes, uint32_t &checksum) {
  if (file.size() < 8 || file.compare(file.size() - 4, 4, kTrailerMagic, 4)) {
    program::Program old; // an artifact from before the checksum?
    if (old.ParseFromString(file) && old.version() != kProgramVersion)
      return Status::error(
          "'" + path + "' has program version " +
          std::to_string(old.version()) + "; this mp-run reads version " +
          std::to_string(kProgramVersion) + " (compile the model again)");
    return Status::error("'" + path +
                         "' is corrupt or truncated (no "
                         "checksum trailer)");
  }
  programBytes = file.substr(0, file.size() - 8);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i)
    stored |=
        static_cast<uint32_t>(static_cast<uint8_t>(file[file.size() - 8 + i]))
        << (8 * i);
  checksum = crcOf(programBytes.data(), programBytes.size());
  if (checksum != stored)
    return Status::error("'" + path + "' fails its checksum (corrupt file)");
  return Status::success();
}

static Status readProgram(const std::string &dir, program::Program &prog,
                          uint32_t &checksum) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    return Status::error("artifact directory '" + dir + "' does not exist");
  if (!S_ISDIR(st.st_mode))
    return Status::error("'" + dir +
                         "' is not a directory (an artifact is the "
                         "directory mp-opt --artifact DIR writes)");
  std::string path = dir + "/program.pb";
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::error("'" + path + "' is missing: '" + dir +
                         "' is not an mp artifact");
  constexpr off_t kMaxProgramBytes = off_t(1) << 31;
  if (st.st_size > kMaxProgramBytes)
    return Status::error("'" + path + "' is " + std::to_string(st.st_size) +
                         " bytes, more than a program can be");
  std::ifstream in(path, std::ios::binary);
  std::string file(static_cast<size_t>(st.st_size), '\0');
  if (!in || !in.read(file.data(), st.st_size))
    return Status::error("cannot read '" + path + "'");
  std::string bytes;
  if (Status s = unsealProgram(file, path, bytes, checksum); !s)
    return s;
  if (!prog.ParseFromString(bytes))
    return Status::error("'" + path + "' is corrupt or truncated");
  if (prog.version() != kProgramVersion)
    return Status::error(
        "'" + path + "' has program version " + std::to_string(prog.version()) +
        "; this mp-run reads version " + std::to_string(kProgramVersion));
  return Status::success();
}

/// Deterministic pseudo-random parameters (a hash of the parameter's name
/// and the element's index, so that every program holding a parameter, a
/// pipeline's tied embedding on two stages, has the same values), uniform
/// in [-0.05, 0.05]: enough to benchmark.
static Status syntheticParameters(const program::Program &prog,
                                  std::vector<std::string> &storage,
                                  std::vector<Tensor> &params, int64_t &bytes) {
  bytes = 0;
  for (int i = 0; i < prog.parameters_size(); ++i) {
    const auto &p = prog.parameters(i);
    Tensor t;
    t.shape.assign(p.shape().begin(), p.shape().end());
    if (!parseDType(p.dtype(), t.dtype))
      return Status::error("parameter '" + p.name() + "' has unknown dtype");
    int64_t size = 0;
    std::string why;
    if (!tensorBytes(t.shape, t.dtype, size, why))
      return Status::error("parameter '" + p.name() + "' has " + why);
    try {
      storage.emplace_back(static_cast<size_t>(size), '\0');
    } catch (const std::bad_alloc &) {
      return Status::error("cannot allocate the " + std::to_string(size) +
                           " bytes of parameter '" + p.name() + "'");
    }
    t.data = storage.back().data();
    bool isFloat = t.dtype == DType::F32 || t.dtype == DType::F16 ||
                   t.dtype == DType::BF16;
    if (isFloat) {
      uint64_t seed = 0xcbf29ce484222325ULL; // FNV-1a of the name
      for (unsigned char c : p.name())
        seed = (seed ^ c) * 0x100000001b3ULL;
      std::vector<float> values(t.numel());
      for (int64_t j = 0; j < t.numel(); ++j) {
        uint64_t h = seed ^ (static_cast<uint64_t>(j) * 0x9e3779b97f4a7c15ULL);
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        values[j] = (static_cast<float>(h & 0xffffff) / 0xffffff - 0.5f) * 0.1f;
      }
      Tensor source{values.data(), DType::F32, t.shape};
      if (Status s = cpu::cast(source, t); !s)
        return s;
    }
    bytes += static_cast<int64_t>(t.bytes());
    params.push_back(t);
  }
  return Status::success();
}

static Status loadParameters(const std::string &dir, int rank,
                             const program::Program &prog,
                             std::unique_ptr<SafetensorsFile> &file,
                             std::vector<Tensor> &params, int64_t &bytes) {
  if (prog.parameters_size() == 0)
    return Status::success();
  std::string name = prog.parameter_file();
  size_t placeholder = name.find("{rank}");
  if (placeholder != std::string::npos)
    name.replace(placeholder, 6, std::to_string(rank));
  std::string path = dir + "/" + name;
  if (Status s = SafetensorsFile::open(path, file); !s)
    return s;
  bytes = 0;
  for (const auto &p : prog.parameters()) {
    auto it = file->entries().find(p.name());
    if (it == file->entries().end())
      return Status::error("parameter '" + p.name() + "' is missing from '" +
                           path + "'");
    DType dtype;
    Shape shape(p.shape().begin(), p.shape().end());
    if (!parseDType(p.dtype(), dtype) || it->second.dtype != dtype ||
        it->second.shape != shape)
      return Status::error("parameter '" + p.name() + "' in '" + path +
                           "' is not " + p.dtype() + " " + formatShape(shape));
    const uint8_t *data = file->data(it->second);
    uint64_t length = it->second.end - it->second.begin;
    const uint32_t crc = checksumOf(data, length);
    uint32_t expected =
        p.rank_crc32_size() > rank ? p.rank_crc32(rank) : p.crc32();
    if (crc != expected) {
      // Another rank's shard (files swapped or copied over) says which.
      for (int r = 0; r < p.rank_crc32_size(); ++r)
        if (r != rank && p.rank_crc32(r) == crc && p.rank_crc32(r) != expected)
          return Status::error("parameter '" + p.name() + "' in '" + path +
                               "' is rank " + std::to_string(r) +
                               "'s shard, not rank " + std::to_string(rank) +
                               "'s (parameter files swapped?)");
      return Status::error("parameter '" + p.name() + "' in '" + path +
                           "' fails its checksum (corrupt file)");
    }
    params.push_back(Tensor{const_cast<uint8_t *>(data), dtype, shape});
    bytes += static_cast<int64_t>(length);
  }
  return Status::success();
}

/// A pipeline chunk's backward: its parameters are `donor`'s (its forward,
/// in this process's memory), matched by name, dtype and shape.
static Status borrowParameters(const std::string &dir,
                               const program::Program &prog,
                               const Executable *donor,
                               std::vector<Tensor> &params) {
  if (!donor)
    return Status::error("program '" + dir + "' reads the parameters of '" +
                         prog.parameters_from() +
                         "' (a pipeline chunk's backward): run the pipeline "
                         "artifact it belongs to");
  for (const auto &p : prog.parameters()) {
    const Tensor *found = nullptr;
    for (const Executable::Parameter &d : donor->parameters())
      if (d.name == p.name())
        found = &d.tensor;
    DType dtype;
    Shape shape(p.shape().begin(), p.shape().end());
    if (!found || !parseDType(p.dtype(), dtype) || found->dtype != dtype ||
        found->shape != shape)
      return Status::error("program '" + dir + "' reads parameter '" +
                           p.name() + "' as " + p.dtype() + " " +
                           formatShape(shape) + ", which '" +
                           prog.parameters_from() + "' does not hold");
    params.push_back(*found);
  }
  return Status::success();
}

/// Copies host tensors into one device allocation and points them there.
static Status uploadAll(const KernelTable *k, std::vector<Tensor *> tensors,
                        void *&storage) {
  size_t total = 0;
  for (Tensor *t : tensors)
    total += (t->bytes() + 255) / 256 * 256;
  if (Status s = k->allocate(total, &storage); !s)
    return s;
  size_t offset = 0;
  for (Tensor *t : tensors) {
    void *dst = static_cast<uint8_t *>(storage) + offset;
    if (Status s = k->toDevice(dst, t->data, t->bytes()); !s)
      return s;
    t->data = dst;
    offset += (t->bytes() + 255) / 256 * 256;
  }
  return Status::success();
}

/// What load checks before its first collective: the program, the device,
/// and that this run has as many ranks as the artifact's grid.
static Status openProgram(const std::string &dir, Device device, int ranksHere,
                          program::Program &prog, const KernelTable *&kernels,
                          int64_t &ranks, uint32_t &checksum) {
  if (Status s = readProgram(dir, prog, checksum); !s)
    return s;
  kernels = &cpuKernelTable();
  if (device == Device::CUDA) {
    std::string reason;
    kernels = cudaKernelTable(&reason);
    if (!kernels)
      return Status::error("--device cuda: " + reason);
    if (!kernels->available(reason))
      return Status::error("--device cuda: " + reason);
  }
  ranks = 1;
  for (int64_t d : prog.grid_shape())
    if (d < 1 || __builtin_mul_overflow(ranks, d, &ranks) || ranks > (1 << 20))
      return Status::error("artifact '" + dir + "' has a device grid of " +
                           std::to_string(prog.grid_shape_size()) +
                           " axes with a size out of range (" +
                           std::to_string(d) + ")");
  const int64_t replicas = std::max<int64_t>(prog.data_parallel(), 1);
  if (replicas > (1 << 20) || prog.zero() < 0 || prog.zero() > 1)
    return Status::error("artifact '" + dir + "' has data_parallel " +
                         std::to_string(prog.data_parallel()) + " and zero " +
                         std::to_string(prog.zero()) + " out of range");
  const int64_t total = ranks * replicas;
  if (total != ranksHere)
    return Status::error("artifact '" + dir + "' was compiled for " +
                         std::to_string(total) + " rank(s)" +
                         (replicas > 1 ? " (" + std::to_string(replicas) +
                                             " data-parallel replicas of " +
                                             std::to_string(ranks) + ")"
                                       : "") +
                         " but this run has " + std::to_string(ranksHere) +
                         (total > 1 ? "; launch it with mpirun -np " +
                                          std::to_string(total) + " mp-run ..."
                                    : "") +
                         (total > 1 && !haveMPI()
                              ? " (this mp-run was built without MPI)"
                              : ""));
  return Status::success();
}

Status Executable::load(const std::string &dir,
                        std::unique_ptr<Executable> &out, Communicator *comm,
                        Device device, const Executable *parametersFrom,
                        bool parametersChange) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  exe->parametersChange = parametersChange || parametersFrom;
  if (!comm) {
    exe->ownedComm = makeSingleProcessCommunicator();
    comm = exe->ownedComm.get();
  }
  exe->comm = comm;
  program::Program prog;
  Status opened = openProgram(dir, device, comm->size(), prog, exe->kernels,
                              exe->ranks, exe->checksum);
  // Splitting the grid is collective: a rank that cannot get there stops
  // every rank here, rather than leaving the others waiting in the split.
  if (anyRankFailed(*comm, !opened)) {
    return opened ? Status::error("another rank could not open artifact '" +
                                  dir + "' (its error says why)")
                  : opened;
  }
  // Data-parallel replicas: ranks [replica][grid rank]; the program runs
  // on its replica's ranks, the optimizer reduces over the replicas.
  exe->replicas = std::max<int64_t>(prog.data_parallel(), 1);
  exe->zero = prog.zero();
  if (exe->replicas > 1) {
    const std::vector<int64_t> layout = {exe->replicas, exe->ranks};
    std::unique_ptr<Communicator> group;
    if (Status s = comm->split(layout, 1, group); !s)
      return s;
    if (Status s = comm->split(layout, 0, exe->dataComm); !s)
      return s;
    exe->ownedComm = std::move(group);
    comm = exe->ownedComm.get();
    exe->comm = comm;
  }
  // One communicator per grid axis (collectives name the axis they span).
  std::vector<int64_t> gridShape(prog.grid_shape().begin(),
                                 prog.grid_shape().end());
  if (gridShape.empty())
    gridShape.push_back(1);
  for (size_t axis = 0; axis < gridShape.size(); ++axis) {
    exe->axisComms.emplace_back();
    if (Status s = comm->split(gridShape, static_cast<int64_t>(axis),
                               exe->axisComms.back());
        !s)
      return s;
  }
  std::vector<Tensor> params;
  exe->syntheticStorage.reserve(prog.parameters_size());
  const bool borrowed = !prog.parameters_from().empty();
  if (Status s = borrowed ? borrowParameters(dir, prog, parametersFrom, params)
                 : prog.synthetic_weights()
                     ? syntheticParameters(prog, exe->syntheticStorage, params,
                                           exe->paramBytes)
                     : loadParameters(dir, comm->rank(), prog, exe->params,
                                      params, exe->paramBytes);
      !s)
    return s;
  exe->synthetic = prog.synthetic_weights();

  // Every buffer's size, without overflow, before anything is allocated;
  // the arena is no larger than its buffers laid end to end.
  std::vector<int64_t> bufferBytes;
  int64_t arenaTotal = 0;
  for (int i = 0; i < prog.buffers_size(); ++i) {
    const auto &b = prog.buffers(i);
    DType dtype;
    std::string why;
    int64_t bytes = 0;
    if (!parseDType(b.dtype(), dtype))
      return Status::error("buffer " + std::to_string(i) +
                           " has unknown dtype '" + b.dtype() + "'");
    if (!tensorBytes(std::vector<int64_t>(b.shape().begin(), b.shape().end()),
                     dtype, bytes, why))
      return Status::error("buffer " + std::to_string(i) + " has " + why);
    bufferBytes.push_back(bytes);
    if (b.kind() == program::Buffer::ARENA)
      arenaTotal += (bytes + 63) / 64 * 64;
    if (arenaTotal > kMaxTensorBytes)
      return Status::error("the program's buffers need more than " +
                           std::to_string(kMaxTensorBytes) + " bytes");
  }
  exe->arenaSize = prog.arena_bytes();
  if (exe->arenaSize < 0 || exe->arenaSize > arenaTotal)
    return Status::error("program arena of " + std::to_string(exe->arenaSize) +
                         " bytes: its buffers need between 0 and " +
                         std::to_string(arenaTotal));
  void *arena = nullptr;
  if (Status s = exe->kernels->allocate(exe->arenaSize, &arena); !s)
    return Status::error("cannot allocate the " +
                         std::to_string(exe->arenaSize) +
                         "-byte arena: " + s.message);
  exe->arena = static_cast<uint8_t *>(arena);
  bool onHost = exe->kernels == &cpuKernelTable();
  if (!onHost && !borrowed) {
    std::vector<Tensor *> ptrs;
    for (Tensor &p : params)
      ptrs.push_back(&p);
    if (Status s = uploadAll(exe->kernels, ptrs, exe->deviceParams); !s)
      return s;
  }

  for (size_t i = 0; i < params.size(); ++i) {
    const program::Parameter &p = prog.parameters(static_cast<int>(i));
    exe->paramTable.push_back({p.name(), params[i], p.part_of(), p.part_axis(),
                               p.part_start(), p.part_whole()});
  }

  // A splat constant is no larger than the largest parameter or the arena
  // (a zero gradient has a parameter's shape): a corrupt shape is refused
  // before it is allocated.
  int64_t largestSplat = std::max<int64_t>(exe->arenaSize, int64_t(1) << 20);
  for (const Tensor &p : params)
    largestSplat = std::max(largestSplat, static_cast<int64_t>(p.bytes()));
  exe->constants.reserve(prog.buffers_size());
  for (int i = 0; i < prog.buffers_size(); ++i) {
    const auto &b = prog.buffers(i);
    Tensor t;
    std::string where = "buffer " + std::to_string(i);
    parseDType(b.dtype(), t.dtype); // (checked above)
    t.shape.assign(b.shape().begin(), b.shape().end());
    switch (b.kind()) {
    case program::Buffer::ARENA:
      if (b.offset() < 0 || b.offset() > exe->arenaSize ||
          bufferBytes[i] > exe->arenaSize - b.offset())
        return Status::error(where + " lies outside the arena");
      t.data = exe->arena + b.offset();
      break;
    case program::Buffer::PARAMETER:
      // (Of the parameter's shape, or a view of its bytes in another: an
      // einsum's weight read 2-D by its linear.)
      if (b.parameter() < 0 ||
          b.parameter() >= static_cast<int>(params.size()) ||
          params[b.parameter()].numel() != t.numel() ||
          params[b.parameter()].dtype != t.dtype)
        return Status::error(where + " does not match parameter " +
                             std::to_string(b.parameter()));
      t.data = params[b.parameter()].data;
      break;
    case program::Buffer::CONSTANT: {
      // A splat holds one element, repeated over the shape here.
      size_t element = t.numel() > 0 ? t.bytes() / t.numel() : 0;
      if (b.splat() ? element == 0 || b.data().size() != element
                    : b.data().size() != t.bytes())
        return Status::error(where + " holds " +
                             std::to_string(b.data().size()) + " bytes for " +
                             (b.splat() ? "each element of " : "") +
                             formatShape(t.shape));
      if (b.splat() && static_cast<int64_t>(t.bytes()) > largestSplat)
        return Status::error(where + ", a constant of one repeated value, " +
                             formatShape(t.shape) +
                             ", is larger than every parameter and the arena");
      if (!b.splat()) {
        exe->constants.push_back(b.data());
      } else {
        try {
          exe->constants.emplace_back(t.bytes(), '\0');
        } catch (const std::bad_alloc &) {
          return Status::error("cannot allocate the " +
                               std::to_string(t.bytes()) + " bytes of " +
                               where);
        }
        std::string &full = exe->constants.back();
        for (size_t at = 0; at < full.size(); at += element)
          std::memcpy(&full[at], b.data().data(), element);
      }
      t.data = exe->constants.back().data();
      break;
    }
    default: return Status::error(where + " has an unknown kind");
    }
    exe->buffers.push_back(std::move(t));
  }

  if (!onHost) {
    std::vector<Tensor *> constants;
    for (int i = 0; i < prog.buffers_size(); ++i)
      if (prog.buffers(i).kind() == program::Buffer::CONSTANT)
        constants.push_back(&exe->buffers[i]);
    if (Status s = uploadAll(exe->kernels, constants, exe->deviceConstants); !s)
      return s;
  }

  auto bindIO = [&](const auto &bindings, std::vector<IOSpec> &specs,
                    std::vector<int> &ids) -> Status {
    for (const auto &b : bindings) {
      if (b.buffer() < 0 || b.buffer() >= static_cast<int>(exe->buffers.size()))
        return Status::error("input/output '" + b.name() + "' names no buffer");
      const Tensor &t = exe->buffers[b.buffer()];
      specs.push_back({b.name(), t.dtype, t.shape});
      specs.back().partial = b.partial();
      specs.back().constant =
          prog.buffers(b.buffer()).kind() == program::Buffer::CONSTANT;
      if (b.has_sharding()) {
        const program::Sharding &sh = b.sharding();
        int64_t rank = static_cast<int64_t>(t.shape.size());
        if (sh.axis() < 0 || sh.axis() >= rank || sh.groups() < 1 ||
            t.shape[sh.axis()] % sh.groups() != 0 || sh.size() < 0 ||
            (sh.size() > 0 && sh.groups() != 1))
          return Status::error(
              "input/output '" + b.name() + "': sharding axis " +
              std::to_string(sh.axis()) + " in " + std::to_string(sh.groups()) +
              " groups (size " + std::to_string(sh.size()) +
              ") does not fit its shape " + formatShape(t.shape));
        specs.back().shardAxis = sh.axis();
        specs.back().shardGroups = sh.groups();
        specs.back().shardSize = sh.size();
      }
      ids.push_back(b.buffer());
    }
    return Status::success();
  };
  if (Status s = bindIO(prog.inputs(), exe->inputSpecs, exe->inputBuffers); !s)
    return s;
  if (Status s = bindIO(prog.outputs(), exe->outputSpecs, exe->outputBuffers);
      !s)
    return s;
  for (int id : exe->inputBuffers)
    if (prog.buffers(id).kind() != program::Buffer::ARENA)
      return Status::error("an input is bound to a non-arena buffer");
  // A train step (a program with a backward) changes its parameters between
  // runs.
  for (const auto &inst : prog.instructions())
    if (std::optional<contract::OpKind> kind =
            contract::opKindFromName(inst.op());
        kind && contract::isGradient(*kind))
      exe->parametersChange = true;

  if (Status s = checkDataflow(prog, bufferBytes); !s)
    return s;
  exe->commScratch.assign(exe->axisComms.size(), 0);
  for (const auto &inst : prog.instructions())
    exe->widenBytes =
        std::max(exe->widenBytes, Binder::widenedBytes(*exe, inst));
  if (exe->widenBytes > 0) {
    void *block = nullptr;
    if (Status s = exe->kernels->allocate(exe->widenBytes, &block); !s)
      return Status::error("cannot allocate the f32 copies of 16-bit values: " +
                           s.message);
    exe->widenArena = static_cast<uint8_t *>(block);
  }
  for (const auto &inst : prog.instructions()) {
    Step step;
    if (Status s = Binder(*exe, inst).bind(step); !s)
      return s;
    exe->steps.push_back(std::move(step));
  }
  if (Status s = exe->allocateScratch(); !s)
    return s;
  out = std::move(exe);
  return Status::success();
}

/// Scratch is one block allocated here, once, for the largest need of any
/// step (known only once every step is bound), so that out-of-memory shows
/// at load and no step allocates while running. The kernels' part is lent
/// while this executable runs (their scratch is per process); each axis
/// communicator, owned by this executable, gets its part now.
Status Executable::allocateScratch() {
  if (kernels->prepare)
    if (Status s = kernels->prepare(); !s)
      return Status::error("cannot prepare the " + std::string(kernels->name) +
                           " kernels: " + s.message);
  auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  scratchSize = aligned(kernelScratch);
  for (size_t bytes : commScratch)
    scratchSize += aligned(bytes);
  if (scratchSize == 0)
    return Status::success();
  if (Status s = kernels->allocate(scratchSize, &scratch); !s) {
    scratch = nullptr;
    return Status::error(
        "cannot allocate " + std::to_string(scratchSize) +
        " bytes of scratch (" + std::to_string(kernelScratch) +
        " for kernels, the rest for collectives): " + s.message);
  }
  size_t offset = aligned(kernelScratch);
  for (size_t axis = 0; axis < axisComms.size(); ++axis) {
    axisComms[axis]->lendScratch(static_cast<uint8_t *>(scratch) + offset,
                                 commScratch[axis]);
    offset += aligned(commScratch[axis]);
  }
  return Status::success();
}

} // namespace mp::rt
