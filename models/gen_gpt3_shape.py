#!/usr/bin/python3
"""Write a GPT-3-shaped ONNX model of any size, for shape-only planning.

The graph is built directly with onnx.helper (no torch; sizes may be huge) and
has the same structure and initializer names as models/gpt2 (gen_tiny.py):
learned positions, pre-norm LayerNormalization, fused QKV (Split), causal mask
(ConstantOfShape -> Trilu -> Cast -> Where), erf GELU, tied LM head
(Transpose(wte.weight) -> MatMul).

Every float initializer is stored as ONNX external data
(data_location=EXTERNAL, location="weights.bin", offset, length), but
weights.bin is deliberately NOT written: the data is absent, only shapes matter.
model.onnx stays a few KB per layer even for 175B-sized configs.

Example (GPT-3 175B):
  /usr/bin/python3 models/gen_gpt3_shape.py --layers 96 --hidden 12288 --heads 96 \\
      --vocab 50257 --seq 2048 --batch 1 -o /tmp/gpt3_175b
"""
import argparse
import math
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

DTYPES = {"float32": (TensorProto.FLOAT, 4), "float16": (TensorProto.FLOAT16, 2),
          "bfloat16": (TensorProto.BFLOAT16, 2)}
WEIGHTS_FILE = "weights.bin"


