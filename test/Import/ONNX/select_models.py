#!/usr/bin/python3
"""Models for select.test: TopK, OneHot, ScatterElements and GatherElements
on indices computed at run time (a mixture-of-experts router's), with
inputs and the values NumPy computes, and models each import error needs.

Usage: select_models.py DIR
"""
import os
import sys

import numpy as np
import onnx
import onnx.helper as h
from onnx import numpy_helper

F, I = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64


def save(graph, path):
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]), path)


def const(name, array):
    return h.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))


def selections(d):
    """scores x [3, 5]: its top 2 (values and indices), the smallest 2
    along axis 0, their one-hot [3, 2, 5], the top-2 values scattered into
    zeros (and added into x), and x gathered again at the indices."""
    nodes = [
        const("k", np.array([2], np.int64)),
        const("k0", np.array([2], np.int64)),
        const("depth", np.array(5, np.int64)),
        const("onoff", np.array([0.0, 1.0], np.float32)),
        h.make_node("TopK", ["x", "k"], ["top", "index"], axis=-1),
        h.make_node("TopK", ["x", "k0"], ["low", "lowindex"], axis=0, largest=0),
        h.make_node("OneHot", ["index", "depth", "onoff"], ["onehot"], axis=1),
        h.make_node("ConstantOfShape", ["shape"], ["zeros"],
                    value=numpy_helper.from_array(np.zeros(1, np.float32))),
        h.make_node("ScatterElements", ["zeros", "index", "top"], ["dense"], axis=1),
        h.make_node("ScatterElements", ["x", "index", "top"], ["added"], axis=-1,
                    reduction="add"),
        h.make_node("Neg", ["index"], ["negated"]),
        h.make_node("Add", ["negated", "five"], ["wrapped"]),  # 5 - i: in (0, 5]
        h.make_node("Neg", ["wrapped"], ["negative"]),        # i - 5: in [-5, 0)
        h.make_node("GatherElements", ["x", "negative"], ["gathered"], axis=1),
    ]
    graph = h.make_graph(
        [const("shape", np.array([3, 5], np.int64)), const("five", np.array(5, np.int64))] + nodes,
        "select", [h.make_tensor_value_info("x", F, [3, 5])],
        [h.make_tensor_value_info(n, t, s) for n, t, s in
         [("top", F, [3, 2]), ("index", I, [3, 2]), ("low", F, [2, 5]),
          ("lowindex", I, [2, 5]), ("onehot", F, [3, 5, 2]), ("dense", F, [3, 5]),
          ("added", F, [3, 5]), ("gathered", F, [3, 2])]])
    save(graph, os.path.join(d, "select.onnx"))
    # Ties (two 0.7s: the lower index first), -inf and a repeated minimum.
    x = np.array([[0.1, 0.7, 0.7, -np.inf, 0.2],
                  [3.0, -1.0, 2.0, 0.5, 2.5],
                  [-2.0, -2.0, 4.0, 1.0, 0.0]], np.float32)
    np.save(os.path.join(d, "x.npy"), x)
    index = np.argsort(-x, axis=-1, kind="stable")[:, :2]
    top = np.take_along_axis(x, index, -1)
    lowindex = np.argsort(x, axis=0, kind="stable")[:2]
    dense = np.zeros_like(x)
    np.put_along_axis(dense, index, top, -1)
    expected = {"top": top, "index": index, "low": np.take_along_axis(x, lowindex, 0),
                "lowindex": lowindex,
                "onehot": np.eye(5, dtype=np.float32)[index].transpose(0, 2, 1),
                "dense": dense, "added": x + dense,
                "gathered": np.take_along_axis(x, index, 1)}
    os.makedirs(os.path.join(d, "expected"))
    for name, value in expected.items():
        np.save(os.path.join(d, "expected", name + ".npy"), value)


def nans(d):
    """NaN taken as the largest, as PyTorch's topk does: first among the
    largest, last among the smallest; a NaN update wins a max scatter (as
    np.maximum); GatherElements with indices narrower than the data on
    another dim (int32)."""
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, 0.0, 5.0]], np.float32)
    nodes = [
        const("k", np.array([3], np.int64)),
        h.make_node("TopK", ["x", "k"], ["high", "highindex"]),
        h.make_node("TopK", ["x", "k"], ["low", "lowindex"], largest=0),
        const("at", np.array([[1], [3]], np.int64)),
        const("update", np.array([[np.nan], [4.0]], np.float32)),
        h.make_node("ScatterElements", ["x", "at", "update"], ["max"], axis=1,
                    reduction="max"),
        const("picks", np.array([[3, 0]], np.int32)),
        h.make_node("GatherElements", ["x", "picks"], ["narrow"], axis=1),
    ]
    outputs = {"high": np.array([[np.nan, 3, 2], [np.nan, np.nan, 5]], np.float32),
               "highindex": np.array([[1, 2, 3], [0, 1, 3]], np.int64),
               "low": np.array([[1, 2, 3], [0, 5, np.nan]], np.float32),
               "lowindex": np.array([[0, 3, 2], [2, 3, 0]], np.int64),
               "max": np.array([[1, np.nan, 3, 2], [np.nan, np.nan, 0, 5]], np.float32),
               "narrow": np.array([[2, 1]], np.float32)}
    graph = h.make_graph(nodes, "nans", [h.make_tensor_value_info("x", F, [2, 4])],
                         [h.make_tensor_value_info(n, I if v.dtype == np.int64 else F, list(v.shape))
                          for n, v in outputs.items()])
    save(graph, os.path.join(d, "nans.onnx"))
    np.save(os.path.join(d, "xnan.npy"), x)
    os.makedirs(os.path.join(d, "nans"))
    for name, value in outputs.items():
        np.save(os.path.join(d, "nans", name + ".npy"), value)


def errors(d):
    """One model per import error."""
    x = h.make_tensor_value_info("x", F, [3, 5])
    y = h.make_tensor_value_info("y", F, [3, 5])
    k = h.make_tensor_value_info("k", I, [1])
    cases = {
        "k_too_large": ([const("k", np.array([6], np.int64)),
                         h.make_node("TopK", ["x", "k"], ["y", "i"])], [x]),
        "k_at_run_time": ([h.make_node("TopK", ["x", "k"], ["y", "i"])], [x, k]),
        "scatter_partial": ([const("i", np.zeros((2, 1), np.int64)),
                             const("u", np.zeros((2, 1), np.float32)),
                             h.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
                            [x]),
    }
    for name, (nodes, inputs) in cases.items():
        save(h.make_graph(nodes, name, inputs, [y]), os.path.join(d, name + ".onnx"))


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    selections(d)
    nans(d)
    errors(d)


if __name__ == "__main__":
    main()
