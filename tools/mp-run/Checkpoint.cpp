//===- Checkpoint.cpp - mp-run --train --save / --resume ------------------===//
//
// A checkpoint is a directory: rank<R>.safetensors per grid rank (each
// parameter's shard in its dtype, and its fp32 master weights and AdamW
// moments under master/, exp_avg/, exp_avg_sq/; with pipeline stages
// stage<S>.rank<R>.safetensors, each stage its own parameters) and
// manifest.json (the step, the layout, how each parameter is split and
// which stage holds it). Loading reassembles each tensor whole and takes
// this rank's shard as its own program splits it, so a checkpoint loads
// into another (tp, dp, pp) layout.
//
//===----------------------------------------------------------------------===//
#include "TrainState.h"

#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Safetensors.h"
#include "mp/Runtime/Shards.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <ftw.h>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

using namespace mp::rt;

namespace mprun {
namespace {

const char *const kStateKinds[] = {"master/", "exp_avg/", "exp_avg_sq/"};

int removeEntry(const char *path, const struct stat *, int, struct FTW *) {
  return ::remove(path);
}

/// Removes `path` and everything below it (nothing when it is absent).
void removeTree(const std::string &path) {
  ::nftw(path.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS);
}

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

/// A test hook: this rank dies (SIGKILL) at `point` of a save when
/// MP_RUN_TEST_KILL_IN_SAVE is "POINT:RANK".
void maybeDie(const char *point, int rank) {
  const char *hook = std::getenv("MP_RUN_TEST_KILL_IN_SAVE");
  if (!hook)
    return;
  std::string spec = hook;
  size_t colon = spec.find(':');
  if (spec.substr(0, colon) == point &&
      (colon == std::string::npos ||
       std::atoi(spec.c_str() + colon + 1) == rank))
    std::raise(SIGKILL);
}

/// The whole fp32 master weights and moments on this rank (ZeRO-1:
/// gathered from the replicas' shards).
Status wholeState(const TrainLayout &layout, const Flat &flat,
                  std::vector<float> &w, std::vector<float> &m,
                  std::vector<float> &v) {
  Status st = wholeOf(layout, flat, flat.master, w);
  if (st)
    st = wholeOf(layout, flat, flat.m, m);
  if (st)
    st = wholeOf(layout, flat, flat.v, v);
  return st;
}

/// A stage's files are stage<S>.rank<R>.safetensors when the layout has
/// pipeline stages, else rank<R>.safetensors.
std::string stagePrefix(const TrainLayout &layout) {
  return layout.stages > 1 ? "stage" + std::to_string(layout.stage) + "."
                           : std::string();
}

/// manifest.json: `header`'s fields, then one line per parameter.
std::string manifestText(const nlohmann::ordered_json &header,
                         const std::vector<std::string> &parameters) {
  std::string text = header.dump(2);
  text.erase(text.find_last_of('}'));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  text += ",\n  \"parameters\": [";
  for (size_t i = 0; i < parameters.size(); ++i)
    text += std::string(i ? "," : "") + "\n    " + parameters[i];
  text += "\n  ]\n}\n";
  return text;
}

std::string bytesOf(const float *values, int64_t n) {
  return std::string(reinterpret_cast<const char *>(values),
                     static_cast<size_t>(n) * sizeof(float));
}

/// The manifest's fields besides the parameters.
nlohmann::ordered_json manifestHeader(const TrainLayout &layout, int64_t step,
                                      int64_t seed,
                                      const TrainOptions &options) {
  nlohmann::ordered_json manifest;
  manifest["format"] = "mp-checkpoint";
  manifest["version"] = 1;
  manifest["step"] = step;
  manifest["seed"] = seed; // the random state: masks are f(seed, step)
  manifest["ranks"] = layout.grid->size();
  manifest["data_parallel"] = layout.replicas;
  manifest["zero"] = layout.zero ? 1 : 0;
  manifest["optimizer"] = options.sgd ? "sgd" : "adamw";
  // Trained from --mp-synthetic-weights' random values, not the model's
  // (a resumed run keeps what its checkpoint said).
  manifest["initial_weights"] = layout.syntheticStart ? "synthetic" : "model";
  manifest["data"] = options.data;
  // Rows consumed = step x global batch: a resumed run must read alike.
  manifest["global_batch"] = layout.rowsPerStep;
  return manifest;
}

/// This rank's file, and (its grid's first rank) the manifest of its
/// stage's parameters: manifest.json, or with pipeline stages
/// manifest.stage<S>.json for rank 0 to merge.
Status writeRank(const std::string &dir, const TrainLayout &layout,
                 const std::vector<Slot> &slots, const std::vector<float> &w,
                 const std::vector<float> &m, const std::vector<float> &v,
                 int64_t step, int64_t seed, const TrainOptions &options) {
  Communicator &grid = *layout.grid;
  SafetensorsWriter writer(dir + "/" + stagePrefix(layout) + "rank" +
                               std::to_string(grid.rank()) + ".safetensors",
                           /*checksums=*/true);
  std::vector<uint8_t> bytes;
  std::vector<std::string> entries;
  for (const Slot &s : slots) {
    if (!s.normHere) // (a tied parameter: its first stage's copy)
      continue;
    const int64_t n = s.param.numel();
    fromFloats(w.data() + s.offset, n, s.param.dtype, bytes);
    writer.add(s.name, s.param.dtype, s.param.shape,
               std::string(bytes.begin(), bytes.end()));
    const float *state[] = {w.data(), m.data(), v.data()};
    for (int k = 0; k < 3; ++k)
      writer.add(kStateKinds[k] + s.name, DType::F32, s.param.shape,
                 bytesOf(state[k] + s.offset, n));
    nlohmann::ordered_json p = {{"name", s.name},
                                {"dtype", dtypeName(s.param.dtype)},
                                {"local_shape", s.param.shape},
                                {"shard_axis", s.shardAxis},
                                {"shard_groups", s.shardGroups}};
    if (!s.partOf.empty()) {
      p["part_of"] = s.partOf;
      p["part_axis"] = s.partAxis;
      p["part_start"] = s.partStart;
      p["part_whole"] = s.partWhole; // (a padded part runs past it)
    }
    if (layout.stages > 1)
      p["stage"] = layout.stage;
    entries.push_back(p.dump());
  }
  if (Status st = writer.finish(); !st)
    return st;
  if (grid.rank() != 0)
    return Status::success();
  if (layout.stages > 1) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string &e : entries)
      list.push_back(nlohmann::json::parse(e));
    return writeFileAtomically(dir + "/manifest.stage" +
                                   std::to_string(layout.stage) + ".json",
                               list.dump());
  }
  return writeFileAtomically(
      dir + "/manifest.json",
      manifestText(manifestHeader(layout, step, seed, options), entries));
}