class Builder:
    def __init__(self, dtype):
        self.nodes, self.inits = [], []
        self.offset = 0
        self.dtype, self.esize = DTYPES[dtype]
        self.counter = {}

    def name(self, scope, op):
        key = scope + "/" + op
        i = self.counter.get(key, 0)
        self.counter[key] = i + 1
        return "%s/%s%s" % (scope, op, "" if i == 0 else "_%d" % i)

    def node(self, scope, op, inputs, n_out=1, **attrs):
        nm = self.name(scope, op)
        outs = ["%s_output_%d" % (nm, k) for k in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=nm, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, scope, value):
        arr = np.asarray(value)
        return self.node(scope, "Constant", [], value=helper.make_tensor(
            "value", helper.np_dtype_to_tensor_dtype(arr.dtype) if hasattr(helper, "np_dtype_to_tensor_dtype")
            else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype], arr.shape, arr.flatten().tolist()))

    def weight(self, name, dims):
        """Float initializer with external data in weights.bin (file not written)."""
        t = TensorProto()
        t.name = name
        t.data_type = self.dtype
        t.dims.extend(int(d) for d in dims)
        t.data_location = TensorProto.EXTERNAL
        length = int(np.prod(dims, dtype=np.int64)) * self.esize
        for k, v in (("location", WEIGHTS_FILE), ("offset", str(self.offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
        self.offset += length
        self.inits.append(t)
        return name


def build(layers, hidden, heads, vocab, seq, batch, positions=None, dtype="float32", eps=1e-5):
    assert hidden % heads == 0, "hidden must be divisible by heads"
    positions = positions or seq
    assert positions >= seq
    d = hidden // heads
    b = Builder(dtype)
    elem = b.dtype

    wte = b.weight("wte.weight", [vocab, hidden])
    wpe = b.weight("wpe.weight", [positions, hidden])
    pos = b.const("", np.arange(seq, dtype=np.int64))
    x = b.node("/wte", "Gather", [wte, "input_ids"])
    x = b.node("", "Add", [x, b.node("/wpe", "Gather", [wpe, pos])])

    # causal mask [S, S] (bool), built from small constants so the file stays tiny
    ones = b.node("", "ConstantOfShape", [b.const("", np.array([seq, seq], dtype=np.int64))],
                  value=helper.make_tensor("value", elem, [1], [1.0]))
    mask = b.node("", "Cast", [b.node("", "Trilu", [ones], upper=0)], to=TensorProto.BOOL)
    neg = b.const("", np.array(-1e9, dtype=np.float32))
    if elem != TensorProto.FLOAT:
        neg = b.node("", "Cast", [neg], to=elem)
    inv_sqrt_d_div = b.const("", np.array(math.sqrt(d), dtype=np.float32))
    sqrt2 = b.const("", np.array(math.sqrt(2.0), dtype=np.float32))
    one = b.const("", np.array(1.0, dtype=np.float32))
    half = b.const("", np.array(0.5, dtype=np.float32))
    if elem != TensorProto.FLOAT:
        inv_sqrt_d_div, sqrt2, one, half = (b.node("", "Cast", [c], to=elem)
                                             for c in (inv_sqrt_d_div, sqrt2, one, half))
    split_sizes = b.const("", np.array([hidden] * 3, dtype=np.int64))
    heads_shape = b.const("", np.array([batch, seq, heads, d], dtype=np.int64))
    merged_shape = b.const("", np.array([batch, seq, hidden], dtype=np.int64))

    def ln(scope, x, prefix):
        return b.node(scope, "LayerNormalization",
                      [x, b.weight(prefix + ".weight", [hidden]), b.weight(prefix + ".bias", [hidden])],
                      axis=-1, epsilon=eps)

    def linear(scope, x, prefix, nin, nout):
        y = b.node(scope, "MatMul", [x, b.weight(prefix + ".weight", [nin, nout])])
        return b.node(scope, "Add", [y, b.weight(prefix + ".bias", [nout])])

    for i in range(layers):
        p, s = "h.%d" % i, "/h.%d" % i
        a = ln(s + "/ln_1", x, p + ".ln_1")
        qkv = linear(s + "/attn/c_attn", a, p + ".attn.c_attn", hidden, 3 * hidden)
        q, k, v = b.node(s + "/attn", "Split", [qkv, split_sizes], n_out=3, axis=2)
        q, k, v = (b.node(s + "/attn", "Transpose", [b.node(s + "/attn", "Reshape", [t, heads_shape])],
                          perm=[0, 2, 1, 3]) for t in (q, k, v))
        kt = b.node(s + "/attn", "Transpose", [k], perm=[0, 1, 3, 2])
        sc = b.node(s + "/attn", "Div", [b.node(s + "/attn", "MatMul", [q, kt]), inv_sqrt_d_div])
        sc = b.node(s + "/attn", "Where", [mask, sc, neg])
        pr = b.node(s + "/attn", "Softmax", [sc], axis=-1)
        o = b.node(s + "/attn", "Transpose", [b.node(s + "/attn", "MatMul", [pr, v])], perm=[0, 2, 1, 3])
        o = b.node(s + "/attn", "Reshape", [o, merged_shape])
        x = b.node(s, "Add", [x, linear(s + "/attn/c_proj", o, p + ".attn.c_proj", hidden, hidden)])

        m = ln(s + "/ln_2", x, p + ".ln_2")
        h = linear(s + "/mlp/c_fc", m, p + ".mlp.c_fc", hidden, 4 * hidden)
        g = b.node(s + "/mlp", "Add", [b.node(s + "/mlp", "Erf", [b.node(s + "/mlp", "Div", [h, sqrt2])]), one])
        g = b.node(s + "/mlp", "Mul", [b.node(s + "/mlp", "Mul", [h, half]), g])
        x = b.node(s, "Add", [x, linear(s + "/mlp/c_proj", g, p + ".mlp.c_proj", 4 * hidden, hidden)])

    x = ln("/ln_f", x, "ln_f")
    wte_t = b.node("", "Transpose", [wte], perm=[1, 0])
    b.nodes.append(helper.make_node("MatMul", [x, wte_t], ["logits"], name="/MatMul"))

    graph = helper.make_graph(
        b.nodes, "gpt3_shape",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])],
        [helper.make_tensor_value_info("logits", elem, [batch, seq, vocab])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="mp-gen_gpt3_shape")
    model.ir_version = 8
    n_params = b.offset // b.esize
    return model, n_params, b.offset


def check(model):
    """onnx.checker.check_model (not full_check).  onnx 1.12's checker insists that
    an external-data file *exists* (it does not read it), so the check runs on a
    temporary copy next to an empty placeholder weights.bin."""
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "model.onnx")
        with open(p, "wb") as f:
            f.write(model.SerializeToString())
        open(os.path.join(td, WEIGHTS_FILE), "wb").close()
        onnx.checker.check_model(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--positions", type=int, default=None, help="learned positions (default: seq)")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("-o", "--out", required=True, help="output directory (model.onnx is written there)")
    args = ap.parse_args()

    model, n_params, nbytes = build(args.layers, args.hidden, args.heads, args.vocab, args.seq,
                                    args.batch, args.positions, args.dtype)
    check(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out_t = inferred.graph.output[0].type.tensor_type
    assert [dd.dim_value for dd in out_t.shape.dim] == [args.batch, args.seq, args.vocab]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "model.onnx")
    # plain serialization: onnx.save would try to (re)write external data
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    print("wrote %s (%d bytes): %d nodes, %d initializers, %d params (%.3fB), "
          "%s would be %d bytes (not written)"
          % (path, os.path.getsize(path), len(model.graph.node), len(model.graph.initializer),
             n_params, n_params / 1e9, WEIGHTS_FILE, nbytes))


if __name__ == "__main__":
    main()
