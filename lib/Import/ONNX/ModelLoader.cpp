//===- ModelLoader.cpp - reading and validating ONNX files ----------------===//
#include "ModelLoader.h"

#include "InlineIf.h"
#include "NewerOpsets.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <onnx/version_converter/convert.h>

#include "mp/Import/ONNXImporter.h"
#include "mp/Support/Shape.h"

#include "llvm/Support/JSON.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

namespace fs = std::filesystem;

namespace mp::onnx_import {

static constexpr int64_t kMinOpset = 13;
static constexpr int64_t kMaxOpset = kNewestOpset;

static int64_t defaultDomainOpset(const onnx::ModelProto &model) {
  for (const auto &imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      return imp.version();
  return 0;
}

static bool readModelFile(const std::string &path, onnx::ModelProto &model,
                          std::string &error) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    error = "cannot open '" + path + "': no such file";
    return false;
  }
  if (fs::is_directory(path, ec)) {
    error = "'" + path + "' is a directory, not an ONNX model file";
    return false;
  }
  if (!fs::is_regular_file(path, ec)) {
    error = "'" + path + "' is not a regular file (a device, pipe or " +
            "socket?); give the path of an .onnx model file";
    return false;
  }
  // Protobuf refuses messages over 2 GiB; bigger models keep their weights
  // in external data files.
  constexpr uintmax_t kMaxModelBytes = (uintmax_t(1) << 31) - 1;
  uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxModelBytes) {
    error = "'" + path + "' is " + std::to_string(size >> 20) +
            " MiB; an ONNX protobuf holds at most 2 GiB (export the weights "
            "as external data: onnx.save(..., save_as_external_data=True))";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open '" + path + "' for reading";
    return false;
  }
  if (!model.ParseFromIstream(&in)) {
    error = "'" + path +
            "' is not a valid ONNX model: the protobuf could "
            "not be parsed (truncated or corrupt file?)";
    return false;
  }
  if (!model.has_graph()) {
    error = "'" + path + "' is not a valid ONNX model: it has no graph";
    return false;
  }
  return true;
}

/// "node 'NAME' (OpType)", a nameless node named as the importer names it.
static std::string describeNode(const onnx::GraphProto &graph, int index) {
  const onnx::NodeProto &node = graph.node(index);
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  return "node '" + name + "' (" + node.op_type() + ")";
}

/// A Conv whose declared input and weight ranks differ: libonnx's Conv shape
/// inference reads the weight's dims by the input's rank unchecked.
static bool checkConvRanks(const onnx::GraphProto &graph, std::string &error) {
  std::map<std::string, int> ranks;
  for (const auto &v : graph.input())
    if (v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const auto &t : graph.initializer())
    ranks[t.name()] = t.dims_size();
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    if (node.op_type() != "Conv" || node.input_size() < 2)
      continue;
    auto x = ranks.find(node.input(0)), w = ranks.find(node.input(1));
    if (x != ranks.end() && w != ranks.end() && x->second != w->second) {
      error = describeNode(graph, i) + ": input of rank " +
              std::to_string(x->second) + " and weight of rank " +
              std::to_string(w->second) + " must have one rank";
      return false;
    }
  }
  return true;
}

/// A stride below 1 (on any node, subgraphs included): libonnx's conv and
/// pool shape inference divides by the strides unchecked.
static bool checkStrides(const onnx::GraphProto &graph, std::string &error) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    for (const auto &attr : node.attribute())
      if (attr.name() == "strides")
        for (int64_t s : attr.ints())
          if (s < 1) {
            error = describeNode(graph, i) + ": strides entry " +
                    std::to_string(s) + " is below 1";
            return false;
          }
    bool ok = true;
    forEachSubgraph(node, [&](const onnx::GraphProto &g) {
      ok = ok && checkStrides(g, error);
    });
    if (!ok)
      return false;
  }
  return true;
}

/// Refuses what would crash libonnx's shape inference, which opset
/// conversion runs, instead of letting it fault.
static bool checkBeforeShapeInference(const onnx::GraphProto &graph,
                                      std::string &error) {
  return checkConvRanks(graph, error) && checkStrides(graph, error);
}

