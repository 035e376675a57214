//===- TrainBatch.cpp - the inputs of each train step ---------------------===//
#include "TrainBatch.h"
#include "Modes.h"

#include "mp/Runtime/Npy.h"

#include <cstring>
#include <map>

using namespace mp::rt;

namespace mprun {

namespace {

bool isIndex(DType t) { return t == DType::I64 || t == DType::I32; }

/// Reads the token file: integers [N, S+1].
Status readTokens(const std::string &path, int64_t sequence,
                  HostBuffer &tokens) {
  if (Status s = readNpy(path, tokens); !s)
    return Status::error("--data: " + s.message);
  if (!isIndex(tokens.dtype) || tokens.shape.size() != 2 ||
      tokens.shape[1] != sequence + 1 || tokens.shape[0] < 1)
    return Status::error(
        "--data '" + path + "' holds " + dtypeName(tokens.dtype) + " " +
        formatShape(tokens.shape) + ": expected integer tokens [N, " +
        std::to_string(sequence + 1) +
        "] (the model's sequence plus one, for the labels)");
  return Status::success();
}

int64_t tokenAt(const HostBuffer &t, int64_t i) {
  return t.dtype == DType::I64
             ? reinterpret_cast<const int64_t *>(t.bytes.data())[i]
             : reinterpret_cast<const int32_t *>(t.bytes.data())[i];
}

void setIndex(HostBuffer &b, int64_t i, int64_t v) {
  if (b.dtype == DType::I64)
    reinterpret_cast<int64_t *>(b.bytes.data())[i] = v;
  else
    reinterpret_cast<int32_t *>(b.bytes.data())[i] = static_cast<int32_t>(v);
}

/// Reads --input `file` for the step's input `spec`: the step's own shape
/// (every step), or, for an input whose first dim is the step's `batch`,
/// one row per token row (`rows` of them).
Status readStepInput(const std::string &file, const IOSpec &spec, int64_t batch,
                     int64_t rows, HostBuffer &out, bool &perRow) {
  std::string rowShape = "[" + std::to_string(rows);
  for (size_t d = 1; d < spec.shape.size(); ++d)
    rowShape += ", " + std::to_string(spec.shape[d]);
  rowShape += "]";
  if (spec.shardAxis >= 0)
    return Status::error("input '" + spec.name +
                         "' is read as each rank's block: --train does not "
                         "feed such inputs");
  if (Status s = readNpy(file, out); !s)
    return Status::error("input '" + spec.name + "': " + s.message);
  const bool sameTail = out.shape.size() == spec.shape.size() &&
                        !spec.shape.empty() &&
                        std::equal(out.shape.begin() + 1, out.shape.end(),
                                   spec.shape.begin() + 1);
  // Rows follow the tokens only along a batch dim.
  const bool batched = !spec.shape.empty() && spec.shape[0] == batch;
  perRow = out.shape != spec.shape;
  if (out.dtype != spec.dtype ||
      (perRow && (!batched || !sameTail || out.shape[0] != rows)))
    return Status::error(
        "input '" + spec.name + "' expects " + dtypeName(spec.dtype) + " " +
        formatShape(spec.shape) + " (every step)" +
        (batched ? " or " + rowShape +
                       " (a row per row of --data, taken with the tokens)"
                 : std::string(" (its first dim is not the batch, so no row "
                               "per token row)")) +
        " but '" + file + "' holds " + dtypeName(out.dtype) + " " +
        formatShape(out.shape));
  return Status::success();
}

} // namespace

Status
findTrainStep(const std::vector<IOSpec> &ins, const std::vector<IOSpec> &outs,
              const std::vector<std::pair<std::string, std::string>> &given,
              const std::string &notTraining, size_t &idsInput,
              size_t &labelsInput) {
  idsInput = labelsInput = ins.size();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].name == "labels")
      labelsInput = i;
  if (labelsInput == ins.size() || outs.empty() || outs[0].name != "loss")
    return Status::error(notTraining);
  std::vector<size_t> candidates;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].name == "input_ids") {
      idsInput = i;
      return Status::success();
    }
    bool givenHere = std::any_of(given.begin(), given.end(), [&](auto &g) {
      return g.first == ins[i].name;
    });
    if (i != labelsInput && isIndex(ins[i].dtype) && !givenHere)
      candidates.push_back(i);
  }
  if (candidates.size() == 1) {
    idsInput = candidates.front();
    return Status::success();
  }
  if (candidates.empty())
    return Status::error(notTraining + ": no integer input for the token "
                                       "ids besides the labels and those "
                                       "--input gives");
  std::string names;
  for (size_t i : candidates)
    names += (names.empty() ? "" : ", ") + ins[i].name;
  return Status::error(
      "the train step takes several integer inputs that --input does not "
      "give (" +
      names +
      ") and none is named input_ids: give all but the token ids with "
      "--input NAME=FILE.npy");
}

