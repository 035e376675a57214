#!/usr/bin/python3
"""Writes one-node ONNX models whose node does not fit its op's shape rule
into the directory given, for node-errors.test. Each must give an error at the
node: the mp ops infer their result types, and inference that fails aborts,
so the importer has to check first.

Usage: bad_nodes.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def write(out, name, op, inputs, attrs=None, inits=(), outputs=("y",)):
    """A model of one node `op` named 'n' reading `inputs` (name, shape[, type])
    that are not initializers."""
    node = helper.make_node(op, [i[0] for i in inputs] + [t.name for t in inits],
                            list(outputs), name="n", **(attrs or {}))
    graph = helper.make_graph(
        [node], name, [vi(*i) for i in inputs],
        [vi(o, ["d"]) for o in outputs], initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(out, "matmul_k", "MatMul", [("a", [2, 3]), ("b", [4, 5])])
    write(out, "matmul_batch", "MatMul", [("a", [2, 2, 3]), ("b", [3, 3, 5])])
    write(out, "add", "Add", [("a", [2, 3]), ("b", [4])])
    write(out, "pow", "Pow", [("a", [2, 3]), ("b", [4], TensorProto.INT64)])
    write(out, "equal", "Equal", [("a", [2, 3]), ("b", [4])])
    write(out, "where", "Where",
          [("c", [2, 3], TensorProto.BOOL), ("a", [2, 3]), ("b", [4])])
    write(out, "gemm_k", "Gemm", [("a", [2, 3]), ("b", [4, 5])], {"transB": 1})
    write(out, "gemm_c", "Gemm", [("a", [2, 3]), ("b", [3, 5]), ("c", [3, 2, 5])])
    write(out, "layer_norm", "LayerNormalization", [("a", [2, 3]), ("s", [4])])
    write(out, "reduce", "ReduceSum", [("a", [2, 3])], inits=[ints("axes", [1, -1])])
    write(out, "softmax", "Softmax", [("a", [2, 3])], {"axis": 2})
    write(out, "trilu", "Trilu", [("a", [3])])
    write(out, "einsum", "Einsum", [("a", [2, 3]), ("b", [4, 5])],
          {"equation": "ij,jk->ik"})
    write(out, "transpose", "Transpose", [("a", [2, 3])], {"perm": [0, 0]})
    write(out, "concat", "Concat", [("a", [2, 3]), ("b", [2, 4])], {"axis": 0})
    write(out, "slice", "Slice", [("a", [0, 3])],
          inits=[ints("starts", [0]), ints("ends", [-10]), ints("axes", [0]),
                 ints("steps", [-1])])
    write(out, "gather", "Gather", [("a", [2, 3])], {"axis": 1},
          inits=[ints("i", [3])])
    floats = numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "i")
    write(out, "gather_float", "Gather", [("a", [2, 3])], {"axis": 1},
          inits=[floats])
    write(out, "gather_float_input", "Gather",
          [("a", [2, 3]), ("i", [2])], {"axis": 1})
    write(out, "gather_bool_input", "Gather",
          [("a", [2, 3]), ("i", [2], TensorProto.BOOL)], {"axis": 1})
    write(out, "reshape", "Reshape", [("a", [2, 3])], inits=[ints("shape", [4])])
    write(out, "split", "Split", [("a", [6, 3])], {"axis": 0},
          inits=[ints("split", [2, 3])], outputs=("y", "z"))
    write(out, "split_negative", "Split", [("a", [6, 3])], {"axis": 0},
          inits=[ints("split", [-1, 7])], outputs=("y", "z"))
    write(out, "expand", "Expand", [("a", [2, 3])], inits=[ints("shape", [4, 4])])
    write(out, "unsqueeze", "Unsqueeze", [("a", [3])], inits=[ints("axes", [0, 0])])
    write(out, "flatten", "Flatten", [("a", [2, 3])], {"axis": 3})
    write(out, "and", "And", [("a", [2, 3], TensorProto.BOOL), ("b", [2, 3])])
    write(out, "conv_group", "Conv", [("x", [1, 4, 8]), ("w", [4, 1, 3])],
          {"group": 3})
    write(out, "conv_group_channels", "Conv", [("x", [1, 4, 8]), ("w", [4, 1, 3])],
          {"group": 2})
    write(out, "conv_channels", "Conv", [("x", [1, 3, 8]), ("w", [4, 2, 3])])
    write(out, "conv_small", "Conv", [("x", [1, 3, 2]), ("w", [4, 3, 3])],
          {"dilations": [2]})
    write(out, "conv_pads", "Conv", [("x", [1, 3, 8, 8]), ("w", [4, 3, 3, 3])],
          {"pads": [1, 1]})
    write(out, "conv_empty_kernel", "Conv", [("x", [1, 2, 5]), ("w", [3, 2, 0])])
    write(out, "conv_huge_dilation", "Conv", [("x", [1, 2, 5]), ("w", [3, 2, 3])],
          {"dilations": [1 << 62]})
    # The same mistakes on constant data, which the importer folds.
    data = ints("x", [1, 2, 3, 4, 5, 6])
    write(out, "fold_split", "Split", [], {"axis": 0},
          inits=[data, ints("split", [4, 4])], outputs=("y", "z"))
    write(out, "fold_split_negative", "Split", [], {"axis": 0},
          inits=[data, ints("split", [-1, 7])], outputs=("y", "z"))
    write(out, "fold_transpose", "Transpose", [], {"perm": [0, 2]},
          inits=[ints("x", [[1, 2, 3], [4, 5, 6]])])
    write(out, "fold_unsqueeze", "Unsqueeze", [], inits=[data, ints("axes", [0, 0])])
    write(out, "fold_squeeze", "Squeeze", [], inits=[data, ints("axes", [5])])
    write(out, "fold_reshape", "Reshape", [], inits=[data, ints("shape", [0, 0, 0])])
    write(out, "fold_concat", "Concat", [], {"axis": 0},
          inits=[data, ints("w", [[1, 2]])])
    write(out, "fold_gather", "Gather", [], {"axis": 3},
          inits=[data, ints("i", [0])])
    write(out, "fold_gather_float", "Gather", [], inits=[data, floats])
    write(out, "fold_softmax", "Softmax", [], {"axis": 3},
          inits=[numpy_helper.from_array(np.ones(4, np.float32), "x")])
    write(out, "fold_reduce", "ReduceSum", [], inits=[data, ints("axes", [2])])
    write(out, "fold_flatten", "Flatten", [], {"axis": -2}, inits=[data])
    write(out, "fold_and", "And", [], inits=[data, ints("w", [1, 0, 1, 0, 1, 0])])
    write(out, "fold_slice", "Slice", [],
          inits=[data, ints("starts", [0]), ints("ends", [2]), ints("axes", [4])])
    # Folding within a stated size: 2^40 elements would exhaust memory.
    write(out, "fold_constant_of_shape", "ConstantOfShape", [],
          inits=[ints("s", [1 << 20, 1 << 20])])
    write(out, "fold_expand", "Expand", [],
          inits=[data, ints("s", [1 << 24, 6])])
    write(out, "fold_range", "Range", [],
          inits=[ints("a", 0), ints("b", 1 << 40), ints("c", 1)])
    write(out, "fold_range_vector", "Range", [],
          inits=[ints("a", [0, 1]), ints("b", 4), ints("c", 1)])
    # Integer folding follows the runtime's arithmetic: wrap-around, and
    # INT64_MIN / -1 (which traps in C++) is INT64_MIN.
    write(out, "fold_int64_min_div", "Div", [],
          inits=[ints("a", [-(1 << 63), 7]), ints("b", [-1, -2])])
    write(out, "fold_int64_wrap", "Add", [],
          inits=[ints("a", [(1 << 63) - 1]), ints("b", [1])])
    write(out, "fold_int32_wrap", "Mul", [],
          inits=[numpy_helper.from_array(np.array([65536], np.int32), "a"),
                 numpy_helper.from_array(np.array([65537], np.int32), "b")])
    write(out, "fold_int64_neg", "Neg", [], inits=[ints("a", [-(1 << 63)])])


if __name__ == "__main__":
    main()
