//===- RunIO.cpp - mp-run's inputs and outputs, shared by its run modes ---===//
//
// Reading and sharing inputs, gathering sharded outputs, joining the parts
// of cut parameters' gradients, and writing and comparing outputs: what a
// plain run (mp-run.cpp) and a pipeline run (PipelineRun.cpp) share.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Comm.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Shards.h"
#include "mp/Support/AtomicFile.h"

#include "Modes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace mp::rt;

namespace mprun {

/// An output name as a path that stays inside the output directory: '/'
/// separates directories (a train step's gradients are "grads/NAME"); in
/// each component, characters other than letters, digits, '.', '_' and '-'
/// become '_', and a leading '.' is prefixed ("../../x" -> "_../_../x").
std::string relativePathOf(const std::string &name) {
  std::string path, component;
  auto flush = [&]() {
    if (component.empty() || component[0] == '.')
      component = "_" + component;
    path += (path.empty() ? "" : "/") + component;
    component.clear();
  };
  for (char c : name) {
    if (c == '/') {
      flush();
      continue;
    }
    component += std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                         c == '_' || c == '-'
                     ? c
                     : '_';
  }
  flush();
  return path;
}

/// Creates the directories of `path` below `root` (which exists).
Status makeParents(const std::string &root, const std::string &path) {
  for (size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    std::string dir = root + "/" + path.substr(0, slash);
    mkdir(dir.c_str(), 0755);
    struct stat st;
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return Status::error("cannot create output directory '" + dir + "'");
  }
  return Status::success();
}

/// The whole tensor of which `local` is this rank's shard, split as `spec`
/// says, gathered from every rank of `comm` (called by every rank).
Status gatherWhole(Communicator &comm, const Tensor &local, const IOSpec &spec,
                   HostBuffer &whole) {
  whole.dtype = local.dtype;
  whole.shape = local.shape;
  whole.shape[spec.shardAxis] *= comm.size();
  whole.bytes.resize(local.bytes() * comm.size());
  // Row-major, the shard is [outer · groups, inner] blocks of the whole's
  // [outer · groups, ranks · inner]: a gather along the inner dim.
  int64_t outer = spec.shardGroups;
  for (int64_t d = 0; d < spec.shardAxis; ++d)
    outer *= local.shape[d];
  int64_t inner = outer ? local.numel() / outer : 0;
  Tensor in{local.data, local.dtype, {outer, inner}};
  Tensor out{whole.bytes.data(), local.dtype, {outer, inner * comm.size()}};
  if (Status s = comm.allGather(in, out, 1); !s)
    return Status::error("gathering output '" + spec.name + "': " + s.message);
  const int64_t size = spec.shardSize;
  if (size > whole.shape[spec.shardAxis])
    return Status::error(
        "output '" + spec.name + "' is " + std::to_string(size) +
        " along dim " + std::to_string(spec.shardAxis) + ", more than its " +
        std::to_string(whole.shape[spec.shardAxis]) + " gathered");
  if (size > 0 && size < whole.shape[spec.shardAxis]) {
    // A padded vocabulary: its padding dropped.
    std::string unpadded = blockAlong(
        std::string_view(reinterpret_cast<const char *>(whole.bytes.data()),
                         whole.bytes.size()),
        whole.shape, static_cast<int64_t>(dtypeSize(whole.dtype)),
        spec.shardAxis, 0, size);
    whole.shape[spec.shardAxis] = size;
    whole.bytes.assign(unpadded.begin(), unpadded.end());
  }
  return Status::success();
}

/// The outputs to write, by name (`named`): the gradients of the parts
/// tensor parallelism cut a fused weight into (`grads/W[:, 0:32]`, ...) are
/// joined into one gradient of the parameter the user wrote (`grads/W`),
/// held in `joined`.
Status outputsToWrite(const std::vector<const Executable::Parameter *> &params,
                      const std::vector<std::string> &names,
                      const std::vector<Tensor> &outputs,
                      std::map<std::string, HostBuffer> &joined,
                      std::vector<std::pair<std::string, Tensor>> &named) {
  std::map<std::string, const Executable::Parameter *> partOf;
  for (const Executable::Parameter *p : params)
    if (!p->partOf.empty())
      partOf["grads/" + p->name] = p;
  std::map<
      std::string,
      std::vector<std::pair<const Executable::Parameter *, const Tensor *>>>
      parts;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string &name = names[i];
    auto part = partOf.find(name);
    if (part == partOf.end()) {
      named.push_back({name, outputs[i]});
      continue;
    }
    std::string whole = "grads/" + part->second->partOf;
    if (!parts.count(whole))
      named.push_back({whole, Tensor{}}); // (filled below, in place)
    parts[whole].push_back({part->second, &outputs[i]});
  }
  for (auto &[name, pieces] : parts) {
    const Executable::Parameter &first = *pieces[0].first;
    HostBuffer &whole = joined[name];
    whole.dtype = pieces[0].second->dtype;
    whole.shape = pieces[0].second->shape;
    if (first.partAxis < 0 ||
        first.partAxis >= static_cast<int64_t>(whole.shape.size()))
      return Status::error("parameter '" + first.name + "' has part axis " +
                           std::to_string(first.partAxis) + " out of range");
    whole.shape[first.partAxis] = first.partWhole;
    std::vector<PartBytes> bytes;
    for (auto &[param, grad] : pieces)
      bytes.push_back({param->partStart,
                       std::string_view(static_cast<const char *>(grad->data),
                                        grad->bytes())});
    std::string data, error;
    if (!joinParts(bytes, whole.shape, dtypeSize(whole.dtype), first.partAxis,
                   data, error))
      return Status::error("joining the gradient parts of '" + first.partOf +
                           "': " + error);
    whole.bytes.assign(data.begin(), data.end());
    for (auto &entry : named)
      if (entry.first == name)
        entry.second = whole.view();
  }
  return Status::success();
}

