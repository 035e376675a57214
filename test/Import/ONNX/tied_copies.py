"""Writes tied.onnx and untied.onnx to the directory named: an embedding
and an LM head that reads a transposed copy of it under an exporter-made
name, as PyTorch's constant folding writes a tied head; in untied.onnx one
element of the copy differs. Also an input and tied.onnx's expected output."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(os.path.join(out, "expected"), exist_ok=True)
rng = np.random.default_rng(3)
table = rng.standard_normal((6, 4)).astype(np.float32)
ids = np.array([[0, 5, 2]], np.int64)


def write(name, head):
    nodes = [helper.make_node("Gather", ["embed.weight", "ids"], ["h"]),
             helper.make_node("MatMul", ["h", "onnx::MatMul_7"], ["logits"])]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 6])],
        [numpy_helper.from_array(table, "embed.weight"),
         numpy_helper.from_array(head, "onnx::MatMul_7")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


def save(name, nodes, x_width, y_width, inits):
    """A model `name` of `nodes` from x [1, x_width] to y [1, y_width]."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, x_width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, y_width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


write("tied", np.ascontiguousarray(table.T))
near = np.ascontiguousarray(table.T)
near[2, 3] += 1.0
write("untied", near)
np.save(os.path.join(out, "ids.npy"), ids)
np.save(os.path.join(out, "expected", "logits.npy"), table[ids] @ table.T)

# named.onnx: folded weights (onnx::MatMul_N) read by one matmul each take
# the name of that node's module; one read by two matmuls, and a folded
# value that is no matmul's weight (a norm's 1 + w), keep their names. A
# module inside nn.Sequential is scoped by attribute and index
# (/blocks/blocks.0/ffwd/ffwd.0): its weight is blocks.0.ffwd.0.weight; a
# Sequential's child in a ModuleList (/layers.0/layers.0.0) is
# layers.0.0, a block's own ModuleList's child (/layers.0/layers.0) is
# layers.0.layers.0. nn.MultiheadAttention's packed projection, whose
# bias is attn.in_proj_bias, is attn.in_proj_weight; a module's own
# weight added to a bias of another name (proj.qkv_bias) stays proj.weight.
w = rng.standard_normal((4, 4)).astype(np.float32)
shared = rng.standard_normal((4, 4)).astype(np.float32)
nodes = [helper.make_node("MatMul", ["x", "onnx::MatMul_3"], ["a"], name="/layers.0/fc/MatMul"),
         helper.make_node("MatMul", ["a", "onnx::MatMul_4"], ["b"], name="/layers.0/up/MatMul"),
         helper.make_node("MatMul", ["b", "onnx::MatMul_4"], ["c"], name="/layers.0/down/MatMul"),
         helper.make_node("Mul", ["c", "onnx::Mul_5"], ["m"], name="/layers.0/norm/Mul"),
         helper.make_node("MatMul", ["m", "onnx::MatMul_6"], ["f"],
                          name="/blocks/blocks.0/ffwd/ffwd.0/MatMul"),
         helper.make_node("MatMul", ["f", "onnx::MatMul_7"], ["g"],
                          name="/layers.0/layers.0.0/MatMul"),
         helper.make_node("MatMul", ["g", "onnx::MatMul_11"], ["g2"],
                          name="/layers.0/layers.0/MatMul"),
         helper.make_node("MatMul", ["g2", "onnx::MatMul_8"], ["h"], name="/attn/MatMul"),
         helper.make_node("Add", ["h", "attn.in_proj_bias"], ["i"], name="/attn/Add"),
         helper.make_node("MatMul", ["i", "onnx::MatMul_9"], ["j"], name="/proj/MatMul"),
         helper.make_node("Add", ["j", "proj.qkv_bias"], ["y"], name="/proj/Add")]
save("named", nodes, 4, 4,
     [numpy_helper.from_array(w, "onnx::MatMul_3"), numpy_helper.from_array(shared, "onnx::MatMul_4"),
      numpy_helper.from_array(1 + rng.standard_normal(4).astype(np.float32), "onnx::Mul_5"),
      numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_6"),
      numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_7"),
      numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_8"),
      numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "attn.in_proj_bias"),
      numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_9"),
      numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "proj.qkv_bias"),
      numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "onnx::MatMul_11")])

# calls.onnx: modules called twice, each call reading its own folded copy
# of the module's weight (equal data), each module named by the bias its
# calls add: nn.Sequential's child (scoped /ffn/ffn.0, then /ffn/ffn.0_1),
# nn.MultiheadAttention's packed projection (bias attn.in_proj_bias; /attn
# then /attn_1), a module whose own name ends in _1 (/fc_1, then /fc_1_1),
# a Sequential's child in a ModuleList (/layers.0/layers.0.0, bias
# layers.0.0.bias) and a module reached through a container that is not
# called (scoped /layer/linear1, bias enc.layer.linear1.bias). Each
# module's copies are one parameter, as in PyTorch.
modules = [("ffn.0.bias", "/ffn/ffn.0", "/ffn/ffn.0_1"),
           ("attn.in_proj_bias", "/attn", "/attn_1"),
           ("fc_1.bias", "/fc_1", "/fc_1_1"),
           ("layers.0.0.bias", "/layers.0/layers.0.0", "/layers.0/layers.0.0_1"),
           ("enc.layer.linear1.bias", "/layer/linear1", "/layer_1/linear1")]
nodes, inits, x, number = [], [], "x", 3
for bias, *scopes in modules:
    weight = rng.standard_normal((4, 4)).astype(np.float32)
    inits.append(numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), bias))
    for scope in scopes:
        copy = "onnx::MatMul_%d" % number
        number += 1
        inits.append(numpy_helper.from_array(weight, copy))
        nodes += [helper.make_node("MatMul", [x, copy], [scope + "/m"], name=scope + "/MatMul"),
                  helper.make_node("Add", [scope + "/m", bias], [scope + "/y"], name=scope + "/Add")]
        x = scope + "/y"
nodes.append(helper.make_node("Identity", [x], ["y"]))
save("calls", nodes, 4, 4, inits)

# sliced.onnx: nn.MultiheadAttention used for self- and then
# cross-attention: the exporter folds the second call's bias in slices
# (onnx::Add_N), blocks of attn.in_proj_bias, which the first call reads
# whole. Not tied yet: a warning names each slice. A folded vector of one
# repeated value (zeros) is a block of any such vector and is not taken for
# a slice.
packed_bias = rng.standard_normal(6).astype(np.float32)
nodes = [helper.make_node("Add", ["x", "attn.in_proj_bias"], ["a"], name="/attn/Add"),
         helper.make_node("Slice", ["a", "starts", "ends", "axes"], ["b"], name="/Slice"),
         helper.make_node("Add", ["b", "onnx::Add_9"], ["c"], name="/attn_1/Add"),
         helper.make_node("Add", ["c", "zeros.bias"], ["d"], name="/zeros/Add"),
         helper.make_node("Add", ["d", "onnx::Add_10"], ["y"], name="/zeros_1/Add")]
save("sliced", nodes, 6, 4,
     [numpy_helper.from_array(packed_bias, "attn.in_proj_bias"),
      numpy_helper.from_array(packed_bias[2:], "onnx::Add_9"),
      numpy_helper.from_array(np.array([2], np.int64), "starts"),
      numpy_helper.from_array(np.array([6], np.int64), "ends"),
      numpy_helper.from_array(np.array([1], np.int64), "axes"),
      numpy_helper.from_array(np.zeros(4, np.float32), "zeros.bias"),
      numpy_helper.from_array(np.zeros(1, np.float32), "onnx::Add_10")])