Status TrainBatches::open(const TrainOptions &t,
                          const std::vector<IOSpec> &specs, size_t idsInput,
                          size_t labelsInput, int64_t replicaCount,
                          TrainBatches &out) {
  out.ids = idsInput;
  out.labels = labelsInput;
  out.replicas = replicaCount;
  if (Status s = readTokens(t.data, specs[idsInput].shape[1], out.tokens); !s)
    return s;
  std::map<std::string, std::string> given;
  for (const auto &[name, file] : t.inputs) {
    size_t i = 0;
    while (i < specs.size() && specs[i].name != name)
      ++i;
    if (i == specs.size()) {
      std::string names;
      for (const IOSpec &s : specs)
        names += (names.empty() ? "" : ", ") + describe(s);
      return Status::error("the train step has no input '" + name +
                           "' (inputs: " + names + ")");
    }
    if (i == idsInput || i == labelsInput)
      return Status::error("--input " + name +
                           ": the train step's token ids and labels come "
                           "from --data");
    given[name] = file;
  }
  out.inputs.clear();
  out.perRow.assign(specs.size(), HostBuffer());
  for (size_t i = 0; i < specs.size(); ++i) {
    out.inputs.push_back(HostBuffer::zeros(specs[i].dtype, specs[i].shape));
    if (i == idsInput || i == labelsInput)
      continue;
    auto it = given.find(specs[i].name);
    if (it == given.end())
      return Status::error(
          "the train step also takes " + describe(specs[i]) +
          ", which --data does not give: pass --input " + specs[i].name +
          "=FILE.npy, the step's shape (every step) or a row per row of "
          "--data (" +
          std::to_string(out.tokens.shape[0]) + ")");
    HostBuffer file;
    bool perRow = false;
    if (Status s = readStepInput(it->second, specs[i], specs[idsInput].shape[0],
                                 out.tokens.shape[0], file, perRow);
        !s)
      return s;
    if (perRow)
      out.perRow[i] = std::move(file);
    else
      out.inputs[i] = std::move(file);
  }
  return Status::success();
}

void TrainBatches::fill(int64_t step, int64_t replica) {
  HostBuffer &idsBuffer = inputs[ids], &labelsBuffer = inputs[labels];
  const int64_t batch = idsBuffer.shape[0], seq = idsBuffer.shape[1];
  const int64_t rows = tokens.shape[0], width = tokens.shape[1];
  for (int64_t b = 0; b < batch; ++b) {
    int64_t row = ((step - 1) * batch * replicas + replica * batch + b) % rows;
    for (int64_t s = 0; s < seq; ++s) {
      setIndex(idsBuffer, b * seq + s, tokenAt(tokens, row * width + s));
      setIndex(labelsBuffer, b * seq + s, tokenAt(tokens, row * width + s + 1));
    }
    for (size_t i = 0; i < perRow.size(); ++i) {
      if (perRow[i].bytes.empty())
        continue;
      const size_t rowBytes = inputs[i].bytes.size() / batch;
      std::memcpy(inputs[i].bytes.data() + b * rowBytes,
                  perRow[i].bytes.data() + row * rowBytes, rowBytes);
    }
  }
}

} // namespace mprun
