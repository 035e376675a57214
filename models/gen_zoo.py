#!/usr/bin/python3
"""A zoo of small transformers written from their published architectures
(not copied code), exported to ONNX the way users export them, with
PyTorch reference data: what mp must import, raise and partition beyond the
bundled export styles (issue 15).

For every model NAME this writes models/zoo/NAME/:
  model.onnx               opset 17, input_ids int64 [2, 8] -> logits f32 [2, 8, 64]
  inputs/input_ids.npy
  outputs/logits.npy       the PyTorch fp32 forward

Unlike gen_tiny.py these use nn.Linear and the exporter's defaults where a
user would (constant folding on: transposed weight copies under onnx::
names), and some are exported with dynamic batch and sequence axes (pin
them with mp-opt --mp-shape=input_ids=2x8).

Usage: /usr/bin/python3 models/gen_zoo.py [--out DIR] [--model NAME|all]
"""
import argparse
import math
import os
import shutil
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
BATCH, SEQ, VOCAB = 2, 8, 64
HIDDEN, HEADS, LAYERS = 32, 4, 2
HEAD_DIM = HIDDEN // HEADS


# ----------------------------------------------------------------------------
# shared pieces
# ----------------------------------------------------------------------------
def rotary_tables(dim, seq, theta=10000.0):
    """cos and sin [1, 1, seq, dim] of rotary embeddings over `dim` channels."""
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos()[None, None], emb.sin()[None, None]


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_every_two(x):
    """GPT-J's interleaved rotation: pairs (x0, x1) -> (-x1, x0)."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def partial_rotary(x, cos, sin, dim, rotate=rotate_half):
    """Rotary on the first `dim` channels of each head, the rest unchanged."""
    xr, xp = x[..., :dim], x[..., dim:]
    return torch.cat((xr * cos + rotate(xr) * sin, xp), dim=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def causal_bool(seq, window=None):
    """True where a query may not see a key (future, or beyond the window)."""
    i = torch.arange(seq)[:, None]
    j = torch.arange(seq)[None, :]
    hidden = j > i
    if window is not None:
        hidden = hidden | (i - j >= window)
    return hidden


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6, plus_one=False):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n) if plus_one else torch.ones(n))
        self.eps, self.plus_one = eps, plus_one

    def forward(self, x):
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * (1.0 + self.weight if self.plus_one else self.weight)


def attend(q, k, v, hidden_mask, style):
    """Softmax attention of q [B, h, S, d] over k, v [B, kv, S, d] (kv heads
    repeated for GQA), the mask applied as `style` says."""
    if k.shape[1] != q.shape[1]:  # as HF's repeat_kv (repeat_interleave exports a Loop)
        b, kv, s, d = k.shape
        rep = q.shape[1] // kv
        k = k[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)
        v = v[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)
    d = q.shape[-1]
    if style == "scale_q_additive":  # OPT: q scaled first, a large negative mask added
        scores = torch.matmul(q * d ** -0.5, k.transpose(-1, -2))
        scores = scores + hidden_mask.float() * torch.finfo(torch.float32).min
    elif style == "masked_fill":  # scaled, then masked_fill(-inf)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(hidden_mask, float("-inf"))
    else:  # "where": torch.where(allowed, scores, -inf) after scaling
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        scores = torch.where(~hidden_mask, scores, torch.tensor(float("-inf")))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def merge_heads(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, s, h * d)


def split_heads(x, heads):
    b, s, _ = x.shape
    return x.view(b, s, heads, -1).transpose(1, 2)


# ----------------------------------------------------------------------------
# GPT-NeoX / Pythia: per-head fused QKV [heads, 3, d], rotary on a quarter of
# each head, parallel residual x + attn(ln1 x) + mlp(ln2 x), tanh GELU.
# ----------------------------------------------------------------------------
class NeoXLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.post_attention_layernorm = nn.LayerNorm(HIDDEN)
        self.query_key_value = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.dense_4h_to_h = nn.Linear(4 * HIDDEN, HIDDEN)
        self.rot = HEAD_DIM // 4
        cos, sin = rotary_tables(self.rot, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def attention(self, x):
        b, s, _ = x.shape
        qkv = self.query_key_value(x).view(b, s, HEADS, 3 * HEAD_DIM).transpose(1, 2)
        q, k, v = qkv[..., :HEAD_DIM], qkv[..., HEAD_DIM:2 * HEAD_DIM], qkv[..., 2 * HEAD_DIM:]
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = partial_rotary(q, cos, sin, self.rot)
        k = partial_rotary(k, cos, sin, self.rot)
        return self.dense(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))

    def forward(self, x):
        mlp = self.dense_4h_to_h(gelu_tanh(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        return x + self.attention(self.input_layernorm(x)) + mlp


class NeoX(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_in = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(NeoXLayer() for _ in range(LAYERS))
        self.final_layer_norm = nn.LayerNorm(HIDDEN)
        self.embed_out = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed_in(ids)
        for layer in self.layers:
            x = layer(x)
        return self.embed_out(self.final_layer_norm(x))


# ----------------------------------------------------------------------------
# GPT-J: one LayerNorm feeding attention and MLP in parallel, interleaved
# rotary (rotate_every_two) on part of each head, no attention biases, an LM
# head with a bias.
# ----------------------------------------------------------------------------
class GPTJLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.out_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.fc_in = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc_out = nn.Linear(4 * HIDDEN, HIDDEN)
        self.rot = HEAD_DIM // 2
        inv = 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / self.rot))
        freqs = torch.outer(torch.arange(SEQ).float(), inv)
        # Interleaved tables: each frequency repeated for its pair.
        self.register_buffer("cos", freqs.cos().repeat_interleave(2, -1)[None, None], persistent=False)
        self.register_buffer("sin", freqs.sin().repeat_interleave(2, -1)[None, None], persistent=False)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def forward(self, x):
        h = self.ln_1(x)
        s = x.shape[1]
        q, k, v = (split_heads(p(h), HEADS) for p in (self.q_proj, self.k_proj, self.v_proj))
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = partial_rotary(q, cos, sin, self.rot, rotate_every_two)
        k = partial_rotary(k, cos, sin, self.rot, rotate_every_two)
        attn = self.out_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "where")))
        return x + attn + self.fc_out(gelu_tanh(self.fc_in(h)))


class GPTJ(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.h = nn.ModuleList(GPTJLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        x = self.wte(ids)
        for layer in self.h:
            x = layer(x)
        return self.lm_head(self.ln_f(x))


# ----------------------------------------------------------------------------
# OPT: learned positions offset by 2, q scaled before QK^T, an additive
# mask of float min, ReLU MLP, pre-LN, tied LM head.
# ----------------------------------------------------------------------------
class OPTLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN)
        self.out_proj = nn.Linear(HIDDEN, HIDDEN)
        self.final_layer_norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def forward(self, x):
        h = self.self_attn_layer_norm(x)
        s = x.shape[1]
        q, k, v = (split_heads(p(h), HEADS) for p in (self.q_proj, self.k_proj, self.v_proj))
        x = x + self.out_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "scale_q_additive")))
        return x + self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))


class OPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.embed_positions = nn.Embedding(SEQ + 2, HIDDEN)
        self.layers = nn.ModuleList(OPTLayer() for _ in range(LAYERS))
        self.final_layer_norm = nn.LayerNorm(HIDDEN)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1]) + 2
        x = self.embed_tokens(ids) + self.embed_positions(positions)
        for layer in self.layers:
            x = layer(x)
        return torch.matmul(self.final_layer_norm(x), self.embed_tokens.weight.t())


# ----------------------------------------------------------------------------
# Qwen2 / Mistral: RMSNorm, GQA (2 KV heads for 4), rotary, SwiGLU; Qwen2 has
# q/k/v biases, Mistral a sliding-window causal mask.
# ----------------------------------------------------------------------------
class LlamaLikeLayer(nn.Module):
    def __init__(self, qkv_bias, window):
        super().__init__()
        kv = HEADS // 2
        self.input_layernorm = RMSNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=qkv_bias)
        self.k_proj = nn.Linear(HIDDEN, kv * HEAD_DIM, bias=qkv_bias)
        self.v_proj = nn.Linear(HIDDEN, kv * HEAD_DIM, bias=qkv_bias)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate_proj = nn.Linear(HIDDEN, 2 * HIDDEN, bias=False)
        self.up_proj = nn.Linear(HIDDEN, 2 * HIDDEN, bias=False)
        self.down_proj = nn.Linear(2 * HIDDEN, HIDDEN, bias=False)
        cos, sin = rotary_tables(HEAD_DIM, SEQ, theta=1e6)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_bool(SEQ, window), persistent=False)
        self.kv = kv

    def forward(self, x):
        h = self.input_layernorm(x)
        s = x.shape[1]
        q = split_heads(self.q_proj(h), HEADS)
        k = split_heads(self.k_proj(h), self.kv)
        v = split_heads(self.v_proj(h), self.kv)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        x = x + self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaLike(nn.Module):
    def __init__(self, qkv_bias=False, window=None):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(LlamaLikeLayer(qkv_bias, window) for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


# ----------------------------------------------------------------------------
# export
# ----------------------------------------------------------------------------
# name: (constructor, seed, dynamic batch/sequence axes)
MODELS = {
    "gpt_neox": (NeoX, 2001, True),
    "gptj": (GPTJ, 2002, False),
    "opt": (OPT, 2003, False),
    "qwen2": (lambda: LlamaLike(qkv_bias=True), 2004, False),
    "mistral": (lambda: LlamaLike(window=3), 2005, True),
}


def generate(name, out_root):
    build, seed, dynamic = MODELS[name]
    torch.manual_seed(seed)
    model = build().eval()
    with torch.no_grad():  # away from the initial ones and zeros (trained-like)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed + 7))
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "outputs"))
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logits = model(ids)
        torch.onnx.export(model, (ids,), os.path.join(d, "model.onnx"), opset_version=OPSET,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes=axes if dynamic else None)
    np.save(os.path.join(d, "inputs", "input_ids.npy"), ids.numpy())
    np.save(os.path.join(d, "outputs", "logits.npy"), logits.numpy().astype(np.float32))
    print("wrote", d)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo"))
    parser.add_argument("--model", default="all", choices=["all"] + sorted(MODELS))
    args = parser.parse_args()
    for name in sorted(MODELS) if args.model == "all" else [args.model]:
        generate(name, args.out)


if __name__ == "__main__":
    main()