std::string describe(const IOSpec &spec) {
  return spec.name + " (" + dtypeName(spec.dtype) + " " +
         formatShape(spec.shape) + ")";
}

/// Reads the inputs in the artifact's order, with errors naming what was
/// expected (rank 0 does, for every rank).
Status readInputs(const Options &o, const std::vector<IOSpec> &specs,
                  std::vector<HostBuffer> &buffers) {
  std::map<std::string, std::string> given;
  for (const auto &[name, file] : o.inputs) {
    bool known = std::any_of(specs.begin(), specs.end(),
                             [&](const IOSpec &s) { return s.name == name; });
    if (!known) {
      std::string expected;
      for (const IOSpec &s : specs)
        expected += (expected.empty() ? "" : ", ") + describe(s);
      return Status::error("the artifact has no input '" + name +
                           "' (inputs: " + expected + ")");
    }
    given[name] = file;
  }
  for (const IOSpec &spec : specs) {
    auto it = given.find(spec.name);
    if (it == given.end())
      return Status::error("input " + describe(spec) +
                           " was not given: pass --input " + spec.name +
                           "=FILE.npy");
    HostBuffer buffer;
    if (Status s = readNpy(it->second, buffer); !s)
      return Status::error("input '" + spec.name + "': " + s.message);
    if (buffer.dtype != spec.dtype || buffer.shape != spec.shape)
      return Status::error(
          "input '" + spec.name + "' expects " + dtypeName(spec.dtype) + " " +
          formatShape(spec.shape) + " but '" + it->second + "' holds " +
          dtypeName(buffer.dtype) + " " + formatShape(buffer.shape));
    buffers.push_back(std::move(buffer));
  }
  return Status::success();
}

/// Every rank gets the inputs rank 0 read, as Megatron's broadcast_data
/// does: all ranks compute on the same data, whatever files they see. An
/// input the program reads as each rank's block (`shardAxis`) is left to
/// localInputs: only rank 0 holds it whole.
Status shareInputs(Communicator &world, const std::vector<IOSpec> &specs,
                   std::vector<HostBuffer> &buffers) {
  if (rankId != 0)
    for (const IOSpec &spec : specs) {
      HostBuffer b;
      b.dtype = spec.dtype;
      b.shape = spec.shape;
      if (spec.shardAxis < 0)
        b.bytes.resize(b.view().bytes());
      buffers.push_back(std::move(b));
    }
  for (size_t i = 0; i < buffers.size(); ++i)
    if (specs[i].shardAxis < 0)
      if (Status s = broadcastBytes(world, buffers[i].bytes.data(),
                                    buffers[i].bytes.size(), 0);
          !s)
        return s;
  return Status::success();
}

std::vector<IOSpec> wholeInputs(const Executable &exe) {
  std::vector<IOSpec> specs = exe.inputs();
  for (IOSpec &spec : specs)
    if (spec.shardAxis >= 0)
      spec.shape[spec.shardAxis] *= exe.gridSize();
  return specs;
}

namespace {

/// Point-to-point in pieces of at most 1 GiB: one MPI message holds at
/// most INT_MAX bytes, and a rank's block of a long cache can pass that.
constexpr size_t kPieceBytes = size_t(1) << 30;

Status sendInPieces(Communicator &world, HostBuffer &b, int peer) {
  for (size_t at = 0; at < b.bytes.size(); at += kPieceBytes) {
    size_t n = std::min(kPieceBytes, b.bytes.size() - at);
    if (Status s = world.send(
            Tensor{b.bytes.data() + at, DType::I8, {static_cast<int64_t>(n)}},
            peer);
        !s)
      return s;
  }
  return Status::success();
}

Status recvInPieces(Communicator &world, HostBuffer &b, int peer) {
  for (size_t at = 0; at < b.bytes.size(); at += kPieceBytes) {
    size_t n = std::min(kPieceBytes, b.bytes.size() - at);
    Tensor piece{b.bytes.data() + at, DType::I8, {static_cast<int64_t>(n)}};
    if (Status s = world.recv(piece, peer); !s)
      return s;
  }
  return Status::success();
}

} // namespace