static bool convertOpset(LoadedModel &out, std::string &error) {
  int64_t opset = defaultDomainOpset(out.model);
  out.originalOpset = opset;
  if (opset == 0) {
    error = "model imports no version of the default ONNX domain (ai.onnx)";
    return false;
  }
  if (opset > kMaxOpset) {
    error = "model uses ONNX opset " + std::to_string(opset) +
            "; supported opsets are " + std::to_string(kMinOpset) + " to " +
            std::to_string(kMaxOpset);
    return false;
  }
  if (opset > 17) {
    if (!readAsOpset17(out.model, error))
      return false;
    opset = 17;
  }
  if (opset < kMinOpset) {
    if (!checkBeforeShapeInference(out.model.graph(), error))
      return false;
    try {
      // Some adapters (Softmax 12->13) need inferred shapes.
      onnx::shape_inference::InferShapes(out.model);
      out.model = onnx::version_conversion::ConvertVersion(
          out.model, static_cast<int>(kMinOpset));
    } catch (const std::exception &e) {
      error = "cannot convert the model from opset " + std::to_string(opset) +
              " to " + std::to_string(kMinOpset) + ": " + e.what();
      return false;
    }
    opset = kMinOpset;
  }
  out.opset = opset;
  return true;
}

static std::string formatDims(const std::vector<int64_t> &dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "x" : "") + std::to_string(dims[i]);
  return s.empty() ? "scalar" : s;
}

/// Replaces symbolic or missing dims of graph inputs by pinned sizes.
static bool
pinInputShapes(onnx::GraphProto &graph,
               const std::map<std::string, std::vector<int64_t>> &shapes,
               const std::map<std::string, std::string> &bound,
               std::string &error) {
  std::set<std::string> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  std::set<std::string> seen;
  for (const auto &input : graph.input())
    if (!initializers.count(input.name()))
      seen.insert(input.name());
  auto inputList = [&] {
    std::string known;
    for (const std::string &s : seen)
      known += (known.empty() ? "" : ", ") + s;
    return known.empty() ? std::string("none") : known;
  };
  for (const auto &[name, file] : bound) {
    if (!seen.count(name)) {
      error = "--mp-bind-input names '" + name +
              "', which is not a graph input (inputs: " + inputList() + ")";
      return false;
    }
  }
  for (const auto &[name, file] : bound) {
    initializers.insert(name);
    seen.erase(name);
  }
  for (const auto &[name, dims] : shapes)
    if (!seen.count(name)) {
      error = "--mp-shape names '" + name +
              "', which is not a graph input (inputs: " + inputList() +
              (bound.count(name) ? "; it is bound by --mp-bind-input)" : ")");
      return false;
    }
  for (auto &input : *graph.mutable_input()) {
    if (initializers.count(input.name()))
      continue;
    if (!input.type().has_tensor_type()) {
      error = "graph input '" + input.name() + "' is not a tensor";
      return false;
    }
    auto *tensorType = input.mutable_type()->mutable_tensor_type();
    auto pinned = shapes.find(input.name());
    if (!tensorType->has_shape() && pinned == shapes.end()) {
      error = "graph input '" + input.name() +
              "' has no shape; pin it with "
              "--mp-shape=" +
              input.name() + "=<d0>x<d1>...";
      return false;
    }
    auto *shape = tensorType->mutable_shape();
    if (pinned != shapes.end()) {
      const std::vector<int64_t> &dims = pinned->second;
      if (tensorType->has_shape() && shape->dim_size() != (int)dims.size()) {
        error = "--mp-shape gives input '" + input.name() + "' rank " +
                std::to_string(dims.size()) + " (" + formatDims(dims) +
                ") but the model declares rank " +
                std::to_string(shape->dim_size());
        return false;
      }
      if (!tensorType->has_shape())
        for (size_t i = 0; i < dims.size(); ++i)
          shape->add_dim();
      for (size_t i = 0; i < dims.size(); ++i) {
        auto *dim = shape->mutable_dim(static_cast<int>(i));
        if (dim->has_dim_value() && dim->dim_value() != dims[i]) {
          error = "--mp-shape gives input '" + input.name() + "' dimension " +
                  std::to_string(i) + " = " + std::to_string(dims[i]) +
                  " but the model fixes it to " +
                  std::to_string(dim->dim_value());
          return false;
        }
        dim->set_dim_value(dims[i]);
      }
      continue;
    }
    for (int i = 0; i < shape->dim_size(); ++i) {
      const auto &dim = shape->dim(i);
      if (dim.has_dim_value() && dim.dim_value() >= 0)
        continue;
      std::string symbol =
          dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "";
      error = "graph input '" + input.name() + "' has dynamic dimension " +
              std::to_string(i) + symbol +
              "; pin it with --mp-shape=" + input.name() + "=<d0>x<d1>...";
      return false;
    }
  }
  return true;
}

