//===- ExportWeights.cpp - trained weights back into ONNX -----------------===//
//
// mp-run --train --save writes each rank's shard of every parameter and a
// manifest of how they are split; this reassembles each parameter whole
// and writes it over the ONNX initializer the parameter was imported from
// (the parameter's name, or its `initializer` attribute), so any ONNX tool
// can use the trained model.
//
//===----------------------------------------------------------------------===//
#include "mp/Target/ExportWeights.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Safetensors.h"
#include "mp/Runtime/Shards.h"
#include "mp/Support/AtomicFile.h"
#include "mp/Support/Float16.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <set>

using namespace mlir;

namespace mp {
namespace {

/// A parameter of the manifest: how its ranks' shards make the whole.
struct SavedParameter {
  std::string dtype;
  std::vector<int64_t> localShape;
  int64_t shardAxis = -1, shardGroups = 1;
  std::string partOf; // a part of that parameter (a cut fused weight)
  int64_t partAxis = 0, partStart = 0;
  int64_t partWhole = -1; // the user's size along partAxis (-1: not saved)
  /// Its files' prefix: "stage<S>." when a pipeline stage saved it.
  std::string prefix;
};

/// The checkpoint's files by prefix, each a file per grid rank.
using CheckpointFiles =
    std::map<std::string, std::vector<std::unique_ptr<rt::SafetensorsFile>>>;

LogicalResult readManifest(ModuleOp module, StringRef dir, int64_t &ranks,
                           std::map<std::string, SavedParameter> &params) {
  std::string path = (dir + "/manifest.json").str();
  if (rt::Status s = rt::expectRegularFile(path); !s)
    return module.emitError() << "--mp-export-weights: " << s.message;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return module.emitError() << "--mp-export-weights: cannot read '" << path
                              << "' (write it with mp-run --train --save)";
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return module.emitError() << "'" << path << "' is not JSON";
  }
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *list = root ? root->getArray("parameters") : nullptr;
  std::optional<int64_t> count =
      root ? root->getInteger("ranks") : std::nullopt;
  if (!list || !count || *count < 1 ||
      root->getString("format") != std::optional<StringRef>("mp-checkpoint"))
    return module.emitError()
           << "'" << path << "' is not an mp-run --save manifest";
  ranks = *count;
  if (root->getString("initial_weights") ==
      std::optional<StringRef>("synthetic"))
    emitWarning(module.getLoc())
        << "--mp-export-weights: '" << dir
        << "' was trained from synthetic (random) initial weights "
           "(--mp-synthetic-weights), not from the model's";
  for (const llvm::json::Value &entry : *list) {
    const llvm::json::Object *p = entry.getAsObject();
    std::optional<StringRef> name = p ? p->getString("name") : std::nullopt;
    std::optional<StringRef> dtype = p ? p->getString("dtype") : std::nullopt;
    const llvm::json::Array *shape = p ? p->getArray("local_shape") : nullptr;
    if (!name || !dtype || !shape)
      return module.emitError() << "'" << path << "': a malformed parameter";
    SavedParameter saved;
    saved.dtype = dtype->str();
    for (const llvm::json::Value &d : *shape)
      saved.localShape.push_back(d.getAsInteger().value_or(-1));
    saved.shardAxis = p->getInteger("shard_axis").value_or(-1);
    saved.shardGroups = p->getInteger("shard_groups").value_or(1);
    if (saved.shardAxis >= static_cast<int64_t>(saved.localShape.size()) ||
        saved.shardGroups < 1 ||
        llvm::any_of(saved.localShape, [](int64_t d) { return d < 0; }) ||
        (saved.shardAxis >= 0 &&
         saved.localShape[saved.shardAxis] % saved.shardGroups != 0))
      return module.emitError()
             << "'" << path << "': parameter '" << *name
             << "' has a sharding that does not fit its shape";
    if (std::optional<StringRef> of = p->getString("part_of")) {
      saved.partOf = of->str();
      saved.partAxis = p->getInteger("part_axis").value_or(-1);
      saved.partStart = p->getInteger("part_start").value_or(-1);
      saved.partWhole = p->getInteger("part_whole").value_or(-1);
    }
    if (std::optional<int64_t> stage = p->getInteger("stage")) {
      if (*stage < 0)
        return module.emitError() << "'" << path << "': parameter '" << *name
                                  << "' names a malformed stage";
      saved.prefix = "stage" + std::to_string(*stage) + ".";
    }
    params[name->str()] = saved;
  }
  return success();
}

/// `bytes` of element type `from` as little-endian values of ONNX type `to`.
bool convert(const std::string &bytes, rt::DType from, int32_t to,
             std::string &out) {
  const size_t n = bytes.size() / rt::dtypeSize(from);
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h = 0;
    if (from != rt::DType::F32)
      std::memcpy(&h, bytes.data() + 2 * i, 2);
    values[i] = from == rt::DType::F32    ? 0
                : from == rt::DType::BF16 ? bf16ToFloat(h)
                                          : halfToFloat(h);
    if (from == rt::DType::F32)
      std::memcpy(&values[i], bytes.data() + 4 * i, 4);
  }
  out.clear();
  for (float v : values) {
    if (to == onnx::TensorProto::FLOAT) {
      out.append(reinterpret_cast<const char *>(&v), 4);
      continue;
    }
    if (to != onnx::TensorProto::BFLOAT16 && to != onnx::TensorProto::FLOAT16)
      return false;
    uint16_t h =
        to == onnx::TensorProto::BFLOAT16 ? floatToBf16(v) : floatToHalf(v);
    out.append(reinterpret_cast<const char *>(&h), 2);
  }
  return true;
}

