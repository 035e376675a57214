//===- BoundInputs.cpp - graph inputs given as constants ------------------===//
//
// See BoundInputs.h.
//
//===----------------------------------------------------------------------===//
#include "BoundInputs.h"

#include "ModelLoader.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <sys/stat.h>

namespace mp::onnx_import {

namespace {

/// `true`, `false` or a number; nullopt for anything else.
std::optional<double> parseLiteral(llvm::StringRef text) {
  text = text.trim();
  if (text.equals_insensitive("true"))
    return 1.0;
  if (text.equals_insensitive("false"))
    return 0.0;
  double v;
  if (!text.getAsDouble(v))
    return v;
  return std::nullopt;
}

bool fileExists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

/// The input's declared value filled with `literal`: exactly, for an
/// integer input (a fraction or a value its type cannot hold is an error,
/// not rounded or wrapped).
bool literalValue(const onnx::ValueInfoProto &input, const std::string &spec,
                  double literal, HostTensor &value, std::string &error) {
  const auto &tt = input.type().tensor_type();
  if (!isSupportedDType(tt.elem_type())) {
    error = "input '" + input.name() + "' has unsupported element type " +
            dtypeName(tt.elem_type());
    return false;
  }
  value.dtype = static_cast<DType>(tt.elem_type());
  value.shape.clear();
  for (const auto &d : tt.shape().dim()) {
    if (!d.has_dim_value()) {
      error = "the literal '" + spec + "' fills the input's declared shape, " +
              "but dimension " + std::to_string(value.shape.size()) + " of '" +
              input.name() + "' is dynamic: bind a TensorProto file instead";
      return false;
    }
    value.shape.push_back(d.dim_value());
  }
  if (!value.allocate(error))
    return false;
  if (value.dtype == DType::Bool && literal != 0.0 && literal != 1.0) {
    error = "input '" + input.name() + "' is bool: bind it to true or false, " +
            "not '" + spec + "'";
    return false;
  }
  if (!value.isFloat()) {
    // Integers from the text itself: a double would round past 2^53.
    llvm::StringRef text = llvm::StringRef(spec).trim();
    long long exact;
    if (value.dtype != DType::Bool &&
        (text.getAsInteger(10, exact) ||
         (value.dtype == DType::Int32 &&
          (exact < INT32_MIN || exact > INT32_MAX)) ||
         (value.dtype == DType::Int8 &&
          (exact < INT8_MIN || exact > INT8_MAX)))) {
      error = "input '" + input.name() + "' is " + dtypeName(tt.elem_type()) +
              ": '" + spec + "' is not an integer it holds";
      return false;
    }
    int64_t v = value.dtype == DType::Bool ? static_cast<int64_t>(literal)
                                           : static_cast<int64_t>(exact);
    std::fill(value.ints.begin(), value.ints.end(), v);
    return true;
  }
  for (int64_t i = 0; i < value.numElements(); ++i)
    value.set(i, literal);
  return true;
}

/// The value in the TensorProto file `path`, checked against `input`.
bool fileValue(const onnx::ValueInfoProto &input, const std::string &path,
               HostTensor &value, std::string &error) {
  if (!fileExists(path)) {
    error = "'" + path + "' is neither a TensorProto file nor a literal " +
            "(true, false or a number)";
    return false;
  }
  onnx::TensorProto proto;
  if (!readTensorFile(path, proto, error) ||
      !decodeTensor(proto, nullptr, value, error))
    return false;
  const auto &tt = input.type().tensor_type();
  if (tt.elem_type() != static_cast<int32_t>(value.dtype)) {
    error = "'" + path + "' holds " + dtypeName(proto.data_type()) +
            " but the input is " + dtypeName(tt.elem_type());
    return false;
  }
  if (tt.has_shape()) {
    bool matches = tt.shape().dim_size() == (int)value.shape.size();
    for (int i = 0; matches && i < tt.shape().dim_size(); ++i)
      matches = !tt.shape().dim(i).has_dim_value() ||
                tt.shape().dim(i).dim_value() == value.shape[i];
    if (!matches) {
      error = "'" + path + "' has shape " + formatShape(value.shape) +
              ", which the input's declared shape rejects";
      return false;
    }
  }
  return true;
}

} // namespace

bool readBoundInput(const onnx::ValueInfoProto &input, const std::string &spec,
                    HostTensor &value, std::string &error) {
  // A literal whenever the text reads as one (a file named `true` is
  // ./true), so the same flag means the same thing in every directory.
  std::optional<double> literal = parseLiteral(spec);
  bool ok = literal ? literalValue(input, spec, *literal, value, error)
                    : fileValue(input, spec, value, error);
  if (!ok)
    error = "--mp-bind-input " + input.name() + ": " + error;
  return ok;
}

} // namespace mp::onnx_import
