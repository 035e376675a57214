//===- BoundInputs.h - graph inputs given as constants ----------*- C++ -*-===//
//
// --mp-bind-input=NAME=VALUE: a graph input the user fixes at compile time,
// read from a serialized TensorProto file or written as a literal (a flag
// such as Optimum's use_cache_branch=true), so that the importer folds it
// and the branch of an If it decides is inlined.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_BOUNDINPUTS_H
#define MP_LIB_IMPORT_ONNX_BOUNDINPUTS_H

#include "HostTensor.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace mp::onnx_import {

/// The value `spec` binds to the graph input `input`: a literal when it
/// reads as one (`true`, `false` or a number, exact for an integer input)
/// filling the input's declared shape, which must be static; otherwise a
/// serialized TensorProto file (`./true` for a file of that name). Checks the
/// element type and shape against the declaration; false with `error` (which
/// names the input and the file or literal).
bool readBoundInput(const onnx::ValueInfoProto &input, const std::string &spec,
                    HostTensor &value, std::string &error);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_BOUNDINPUTS_H
