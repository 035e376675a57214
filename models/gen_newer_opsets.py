#!/usr/bin/python3
"""Small decoders written in ONNX opsets 18 to 24, the opsets PyTorch's
dynamo exporter writes (torch.onnx.export(dynamo=True)), with NumPy
reference outputs computed from each op's specification.

For every model NAME this writes models/newer_opsets/NAME/:
  model.onnx        input_ids int64 [2, 8] (and attention_mask where said)
                    -> logits f32 [2, 8, 64]
  inputs/NAME.npy   each input
  outputs/logits.npy

  opset18  Llama-like: RMSNorm written out with ReduceMean's axes as an
           input, one fused QKV linear taken apart by Split(num_outputs=3),
           attention written out, SwiGLU, tied head
  opset20  GPT-2-like: LayerNormalization, Gelu (exact in layer 0, tanh in
           layer 1), Cast(saturate=1), attention written out
  opset23  Llama-like: RMSNormalization, Attention on 3D inputs with
           grouped queries (4 query heads, 2 key/value heads) and is_causal
  opset24  GPT-like: Attention on 4D inputs with is_causal, a scale and a
           boolean padding mask from an attention_mask input, Swish MLP
  opset24_softcap  the same with soft-capped scores (softcap=5), which
           leave the attention decomposed: its blocks are found from the
           decomposed attention (the node names carry no layer)
  opset24_mixed  layer 0 plain (raised to attention), layer 1 soft-capped
           (left decomposed): both start a block

The ONNX library here (1.12) knows opset 17: the graphs are built node by
node and not checked by it. Usage: /usr/bin/python3 models/gen_newer_opsets.py
"""
import math
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BATCH, SEQ, VOCAB, HIDDEN, HEADS, LAYERS = 2, 8, 64, 32, 4, 2
HEAD_DIM = HIDDEN // HEADS


class Graph:
    def __init__(self, rng):
        self.nodes, self.inits, self.rng, self.n = [], [], rng, 0

    def param(self, name, *shape, scale=0.2, value=None):
        array = value if value is not None else (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(array, name))
        return name, array

    def const(self, array):
        name = f"const_{self.n}"
        self.n += 1
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, *inputs, outputs=1, **attrs):
        names = [f"{op_type.lower()}_{self.n}_{i}" for i in range(outputs)]
        self.n += 1
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=f"{op_type}_{self.n}", **attrs))
        return names[0] if outputs == 1 else names


# ----------------------------------------------------------------------------
# NumPy references of the ops
# ----------------------------------------------------------------------------
def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def erf(x):
    return np.vectorize(math.erf)(x).astype(np.float32)


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def heads(x, n):
    b, s, _ = x.shape
    return x.reshape(b, s, n, -1).transpose(0, 2, 1, 3)


def merge(x):
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d)


