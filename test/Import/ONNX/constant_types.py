"""Writes constant_types.onnx to the directory named: a Constant of every
element type the importer folds, each a graph output so that the importer
materializes it as an mp.constant. Each type has one constant with distinct
elements, probing rounding to f16 and bf16 and the ends of each integer
range, and one whose elements are all equal (a splat)."""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
types = {
    "f32": (TensorProto.FLOAT, [1.5, -2.25, 0.1]),
    "f64": (TensorProto.DOUBLE, [1.5, -2.25, 0.1]),
    "f16": (TensorProto.FLOAT16, [1.5, -2.25, 0.1]),
    "bf16": (TensorProto.BFLOAT16, [1.5, -2.25, 0.1]),
    "i64": (TensorProto.INT64, [-9223372036854775808, 9223372036854775807, 3]),
    "i32": (TensorProto.INT32, [-2147483648, 2147483647, 3]),
    "i8": (TensorProto.INT8, [-128, 127, 3]),
    "bool": (TensorProto.BOOL, [True, False, True]),
}
nodes, outputs = [], []
for name, (dtype, values) in types.items():
    for suffix, data in (("", values), ("_splat", [values[1]] * 3)):
        tensor = helper.make_tensor(name + suffix + "_value", dtype, [3], data)
        nodes.append(helper.make_node("Constant", [], [name + suffix], value=tensor))
        outputs.append(helper.make_tensor_value_info(name + suffix, dtype, [3]))
graph = helper.make_graph(nodes, "constant_types", [], outputs)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "constant_types.onnx"))