/// The [rows, cols] matrix of `elem`-byte values `bytes`, transposed.
std::string transposed(const std::string &bytes, int64_t rows, int64_t cols,
                       size_t elem) {
  std::string out(bytes.size(), '\0');
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * elem], &bytes[(r * cols + c) * elem],
                  elem);
  return out;
}

/// Every rank's shard of the saved parameter `name`, assembled whole.
FailureOr<std::string> assembleSaved(ParamOp param, const std::string &name,
                                     const SavedParameter &saved,
                                     const CheckpointFiles &checkpoint) {
  std::vector<std::string_view> shards;
  for (auto [r, file] : llvm::enumerate(checkpoint.at(saved.prefix))) {
    auto entry = file->entries().find(name);
    if (entry == file->entries().end())
      return param.emitError()
             << "rank " << r << "'s weights lack '" << name << "'";
    const uint8_t *data = file->data(entry->second);
    shards.emplace_back(reinterpret_cast<const char *>(data),
                        entry->second.end - entry->second.begin);
  }
  return rt::assembleShards(shards, saved.localShape, saved.shardAxis,
                            saved.shardGroups);
}

/// The trained value of `param`: saved whole, or as the parts tensor
/// parallelism cut it into (placed back along their axis, which they must
/// cover exactly); an empty string when it was not trained.
FailureOr<std::string>
trainedValue(ParamOp param, const std::map<std::string, SavedParameter> &saved,
             const CheckpointFiles &files, int64_t ranks,
             std::string &dtypeName) {
  std::string name = param.getSymName().str();
  if (auto found = saved.find(name); found != saved.end()) {
    dtypeName = found->second.dtype;
    return assembleSaved(param, name, found->second, files);
  }
  std::vector<int64_t> shape = param.getTensorType().getShape().vec();
  std::vector<std::string> values; // (the bytes the parts view)
  std::vector<rt::PartBytes> parts;
  int64_t axis = -1, elem = 0;
  for (const auto &[partName, part] : saved) {
    if (part.partOf != name)
      continue;
    rt::DType dtype;
    if (!rt::parseDType(part.dtype, dtype) ||
        (!dtypeName.empty() && dtypeName != part.dtype) ||
        (axis >= 0 && part.partAxis != axis))
      return param.emitError() << "saved part '" << partName << "' of '" << name
                               << "' does not fit it";
    dtypeName = part.dtype;
    axis = part.partAxis;
    elem = static_cast<int64_t>(rt::dtypeSize(dtype));
    // The part's whole shape must be the parameter's but along the axis.
    std::vector<int64_t> partShape = part.localShape;
    if (part.shardAxis >= 0)
      partShape[part.shardAxis] *= ranks;
    if (axis >= 0 && axis < static_cast<int64_t>(shape.size()) &&
        part.partWhole >= 0 && part.partWhole != shape[axis])
      return param.emitError()
             << "saved part '" << partName << "' is a part of '" << name
             << "' of " << part.partWhole << " along dim " << axis
             << ", which is " << param.getTensorType()
             << " in this model (trained from another model?)";
    if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
        partShape.size() != shape.size() ||
        (partShape[axis] = shape[axis], partShape != shape))
      return param.emitError()
             << "saved part '" << partName << "' is not a part of '" << name
             << "' along dim " << axis;
    FailureOr<std::string> value = assembleSaved(param, partName, part, files);
    if (failed(value))
      return failure();
    values.push_back(std::move(*value));
    parts.push_back({part.partStart, {}});
  }
  if (parts.empty())
    return std::string();
  for (size_t i = 0; i < parts.size(); ++i)
    parts[i].bytes = values[i];
  std::string whole, error;
  if (!rt::joinParts(parts, shape, elem, axis, whole, error))
    return param.emitError()
           << "the saved parts of '" << name << "' do not make it: " << error;
  return whole;
}

