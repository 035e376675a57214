//===- NewerOpsets.cpp - opsets 18 to 24 read as opset 17 -----------------===//
//
// See NewerOpsets.h. The rewrites follow the ONNX operator specifications
// (and the reference implementation's order of operations where the text
// leaves it open, as Attention's soft-capping before the mask).
//
//===----------------------------------------------------------------------===//
#include "NewerOpsets.h"

#include "HostTensor.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace mp::onnx_import {

namespace {

bool isDefaultDomain(const onnx::NodeProto &node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

float floatAttribute(const onnx::NodeProto &node, const std::string &name,
                     float otherwise) {
  const auto *a = findAttr(node, name);
  return a ? a->f() : otherwise;
}

void removeAttribute(onnx::NodeProto &node, const std::string &name) {
  auto *attrs = node.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name)
      attrs->DeleteSubrange(i, 1);
}

bool hasInput(const onnx::NodeProto &node, int i) {
  return node.input_size() > i && !node.input(i).empty();
}

bool hasOutput(const onnx::NodeProto &node, int i) {
  return node.output_size() > i && !node.output(i).empty();
}

onnx::AttributeProto makeIntAttr(const std::string &name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
  return a;
}

onnx::AttributeProto makeIntsAttr(const std::string &name,
                                  const std::vector<int64_t> &values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values)
    a.add_ints(v);
  return a;
}

