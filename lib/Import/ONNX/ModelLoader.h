//===- ModelLoader.h - reading and validating ONNX files --------*- C++ -*-===//
//
// The part of the importer that talks to libonnx (which throws). Everything
// here catches and returns errors as strings, so MLIR-side code built without
// exceptions can call it.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_MODELLOADER_H
#define MP_LIB_IMPORT_ONNX_MODELLOADER_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace mp::onnx_import {

struct LoadedModel {
  onnx::ModelProto model;
  std::string path;      // absolute path of the .onnx file
  std::string directory; // where external data files are looked up
  int64_t originalOpset = 0;
  int64_t opset = 0;
  /// Graph inputs only the branches of known Ifs not taken read, removed.
  std::vector<std::string> droppedInputs;
};

/// Reads `path`, replaces Ifs on known conditions by the branches they take
/// (InlineIf.h), converts opsets older than 13 to 13, pins dynamic input
/// dimensions from `inputShapes`, checks the model and that every node input
/// is defined. `validateExternalData` also checks that external data files
/// exist and are long enough.
/// Inputs named in `boundInputs` are left as they are (their values, and so
/// their shapes, come from files).
bool loadModel(const std::string &path,
               const std::map<std::string, std::vector<int64_t>> &inputShapes,
               const std::map<std::string, std::string> &boundInputs,
               bool validateExternalData, LoadedModel &out, std::string &error);

/// Calls `f` on each graph nested in `node`'s attributes (an If's branches,
/// a Loop's body).
template <typename Node, typename F> void forEachSubgraph(Node &node, F f) {
  if constexpr (std::is_const_v<Node>) {
    for (const auto &attr : node.attribute()) {
      if (attr.has_g())
        f(attr.g());
      for (const auto &g : attr.graphs())
        f(g);
    }
  } else {
    for (auto &attr : *node.mutable_attribute()) {
      if (attr.has_g())
        f(*attr.mutable_g());
      for (auto &g : *attr.mutable_graphs())
        f(g);
    }
  }
}

/// Reads a serialized TensorProto (the .pb files of ONNX test data).
bool readTensorFile(const std::string &path, onnx::TensorProto &tensor,
                    std::string &error);

/// Location of an initializer's external data (ONNX external_data entries).
struct ExternalLocation {
  std::string file; // absolute path
  int64_t offset = 0;
  int64_t length = -1; // -1: to the end of the file
};

bool isExternal(const onnx::TensorProto &tensor);
bool getExternalLocation(const onnx::TensorProto &tensor,
                         const std::string &directory, ExternalLocation &loc,
                         std::string &error);
/// Reads `length` bytes (all remaining when -1) at `offset` of `file`.
bool readFileSlice(const ExternalLocation &loc, std::string &bytes,
                   std::string &error);
/// The little-endian bytes of an initializer held in the model (raw_data or
/// the typed fields).
bool initializerBytes(const onnx::TensorProto &t, std::string &bytes,
                      std::string &error);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_MODELLOADER_H