/// Rank 0 of a pipeline's save: the stages' manifests merged into one.
Status mergeManifests(const std::string &dir, const TrainLayout &layout,
                      int64_t step, int64_t seed, const TrainOptions &options) {
  std::vector<std::string> entries;
  for (int64_t s = 0; s < layout.stages; ++s) {
    const std::string part =
        dir + "/manifest.stage" + std::to_string(s) + ".json";
    std::ifstream in(part);
    nlohmann::json list =
        in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
    if (!list.is_array())
      return Status::error("--save: cannot read '" + part + "'");
    for (const auto &p : list)
      entries.push_back(nlohmann::ordered_json(p).dump());
    ::remove(part.c_str());
  }
  nlohmann::ordered_json header = manifestHeader(layout, step, seed, options);
  header["stages"] = layout.stages;
  return writeFileAtomically(dir + "/manifest.json",
                             manifestText(header, entries));
}

/// Puts the finished `tmp` at `dir`: swapped atomically with a previous
/// checkpoint (which is then removed), so `dir` is at every moment either
/// the old checkpoint or the new one.
Status swapIntoPlace(const std::string &tmp, const std::string &dir) {
  syncDirectory(tmp);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(),
                    RENAME_EXCHANGE) != 0) {
      // A filesystem without the exchange (NFS, some FUSE): two renames,
      // the previous checkpoint kept as DIR.old until the new one is in.
      const std::string old = dir + ".old";
      removeTree(old);
      if (std::rename(dir.c_str(), old.c_str()) != 0 ||
          std::rename(tmp.c_str(), dir.c_str()) != 0)
        return Status::error("--save: cannot put '" + tmp + "' in place of '" +
                             dir + "': " + std::strerror(errno));
      syncDirectory(parentOf(dir));
      removeTree(old);
      return Status::success();
    }
    syncDirectory(parentOf(dir));
    maybeDie("after-swap", 0);
    removeTree(tmp); // (now the previous checkpoint)
    return Status::success();
  }
  if (std::rename(tmp.c_str(), dir.c_str()) != 0)
    return Status::error("--save: cannot rename '" + tmp + "' to '" + dir +
                         "': " + std::strerror(errno));
  syncDirectory(parentOf(dir));
  return Status::success();
}

} // namespace

