#!/usr/bin/python3
"""Writes ONNX models that are malformed as a whole (not at one node) into
the directory given, for model-errors.test: shapes no tensor can have, names
that are not UTF-8, a graph with nothing to compute, old-opset models that
would crash libonnx's shape inference.

Usage: bad_models.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def save(out, name, nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=list(inits))
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    data = model.SerializeToString()
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(data)
    return data


def relu(x="x", name="n"):
    return helper.make_node("Relu", [x], ["y"], name=name)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("x", F, [2])
    y = helper.make_tensor_value_info("y", F, [2])

    weight = TensorProto(name="w", data_type=F, dims=[-2, 4], raw_data=b"")
    save(out, "negative_initializer_dim", [relu("w")], [], [y], [weight])
    huge = TensorProto(name="w", data_type=F, dims=[1 << 40, 1 << 40],
                       raw_data=b"")
    save(out, "overflowing_initializer", [relu("w")], [], [y], [huge])
    save(out, "negative_input_dim", [relu()],
         [helper.make_tensor_value_info("x", F, [-3])], [y])
    save(out, "no_outputs", [relu()], [x], [])

    # Non-UTF-8 names (protobuf's proto2 strings accept any bytes; the
    # artifact's proto3 strings do not). Patch a one-letter name to 0xff.
    data = save(out, "utf8_node", [relu(name="Q")], [x], [y])
    with open(os.path.join(out, "utf8_node.onnx"), "wb") as f:
        f.write(data.replace(b"\x1a\x01Q", b"\x1a\x01\xff"))
    data = save(out, "utf8_input", [relu("X")],
                [helper.make_tensor_value_info("X", F, [2])], [y])
    with open(os.path.join(out, "utf8_input.onnx"), "wb") as f:
        f.write(data.replace(b"\n\x01X", b"\n\x01\xff"))

    # A zero stride in an opset-11 model: converting it to opset 13 runs
    # libonnx's conv/pool shape inference, which divides by the strides.
    image = helper.make_tensor_value_info("x", F, [1, 2, 8, 8])
    pooled = helper.make_tensor_value_info("y", F, [1, 2, 7, 7])
    kernel = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                            strides=[1, 0])
    save(out, "zero_stride_conv", [conv], [image], [pooled], [kernel],
         opset=11)
    # The same in a Loop's body, on a nameless node: libonnx infers the
    # body's shapes before mp would refuse the Loop.
    pool = helper.make_node("MaxPool", ["v"], ["out"], kernel_shape=[1, 1],
                            strides=[0, 1])
    body = helper.make_graph(
        [pool, helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", F, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("out", F, [1, 2, 8, 8])])
    trips = numpy_helper.from_array(np.array(2, np.int64), "trips")
    go = numpy_helper.from_array(np.array(True), "go")
    loop = helper.make_node("Loop", ["trips", "go", "x"], ["y"], name="loop",
                            body=body)
    save(out, "zero_stride_pool_in_loop", [loop], [image],
         [helper.make_tensor_value_info("y", F, [1, 2, 8, 8])], [trips, go],
         opset=11)


if __name__ == "__main__":
    main()
