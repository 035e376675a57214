//===- InlineIf.cpp - If nodes whose condition is known -------------------===//
//
// See InlineIf.h.
//
//===----------------------------------------------------------------------===//
#include "InlineIf.h"

#include "BoundInputs.h"
#include "HostTensor.h"
#include "ModelLoader.h"

#include <map>
#include <set>

namespace mp::onnx_import {

namespace {

bool isDefaultDomain(const onnx::NodeProto &node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

/// Every name the nodes of `graph` read, in nested graphs too.
void collectReads(const onnx::GraphProto &graph, std::set<std::string> &reads) {
  for (const auto &node : graph.node()) {
    reads.insert(node.input().begin(), node.input().end());
    forEachSubgraph(node,
                    [&](const onnx::GraphProto &g) { collectReads(g, reads); });
  }
}

/// How many times each name is defined in `graph` (an input, an
/// initializer, a node's output), in nested graphs too, and each
/// initializer name's count alone.
void collectNames(const onnx::GraphProto &graph,
                  std::map<std::string, int> &defined,
                  std::map<std::string, int> &initializers) {
  for (const auto &input : graph.input())
    ++defined[input.name()];
  for (const auto &init : graph.initializer()) {
    ++defined[init.name()];
    ++initializers[init.name()];
  }
  for (const auto &node : graph.node()) {
    for (const auto &name : node.output())
      ++defined[name];
    forEachSubgraph(node, [&](const onnx::GraphProto &g) {
      collectNames(g, defined, initializers);
    });
  }
}

void renameReads(onnx::GraphProto &graph,
                 std::map<std::string, std::string> renamed);

/// `renamed` applied to the names `node` reads, in its nested graphs too.
void renameReads(onnx::NodeProto &node,
                 const std::map<std::string, std::string> &renamed) {
  for (auto &name : *node.mutable_input())
    if (auto it = renamed.find(name); it != renamed.end())
      name = it->second;
  forEachSubgraph(node, [&](onnx::GraphProto &g) { renameReads(g, renamed); });
}

/// `renamed` applied to the names a nested graph's nodes read from outside
/// it (not those it defines again itself).
void renameReads(onnx::GraphProto &graph,
                 std::map<std::string, std::string> renamed) {
  for (const auto &init : graph.initializer())
    renamed.erase(init.name());
  for (const auto &input : graph.input())
    renamed.erase(input.name());
  for (const auto &node : graph.node())
    for (const auto &name : node.output())
      renamed.erase(name);
  for (auto &node : *graph.mutable_node())
    renameReads(node, renamed);
}

class Inliner {
public:
  /// `graph`, whose `nodes` have been moved out to be appended anew.
  Inliner(onnx::GraphProto &graph,
          const std::map<std::string, std::string> &bound,
          const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes)
      : graph(graph), bound(bound) {
    collectNames(graph, names, initializerCount);
    for (const auto &node : nodes) {
      for (const auto &name : node.output())
        ++names[name];
      forEachSubgraph(node, [&](const onnx::GraphProto &g) {
        collectNames(g, names, initializerCount);
      });
    }
  }

  /// The If conditions decided (inputs nothing else may read).
  std::set<std::string> conditions;

  /// Appends `node` to `out`, or the branch it takes when it is a known If.
  bool append(const onnx::NodeProto &node, std::vector<onnx::NodeProto> &out,
              std::string &error) {
    noteKnown(node);
    if (node.op_type() != "If" || !isDefaultDomain(node)) {
      out.push_back(node);
      return true;
    }
    bool taken;
    if (!condition(node, taken, error))
      return false;
    const char *which = taken ? "then_branch" : "else_branch";
    const onnx::AttributeProto *branchAttr = findAttr(node, which);
    if (!branchAttr || !branchAttr->has_g()) {
      error = "If '" + node.name() + "' has no " + which + " graph";
      return false;
    }
    onnx::GraphProto branch = branchAttr->g();
    if (branch.output_size() != node.output_size()) {
      error = "If '" + node.name() + "': its " + which + " has " +
              std::to_string(branch.output_size()) + " outputs, the If " +
              std::to_string(node.output_size());
      return false;
    }
    // Weights are read from the file by name: a branch's own initializer
    // must be the only one of its name in the model.
    for (const auto &init : branch.initializer()) {
      if (initializerCount[init.name()] > 1) {
        error = "If '" + node.name() + "': the " + which + "'s initializer '" +
                init.name() +
                "' shares its name with another initializer of the model, "
                "and mp reads weights by name; give them different names";
        return false;
      }
      *graph.add_initializer() = init;
    }
    // The branch's own names become unique in the one graph it joins.
    std::map<std::string, std::string> renamed;
    for (const auto &inner : branch.node())
      for (const auto &name : inner.output())
        if (!name.empty())
          renamed[name] = uniqueName(name);
    for (auto &inner : *branch.mutable_node()) {
      renameReads(inner, renamed);
      for (auto &name : *inner.mutable_output())
        if (auto it = renamed.find(name); it != renamed.end())
          name = it->second;
      if (!append(inner, out, error))
        return false;
    }
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty())
        continue;
      std::string source = branch.output(i).name();
      if (source.empty()) {
        error = "If '" + node.name() + "': output " + std::to_string(i) +
                " of the branch it takes has no name";
        return false;
      }
      if (auto it = renamed.find(source); it != renamed.end())
        source = it->second;
      onnx::NodeProto identity;
      identity.set_op_type("Identity");
      identity.set_name(node.name() + "/" + node.output(i));
      identity.add_input(source);
      identity.add_output(node.output(i));
      noteKnown(identity);
      out.push_back(std::move(identity));
    }
    return true;
  }

private:
  /// `name`, or `name` with a suffix when the model defines it elsewhere
  /// too (two branches' `tmp`).
  std::string uniqueName(const std::string &name) {
    if (names[name] <= 1)
      return name;
    std::string unique;
    for (int k = 1; unique.empty() || names.count(unique); ++k)
      unique = name + "__inlined" + std::to_string(k);
    names[unique] = 1;
    return unique;
  }