Status checkSaveDirectory(const std::string &dir) {
  const std::string parent = parentOf(dir);
  struct stat st;
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      ::access(parent.c_str(), W_OK) != 0)
    return Status::error("--save: '" + parent +
                         "' is not a directory this process can write to");
  if (::stat(dir.c_str(), &st) != 0)
    return Status::success();
  if (!S_ISDIR(st.st_mode))
    return Status::error("--save: '" + dir + "' exists and is not a directory");
  // A save replaces the directory whole: only an earlier checkpoint (or
  // nothing) may be there.
  if (Status s = expectRegularFile(dir + "/manifest.json"); !s)
    return Status::error("--save: " + s.message);
  std::ifstream in(dir + "/manifest.json");
  nlohmann::json manifest =
      in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
  const bool isCheckpoint = manifest.is_object() &&
                            manifest.contains("format") &&
                            manifest["format"] == "mp-checkpoint";
  bool empty = true;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (struct dirent *e = ::readdir(d))
      empty &=
          std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0;
    ::closedir(d);
  }
  if (!isCheckpoint && !empty)
    return Status::error("--save: '" + dir +
                         "' holds something other than an mp checkpoint; a "
                         "save replaces the directory whole, so give a new "
                         "or checkpoint directory");
  return Status::success();
}

void saveCheckpoint(const std::string &dir, Communicator &world,
                    const TrainLayout &layout, const std::vector<Slot> &slots,
                    Flat &flat, int64_t step, int64_t seed,
                    const TrainOptions &options) {
  std::vector<float> w, m, v;
  stopIfAnyRankFailed(world, wholeState(layout, flat, w, m, v));
  const std::string tmp = dir + ".tmp";
  Status made = Status::success();
  if (world.rank() == 0) {
    removeTree(tmp);
    if (::mkdir(tmp.c_str(), 0755) != 0)
      made = Status::error("--save: cannot create '" + tmp +
                           "': " + std::strerror(errno));
  }
  stopIfAnyRankFailed(world, made);
  maybeDie("before-write", world.rank());
  const bool firstReplica = !layout.data || layout.data->rank() == 0;
  stopIfAnyRankFailed(world, firstReplica ? writeRank(tmp, layout, slots, w, m,
                                                      v, step, seed, options)
                                          : Status::success());
  if (layout.stages > 1)
    stopIfAnyRankFailed(world,
                        world.rank() == 0
                            ? mergeManifests(tmp, layout, step, seed, options)
                            : Status::success());
  maybeDie("before-swap", world.rank());
  stopIfAnyRankFailed(world, world.rank() == 0 ? swapIntoPlace(tmp, dir)
                                               : Status::success());
}

/// The checkpoint's parameters by name, and each rank's file.
using SavedParams = std::map<std::string, nlohmann::json>;
using RankFiles = std::vector<std::unique_ptr<SafetensorsFile>>;

/// A checkpoint's files, opened as parameters need them: each grid rank's
/// (rank<R>.safetensors), or with pipeline stages the files of the stage a
/// parameter names (stage<S>.rank<R>.safetensors).
class CheckpointFiles {
public:
  CheckpointFiles(std::string dir, int64_t ranks)
      : dir(std::move(dir)), ranks(ranks) {}
  Status of(const nlohmann::json &param, const RankFiles *&files) {
    std::string prefix;
    if (param.contains("stage")) {
      if (!param["stage"].is_number_integer() ||
          param["stage"].get<int64_t>() < 0)
        return Status::error("--resume: parameter '" +
                             param.value("name", std::string()) +
                             "' names a malformed stage");
      prefix = "stage" + std::to_string(param["stage"].get<int64_t>()) + ".";
    }
    RankFiles &opened = byPrefix[prefix];
    if (opened.empty()) {
      opened.resize(static_cast<size_t>(ranks));
      for (int64_t r = 0; r < ranks; ++r) {
        const std::string file =
            dir + "/" + prefix + "rank" + std::to_string(r) + ".safetensors";
        if (Status st = SafetensorsFile::open(file, opened[r]); !st) {
          opened.clear();
          return Status::error("--resume: " + st.message);
        }
      }
    }
    files = &opened;
    return Status::success();
  }

private:
  std::string dir;
  int64_t ranks;
  std::map<std::string, RankFiles> byPrefix;
};

