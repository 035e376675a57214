//===- InlineIf.cpp - If nodes whose condition is known -------------------===//
//
// See InlineIf.h.
//
//===----------------------------------------------------------------------===//
#include "InlineIf.h"

#include "BoundInputs.h"
#include "HostTensor.h"

#include <set>

namespace mp::onnx_import {

namespace {

bool isDefaultDomain(const onnx::NodeProto &node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

/// Every name the nodes of `graph` read, in nested graphs too.
void collectReads(const onnx::GraphProto &graph, std::set<std::string> &reads) {
  for (const auto &node : graph.node()) {
    for (const auto &name : node.input())
      reads.insert(name);
    for (const auto &attr : node.attribute()) {
      if (attr.has_g())
        collectReads(attr.g(), reads);
      for (const auto &g : attr.graphs())
        collectReads(g, reads);
    }
  }
}

class Inliner {
public:
  Inliner(onnx::GraphProto &graph,
          const std::map<std::string, std::string> &bound)
      : graph(graph), bound(bound) {}

  /// Appends `node` to `out`, or the branch it takes when it is a known If.
  bool append(const onnx::NodeProto &node, std::vector<onnx::NodeProto> &out,
              std::string &error) {
    if (node.op_type() == "Constant" && node.output_size() == 1)
      constants[node.output(0)] = &node;
    if (node.op_type() != "If" || !isDefaultDomain(node)) {
      out.push_back(node);
      return true;
    }
    bool taken;
    if (!condition(node, taken, error))
      return false;
    const onnx::AttributeProto *branchAttr =
        findAttr(node, taken ? "then_branch" : "else_branch");
    if (!branchAttr || !branchAttr->has_g()) {
      error = "If '" + node.name() + "' has no " +
              (taken ? "then_branch" : "else_branch") + " graph";
      return false;
    }
    const onnx::GraphProto &branch = branchAttr->g();
    if (branch.output_size() != node.output_size()) {
      error = "If '" + node.name() + "': its " +
              (taken ? "then_branch" : "else_branch") + " has " +
              std::to_string(branch.output_size()) + " outputs, the If " +
              std::to_string(node.output_size());
      return false;
    }
    for (const auto &init : branch.initializer())
      *graph.add_initializer() = init;
    for (const auto &inner : branch.node())
      if (!append(inner, out, error))
        return false;
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty())
        continue;
      if (branch.output(i).name().empty()) {
        error = "If '" + node.name() + "': output " + std::to_string(i) +
                " of the branch it takes has no name";
        return false;
      }
      onnx::NodeProto identity;
      identity.set_op_type("Identity");
      identity.set_name(node.name() + "/" + node.output(i));
      identity.add_input(branch.output(i).name());
      identity.add_output(node.output(i));
      out.push_back(std::move(identity));
    }
    return true;
  }

private:
  /// The value of the If's condition, when known before the run.
  bool condition(const onnx::NodeProto &node, bool &taken, std::string &error) {
    const std::string &name = node.input_size() ? node.input(0) : "";
    HostTensor value;
    bool known = false;
    if (auto it = bound.find(name); it != bound.end()) {
      for (const auto &input : graph.input())
        if (input.name() == name) {
          if (!readBoundInput(input, it->second, value, error))
            return false;
          known = true;
        }
    }
    for (const auto &init : graph.initializer())
      if (!known && init.name() == name) {
        if (!decodeTensor(init, nullptr, value, error))
          return false;
        known = true;
      }
    if (auto it = constants.find(name); !known && it != constants.end()) {
      const onnx::AttributeProto *attr = findAttr(*it->second, "value");
      if (attr && attr->has_t()) {
        if (!decodeTensor(attr->t(), nullptr, value, error))
          return false;
        known = true;
      }
    }
    if (!known) {
      bool isInput = false;
      for (const auto &input : graph.input())
        isInput |= input.name() == name;
      error = "If '" + node.name() + "' branches on '" + name +
              "', which is not known before the run; mp compiles the one " +
              "branch taken: " +
              (isInput ? "bind the input, e.g. --mp-bind-input=" + name +
                             "=true (or false)"
                       : std::string("the condition must be a Constant, an "
                                     "initializer or a bound graph input"));
      return false;
    }
    if (value.numElements() != 1) {
      error = "If '" + node.name() + "': its condition '" + name + "' has " +
              std::to_string(value.numElements()) + " elements, not one";
      return false;
    }
    taken = value.getDouble(0) != 0.0;
    return true;
  }

  onnx::GraphProto &graph;
  const std::map<std::string, std::string> &bound;
  std::map<std::string, const onnx::NodeProto *> constants;
};

} // namespace

bool inlineKnownIfs(onnx::GraphProto &graph,
                    const std::map<std::string, std::string> &boundInputs,
                    std::vector<std::string> &dropped, std::string &error) {
  bool any = false;
  for (const auto &node : graph.node())
    any |= node.op_type() == "If" && isDefaultDomain(node);
  if (!any)
    return true;
  std::set<std::string> readBefore;
  collectReads(graph, readBefore);
  // The nodes are rebuilt apart: a Constant deciding an If is read from the
  // old list while the new one grows.
  std::vector<onnx::NodeProto> nodes;
  Inliner inliner(graph, boundInputs);
  const onnx::GraphProto original = graph;
  for (const auto &node : original.node())
    if (!inliner.append(node, nodes, error))
      return false;
  graph.clear_node();
  for (auto &node : nodes)
    *graph.add_node() = std::move(node);
  std::set<std::string> readAfter;
  collectReads(graph, readAfter);
  for (const auto &output : graph.output())
    readAfter.insert(output.name());
  // The weights of branches not taken (an initializer of the outer graph
  // that only they read) are dropped too, silently: nothing asks for them.
  auto *inits = graph.mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (readBefore.count(inits->Get(i).name()) &&
        !readAfter.count(inits->Get(i).name()))
      inits->DeleteSubrange(i, 1);
  auto *inputs = graph.mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i) {
    const std::string &name = inputs->Get(i).name();
    if (readBefore.count(name) && !readAfter.count(name) &&
        !boundInputs.count(name)) {
      dropped.insert(dropped.begin(), name);
      inputs->DeleteSubrange(i, 1);
    }
  }
  return true;
}

} // namespace mp::onnx_import
