#!/usr/bin/python3
"""Writes ONNX models that are malformed as a whole (not at one node) into
the directory given, for model-errors.test: shapes no tensor can have, names
that are not UTF-8, a graph with nothing to compute.

Usage: bad_models.py OUT_DIR
"""
import os
import sys

from onnx import TensorProto, helper

F = TensorProto.FLOAT


def save(out, name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
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


if __name__ == "__main__":
    main()