/// The ops whose axes moved from an attribute to an input in opset 18
/// (ReduceSum's moved in 13, which mp reads as it is).
const std::set<std::string> &reductionsWithAxesInput() {
  static const std::set<std::string> ops = {
      "ReduceMean",   "ReduceMax",       "ReduceMin",
      "ReduceProd",   "ReduceL1",        "ReduceL2",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return ops;
}

/// Builds the opset 17 nodes that replace one node, named after it.
class Rewriter {
public:
  /// `index`, the node's place in the graph, makes the new names unique
  /// (ONNX does not require node names, nor distinct ones).
  Rewriter(const onnx::NodeProto &node, int index,
           google::protobuf::RepeatedPtrField<onnx::NodeProto> &out)
      : original(node),
        base((node.name().empty() ? node.op_type() : node.name()) + "#" +
             std::to_string(index)),
        out(out) {}

  /// A new node `op` on `inputs`; returns its (first) output, or writes to
  /// `outputs` when given (the replaced node's names).
  std::string add(const std::string &op, std::vector<std::string> inputs,
                  std::vector<onnx::AttributeProto> attrs = {},
                  std::vector<std::string> outputs = {}) {
    onnx::NodeProto *node = out.Add();
    node->set_op_type(op);
    node->set_name(base + "/" + op + "_" + std::to_string(count));
    for (const auto &in : inputs)
      node->add_input(in);
    if (outputs.empty())
      outputs.push_back(node->name() + "_out");
    for (const auto &o : outputs)
      node->add_output(o);
    for (auto &a : attrs)
      *node->add_attribute() = std::move(a);
    ++count;
    return outputs.front();
  }

  /// A fresh value name (for a node with several outputs).
  std::string name(const std::string &hint) const {
    return base + "/" + hint + "_" + std::to_string(count);
  }

  std::string ints(const std::vector<int64_t> &values) {
    onnx::AttributeProto value;
    value.set_name("value");
    value.set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *t = value.mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
    return add("Constant", {}, {value});
  }

  /// A scalar of the node's element type (`elementType`).
  std::string scalar(double v) {
    onnx::AttributeProto value;
    value.set_name("value");
    value.set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto *t = value.mutable_t();
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(static_cast<float>(v));
    std::string f32 = add("Constant", {}, {value});
    if (elementType == onnx::TensorProto::FLOAT)
      return f32;
    return add("Cast", {f32}, {makeIntAttr("to", elementType)});
  }

  /// The element type of the values the node computes on (f32 unless the
  /// model says otherwise).
  int elementType = onnx::TensorProto::FLOAT;

  /// Dims [from, to) of `x`'s shape, an int64 vector.
  std::string dims(const std::string &x, int64_t from, int64_t to) {
    return add("Shape", {x},
               {makeIntAttr("start", from), makeIntAttr("end", to)});
  }

  const onnx::NodeProto &original;

private:
  std::string base;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> &out;
  int count = 0;
};

class Downgrader {
public:
  explicit Downgrader(onnx::GraphProto &graph) : graph(graph) {
    for (const auto &init : graph.initializer())
      constants[init.name()] = &init;
    for (const auto &node : graph.node())
      if (node.op_type() == "Constant" && isDefaultDomain(node))
        if (const auto *v = findAttr(node, "value"); v && v->has_t())
          constants[node.output(0)] = &v->t();
    auto declare = [&](const onnx::ValueInfoProto &info) {
      const auto &tensor = info.type().tensor_type();
      if (tensor.has_shape())
        ranks[info.name()] = tensor.shape().dim_size();
      if (tensor.elem_type())
        elementTypes[info.name()] = tensor.elem_type();
    };
    for (const auto &input : graph.input())
      declare(input);
    for (const auto &info : graph.value_info())
      declare(info);
    for (const auto &node : graph.node())
      for (const auto &output : node.output())
        producers[output] = &node;
  }

  bool run(std::string &error) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    int index = 0;
    for (const auto &node : graph.node()) {
      if (!isDefaultDomain(node)) {
        *out.Add() = node;
        continue;
      }
      Rewriter r(node, index++, out);
      if (node.input_size() > 0)
        r.elementType =
            elementTypeOf(node.input(0)).value_or(onnx::TensorProto::FLOAT);
      if (!rewrite(r, node, out, error))
        return false;
    }
    *graph.mutable_node() = std::move(out);
    return true;
  }

private:
  std::string where(const onnx::NodeProto &node) const {
    return "node '" + node.name() + "' (" + node.op_type() + "): ";
  }

  /// The integers `name` holds when known here: an initializer, a Constant
  /// (value, value_ints, value_int), through Identity nodes.
  std::optional<std::vector<int64_t>> constantInts(const std::string &name,
                                                   int depth = 0) {
    if (auto producer = producers.find(name);
        producer != producers.end() && depth < 16) {
      const onnx::NodeProto &node = *producer->second;
      if (node.op_type() == "Identity" && node.input_size() == 1)
        return constantInts(node.input(0), depth + 1);
      if (node.op_type() == "Constant") {
        if (const auto *a = findAttr(node, "value_ints"))
          return std::vector<int64_t>(a->ints().begin(), a->ints().end());
        if (const auto *a = findAttr(node, "value_int"))
          return std::vector<int64_t>{a->i()};
      }
    }
    auto it = constants.find(name);
    if (it == constants.end())
      return std::nullopt;
    HostTensor t;
    std::string error;
    if (!decodeTensor(*it->second, nullptr, t, error) || t.isFloat())
      return std::nullopt;
    return t.ints;
  }

  bool rewrite(Rewriter &r, const onnx::NodeProto &node,
               google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
               std::string &error) {
    const std::string &op = node.op_type();
    if (reductionsWithAxesInput().count(op))
      return reduction(r, node, out, error);
    if (op == "Split" && findAttr(node, "num_outputs") && !hasInput(node, 1))
      return splitInParts(r, node), true;
    if (op == "Split" || op == "Cast" || op == "Pad")
      return retouched(node, out, error);
    if (op == "Gelu")
      return gelu(r, node), true;
    if (op == "Swish") {
      float alpha = floatAttribute(node, "alpha", 1.0f);
      std::string x = node.input(0);
      std::string gate = alpha == 1.0f ? x : r.add("Mul", {x, r.scalar(alpha)});
      r.add("Mul", {x, r.add("Sigmoid", {gate})}, {}, {node.output(0)});
      return true;
    }
    if (op == "RMSNormalization")
      return rmsNorm(r, node, error);
    if (op == "Attention")
      return attention(r, node, error);
    if (op == "RotaryEmbedding")
      return rotary(r, node, error);
    *out.Add() = node;
    return true;
  }

  /// Opset 18's axes input, known at import, back to the attribute.
  bool reduction(Rewriter &r, const onnx::NodeProto &node,
                 google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                 std::string &error) {
    onnx::NodeProto copy = node;
    bool noop = intAttr(node, "noop_with_empty_axes", 0) != 0;
    removeAttribute(copy, "noop_with_empty_axes");
    std::vector<int64_t> axes;
    if (hasInput(node, 1)) {
      std::optional<std::vector<int64_t>> known = constantInts(node.input(1));
      if (!known) {
        error = where(node) + "its axes ('" + node.input(1) +
                "') must be known at import";
        return false;
      }
      axes = *known;
    }
    copy.mutable_input()->DeleteSubrange(1, copy.input_size() - 1);
    if (axes.empty() && noop) {
      r.add("Identity", {node.input(0)}, {}, {node.output(0)});
      return true;
    }
    if (!axes.empty())
      *copy.add_attribute() = makeIntsAttr("axes", axes);
    *out.Add() = std::move(copy);
    return true;
  }

  /// Split(num_outputs = k) (opset 18): parts of ceil(n / k), the last one
  /// what remains, as sizes computed from the input's shape.
  static void splitInParts(Rewriter &r, const onnx::NodeProto &node) {
    int64_t axis = intAttr(node, "axis", 0);
    int64_t parts = node.output_size();
    std::string x = node.input(0);
    std::string n =
        axis == -1 ? r.dims(x, -1, INT64_MAX) : r.dims(x, axis, axis + 1);
    std::string each =
        r.add("Div", {r.add("Add", {n, r.ints({parts - 1})}), r.ints({parts})});
    std::string rest =
        r.add("Sub", {n, r.add("Mul", {each, r.ints({parts - 1})})});
    std::vector<std::string> sizes(parts - 1, each);
    sizes.push_back(rest);
    std::string split = r.add("Concat", sizes, {makeIntAttr("axis", 0)});
    r.add("Split", {x, split}, {makeIntAttr("axis", axis)},
          std::vector<std::string>(node.output().begin(), node.output().end()));
  }

  /// Attributes opset 17 does not have, where they change nothing mp
  /// reads: Cast's saturate (float8 only). Pad's axes input and wrap mode
  /// are refused.
  bool retouched(const onnx::NodeProto &node,
                 google::protobuf::RepeatedPtrField<onnx::NodeProto> &out,
                 std::string &error) {
    if (node.op_type() == "Pad") {
      const auto *mode = findAttr(node, "mode");
      if (hasInput(node, 3)) {
        error = where(node) + "padding along chosen axes (the 'axes' input "
                              "of opset 18) is not supported";
        return false;
      }
      if (mode && mode->s() == "wrap") {
        error = where(node) + "the 'wrap' mode (opset 19) is not supported";
        return false;
      }
    }
    onnx::NodeProto copy = node;
    removeAttribute(copy, "num_outputs");
    removeAttribute(copy, "saturate");
    *out.Add() = std::move(copy);
    return true;
  }

  /// Gelu (opset 20): x/2 (1 + erf(x / sqrt 2)), or the tanh form.
  static void gelu(Rewriter &r, const onnx::NodeProto &node) {
    const auto *approximate = findAttr(node, "approximate");
    std::string x = node.input(0), inner;
    if (approximate && approximate->s() == "tanh") {
      std::string cube = r.add("Pow", {x, r.scalar(3.0)});
      std::string poly =
          r.add("Add", {x, r.add("Mul", {cube, r.scalar(0.044715)})});
      inner = r.add("Tanh",
                    {r.add("Mul", {poly, r.scalar(std::sqrt(2.0 / M_PI))})});
    } else {
      inner = r.add("Erf", {r.add("Div", {x, r.scalar(std::sqrt(2.0))})});
    }
    std::string gate = r.add("Add", {inner, r.scalar(1.0)});
    std::string half = r.add("Mul", {x, r.scalar(0.5)});
    r.add("Mul", {half, gate}, {}, {node.output(0)});
  }

  /// RMSNormalization (opset 23): x / sqrt(mean(x^2 over the dims from
  /// axis) + epsilon) * scale.
  bool rmsNorm(Rewriter &r, const onnx::NodeProto &node, std::string &error) {
    int64_t axis = intAttr(node, "axis", -1);
    std::string x = node.input(0);
    if (axis >= 0) {
      auto rank = ranks.find(x);
      if (rank == ranks.end()) {
        error = where(node) + "a non-negative axis needs the rank of '" + x +
                "', which the model does not declare (write axis as "
                "negative)";
        return false;
      }
      axis -= rank->second;
    }
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < 0; ++a)
      axes.push_back(a);
    std::string mean =
        r.add("ReduceMean", {r.add("Mul", {x, x})},
              {makeIntsAttr("axes", axes), makeIntAttr("keepdims", 1)});
    std::string root =
        r.add("Sqrt", {r.add("Add", {mean, r.scalar(floatAttribute(
                                               node, "epsilon", 1e-5f))})});
    r.add("Mul", {r.add("Div", {x, root}), node.input(1)}, {},
          {node.output(0)});
    return true;
  }

  /// [B, S, heads * d] -> [B, heads, S, d].
  static std::string splitHeads(Rewriter &r, const std::string &x,
                                int64_t heads) {
    std::string viewed = r.add("Reshape", {x, r.ints({0, 0, heads, -1})});
    return r.add("Transpose", {viewed}, {makeIntsAttr("perm", {0, 2, 1, 3})});
  }

  /// Attention (opsets 23 and 24) as the reference computes it: 3D inputs
  /// split into heads, the cache appended, key/value heads repeated for
  /// grouped queries, softmax(q kᵀ · scale, soft-capped, + mask) · v.
  bool attention(Rewriter &r, const onnx::NodeProto &node, std::string &error) {
    if (hasInput(node, 6)) {
      error = where(node) + "'nonpad_kv_seqlen' (a static cache's lengths) is "
                            "not supported";
      return false;
    }
    if (hasOutput(node, 3)) {
      error = where(node) + "'qk_matmul_output' is not supported";
      return false;
    }
    if (hasInput(node, 4) != hasInput(node, 5)) {
      error = where(node) + "past_key and past_value come together";
      return false;
    }
    int64_t qHeads = intAttr(node, "q_num_heads", 0);
    int64_t kvHeads = intAttr(node, "kv_num_heads", 0);
    // 3D inputs need the head counts; 4D ones may carry them too.
    std::optional<int64_t> rank = rankOf(node.input(0));
    bool threeD = rank ? *rank == 3 : qHeads > 0 || kvHeads > 0;
    if (threeD && (qHeads <= 0 || kvHeads <= 0)) {
      error = where(node) + "3D inputs need both q_num_heads and kv_num_heads";
      return false;
    }
    std::string q = node.input(0), k = node.input(1), v = node.input(2);
    if (threeD) {
      q = splitHeads(r, q, qHeads);
      k = splitHeads(r, k, kvHeads);
      v = splitHeads(r, v, kvHeads);
    }
    std::string past;
    if (hasInput(node, 4)) {
      past = node.input(4);
      k = r.add("Concat", {past, k}, {makeIntAttr("axis", 2)});
      v = r.add("Concat", {node.input(5), v}, {makeIntAttr("axis", 2)});
    }
    if (hasOutput(node, 1))
      r.add("Identity", {k}, {}, {node.output(1)});
    if (hasOutput(node, 2))
      r.add("Identity", {v}, {}, {node.output(2)});
    // Grouped queries: each key/value head repeated for its query heads in
    // turn ([h0, h0, h1, h1, ...]), the form mp-raise folds into attention.
    std::string qHeadCount = r.dims(q, 1, 2);
    std::string kvHeadCount = r.dims(k, 1, 2);
    std::string repeats = r.add("Div", {qHeadCount, kvHeadCount});
    auto repeat = [&](const std::string &x) {
      std::string lifted = r.add("Unsqueeze", {x, r.ints({2})});
      std::string expanded = r.add(
          "Expand",
          {lifted, r.add("Concat", {r.dims(x, 0, 2), repeats, r.dims(x, 2, 4)},
                         {makeIntAttr("axis", 0)})});
      return r.add("Reshape", {expanded, r.add("Concat",
                                               {r.dims(x, 0, 1), qHeadCount,
                                                r.dims(x, 2, 4)},
                                               {makeIntAttr("axis", 0)})});
    };
    if (threeD ? qHeads != kvHeads : true) {
      k = repeat(k);
      v = repeat(v);
    }
    std::string kt =
        r.add("Transpose", {k}, {makeIntsAttr("perm", {0, 1, 3, 2})});
    std::string scores = r.add("MatMul", {q, kt});
    const auto *scaleAttr = findAttr(node, "scale");
    std::string scale;
    if (scaleAttr)
      scale = r.scalar(scaleAttr->f());
    else
      scale =
          r.add("Reciprocal",
                {r.add("Sqrt", {r.add("Cast", {r.dims(q, 3, 4)},
                                      {makeIntAttr("to", r.elementType)})})});
    scores = r.add("Mul", {scores, scale});
    float softcap = floatAttribute(node, "softcap", 0.0f);
    if (softcap > 0)
      scores = r.add(
          "Mul", {r.add("Tanh", {r.add("Div", {scores, r.scalar(softcap)})}),
                  r.scalar(softcap)});
    if (intAttr(node, "is_causal", 0)) {
      // Key j is seen by query i when j <= i + past length.
      std::string square = r.add("Concat", {r.dims(q, 2, 3), r.dims(k, 2, 3)},
                                 {makeIntAttr("axis", 0)});
      onnx::AttributeProto one;
      one.set_name("value");
      one.set_type(onnx::AttributeProto::TENSOR);
      one.mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
      one.mutable_t()->add_dims(1);
      one.mutable_t()->add_float_data(1.0f);
      std::string ones = r.add("ConstantOfShape", {square}, {one});
      std::string offset = past.empty() ? r.ints({0}) : r.dims(past, 2, 3);
      std::string offsetScalar = r.add("Squeeze", {offset, r.ints({0})});
      std::string lower =
          r.add("Trilu", {ones, offsetScalar}, {makeIntAttr("upper", 0)});
      std::string allowed =
          r.add("Cast", {lower}, {makeIntAttr("to", onnx::TensorProto::BOOL)});
      scores = r.add("Where", {allowed, scores, r.scalar(-INFINITY)});
    }
    if (hasInput(node, 3))
      scores = maskScores(r, scores, node.input(3), k);
    std::string probs = r.add("Softmax", {scores}, {makeIntAttr("axis", -1)});
    std::string y = r.add("MatMul", {probs, v});
    if (!threeD) {
      r.add("Identity", {y}, {}, {node.output(0)});
      return true;
    }
    std::string merged =
        r.add("Transpose", {y}, {makeIntsAttr("perm", {0, 2, 1, 3})});
    r.add("Reshape", {merged, r.ints({0, 0, -1})}, {}, {node.output(0)});
    return true;
  }

  /// RotaryEmbedding (opset 23) as the reference computes it, in the
  /// [B, S, heads, d] frame: the first rotary_embedding_dim channels of
  /// each head (all without it) rotated by the cos and sin rows of each
  /// position (position_ids into the caches, or the caches [B, S, r/2]
  /// themselves), as halves or interleaved pairs.
  bool rotary(Rewriter &r, const onnx::NodeProto &node, std::string &error) {
    int64_t heads = intAttr(node, "num_heads", 0);
    int64_t dim = intAttr(node, "rotary_embedding_dim", 0);
    bool interleaved = intAttr(node, "interleaved", 0) != 0;
    std::string x = node.input(0);
    std::optional<int64_t> rank = rankOf(x);
    bool threeD = rank ? *rank == 3 : heads > 0;
    if (threeD && heads <= 0) {
      error = where(node) + "3D inputs need num_heads";
      return false;
    }
    std::string frame =
        threeD ? r.add("Reshape", {x, r.ints({0, 0, heads, -1})})
               : r.add("Transpose", {x}, {makeIntsAttr("perm", {0, 2, 1, 3})});
    std::string rotated = frame, kept;
    if (dim > 0) {
      rotated =
          r.add("Slice", {frame, r.ints({0}), r.ints({dim}), r.ints({-1})});
      kept = r.add("Slice",
                   {frame, r.ints({dim}), r.ints({INT64_MAX}), r.ints({-1})});
    }
    auto table = [&](const std::string &cache) {
      std::string rows =
          hasInput(node, 3) ? r.add("Gather", {cache, node.input(3)}) : cache;
      return r.add("Unsqueeze", {rows, r.ints({2})});
    };
    std::string cos = table(node.input(1)), sin = table(node.input(2));
    std::string x1, x2;
    if (interleaved) {
      x1 = r.add("Slice", {rotated, r.ints({0}), r.ints({INT64_MAX}),
                           r.ints({-1}), r.ints({2})});
      x2 = r.add("Slice", {rotated, r.ints({1}), r.ints({INT64_MAX}),
                           r.ints({-1}), r.ints({2})});
    } else {
      x1 = r.name("first_half");
      x2 = r.name("second_half");
      r.add("Split", {rotated}, {makeIntAttr("axis", -1)}, {x1, x2});
    }
    std::string real =
        r.add("Sub", {r.add("Mul", {cos, x1}), r.add("Mul", {sin, x2})});
    std::string imag =
        r.add("Add", {r.add("Mul", {sin, x1}), r.add("Mul", {cos, x2})});
    std::string out;
    if (interleaved) {
      std::string pairs = r.add("Concat",
                                {r.add("Unsqueeze", {real, r.ints({-1})}),
                                 r.add("Unsqueeze", {imag, r.ints({-1})})},
                                {makeIntAttr("axis", -1)});
      out = r.add("Reshape", {pairs, r.add("Shape", {rotated})});
    } else {
      out = r.add("Concat", {real, imag}, {makeIntAttr("axis", -1)});
    }
    if (!kept.empty())
      out = r.add("Concat", {out, kept}, {makeIntAttr("axis", -1)});
    if (threeD)
      r.add("Reshape", {out, r.add("Shape", {x})}, {}, {node.output(0)});
    else
      r.add("Transpose", {out}, {makeIntsAttr("perm", {0, 2, 1, 3})},
            {node.output(0)});
    return true;
  }

  /// A boolean mask (true: attend) applied by Where, a float one added.
  /// A mask shorter than the keys (the cache's length not counted) is
  /// padded with masked positions to `keys`' length, as the reference does.
  std::string maskScores(Rewriter &r, const std::string &scores,
                         const std::string &mask, const std::string &keys) {
    std::string additive =
        isBool(mask)
            ? r.add("Where", {mask, r.scalar(0.0), r.scalar(-INFINITY)})
            : mask;
    if (std::optional<int64_t> rank = rankOf(mask)) {
      std::string missing =
          r.add("Sub", {r.dims(keys, 2, 3), r.dims(mask, *rank - 1, *rank)});
      std::vector<int64_t> zeros(2 * *rank - 1, 0);
      std::string pads =
          r.add("Concat", {r.ints(zeros), missing}, {makeIntAttr("axis", 0)});
      additive = r.add("Pad", {additive, pads, r.scalar(-INFINITY)});
    }
    return r.add("Add", {scores, additive});
  }

  /// The rank of `name` where the model says or implies it: declared,
  /// stored, or carried through the ops that keep or combine ranks.
  std::optional<int64_t> rankOf(const std::string &name, int depth = 0) const {
    if (auto it = ranks.find(name); it != ranks.end())
      return it->second;
    if (auto it = constants.find(name); it != constants.end())
      return it->second->dims_size();
    auto producer = producers.find(name);
    if (producer == producers.end() || depth > 64)
      return std::nullopt;
    const onnx::NodeProto &node = *producer->second;
    const std::string &op = node.op_type();
    static const std::set<std::string> keep = {"Identity",
                                               "Cast",
                                               "Relu",
                                               "Gelu",
                                               "Erf",
                                               "Tanh",
                                               "Sigmoid",
                                               "Softmax",
                                               "LayerNormalization",
                                               "RMSNormalization",
                                               "Swish",
                                               "Neg",
                                               "Sqrt",
                                               "Exp",
                                               "Transpose",
                                               "Slice",
                                               "Concat",
                                               "Dropout",
                                               "Attention",
                                               "RotaryEmbedding",
                                               "Reciprocal",
                                               "Abs",
                                               "Log",
                                               "Clip"};
    static const std::set<std::string> widest = {"Add", "Sub",   "Mul",   "Div",
                                                 "Pow", "Where", "MatMul"};
    if (keep.count(op) && node.input_size() > 0)
      return rankOf(node.input(0), depth + 1);
    if (widest.count(op)) {
      int64_t most = 0;
      for (const auto &input : node.input()) {
        std::optional<int64_t> r = rankOf(input, depth + 1);
        if (!r)
          return std::nullopt;
        most = std::max(most, *r);
      }
      return most;
    }
    if (op == "Reshape" && node.input_size() > 1) {
      auto it = constants.find(node.input(1));
      if (it != constants.end() && it->second->dims_size() == 1)
        return it->second->dims(0);
    }
    return std::nullopt;
  }

  /// The element type of `name` where the model says or implies it.
  std::optional<int> elementTypeOf(const std::string &name,
                                   int depth = 0) const {
    if (auto it = elementTypes.find(name); it != elementTypes.end())
      return it->second;
    if (auto it = constants.find(name); it != constants.end())
      return it->second->data_type();
    auto producer = producers.find(name);
    if (producer == producers.end() || depth > 64)
      return std::nullopt;
    const onnx::NodeProto &node = *producer->second;
    if (node.op_type() == "Cast")
      return static_cast<int>(intAttr(node, "to", onnx::TensorProto::FLOAT));
    if (isBool(name))
      return onnx::TensorProto::BOOL;
    if (node.op_type() == "Where" && node.input_size() > 1)
      return elementTypeOf(node.input(1), depth + 1);
    if (node.input_size() == 0)
      return std::nullopt;
    return elementTypeOf(node.input(0), depth + 1);
  }

  /// Whether `name` holds booleans: declared so, or made by an op that
  /// gives booleans (a comparison, a logical op, a cast to bool), or moved
  /// from such a value by shape ops. (The graph has no inferred types yet.)
  bool isBool(const std::string &name, int depth = 0) const {
    if (auto it = elementTypes.find(name); it != elementTypes.end())
      return it->second == onnx::TensorProto::BOOL;
    if (auto it = constants.find(name); it != constants.end())
      return it->second->data_type() == onnx::TensorProto::BOOL;
    auto producer = producers.find(name);
    if (producer == producers.end() || depth > 64)
      return false;
    const onnx::NodeProto &node = *producer->second;
    static const std::set<std::string> comparisons = {
        "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not",
        "And",   "Or",   "Xor",         "IsNaN",   "IsInf"};
    static const std::set<std::string> movers = {
        "Identity",  "Reshape", "Expand", "Unsqueeze", "Squeeze", "Slice",
        "Transpose", "Concat",  "Gather", "Tile",      "Flatten"};
    if (comparisons.count(node.op_type()))
      return true;
    if (node.op_type() == "Cast")
      return intAttr(node, "to", 0) == onnx::TensorProto::BOOL;
    if (node.op_type() == "ConstantOfShape") {
      const auto *value = findAttr(node, "value");
      return value && value->t().data_type() == onnx::TensorProto::BOOL;
    }
    if (movers.count(node.op_type()) && node.input_size() > 0)
      return isBool(node.input(0), depth + 1);
    if (node.op_type() == "Where" && node.input_size() > 1)
      return isBool(node.input(1), depth + 1);
    return false;
  }

  onnx::GraphProto &graph;
  std::map<std::string, const onnx::TensorProto *> constants;
  // What the graph's inputs and value_info declare.
  std::map<std::string, int64_t> ranks;
  std::map<std::string, int> elementTypes;
  std::map<std::string, const onnx::NodeProto *> producers;
};

} // namespace

bool readAsOpset17(onnx::ModelProto &model, std::string &error) {
  Downgrader downgrader(*model.mutable_graph());
  if (!downgrader.run(error))
    return false;
  for (auto &imp : *model.mutable_opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      imp.set_version(17);
  // IR versions 9 to 11 add float8 and 4-bit types and function overloads,
  // none of which opset 17 nodes use (the importer refuses those types).
  if (model.ir_version() > 8)
    model.set_ir_version(8);
  return true;
}

} // namespace mp::onnx_import
