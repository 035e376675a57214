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


write("tied", np.ascontiguousarray(table.T))
near = np.ascontiguousarray(table.T)
near[2, 3] += 1.0
write("untied", near)
np.save(os.path.join(out, "ids.npy"), ids)
np.save(os.path.join(out, "expected", "logits.npy"), table[ids] @ table.T)