/// State `kind` (master, moments) of the saved parameter `name`, whole, and
/// its shape.
Status savedTensor(const SavedParams &saved, CheckpointFiles &checkpoint,
                   const std::string &name, int kind, std::string &whole,
                   std::vector<int64_t> &wholeShape) {
  const nlohmann::json &p = saved.at(name);
  const RankFiles *opened = nullptr;
  if (Status st = checkpoint.of(p, opened); !st)
    return st;
  const RankFiles &files = *opened;
  const std::string bad =
      "--resume: parameter '" + name + "' is malformed in the manifest";
  if (!p.contains("local_shape") || !p["local_shape"].is_array() ||
      !p.contains("shard_axis") || !p["shard_axis"].is_number_integer() ||
      !p.contains("shard_groups") || !p["shard_groups"].is_number_integer())
    return Status::error(bad);
  std::vector<int64_t> localShape;
  for (const auto &d : p["local_shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return Status::error(bad);
    localShape.push_back(d.get<int64_t>());
  }
  const int64_t axis = p["shard_axis"].get<int64_t>();
  const int64_t groups = p["shard_groups"].get<int64_t>();
  if (axis >= static_cast<int64_t>(localShape.size()) || groups < 1 ||
      (axis >= 0 && localShape[axis] % groups != 0))
    return Status::error(bad);
  std::optional<int64_t> localCount = mp::checkedNumElements(localShape);
  if (!localCount)
    return Status::error(bad);
  wholeShape = localShape;
  if (axis >= 0)
    wholeShape[axis] *= static_cast<int64_t>(files.size());
  std::vector<std::string_view> shards;
  const std::string key = kStateKinds[kind] + name;
  for (size_t r = 0; r < files.size(); ++r) {
    auto entry = files[r]->entries().find(key);
    if (entry == files[r]->entries().end() ||
        entry->second.dtype != DType::F32 ||
        entry->second.end - entry->second.begin !=
            static_cast<uint64_t>(*localCount) * sizeof(float))
      return Status::error("--resume: rank " + std::to_string(r) +
                           "'s file lacks f32 '" + key + "' of " +
                           formatShape(localShape));
    shards.emplace_back(
        reinterpret_cast<const char *>(files[r]->data(entry->second)),
        entry->second.end - entry->second.begin);
  }
  whole = assembleShards(shards, localShape, axis, groups);
  return Status::success();
}

/// State `kind` of parameter `name` joined from its saved parts (the parts
/// a fused weight was cut into, or one padded part), whole of shape `mine`;
/// `found` false when the checkpoint has no part of it.
Status joinSavedParts(const SavedParams &saved, CheckpointFiles &files,
                      const std::string &name, int kind,
                      const std::vector<int64_t> &mine, std::string &whole,
                      bool &found) {
  std::vector<std::string> values; // (the bytes the parts view)
  std::vector<PartBytes> parts;
  std::vector<int64_t> shape;
  int64_t axis = -1;
  for (const auto &[partName, p] : saved) {
    if (!p.contains("part_of") || p["part_of"] != name)
      continue;
    const bool integers =
        p.contains("part_axis") && p["part_axis"].is_number_integer() &&
        p.contains("part_start") && p["part_start"].is_number_integer();
    if (!integers || (axis >= 0 && p["part_axis"].get<int64_t>() != axis))
      return Status::error("--resume: the saved part '" + partName +
                           "' is malformed in the manifest");
    axis = p["part_axis"].get<int64_t>();
    values.emplace_back();
    if (Status st =
            savedTensor(saved, files, partName, kind, values.back(), shape);
        !st)
      return st;
    std::vector<int64_t> expected = shape;
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
        axis >= static_cast<int64_t>(mine.size()) ||
        (expected[axis] = mine[axis], expected != mine))
      return Status::error("--resume: the saved part '" + partName + "' is " +
                           formatShape(shape) + ", not a part of " +
                           formatShape(mine) + " along dim " +
                           std::to_string(axis));
    // (Older checkpoints do not say.)
    if (p.contains("part_whole") &&
        (!p["part_whole"].is_number_integer() ||
         p["part_whole"].get<int64_t>() != mine[axis]))
      return Status::error(
          "--resume: the saved part '" + partName + "' is a part of '" + name +
          "' of " + p["part_whole"].dump() + " along dim " +
          std::to_string(axis) + ", which is " + formatShape(mine) +
          " in this model (trained from another model?)");
    parts.push_back({p["part_start"].get<int64_t>(), {}});
  }
  found = !parts.empty();
  if (!found)
    return Status::success();
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i].bytes = values[i];
  std::string error;
  if (!joinParts(parts, mine, sizeof(float), axis, whole, error))
    return Status::error("--resume: the saved parts of '" + name +
                         "' do not make it " + formatShape(mine) + ": " +
                         error);
  return Status::success();
}