def attend(q, k, v, mask=None, causal=True, scale=None, softcap=0.0):
    """q [B, H, S, d], k and v [B, KV, S, d] (repeated per query head)."""
    k, v = (np.repeat(t, q.shape[1] // t.shape[1], axis=1) for t in (k, v))
    s = q @ k.transpose(0, 1, 3, 2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if softcap > 0:
        s = np.tanh(s / softcap) * softcap
    if causal:
        s = np.where(np.tril(np.ones((s.shape[-2], s.shape[-1]), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return softmax(s) @ v


# ----------------------------------------------------------------------------
# the graphs, each with its reference beside it
# ----------------------------------------------------------------------------
def written_out_attention(g, x, prefix, kv_split=None):
    """Self-attention as exporters write it out; returns (output, ref)."""
    wqkv, wqkv_ = g.param(f"{prefix}.qkv.weight", HIDDEN, 3 * HIDDEN)
    wo, wo_ = g.param(f"{prefix}.o.weight", HIDDEN, HIDDEN)
    qkv = g.op("MatMul", x[0], wqkv)
    parts = g.op("Split", qkv, axis=-1, num_outputs=3, outputs=3)
    hs = []
    for p in parts:
        r = g.op("Reshape", p, g.const(np.array([0, 0, HEADS, HEAD_DIM], np.int64)))
        hs.append(g.op("Transpose", r, perm=[0, 2, 1, 3]))
    kt = g.op("Transpose", hs[1], perm=[0, 1, 3, 2])
    s = g.op("Mul", g.op("MatMul", hs[0], kt), g.const(np.array(1 / math.sqrt(HEAD_DIM), np.float32)))
    causal = g.const(np.tril(np.ones((SEQ, SEQ), bool)))
    s = g.op("Where", causal, s, g.const(np.array(-np.inf, np.float32)))
    o = g.op("MatMul", g.op("Softmax", s, axis=-1), hs[2])
    o = g.op("Reshape", g.op("Transpose", o, perm=[0, 2, 1, 3]), g.const(np.array([0, 0, HIDDEN], np.int64)))
    ref_qkv = x[1] @ wqkv_
    q, k, v = (heads(t, HEADS) for t in np.split(ref_qkv, 3, axis=-1))
    return (g.op("MatMul", o, wo), merge(attend(q, k, v)) @ wo_)


def rms_written_out(g, x, name):
    w, w_ = g.param(name, HIDDEN, value=(1 + np.random.default_rng(len(name)).standard_normal(HIDDEN) * 0.1).astype(np.float32))
    ms = g.op("ReduceMean", g.op("Mul", x[0], x[0]), g.const(np.array([-1], np.int64)), keepdims=1)
    root = g.op("Sqrt", g.op("Add", ms, g.const(np.array(1e-5, np.float32))))
    return (g.op("Mul", g.op("Div", x[0], root), w), rms_norm(x[1], w_))


def swiglu(g, x, prefix, swish=False):
    wg, wg_ = g.param(f"{prefix}.gate.weight", HIDDEN, 2 * HIDDEN)
    wu, wu_ = g.param(f"{prefix}.up.weight", HIDDEN, 2 * HIDDEN)
    wd, wd_ = g.param(f"{prefix}.down.weight", 2 * HIDDEN, HIDDEN)
    gate = g.op("MatMul", x[0], wg)
    act = g.op("Swish", gate) if swish else g.op("Mul", gate, g.op("Sigmoid", gate))
    h = g.op("Mul", act, g.op("MatMul", x[0], wu))
    gate_ = x[1] @ wg_
    return (g.op("MatMul", h, wd), (gate_ / (1 + np.exp(-gate_)) * (x[1] @ wu_)) @ wd_)


def add(g, a, b):
    return (g.op("Add", a[0], b[0]), a[1] + b[1])


def embed(g, ids):
    table, table_ = g.param("embed.weight", VOCAB, HIDDEN, scale=0.5)
    return table, table_, (g.op("Gather", table, "input_ids"), table_[ids])


def head(g, x, table, table_):
    return g.op("MatMul", x[0], g.op("Transpose", table, perm=[1, 0])), x[1] @ table_.T


def opset18(g, ids, _):
    table, table_, x = embed(g, ids)
    for i in range(LAYERS):
        x = add(g, x, written_out_attention(g, rms_written_out(g, x, f"l{i}.attn_norm.weight"), f"l{i}.attn"))
        x = add(g, x, swiglu(g, rms_written_out(g, x, f"l{i}.mlp_norm.weight"), f"l{i}.mlp"))
    return head(g, rms_written_out(g, x, "norm.weight"), table, table_)


def opset20(g, ids, _):
    table, table_, x = embed(g, ids)
    for i in range(LAYERS):
        w, w_ = g.param(f"l{i}.ln1.weight", HIDDEN, value=np.ones(HIDDEN, np.float32))
        b, b_ = g.param(f"l{i}.ln1.bias", HIDDEN)
        h = (g.op("LayerNormalization", x[0], w, b, axis=-1), layer_norm(x[1], w_, b_))
        x = add(g, x, written_out_attention(g, h, f"l{i}.attn"))
        w2, w2_ = g.param(f"l{i}.ln2.weight", HIDDEN, value=np.ones(HIDDEN, np.float32))
        b2, b2_ = g.param(f"l{i}.ln2.bias", HIDDEN)
        h = (g.op("LayerNormalization", x[0], w2, b2, axis=-1), layer_norm(x[1], w2_, b2_))
        up, up_ = g.param(f"l{i}.fc1.weight", HIDDEN, 4 * HIDDEN)
        down, down_ = g.param(f"l{i}.fc2.weight", 4 * HIDDEN, HIDDEN)
        u, u_ = g.op("MatMul", h[0], up), h[1] @ up_
        if i == 0:
            a_ = 0.5 * u_ * (1 + erf(u_ / math.sqrt(2)))
            a = g.op("Gelu", u)
        else:
            a_ = 0.5 * u_ * (1 + np.tanh(math.sqrt(2 / math.pi) * (u_ + 0.044715 * u_ ** 3)))
            a = g.op("Gelu", u, approximate="tanh")
        a = g.op("Cast", a, to=TensorProto.FLOAT, saturate=1)
        x = add(g, x, (g.op("MatMul", a, down), a_ @ down_))
    return head(g, x, table, table_)


def opset23(g, ids, _):
    table, table_, x = embed(g, ids)
    kv = 2
    for i in range(LAYERS):
        w, w_ = g.param(f"l{i}.attn_norm.weight", HIDDEN, value=np.full(HIDDEN, 1.1, np.float32))
        h = (g.op("RMSNormalization", x[0], w, axis=-1, epsilon=1e-5), rms_norm(x[1], w_))
        wq, wq_ = g.param(f"l{i}.q.weight", HIDDEN, HIDDEN)
        wk, wk_ = g.param(f"l{i}.k.weight", HIDDEN, kv * HEAD_DIM)
        wv, wv_ = g.param(f"l{i}.v.weight", HIDDEN, kv * HEAD_DIM)
        wo, wo_ = g.param(f"l{i}.o.weight", HIDDEN, HIDDEN)
        y = g.op("Attention", g.op("MatMul", h[0], wq), g.op("MatMul", h[0], wk), g.op("MatMul", h[0], wv),
                 is_causal=1, q_num_heads=HEADS, kv_num_heads=kv)
        y_ = merge(attend(heads(h[1] @ wq_, HEADS), heads(h[1] @ wk_, kv), heads(h[1] @ wv_, kv)))
        x = add(g, x, (g.op("MatMul", y, wo), y_ @ wo_))
        w2, w2_ = g.param(f"l{i}.mlp_norm.weight", HIDDEN, value=np.full(HIDDEN, 0.9, np.float32))
        h = (g.op("RMSNormalization", x[0], w2, axis=-1, epsilon=1e-5), rms_norm(x[1], w2_))
        x = add(g, x, swiglu(g, h, f"l{i}.mlp"))
    return head(g, x, table, table_)


def opset24(g, ids, mask, softcap=(0.0, 0.0)):
    table, table_, x = embed(g, ids)
    keep = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    keep = g.op("Unsqueeze", keep, g.const(np.array([1, 2], np.int64)))  # [B, 1, 1, S]
    keep_ = mask.astype(bool)[:, None, None, :]
    for i in range(LAYERS):
        w, w_ = g.param(f"l{i}.attn_norm.weight", HIDDEN, value=np.ones(HIDDEN, np.float32))
        b, b_ = g.param(f"l{i}.attn_norm.bias", HIDDEN)
        h = (g.op("LayerNormalization", x[0], w, b, axis=-1), layer_norm(x[1], w_, b_))
        ws = [g.param(f"l{i}.{n}.weight", HIDDEN, HIDDEN) for n in "qkvo"]
        hs = []
        for wt, _ in ws[:3]:
            r = g.op("Reshape", g.op("MatMul", h[0], wt), g.const(np.array([0, 0, HEADS, HEAD_DIM], np.int64)))
            hs.append(g.op("Transpose", r, perm=[0, 2, 1, 3]))
        caps = {"softcap": softcap[i]} if softcap[i] else {}
        y = g.op("Attention", hs[0], hs[1], hs[2], keep, is_causal=1, scale=0.3, **caps)
        y = g.op("Reshape", g.op("Transpose", y, perm=[0, 2, 1, 3]), g.const(np.array([0, 0, HIDDEN], np.int64)))
        q_, k_, v_ = (heads(h[1] @ wt_, HEADS) for _, wt_ in ws[:3])
        y_ = merge(attend(q_, k_, v_, mask=keep_, scale=0.3, softcap=softcap[i]))
        x = add(g, x, (g.op("MatMul", y, ws[3][0]), y_ @ ws[3][1]))
        w2, w2_ = g.param(f"l{i}.mlp_norm.weight", HIDDEN, value=np.ones(HIDDEN, np.float32))
        b2, b2_ = g.param(f"l{i}.mlp_norm.bias", HIDDEN)
        h = (g.op("LayerNormalization", x[0], w2, b2, axis=-1), layer_norm(x[1], w2_, b2_))
        x = add(g, x, swiglu(g, h, f"l{i}.mlp", swish=True))
    return head(g, x, table, table_)


MODELS = {"opset18": (opset18, 18), "opset20": (opset20, 20), "opset23": (opset23, 23), "opset24": (opset24, 24),
          "opset24_softcap": (lambda g, ids, mask: opset24(g, ids, mask, softcap=(5.0, 5.0)), 24),
          "opset24_mixed": (lambda g, ids, mask: opset24(g, ids, mask, softcap=(0.0, 5.0)), 24)}


def generate(name, out_root):
    build, opset = MODELS[name]
    rng = np.random.default_rng(opset)
    ids = rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int64)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, 6:] = 0
    g = Graph(rng)
    logits, ref = build(g, ids, mask)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [BATCH, SEQ])]
    feeds = {"input_ids": ids}
    if name.startswith("opset24"):
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [BATCH, SEQ]))
        feeds["attention_mask"] = mask
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
    graph = helper.make_graph(g.nodes, name, inputs,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, SEQ, VOCAB])],
                              initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="gen_newer_opsets")
    model.ir_version = 10 if opset >= 23 else 8
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "outputs"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for n, v in feeds.items():
        np.save(os.path.join(d, "inputs", n + ".npy"), v)
    np.save(os.path.join(d, "outputs", "logits.npy"), ref.astype(np.float32))
    print("wrote", d)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "newer_opsets")
    for name in MODELS:
        generate(name, out)


if __name__ == "__main__":
    main()