Status localInputs(Communicator &world, const Executable &exe,
                   std::vector<HostBuffer> &whole,
                   std::vector<HostBuffer> &blocks,
                   std::vector<Tensor> &local) {
  // mp-run lays ranks out [replica][grid position].
  const int64_t ranks = exe.gridSize();
  local.clear();
  blocks.resize(whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    const IOSpec &spec = exe.inputs()[i];
    if (spec.shardAxis < 0) {
      local.push_back(whole[i].view());
      continue;
    }
    HostBuffer &mine = blocks[i];
    mine.dtype = spec.dtype;
    mine.shape = spec.shape;
    if (rankId != 0) {
      mine.bytes.resize(mine.view().bytes());
      if (Status s = recvInPieces(world, mine, 0); !s)
        return Status::error("receiving input '" + spec.name +
                             "': " + s.message);
    } else {
      std::string_view bytes(
          reinterpret_cast<const char *>(whole[i].bytes.data()),
          whole[i].bytes.size());
      for (int r = world.size() - 1; r >= 0; --r) {
        std::string block = shardOf(bytes, whole[i].shape, spec.shardAxis,
                                    spec.shardGroups, ranks, r % ranks);
        mine.bytes.assign(block.begin(), block.end());
        if (r == 0)
          break;
        if (Status s = sendInPieces(world, mine, r); !s)
          return Status::error("sending input '" + spec.name + "' to rank " +
                               std::to_string(r) + ": " + s.message);
      }
    }
    local.push_back(mine.view());
  }
  return Status::success();
}

void writeOutputs(const Options &o,
                  const std::vector<std::pair<std::string, Tensor>> &named) {
  mkdir(o.outputDir.c_str(), 0755);
  struct stat st;
  if (stat(o.outputDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    abortRun("cannot create output directory '" + o.outputDir + "'");
  for (auto &[name, value] : named) {
    std::string relative = relativePathOf(name) + ".npy";
    if (Status s = makeParents(o.outputDir, relative); !s)
      abortRun(s.message);
    std::string path = o.outputDir + "/" + relative;
    if (Status s = writeNpy(path, value); !s)
      abortRun(s.message);
    if (!o.quiet)
      std::printf("mp-run: wrote %s (%s %s)\n", path.c_str(),
                  dtypeName(value.dtype), formatShape(value.shape).c_str());
  }
}

/// The executable's parameters and output names (outputsToWrite's view).
std::vector<const Executable::Parameter *> parametersOf(const Executable &exe) {
  std::vector<const Executable::Parameter *> params;
  for (const Executable::Parameter &p : exe.parameters())
    params.push_back(&p);
  return params;
}

std::vector<std::string> outputNames(const Executable &exe) {
  std::vector<std::string> names;
  for (const IOSpec &spec : exe.outputs())
    names.push_back(spec.name);
  return names;
}

bool compareOutputs(const std::vector<std::pair<std::string, Tensor>> &outputs,
                    const std::vector<IOSpec> &refSpecs,
                    const std::vector<Tensor> &refOutputs, double tolerance) {
  bool failed = false;
  for (const auto &[name, a] : outputs) {
    size_t i = 0;
    while (i < refSpecs.size() && refSpecs[i].name != name)
      ++i;
    if (i == refSpecs.size()) {
      std::printf("  %s: not in the reference\n", name.c_str());
      continue;
    }
    const Tensor &b = refOutputs[i];
    if (a.shape != b.shape || a.dtype != DType::F32 || b.dtype != DType::F32) {
      std::printf("  %s: not comparable (%s %s vs %s %s)\n", name.c_str(),
                  dtypeName(a.dtype), formatShape(a.shape).c_str(),
                  dtypeName(b.dtype), formatShape(b.shape).c_str());
      continue;
    }
    double err = 0, scale = 0;
    int64_t notFinite = 0; // values not finite where the reference is
    for (int64_t k = 0; k < a.numel(); ++k) {
      const float x = a.as<float>()[k], y = b.as<float>()[k];
      if (!std::isfinite(x) && std::isfinite(y)) {
        ++notFinite;
        continue;
      }
      err = std::max(err, static_cast<double>(std::abs(x - y)));
      scale = std::max(scale, static_cast<double>(std::abs(y)));
    }
    if (notFinite > 0) {
      std::printf("  %s: %lld values are NaN or infinite where the "
                  "reference's are finite\n",
                  name.c_str(), static_cast<long long>(notFinite));
      failed = true;
      continue;
    }
    const double relative = scale > 0 ? err / scale : err;
    const bool within = tolerance < 0 || relative <= tolerance;
    std::printf(
        "  %s: max abs error %.3g, relative to max |reference| %.3g%s\n",
        name.c_str(), err, relative,
        tolerance < 0 ? ""
        : within      ? " (within --verify-tolerance)"
                      : " (above --verify-tolerance)");
    failed = failed || !within;
  }
  return !failed;
}

} // namespace mprun
