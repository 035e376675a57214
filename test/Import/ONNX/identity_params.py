"""Writes identity_params.onnx to the directory named: parameters stored
once and repeated through Identity nodes, as PyTorch's exporter writes equal
parameters (freshly initialized norm weights and biases), with an input and
the expected output."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(5)
w = rng.standard_normal((4, 4)).astype(np.float32)
ones = np.ones(4, np.float32)
x = rng.standard_normal((2, 4)).astype(np.float32)
nodes = [
    helper.make_node("Identity", ["ln1.weight"], ["ln2.weight"]),
    helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
    helper.make_node("Mul", ["h", "ln1.weight"], ["h1"]),
    helper.make_node("Mul", ["h1", "ln2.weight"], ["y"]),
]
graph = helper.make_graph(
    nodes, "identity_params",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    [numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(ones * 2, "ln1.weight")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "identity_params.onnx"))
np.save(os.path.join(out, "x.npy"), x)
os.makedirs(os.path.join(out, "expected"), exist_ok=True)
np.save(os.path.join(out, "expected", "y.npy"), (x @ w) * 2 * 2)
