"""Writes models in opsets 18 to 25 to OUT/NAME.onnx: those mp cannot read
as opset 17 (what newer_opsets.test expects an error for), and corner
cases it must read (nodes without names, axes from value_ints through an
Identity, f16, a boolean mask from ConstantOfShape, 4D Attention inputs
with head counts through an Identity)."""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def save(out, name, nodes, inputs, outputs, opset, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def main(out):
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    # ReduceMean's axes (an input since opset 18) known only at run time.
    save(out, "runtime_axes", [helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="mean")],
         [x, axes], [y], 18)
    # Pad's wrap mode (opset 19).
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")
    save(out, "pad_wrap", [helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="wrap")],
         [x], [y], 19, [pads])
    # Attention with a static cache's lengths (opset 24).
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    lens = numpy_helper.from_array(np.array([3], np.int64), "lens")
    save(out, "nonpad_kv", [helper.make_node("Attention", ["q", "q", "q", "", "", "", "lens"], ["y"],
                                             name="attn")], [q], [y], 24, [lens])
    # An opset past the newest read.
    save(out, "opset25", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y], 25)
    # ReduceMean with noop_with_empty_axes and no axes: the input as it is.
    same = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    save(out, "noop_mean", [helper.make_node("ReduceMean", ["x"], ["y"], name="mean",
                                             noop_with_empty_axes=1)], [x], [same], 18)
    # Two unnamed Gelu nodes (opset 20): the rewrites' names stay distinct.
    save(out, "unnamed_gelus", [helper.make_node("Gelu", ["x"], ["h"]), helper.make_node("Gelu", ["h"], ["y"])],
         [x], [same], 20)
    # Axes from Constant(value_ints) through an Identity.
    mean = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])
    save(out, "value_ints_axes", [helper.make_node("Constant", [], ["a0"], value_ints=[-1]),
                                  helper.make_node("Identity", ["a0"], ["a"]),
                                  helper.make_node("ReduceMean", ["x", "a"], ["y"], name="mean")],
         [x], [mean], 18)
    # Gelu on f16: the rewrite's constants take the input's type.
    x16 = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])
    y16 = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])
    save(out, "gelu_f16", [helper.make_node("Gelu", ["x"], ["y"], name="gelu")], [x16], [y16], 20)
    # 4D Attention whose inputs pass an Identity (rank not declared) with
    # head counts given, and a boolean mask made by ConstantOfShape.
    q4 = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 3, 4])
    y4 = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])
    true = helper.make_tensor("true", TensorProto.BOOL, [1], [True])
    shape = numpy_helper.from_array(np.array([3, 3], np.int64), "mask_shape")
    save(out, "attention_4d_heads", [helper.make_node("Identity", ["q"], ["qi"]),
                                     helper.make_node("ConstantOfShape", ["mask_shape"], ["m"], value=true),
                                     helper.make_node("Attention", ["qi", "qi", "qi", "m"], ["y"], name="attn",
                                                      q_num_heads=2, kv_num_heads=2)],
         [q4], [y4], 23, [shape])
    # Split(num_outputs=3) of 10: parts of 4, 4 and 2.
    x10 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 10])
    parts = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, w]) for n, w in (("a", 4), ("b", 4), ("c", 2))]
    save(out, "split_uneven", [helper.make_node("Split", ["x"], ["a", "b", "c"], name="split", axis=1,
                                                num_outputs=3)], [x10], parts, 18)
    np.save(os.path.join(out, "x.npy"), np.arange(8, dtype=np.float32).reshape(2, 4))


if __name__ == "__main__":
    main(sys.argv[1])
