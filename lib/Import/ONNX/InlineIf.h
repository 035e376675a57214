//===- InlineIf.h - If nodes whose condition is known -----------*- C++ -*-===//
//
// Optimum's merged decoders (decoder_model_merged.onnx) hold both the
// first step and the steps with a key/value cache in one graph, chosen by
// an If on the input use_cache_branch. A static program runs one of them:
// bound with --mp-bind-input=use_cache_branch=true (or false), the If is
// replaced by the branch it takes, before shape inference sees the graph.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_IMPORT_ONNX_INLINEIF_H
#define MP_LIB_IMPORT_ONNX_INLINEIF_H

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

namespace mp::onnx_import {

/// Replaces each If of `graph` whose condition is known (a bound input, an
/// initializer, a Constant node's output) with the nodes of the branch it
/// takes, nested Ifs included: the branch's initializers join the graph's,
/// its nodes read outer names as they are, and Identity nodes give its
/// outputs the If's names. Graph inputs that only the branches not taken
/// read are removed and listed in `dropped`. An If on a value known only at
/// run time is an error naming it and the binding that would decide it.
bool inlineKnownIfs(onnx::GraphProto &graph,
                    const std::map<std::string, std::string> &boundInputs,
                    std::vector<std::string> &dropped, std::string &error);

} // namespace mp::onnx_import

#endif // MP_LIB_IMPORT_ONNX_INLINEIF_H