/// State `kind` of slot `s`'s parameter, whole (of shape `mine`): saved
/// under its name, or cut differently by tensor parallelism in one layout
/// and not the other (a fused weight saved whole that is a part here, or
/// saved as parts that are whole here; a vocabulary padded to another
/// size).
Status savedWhole(const SavedParams &saved, CheckpointFiles &files,
                  const Slot &s, int kind, const std::vector<int64_t> &mine,
                  std::string &whole) {
  std::vector<int64_t> shape;
  auto mismatch = [&](const std::string &name) {
    return Status::error("--resume: parameter '" + name + "' is " +
                         formatShape(shape) + " in the checkpoint but " +
                         formatShape(mine) + " in this model");
  };
  if (saved.count(s.name)) {
    if (Status st = savedTensor(saved, files, s.name, kind, whole, shape); !st)
      return st;
    return shape == mine ? Status::success() : mismatch(s.name);
  }
  const int64_t axis = s.partAxis;
  if (!s.partOf.empty() &&
      (axis < 0 || axis >= static_cast<int64_t>(mine.size())))
    return Status::error("--resume: parameter '" + s.name + "' has part axis " +
                         std::to_string(axis) + " out of range");
  if (!s.partOf.empty() && saved.count(s.partOf)) {
    std::string fused;
    if (Status st = savedTensor(saved, files, s.partOf, kind, fused, shape);
        !st)
      return st;
    std::vector<int64_t> expected = shape;
    // (The part may run past the end: a padded vocabulary.)
    if (shape.size() != mine.size() || s.partStart < 0 ||
        s.partStart >= shape[axis] || shape[axis] != s.partWhole ||
        (expected[axis] = mine[axis], expected != mine))
      return mismatch(s.partOf);
    whole =
        blockAlong(fused, shape, sizeof(float), axis, s.partStart, mine[axis]);
    return Status::success();
  }
  bool found = false;
  if (!s.partOf.empty()) {
    // The user's parameter saved in other parts (padded to another size).
    shape = mine;
    shape[axis] = s.partWhole;
    std::string fused;
    if (Status st =
            joinSavedParts(saved, files, s.partOf, kind, shape, fused, found);
        !st)
      return st;
    if (found) {
      whole = blockAlong(fused, shape, sizeof(float), axis, s.partStart,
                         mine[axis]);
      return Status::success();
    }
  }
  // Saved as the parts of a fused weight that is whole here.
  if (Status st =
          joinSavedParts(saved, files, s.name, kind, mine, whole, found);
      !st || found)
    return st;
  return Status::error("--resume: the checkpoint has no parameter '" + s.name +
                       "'");
}

