//===- NewerOpsets.h - opsets 18 to 24 read as opset 17 ---------*- C++ -*-===//
//
// PyTorch's dynamo exporter (torch.onnx.export(dynamo=True), the default
// from PyTorch 2.9) writes opset 18 and later. The ONNX library mp builds
// on knows opset 17, and between 17 and 24 the ops a transformer uses
// changed little: reductions take their axes as an input (18), Split counts
// its outputs (18), Cast gained `saturate` (19, float8 only), and new ops
// name what exporters used to decompose: Gelu (20), RMSNormalization,
// Attention and RotaryEmbedding (23), Swish (24). Each such node is
// rewritten as the opset 17 nodes that compute it (which mp-raise raises
// back to named ops), so the rest of the importer, and the ONNX checker,
// read opset 17.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_NEWEROPSETS_H
#define MP_LIB_IMPORT_ONNX_NEWEROPSETS_H

#include <onnx/onnx_pb.h>

#include <string>

namespace mp::onnx_import {

/// The newest opset read (through readAsOpset17).
constexpr int64_t kNewestOpset = 24;

/// Rewrites the nodes of `model` (opset 18 to kNewestOpset) that opset 17
/// does not have, or reads differently, as opset 17 nodes, and makes the
/// model import opset 17. A node that cannot be rewritten (axes known only
/// at run time, Pad's `wrap` mode, an output opset 17 cannot compute) is an
/// error naming it.
bool readAsOpset17(onnx::ModelProto &model, std::string &error);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_NEWEROPSETS_H