/// Replaces the initializer's data by `bytes` (raw, inline).
void setData(onnx::TensorProto &init, std::string bytes) {
  init.clear_float_data();
  init.clear_int32_data();
  init.clear_double_data();
  init.clear_external_data();
  init.set_data_location(onnx::TensorProto::DEFAULT);
  init.set_raw_data(std::move(bytes));
}

} // namespace

FailureOr<int64_t> exportTrainedWeights(ModuleOp module, StringRef onnxPath,
                                        StringRef weightsDir,
                                        StringRef outPath) {
  if (liesWithin(outPath.str(), weightsDir.str()))
    return module.emitError() << "--mp-export-weights: -o " << outPath
                              << " lies in the checkpoint '" << weightsDir
                              << "' it reads (it would replace a file of it)";
  int64_t ranks = 0;
  std::map<std::string, SavedParameter> saved;
  if (failed(readManifest(module, weightsDir, ranks, saved)))
    return failure();
  CheckpointFiles files;
  for (const auto &[name, param] : saved) {
    auto &opened = files[param.prefix];
    if (!opened.empty())
      continue;
    opened.resize(static_cast<size_t>(ranks));
    for (int64_t r = 0; r < ranks; ++r) {
      std::string path = (weightsDir + "/" + param.prefix + "rank" +
                          std::to_string(r) + ".safetensors")
                             .str();
      if (rt::Status s = rt::SafetensorsFile::open(path, opened[r]); !s)
        return module.emitError() << "--mp-export-weights: " << s.message;
    }
  }
  onnx::ModelProto model;
  {
    std::ifstream in(onnxPath.str(), std::ios::binary);
    if (!in || !model.ParseFromIstream(&in))
      return module.emitError()
             << "cannot read the ONNX model '" << onnxPath << "'";
  }
  // (An If branch's own weights too: Optimum's merged decoders.)
  std::map<std::string, onnx::TensorProto *> initializers;
  std::function<void(onnx::GraphProto &)> collect = [&](onnx::GraphProto &g) {
    for (onnx::TensorProto &init : *g.mutable_initializer())
      initializers[init.name()] = &init;
    for (onnx::NodeProto &node : *g.mutable_node())
      for (onnx::AttributeProto &attr : *node.mutable_attribute()) {
        if (attr.has_g())
          collect(*attr.mutable_g());
        for (onnx::GraphProto &nested : *attr.mutable_graphs())
          collect(nested);
      }
  };
  collect(*model.mutable_graph());
  // Identity nodes of an initializer, by their output.
  std::map<std::string, int> identities;
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const onnx::NodeProto &node = model.graph().node(i);
    if (node.op_type() == "Identity" && node.input_size() == 1 &&
        node.output_size() == 1 && initializers.count(node.input(0)))
      identities[node.output(0)] = i;
  }
  std::set<int> removedNodes;

  // A checkpoint of another model would replace nothing, or the wrong
  // tensors: every saved parameter must be one of this model's.
  std::set<std::string> names;
  for (ParamOp param : module.getOps<ParamOp>())
    names.insert(param.getSymName().str());
  for (const auto &entry : saved)
    if (!names.count(entry.first) && !names.count(entry.second.partOf))
      return module.emitError()
             << "--mp-export-weights: '" << weightsDir << "' holds parameter '"
             << entry.first << "', which " << onnxPath
             << " lacks (was it trained from another model?)";

  int64_t replaced = 0;
  for (ParamOp param : module.getOps<ParamOp>()) {
    std::string dtypeName;
    FailureOr<std::string> trained =
        trainedValue(param, saved, files, ranks, dtypeName);
    if (failed(trained))
      return failure();
    if (trained->empty()) {
      if (!isa<FloatType>(param.getTensorType().getElementType()))
        continue; // (integer parameters are not trained)
      // A float parameter the checkpoint lacks would keep its initial value
      // in a model that claims to be trained (a tied model's checkpoint
      // exported into an untied one leaves its head untrained).
      return module.emitError()
             << "--mp-export-weights: '" << weightsDir
             << "' holds no value for parameter '" << param.getSymName()
             << "' of " << onnxPath << " (was it trained from another model?)";
    }
    std::string initName = param.getInitializer()
                               ? param.getInitializer()->str()
                               : param.getSymName().str();
    // A parameter the exporter wrote as an Identity of an initializer it
    // shares with others was trained apart: it gets an initializer of its
    // own, in place of the Identity.
    auto identity = identities.find(param.getSymName().str());
    if (param.getInitializer() && identity != identities.end()) {
      auto shared = initializers.find(initName);
      if (shared == initializers.end())
        return param.emitError() << "no ONNX initializer '" << initName << "'";
      onnx::TensorProto *own = model.mutable_graph()->add_initializer();
      own->set_name(param.getSymName().str());
      own->set_data_type(shared->second->data_type());
      own->mutable_dims()->CopyFrom(shared->second->dims());
      removedNodes.insert(identity->second);
      initializers[own->name()] = own;
      initName = own->name();
    }
    auto init = initializers.find(initName);
    if (init == initializers.end())
      return param.emitError()
             << "trained parameter '" << param.getSymName()
             << "' has no ONNX initializer '" << initName << "' to go into";
    rt::DType dtype;
    if (!rt::parseDType(dtypeName, dtype))
      return param.emitError() << "unknown saved dtype '" << dtypeName << "'";
    std::string whole = std::move(*trained);
    const onnx::TensorProto &proto = *init->second;
    int64_t elements = 1;
    for (int64_t d : proto.dims())
      elements *= d;
    if (static_cast<int64_t>(whole.size() / rt::dtypeSize(dtype)) != elements ||
        param.getTensorType().getNumElements() != elements)
      return param.emitError()
             << "trained parameter '" << param.getSymName() << "' has "
             << whole.size() / rt::dtypeSize(dtype)
             << " values, its ONNX initializer " << elements;
    std::string bytes;
    if (!convert(whole, dtype, proto.data_type(), bytes))
      return param.emitError()
             << "ONNX initializer '" << initName << "' is not a float tensor";
    // Transposed copies folding made of it (a tied LM head) get the
    // trained values too.
    if (auto copies = param->getAttrOfType<ArrayAttr>(
            MPDialect::getTiedCopiesAttrName())) {
      auto shape = param.getTensorType().getShape();
      for (Attribute copy : copies) {
        auto target = initializers.find(cast<StringAttr>(copy).str());
        if (target == initializers.end() || shape.size() != 2 ||
            target->second->dims_size() != 2 ||
            target->second->dims(0) != shape[1] ||
            target->second->dims(1) != shape[0] ||
            target->second->data_type() != proto.data_type())
          return param.emitError()
                 << "cannot write the trained '" << param.getSymName()
                 << "' into its transposed copy '"
                 << cast<StringAttr>(copy).getValue() << "'";
        setData(*target->second,
                transposed(bytes, shape[0], shape[1],
                           bytes.size() / static_cast<size_t>(elements)));
        ++replaced;
      }
    }
    // Equal copies folding made for other calls of its module get them
    // as they are (one stored as an Identity of it has nothing to write).
    if (auto copies = param->getAttrOfType<ArrayAttr>(
            MPDialect::getEqualCopiesAttrName()))
      for (Attribute copy : copies) {
        auto target = initializers.find(cast<StringAttr>(copy).str());
        if (target == initializers.end())
          continue;
        if (target->second->data_type() != proto.data_type() ||
            target->second->dims_size() != proto.dims_size())
          return param.emitError() << "cannot write the trained '"
                                   << param.getSymName() << "' into its copy '"
                                   << cast<StringAttr>(copy).getValue() << "'";
        setData(*target->second, bytes);
        ++replaced;
      }
    setData(*init->second, std::move(bytes));
    ++replaced;
  }
  if (!removedNodes.empty()) {
    auto *nodes = model.mutable_graph()->mutable_node();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < nodes->size(); ++i)
      if (!removedNodes.count(i))
        *kept.Add() = std::move(*nodes->Mutable(i));
    nodes->Swap(&kept);
  }
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    return module.emitError()
           << "cannot serialize the ONNX model (over 2 GiB?)";
  if (rt::Status s = rt::writeFileAtomically(outPath.str(), serialized); !s)
    return module.emitError() << s.message;
  return replaced;
}

} // namespace mp
