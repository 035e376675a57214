"""Writes one-node Attention and RotaryEmbedding models (opset 23) to
OUT/NAME/ with inputs and NumPy outputs computed as the ONNX reference
implementation does (Attention: scores * scale, soft-capped, + mask; the
causal mask offset by the past length; key/value heads repeated in turn for
grouped queries. RotaryEmbedding: in the [B, S, heads, d] frame, the first
rotary_embedding_dim channels rotated as halves or interleaved pairs by
the cache rows at position_ids)."""
import math
import os
import sys

import numpy as np
from onnx import TensorProto, helper


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference(q, k, v, mask=None, past_k=None, past_v=None, scale=None, softcap=0.0,
              causal=False, q_heads=None, kv_heads=None):
    three_d = q.ndim == 3
    if three_d:
        def split(x, h):
            b, s, _ = x.shape
            return x.reshape(b, s, h, -1).transpose(0, 2, 1, 3)
        q, k, v = split(q, q_heads), split(k, kv_heads), split(v, kv_heads)
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k, v = np.concatenate([past_k, k], 2), np.concatenate([past_v, v], 2)
    present_k, present_v = k, v
    scale = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if softcap > 0:
        s = np.tanh(s / softcap) * softcap
    sq, sk = s.shape[-2:]
    if causal:
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + past
        s = np.where(allowed, s, -np.inf)
    if mask is not None:
        missing = sk - mask.shape[-1]  # a short mask: the rest is masked
        fill = False if mask.dtype == bool else -np.inf
        mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, missing)], constant_values=fill)
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    y = softmax(s) @ v
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    return y, present_k, present_v


def write(out, name, inputs, attrs, outputs=("y",), **ref_args):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "outputs"), exist_ok=True)
    order = ["q", "k", "v", "mask", "past_k", "past_v"]
    node_inputs = [n if n in inputs else "" for n in order]
    while node_inputs[-1] == "":
        node_inputs.pop()
    node = helper.make_node("Attention", node_inputs, list(outputs), name="attention", **attrs)
    results = reference(inputs["q"], inputs["k"], inputs["v"], inputs.get("mask"),
                        inputs.get("past_k"), inputs.get("past_v"), **ref_args)
    save(d, node, {n: inputs[n] for n in order if n in inputs},
         {n: r.astype(np.float32) for n, r in zip(outputs, results)})


def save(d, node, inputs, outputs):
    """The one-node model (opset 23) in d/model.onnx, its inputs and
    expected outputs as .npy files."""
    def info(n, a):
        t = {np.dtype(bool): TensorProto.BOOL, np.dtype(np.int64): TensorProto.INT64}.get(a.dtype, TensorProto.FLOAT)
        return helper.make_tensor_value_info(n, t, list(a.shape))
    graph = helper.make_graph([node], node.name, [info(n, a) for n, a in inputs.items()],
                              [info(n, a) for n, a in outputs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for n, a in inputs.items():
        np.save(os.path.join(d, "inputs", n + ".npy"), a)
    for n, a in outputs.items():
        np.save(os.path.join(d, "outputs", n + ".npy"), a)


def rotary_reference(x, cos_cache, sin_cache, position_ids=None, interleaved=0, dim=0, heads=0):
    shape = x.shape
    x = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(shape[0], shape[1], heads, -1)
    dim = dim or x.shape[3]
    rot, keep = x[..., :dim], x[..., dim:]
    cos = cos_cache[position_ids] if position_ids is not None else cos_cache
    sin = sin_cache[position_ids] if position_ids is not None else sin_cache
    cos, sin = cos[:, :, None], sin[:, :, None]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if interleaved else np.split(rot, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    rot = np.stack([real, imag], -1).reshape(rot.shape) if interleaved else np.concatenate([real, imag], -1)
    y = np.concatenate([rot, keep], -1)
    return y.reshape(shape) if len(shape) == 3 else y.transpose(0, 2, 1, 3)


def write_rotary(out, name, inputs, attrs):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "outputs"), exist_ok=True)
    order = [n for n in ["x", "cos", "sin", "pos"] if n in inputs]
    node = helper.make_node("RotaryEmbedding", order, ["y"], name="rotary", **attrs)
    y = rotary_reference(inputs["x"], inputs["cos"], inputs["sin"], inputs.get("pos"),
                         attrs.get("interleaved", 0), attrs.get("rotary_embedding_dim", 0),
                         attrs.get("num_heads", 0)).astype(np.float32)
    save(d, node, {n: inputs[n] for n in order}, {"y": y})


def main(out):
    rng = np.random.default_rng(23)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)
    # 4D, soft-capped, an additive mask broadcast over heads.
    write(out, "softcap", {"q": r(2, 4, 5, 8), "k": r(2, 4, 5, 8), "v": r(2, 4, 5, 8),
                           "mask": r(2, 1, 5, 5)},
          {"softcap": 2.0, "scale": 0.5}, softcap=2.0, scale=0.5)
    # 3D with a cache of 3 positions, causal from the past offset, grouped
    # queries (4 heads over 2), the presents returned.
    write(out, "past", {"q": r(2, 2, 32), "k": r(2, 2, 16), "v": r(2, 2, 16),
                        "past_k": r(2, 2, 3, 8), "past_v": r(2, 2, 3, 8)},
          {"is_causal": 1, "q_num_heads": 4, "kv_num_heads": 2}, outputs=("y", "present_k", "present_v"),
          causal=True, q_heads=4, kv_heads=2)
    # 4D causal with a boolean padding mask.
    keep = np.ones((2, 1, 1, 6), bool)
    keep[1, ..., 4:] = False
    write(out, "bool_mask", {"q": r(2, 2, 6, 4), "k": r(2, 2, 6, 4), "v": r(2, 2, 6, 4), "mask": keep},
          {"is_causal": 1}, causal=True)
    # A float mask shorter than the keys (the cache's 2 positions not
    # counted): padded with masked positions.
    write(out, "short_mask", {"q": r(1, 2, 3, 4), "k": r(1, 2, 3, 4), "v": r(1, 2, 3, 4),
                              "mask": r(1, 1, 3, 3), "past_k": r(1, 2, 2, 4), "past_v": r(1, 2, 2, 4)},
          {})
    # RotaryEmbedding: 4D halves over whole heads with position_ids into
    # the caches; 3D interleaved over the first 4 of 8 channels, the
    # caches given per position.
    pos = np.array([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]], np.int64)
    write_rotary(out, "rotary_halves", {"x": r(2, 3, 5, 8), "cos": r(10, 4), "sin": r(10, 4), "pos": pos}, {})
    write_rotary(out, "rotary_interleaved", {"x": r(2, 5, 24), "cos": r(2, 5, 2), "sin": r(2, 5, 2)},
                 {"interleaved": 1, "rotary_embedding_dim": 4, "num_heads": 3})


if __name__ == "__main__":
    main(sys.argv[1])