  /// Records the value of a Constant node, or of an Identity of a known
  /// value (an inlined If's output), for conditions that read it.
  void noteKnown(const onnx::NodeProto &node) {
    if (node.output_size() != 1)
      return;
    if (node.op_type() == "Identity" && node.input_size() == 1) {
      if (auto it = known.find(node.input(0)); it != known.end())
        known[node.output(0)] = it->second;
      return;
    }
    if (node.op_type() != "Constant")
      return;
    HostTensor value;
    std::string ignored;
    if (const onnx::AttributeProto *attr = findAttr(node, "value");
        attr && attr->has_t()) {
      if (decodeTensor(attr->t(), nullptr, value, ignored))
        known[node.output(0)] = std::move(value);
    } else if (const onnx::AttributeProto *i = findAttr(node, "value_int")) {
      value.dtype = DType::Int64;
      value.ints = {i->i()};
      known[node.output(0)] = std::move(value);
    } else if (const onnx::AttributeProto *f = findAttr(node, "value_float")) {
      value.dtype = DType::Float;
      value.floats = {f->f()};
      known[node.output(0)] = std::move(value);
    }
  }

  /// The value of the If's condition, when known before the run.
  bool condition(const onnx::NodeProto &node, bool &taken, std::string &error) {
    const std::string &name = node.input_size() ? node.input(0) : "";
    HostTensor value;
    bool isKnown = false;
    if (auto it = bound.find(name); it != bound.end()) {
      for (const auto &input : graph.input())
        if (input.name() == name) {
          if (!readBoundInput(input, it->second, value, error))
            return false;
          isKnown = true;
        }
    }
    for (const auto &init : graph.initializer())
      if (!isKnown && init.name() == name) {
        if (!decodeTensor(init, nullptr, value, error))
          return false;
        isKnown = true;
      }
    if (auto it = known.find(name); !isKnown && it != known.end()) {
      value = it->second;
      isKnown = true;
    }
    if (!isKnown) {
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
    conditions.insert(name);
    taken = value.getDouble(0) != 0.0;
    return true;
  }

  onnx::GraphProto &graph;
  const std::map<std::string, std::string> &bound;
  std::map<std::string, int> names;            // definitions anywhere
  std::map<std::string, int> initializerCount; // in every graph
  std::map<std::string, HostTensor> known;     // Constant values
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
  // The nodes are rebuilt apart (moved out, not copied with the weights):
  // the inliner reads the graph's inputs and initializers meanwhile.
  google::protobuf::RepeatedPtrField<onnx::NodeProto> original;
  original.Swap(graph.mutable_node());
  std::vector<onnx::NodeProto> nodes;
  Inliner inliner(graph, boundInputs, original);
  for (const auto &node : original)
    if (!inliner.append(node, nodes, error))
      return false;
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
        !boundInputs.count(name) && !inliner.conditions.count(name)) {
      dropped.insert(dropped.begin(), name);
      inputs->DeleteSubrange(i, 1);
    }
  }
  return true;
}

} // namespace mp::onnx_import