/// Names reach MLIR attributes and program.pb (proto3 strings, UTF-8 only):
/// every name in the graph must be valid UTF-8.
static bool checkNames(const onnx::GraphProto &graph, std::string &error) {
  auto bad = [&](const std::string &name, const std::string &what) {
    if (llvm::json::isUTF8(name))
      return false;
    error = what + " is not valid UTF-8 (" + llvm::json::fixUTF8(name) + ")";
    return true;
  };
  for (const auto &v : graph.input())
    if (bad(v.name(), "a graph input's name"))
      return false;
  for (const auto &v : graph.output())
    if (bad(v.name(), "a graph output's name"))
      return false;
  for (const auto &init : graph.initializer())
    if (bad(init.name(), "an initializer's name"))
      return false;
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    std::string which = "node #" + std::to_string(i) + " (" +
                        llvm::json::fixUTF8(node.op_type()) + ")";
    if (bad(node.name(), "the name of " + which) ||
        bad(node.op_type(), "the op type of " + which))
      return false;
    for (const auto &name : node.input())
      if (bad(name, "an input name of " + which))
        return false;
    for (const auto &name : node.output())
      if (bad(name, "an output name of " + which))
        return false;
  }
  return true;
}

/// Shapes read from the file: no negative dimensions, element counts that
/// int64 holds, and something to compute.
static bool checkShapes(const onnx::GraphProto &graph, std::string &error) {
  if (graph.output_size() == 0) {
    error = "the graph has no outputs: there is nothing to compute";
    return false;
  }
  for (const auto &init : graph.initializer()) {
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (!checkedNumElements(dims)) {
      error = "initializer '" + init.name() + "' has shape " +
              formatShape(dims) +
              ": a negative dimension or more elements than int64 counts";
      return false;
    }
  }
  for (const auto &input : graph.input()) {
    std::vector<int64_t> dims;
    for (const auto &d : input.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : 1);
    if (!checkedNumElements(dims)) {
      error = "graph input '" + input.name() + "' has shape " +
              formatShape(dims) +
              ": a negative dimension or more elements than int64 counts";
      return false;
    }
  }
  return true;
}

/// Every node input must be defined before use; the message names the node.
static bool checkDefinitions(const onnx::GraphProto &graph,
                             std::string &error) {
  std::set<std::string> defined;
  for (const auto &v : graph.input())
    defined.insert(v.name());
  for (const auto &init : graph.initializer())
    defined.insert(init.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto &node = graph.node(i);
    for (const auto &name : node.input())
      if (!name.empty() && !defined.count(name)) {
        std::string nodeName =
            node.name().empty() ? "#" + std::to_string(i) : node.name();
        error = "node '" + nodeName + "' (" + node.op_type() + ") reads '" +
                name +
                "', which is not a graph input, an initializer or "
                "the output of an earlier node";
        return false;
      }
    for (const auto &name : node.output())
      defined.insert(name);
  }
  for (const auto &out : graph.output())
    if (!defined.count(out.name())) {
      error = "graph output '" + out.name() + "' is not produced by any node";
      return false;
    }
  return true;
}

