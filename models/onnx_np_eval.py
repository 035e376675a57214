#!/usr/bin/python3
"""Minimal numpy interpreter for the ONNX ops used by the test models.

There is no onnxruntime in this environment (and onnx 1.12 has no
onnx.reference), so gen_tiny.py uses this to check that each exported
model.onnx reproduces the PyTorch reference logits.  Only what the models in
this directory need is implemented; unknown ops raise NotImplementedError.

Usage as a tool:
  /usr/bin/python3 models/onnx_np_eval.py models/gpt2   # compares to outputs/*.npy
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _np_type(onnx_type):
    # onnx.mapping (Debian's onnx 1.12) was removed in onnx 1.18, whose
    # helper has the function instead.
    if hasattr(onnx.helper, "tensor_dtype_to_np_dtype"):
        return onnx.helper.tensor_dtype_to_np_dtype(onnx_type)
    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def _axes(node, ins, a, idx):
    if len(ins) > idx and ins[idx] is not None:
        return [int(v) for v in ins[idx]]
    return a.get("axes")


def _reduce(fn):
    def f(node, ins, a):
        axes = _axes(node, ins, a, 1)
        keep = bool(a.get("keepdims", 1))
        x = ins[0]
        if axes is None or len(axes) == 0:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = None
        else:
            axes = tuple(int(v) % x.ndim for v in axes)
        return fn(x, axis=axes, keepdims=keep).astype(x.dtype)
    return f


def _unary(fn):
    return lambda node, ins, a: fn(ins[0]).astype(ins[0].dtype)


def _binary(fn):
    return lambda node, ins, a: fn(ins[0], ins[1])


def _softmax(node, ins, a):
    x = ins[0]
    ax = a.get("axis", -1)
    e = np.exp(x - x.max(axis=ax, keepdims=True))
    return (e / e.sum(axis=ax, keepdims=True)).astype(x.dtype)


def _layernorm(node, ins, a):
    x = ins[0]
    ax = a.get("axis", -1) % x.ndim
    eps = a.get("epsilon", 1e-5)
    axes = tuple(range(ax, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * ins[1]
    if len(ins) > 2 and ins[2] is not None:
        y = y + ins[2]
    return y.astype(x.dtype)


def _reshape(node, ins, a):
    x, shape = ins[0], [int(v) for v in ins[1]]
    if not a.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _split(node, ins, a):
    x = ins[0]
    ax = a.get("axis", 0) % x.ndim
    if len(ins) > 1 and ins[1] is not None:
        sizes = [int(v) for v in ins[1]]
    elif "split" in a:
        sizes = list(a["split"])
    else:
        n = len(node.output)
        sizes = [x.shape[ax] // n] * n
    idx = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, idx, axis=ax))


def _slice(node, ins, a):
    x = ins[0]
    starts, ends = ins[1], ins[2]
    axes = ins[3] if len(ins) > 3 and ins[3] is not None else range(len(starts))
    steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    sl = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = int(ax) % x.ndim
        dim = x.shape[ax]
        s, e, st = int(s), int(e), int(st)
        # clamp like the ONNX spec (numpy slicing already clamps, but huge ints are fine too)
        s = max(min(s, dim), -dim - 1) if st < 0 else max(min(s, dim), -dim)
        e = max(min(e, dim), -dim - 1)
        sl[ax] = slice(s, e, st)
    return x[tuple(sl)]


def _unsqueeze(node, ins, a):
    x = ins[0]
    axes = _axes(node, ins, a, 1)
    out_rank = x.ndim + len(axes)
    for ax in sorted(int(v) % out_rank for v in axes):
        x = np.expand_dims(x, ax)
    return x


def _squeeze(node, ins, a):
    x = ins[0]
    axes = _axes(node, ins, a, 1)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(int(v) % x.ndim for v in axes))


def _expand(node, ins, a):
    x, shape = ins[0], [int(v) for v in ins[1]]
    out = np.broadcast_shapes(x.shape, tuple(shape))
    return np.broadcast_to(x, out).copy()


def _trilu(node, ins, a):
    x = ins[0]
    k = int(ins[1]) if len(ins) > 1 and ins[1] is not None else 0
    if a.get("upper", 1):
        return np.triu(x, k)
    return np.tril(x, k)


def _constant(node, ins, a):
    if "value" in a:
        return numpy_helper.to_array(a["value"])
    for k, dt in (("value_float", np.float32), ("value_int", np.int64)):
        if k in a:
            return np.array(a[k], dtype=dt)
    for k, dt in (("value_floats", np.float32), ("value_ints", np.int64)):
        if k in a:
            return np.array(a[k], dtype=dt)
    raise NotImplementedError("Constant attr %s" % list(a))


def _constant_of_shape(node, ins, a):
    v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
    return np.full([int(s) for s in ins[0]], v.reshape(-1)[0], dtype=v.dtype)


def _shape(node, ins, a):
    s = np.array(ins[0].shape, dtype=np.int64)
    start = a.get("start", 0)
    end = a.get("end", None)
    return s[start:end]


def _gemm(node, ins, a):
    A, B = ins[0], ins[1]
    if a.get("transA", 0):
        A = A.T
    if a.get("transB", 0):
        B = B.T
    y = a.get("alpha", 1.0) * (A @ B)
    if len(ins) > 2 and ins[2] is not None:
        y = y + a.get("beta", 1.0) * ins[2]
    return y.astype(A.dtype)


def _range(node, ins, a):
    start, limit, delta = (v.item() for v in ins)
    return np.arange(start, limit, delta).astype(ins[0].dtype)


def _einsum(node, ins, a):
    return np.einsum(a["equation"].decode() if isinstance(a["equation"], bytes) else a["equation"], *ins)


def _pow(node, ins, a):
    return np.power(ins[0], ins[1].astype(ins[0].dtype)).astype(ins[0].dtype)


OPS = {
    "Add": _binary(np.add), "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": lambda n, i, a: (i[0] / i[1]).astype(i[0].dtype) if i[0].dtype.kind == "f"
    else np.floor_divide(i[0], i[1]),
    "Pow": _pow, "MatMul": _binary(np.matmul), "Gemm": _gemm,
    "Equal": _binary(np.equal), "Less": _binary(np.less), "Greater": _binary(np.greater),
    "And": _binary(np.logical_and), "Or": _binary(np.logical_or), "Not": lambda n, i, a: np.logical_not(i[0]),
    "Max": lambda n, i, a: np.maximum.reduce(i), "Min": lambda n, i, a: np.minimum.reduce(i),
    "Sqrt": _unary(np.sqrt), "Reciprocal": _unary(lambda x: 1.0 / x), "Neg": _unary(np.negative),
    "Exp": _unary(np.exp), "Log": _unary(np.log), "Erf": _unary(_erf), "Tanh": _unary(np.tanh),
    "Sigmoid": _unary(lambda x: 1.0 / (1.0 + np.exp(-x))), "Relu": _unary(lambda x: np.maximum(x, 0)),
    "Abs": _unary(np.abs), "Cos": _unary(np.cos), "Sin": _unary(np.sin),
    "Softmax": _softmax, "LayerNormalization": _layernorm,
    "ReduceMean": _reduce(np.mean), "ReduceSum": _reduce(np.sum), "ReduceMax": _reduce(np.max),
    "Reshape": _reshape, "Transpose": lambda n, i, a: np.transpose(i[0], a.get("perm")),
    "Split": _split, "Concat": lambda n, i, a: np.concatenate(i, axis=a["axis"]),
    "Slice": _slice, "Gather": lambda n, i, a: np.take(i[0], i[1], axis=a.get("axis", 0)),
    "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Expand": _expand,
    "Where": lambda n, i, a: np.where(i[0], i[1], i[2]),
    "Cast": lambda n, i, a: i[0].astype(_np_type(a["to"])),
    "Trilu": _trilu, "Constant": _constant, "ConstantOfShape": _constant_of_shape,
    "Shape": _shape, "Identity": lambda n, i, a: i[0], "Einsum": _einsum, "Range": _range,
}


def run(model, feeds):
    """Evaluate `model` (onnx.ModelProto) on dict feeds -> dict of graph outputs."""
    env = {}
    for t in model.graph.initializer:
        env[t.name] = numpy_helper.to_array(t)
    env.update(feeds)
    with np.errstate(over="ignore", invalid="ignore"):
        for node in model.graph.node:
            if node.op_type not in OPS:
                raise NotImplementedError("op %s (node %s)" % (node.op_type, node.name))
            ins = [env[x] if x else None for x in node.input]
            ins = [np.asarray(v) if v is not None else None for v in ins]
            out = OPS[node.op_type](node, ins, _attrs(node))
            if not isinstance(out, tuple):
                out = (out,)
            for name, v in zip(node.output, out):
                if name:
                    env[name] = np.asarray(v)
    return {o.name: env[o.name] for o in model.graph.output}


def main():
    d = sys.argv[1]
    m = onnx.load(os.path.join(d, "model.onnx"))
    feeds = {i.name: np.load(os.path.join(d, "inputs", i.name + ".npy")) for i in m.graph.input}
    outs = run(m, feeds)
    for k, v in outs.items():
        ref = np.load(os.path.join(d, "outputs", k + ".npy"))
        print("%s: shape %s max|onnx-torch| = %.3e" % (k, v.shape, float(np.max(np.abs(v - ref)))))


if __name__ == "__main__":
    main()