Status loadCheckpoint(const std::string &dir, TrainLayout &layout,
                      const std::vector<Slot> &slots, Flat &flat, int64_t &step,
                      int64_t &seed, bool sgd) {
  const std::string path = dir + "/manifest.json";
  if (Status s = expectRegularFile(path); !s)
    return Status::error("--resume: " + s.message);
  std::ifstream in(path);
  if (!in)
    return Status::error("--resume: cannot read '" + path +
                         "' (a checkpoint mp-run --train --save wrote)");
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object() ||
      !manifest.contains("format") || manifest["format"] != "mp-checkpoint" ||
      !manifest["step"].is_number_integer() ||
      !manifest["ranks"].is_number_integer() ||
      !manifest["parameters"].is_array())
    return Status::error("--resume: '" + path +
                         "' is not an mp-run checkpoint manifest");
  step = manifest["step"].get<int64_t>();
  if (manifest.contains("global_batch") &&
      manifest["global_batch"].is_number_integer() && layout.rowsPerStep > 0) {
    const int64_t saved = manifest["global_batch"].get<int64_t>();
    const int64_t here = layout.rowsPerStep;
    if (saved != here)
      return Status::error(
          "--resume: the checkpoint read " + std::to_string(saved) +
          " rows per step and this run reads " + std::to_string(here) +
          " (batch x micro-batches x data-parallel replicas): its data "
          "position would not "
          "carry over");
  }
  if (manifest.contains("optimizer") && manifest["optimizer"].is_string() &&
      manifest["optimizer"].get<std::string>() != (sgd ? "sgd" : "adamw"))
    return Status::error("--resume: the checkpoint was trained with " +
                         manifest["optimizer"].get<std::string>() +
                         ", this run uses " + (sgd ? "sgd" : "adamw"));
  if (manifest.contains("seed") && manifest["seed"].is_number_integer())
    seed = manifest["seed"].get<int64_t>();
  layout.syntheticStart = manifest.contains("initial_weights") &&
                          manifest["initial_weights"] == "synthetic";
  const int64_t ranks = manifest["ranks"].get<int64_t>();
  if (ranks < 1 || ranks > (1 << 20) || step < 0)
    return Status::error("--resume: '" + path +
                         "' has a step or rank count "
                         "out of range");
  std::map<std::string, nlohmann::json> saved;
  for (const auto &p : manifest["parameters"])
    if (p.is_object() && p.contains("name") && p["name"].is_string())
      saved[p["name"].get<std::string>()] = p;
  // Every saved parameter must be one of this model's (a pipeline stage
  // holds only its own, so there only this stage's are looked for).
  if (!layout.pipeline)
    for (const auto &[name, p] : saved) {
      const std::string whole =
          p.contains("part_of") && p["part_of"].is_string()
              ? p["part_of"].get<std::string>()
              : name;
      const bool mine = std::any_of(slots.begin(), slots.end(), [&](auto &s) {
        return s.name == name || s.name == whole || s.partOf == name ||
               s.partOf == whole;
      });
      if (!mine)
        return Status::error("--resume: the checkpoint holds parameter '" +
                             name +
                             "', which this model lacks (was it trained from "
                             "another model?)");
    }
  CheckpointFiles files(dir, ranks);
  Communicator &grid = *layout.grid;
  std::vector<float> w(static_cast<size_t>(flat.padded), 0.0f), m = w, v = w;
  for (const Slot &s : slots) {
    // This program's whole shape of the parameter.
    std::vector<int64_t> mine = s.param.shape;
    if (s.shardAxis >= 0)
      mine[s.shardAxis] *= grid.size();
    float *targets[] = {w.data(), m.data(), v.data()};
    for (int k = 0; k < 3; ++k) {
      std::string whole;
      if (Status st = savedWhole(saved, files, s, k, mine, whole); !st)
        return st;
      std::string local = shardOf(whole, mine, s.shardAxis, s.shardGroups,
                                  grid.size(), grid.rank());
      if (local.size() != static_cast<size_t>(s.param.numel()) * sizeof(float))
        return Status::error(std::string("--resume: '") + kStateKinds[k] +
                             s.name + "' has the wrong size");
      std::memcpy(targets[k] + s.offset, local.data(), local.size());
    }
  }
  flat.master.assign(w.begin() + flat.begin, w.begin() + flat.end);
  flat.m.assign(m.begin() + flat.begin, m.begin() + flat.end);
  flat.v.assign(v.begin() + flat.begin, v.begin() + flat.end);
  return uploadWeights(*layout.exe, slots, w);
}

} // namespace mprun