bool isExternal(const onnx::TensorProto &tensor) {
  return tensor.data_location() == onnx::TensorProto::EXTERNAL;
}

bool getExternalLocation(const onnx::TensorProto &tensor,
                         const std::string &directory, ExternalLocation &loc,
                         std::string &error) {
  std::string location;
  loc.offset = 0;
  loc.length = -1;
  for (const auto &entry : tensor.external_data()) {
    try {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset")
        loc.offset = std::stoll(entry.value());
      else if (entry.key() == "length")
        loc.length = std::stoll(entry.value());
    } catch (const std::exception &) {
      error = "initializer '" + tensor.name() +
              "' has a malformed external "
              "data entry '" +
              entry.key() + "'";
      return false;
    }
  }
  if (location.empty()) {
    error = "initializer '" + tensor.name() +
            "' is external data without a location";
    return false;
  }
  loc.file = (fs::path(directory) / location).lexically_normal().string();
  return true;
}

bool readFileSlice(const ExternalLocation &loc, std::string &bytes,
                   std::string &error) {
  std::ifstream in(loc.file, std::ios::binary);
  if (!in) {
    error = "cannot open external data file '" + loc.file + "'";
    return false;
  }
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  int64_t length = loc.length < 0 ? size - loc.offset : loc.length;
  if (loc.offset < 0 || loc.offset + length > size) {
    error = "external data file '" + loc.file + "' has " +
            std::to_string(size) + " bytes; cannot read " +
            std::to_string(length) + " bytes at offset " +
            std::to_string(loc.offset);
    return false;
  }
  bytes.resize(length);
  in.seekg(loc.offset);
  in.read(bytes.data(), length);
  return static_cast<bool>(in);
}

static bool checkExternalFiles(const LoadedModel &m, std::string &error) {
  for (const auto &init : m.model.graph().initializer()) {
    if (!isExternal(init))
      continue;
    ExternalLocation loc;
    if (!getExternalLocation(init, m.directory, loc, error))
      return false;
    std::error_code ec;
    if (!fs::exists(loc.file, ec)) {
      error = "external data file '" + loc.file + "' of initializer '" +
              init.name() +
              "' does not exist (use --mp-shape-only to "
              "import shapes without data)";
      return false;
    }
    int64_t size = static_cast<int64_t>(fs::file_size(loc.file, ec));
    if (loc.length >= 0 && loc.offset + loc.length > size) {
      error = "external data file '" + loc.file + "' is " +
              std::to_string(size) + " bytes, too short for initializer '" +
              init.name() + "' (offset " + std::to_string(loc.offset) +
              ", length " + std::to_string(loc.length) + ")";
      return false;
    }
  }
  return true;
}

bool readTensorFile(const std::string &path, onnx::TensorProto &tensor,
                    std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open tensor file '" + path + "'";
    return false;
  }
  if (!tensor.ParseFromIstream(&in)) {
    error = "'" + path + "' is not a serialized ONNX TensorProto";
    return false;
  }
  return true;
}

bool loadModel(const std::string &path,
               const std::map<std::string, std::vector<int64_t>> &inputShapes,
               const std::map<std::string, std::string> &boundInputs,
               bool validateExternalData, LoadedModel &out,
               std::string &error) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec).lexically_normal();
  out.path = absolute.string();
  out.directory = absolute.parent_path().string();
  if (!readModelFile(path, out.model, error))
    return false;
  onnx::GraphProto &graph = *out.model.mutable_graph();
  if (!inlineKnownIfs(graph, boundInputs, out.droppedInputs, error))
    return false;
  // Shapes given for inputs only an untaken branch read are moot (the same
  // command then serves either branch; the importer says they are dropped).
  std::map<std::string, std::vector<int64_t>> shapes = inputShapes;
  for (const std::string &name : out.droppedInputs)
    shapes.erase(name);
  if (!checkNames(graph, error) || !checkShapes(graph, error) ||
      !checkDefinitions(graph, error) ||
      !pinInputShapes(graph, shapes, boundInputs, error) ||
      !convertOpset(out, error))
    return false;
  if (validateExternalData && !checkExternalFiles(out, error))
    return false;
  try {
    // The checker reads external data relative to a model directory only
    // when given a path; a ModelProto check covers structure and schemas.
    // Data may be absent (shape-only planning): check external initializers
    // as typed graph inputs, which keeps every structural check.
    onnx::ModelProto copy = out.model;
    auto *graphCopy = copy.mutable_graph();
    auto *inits = graphCopy->mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i) {
      const onnx::TensorProto &init = inits->Get(i);
      if (!isExternal(init))
        continue;
      bool declared = false;
      for (const auto &in : graphCopy->input())
        declared |= in.name() == init.name();
      if (!declared) {
        auto *input = graphCopy->add_input();
        input->set_name(init.name());
        auto *tt = input->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(init.data_type());
        for (int64_t d : init.dims())
          tt->mutable_shape()->add_dim()->set_dim_value(d);
      }
      inits->DeleteSubrange(i, 1);
    }
    onnx::checker::check_model(copy);
  } catch (const std::exception &e) {
    error = "ONNX checker rejected '" + path + "': " + e.what();
    return false;
  }
  return true;
}

/// Raw little-endian bytes of an inline initializer's data.
bool initializerBytes(const onnx::TensorProto &t, std::string &bytes,
                      std::string &error) {
  if (t.has_raw_data()) {
    bytes = t.raw_data();
    return true;
  }
  auto append = [&](const void *p, size_t n) {
    bytes.append(static_cast<const char *>(p), n);
  };
  bytes.clear();
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    for (float v : t.float_data())
      append(&v, 4);
    return true;
  case onnx::TensorProto::DOUBLE:
    for (double v : t.double_data())
      append(&v, 8);
    return true;
  case onnx::TensorProto::INT64:
    for (int64_t v : t.int64_data())
      append(&v, 8);
    return true;
  case onnx::TensorProto::INT32:
    for (int32_t v : t.int32_data())
      append(&v, 4);
    return true;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    for (int32_t v : t.int32_data()) {
      uint16_t h = static_cast<uint16_t>(v);
      append(&h, 2);
    }
    return true;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    for (int32_t v : t.int32_data()) {
      int8_t b = static_cast<int8_t>(v);
      append(&b, 1);
    }
    return true;
  default:
    error = "initializer '" + t.name() + "' has an unsupported element type";
    return false;
  }
}

} // namespace mp::onnx_import

/// The initializer `name` of `graph` or of a graph nested in its nodes (an
/// If branch's own weights), or nullptr.
static const onnx::TensorProto *findInitializer(const onnx::GraphProto &graph,
                                                const std::string &name) {
  for (const auto &init : graph.initializer())
    if (init.name() == name)
      return &init;
  const onnx::TensorProto *found = nullptr;
  for (const auto &node : graph.node())
    mp::onnx_import::forEachSubgraph(node, [&](const onnx::GraphProto &g) {
      if (!found)
        found = findInitializer(g, name);
    });
  return found;
}

bool mp::readONNXInitializer(const std::string &modelPath,
                             const std::string &name, std::string &bytes,
                             std::string &error) {
  using namespace mp::onnx_import;
  static std::map<std::string, std::unique_ptr<onnx::ModelProto>> cache;
  auto &model = cache[modelPath];
  if (!model) {
    model = std::make_unique<onnx::ModelProto>();
    if (!readModelFile(modelPath, *model, error)) {
      model.reset();
      return false;
    }
  }
  const onnx::TensorProto *init = findInitializer(model->graph(), name);
  if (!init) {
    error = "'" + modelPath + "' has no initializer '" + name + "'";
    return false;
  }
  if (isExternal(*init)) {
    error = "initializer '" + name + "' of '" + modelPath +
            "' is external data; re-import to record its location";
    return false;
  }
  return initializerBytes(*init, bytes, error);
}
