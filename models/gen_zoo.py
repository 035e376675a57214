#!/usr/bin/python3
"""A zoo of small transformers written from their published architectures
(not copied code), exported to ONNX the way users export them, with
PyTorch reference data: what mp must import, raise and partition beyond the
bundled export styles (issue 15).

For every model NAME this writes models/zoo/NAME/:
  model.onnx               opset 17, input_ids int64 [2, 8] -> logits f32 [2, 8, 64]
                           (bert_pooler: also token_type_ids and attention_mask
                           in, last_hidden_state and pooler_output out; vit:
                           pixels f32 [2, 3, 16, 16] -> logits f32 [2, 10])
  inputs/NAME.npy          each input
  outputs/NAME.npy         each output of the PyTorch fp32 forward

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
# Falcon (7B layout): multi-query attention from one fused QKV linear laid
# out [q heads..., k, v] (viewed as heads + 2 and sliced, the key and value
# taken by list indexing), rotary on whole heads, one LayerNorm feeding
# attention and MLP in parallel, exact GELU, no biases, tied LM head. The
# one key/value head reaches every query head by matmul broadcasting.
# ----------------------------------------------------------------------------
class FalconLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.query_key_value = nn.Linear(HIDDEN, HIDDEN + 2 * HEAD_DIM, bias=False)
        self.dense = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.dense_4h_to_h = nn.Linear(4 * HIDDEN, HIDDEN, bias=False)
        cos, sin = rotary_tables(HEAD_DIM, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def attention(self, x):
        b, s, _ = x.shape
        fused = self.query_key_value(x).view(b, s, HEADS + 2, HEAD_DIM)
        q, k, v = fused[..., :-2, :], fused[..., [-2], :], fused[..., [-1], :]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        return self.dense(merge_heads(torch.matmul(torch.softmax(scores, dim=-1), v)))

    def forward(self, x):
        h = self.input_layernorm(x)
        return x + self.attention(h) + self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(h)))


class Falcon(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.h = nn.ModuleList(FalconLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, ids):
        x = self.word_embeddings(ids)
        for layer in self.h:
            x = layer(x)
        return torch.matmul(self.ln_f(x), self.word_embeddings.weight.t())


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
    def __init__(self, qkv_bias=False, window=None, kv=HEADS // 2, ffn=2 * HIDDEN,
                 theta=1e6, plus_one=False, activation=F.silu):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN, plus_one=plus_one)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=qkv_bias)
        self.k_proj = nn.Linear(HIDDEN, kv * HEAD_DIM, bias=qkv_bias)
        self.v_proj = nn.Linear(HIDDEN, kv * HEAD_DIM, bias=qkv_bias)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN, plus_one=plus_one)
        self.gate_proj = nn.Linear(HIDDEN, ffn, bias=False)
        self.up_proj = nn.Linear(HIDDEN, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, HIDDEN, bias=False)
        cos, sin = rotary_tables(HEAD_DIM, SEQ, theta=theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_bool(SEQ, window), persistent=False)
        self.kv, self.activation = kv, activation

    def qkv(self, h):
        """The query, key and value heads of the normed input."""
        return (split_heads(self.q_proj(h), HEADS), split_heads(self.k_proj(h), self.kv),
                split_heads(self.v_proj(h), self.kv))

    def rotated_qkv(self, x):
        """The query, key and value heads of the normed input, rotary
        applied to the query and the key; and the sequence length."""
        h = self.input_layernorm(x)
        s = x.shape[1]
        q, k, v = self.qkv(h)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v, s

    def attention(self, x):
        """The attention sublayer with its residual (subclasses that change
        the feed-forward part keep this one)."""
        q, k, v, s = self.rotated_qkv(x)
        return x + self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))

    def forward(self, x):
        x = self.attention(x)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.activation(self.gate_proj(h)) * self.up_proj(h))


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
# Phi-2: one LayerNorm feeding attention and MLP in parallel, rotary on 40%
# of each head, q/k/v/dense with biases, tanh GELU, an LM head with a bias.
# ----------------------------------------------------------------------------
class PhiLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)
        self.rot = int(HEAD_DIM * 0.4) // 2 * 2
        cos, sin = rotary_tables(self.rot, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def forward(self, x):
        h = self.input_layernorm(x)
        s = x.shape[1]
        q, k, v = (split_heads(p(h), HEADS) for p in (self.q_proj, self.k_proj, self.v_proj))
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = partial_rotary(q, cos, sin, self.rot)
        k = partial_rotary(k, cos, sin, self.rot)
        attn = self.dense(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))
        return x + attn + self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


class Phi(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(PhiLayer() for _ in range(LAYERS))
        self.final_layernorm = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.final_layernorm(x))


# ----------------------------------------------------------------------------
# Gemma: RMSNorm scaled by 1 + w, embeddings scaled by sqrt(hidden), GeGLU
# (tanh GELU gate), tied LM head; the 7B layout has a KV head per query
# head, the 2B layout one KV head for all (multi-query attention).
# ----------------------------------------------------------------------------
class Gemma(nn.Module):
    def __init__(self, kv=HEADS):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(
            LlamaLikeLayer(kv=kv, ffn=3 * HIDDEN, theta=10000.0, plus_one=True,
                           activation=lambda x: F.gelu(x, approximate="tanh"))
            for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN, plus_one=True)

    def forward(self, ids):
        x = self.embed_tokens(ids) * math.sqrt(HIDDEN)
        for layer in self.layers:
            x = layer(x)
        return torch.matmul(self.norm(x), self.embed_tokens.weight.t())


# ----------------------------------------------------------------------------
# BERT with everything an encoder user feeds it: token types, a padding mask
# input (1 keep, 0 pad) turned into an additive mask of float min, post-LN
# layers, and a pooler (tanh of a dense layer on the first token); outputs
# the last hidden states and the pooled vector.
# ----------------------------------------------------------------------------
class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)
        self.attention_output = nn.Linear(HIDDEN, HIDDEN)
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.intermediate = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.output = nn.Linear(4 * HIDDEN, HIDDEN)
        self.output_norm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x, additive_mask):
        q, k, v = (split_heads(p(x), HEADS) for p in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM) + additive_mask
        attn = merge_heads(torch.matmul(torch.softmax(scores, dim=-1), v))
        x = self.attention_norm(x + self.attention_output(attn))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.position_embeddings = nn.Embedding(SEQ, HIDDEN)
        self.token_type_embeddings = nn.Embedding(2, HIDDEN)
        self.embeddings_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layer = nn.ModuleList(BertLayer() for _ in range(LAYERS))
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, token_type_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1])
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions) +
             self.token_type_embeddings(token_type_ids))
        x = self.embeddings_norm(x)
        additive = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layer:
            x = layer(x, additive)
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert_inputs(ids):
    """Token types (a second segment from position 5) and a padding mask
    (the second sequence padded after 6 tokens)."""
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return {"token_type_ids": types, "attention_mask": mask}


# ----------------------------------------------------------------------------
# T5-style encoder-decoder, as Megatron's T5 lays it out: learned absolute
# positions, pre-norm RMSNorm, ReLU MLPs, no biases; the decoder has causal
# self-attention and cross-attention (queries from the decoder, keys and
# values from the encoder's output); modules enc.N / dec.N; tied head.
# ----------------------------------------------------------------------------
class T5Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.v = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.o = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x, memory, hidden_mask):
        q = split_heads(self.q(x), HEADS)
        k, v = split_heads(self.k(memory), HEADS), split_heads(self.v(memory), HEADS)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        if hidden_mask is not None:
            scores = scores.masked_fill(hidden_mask, float("-inf"))
        return self.o(merge_heads(torch.matmul(torch.softmax(scores, dim=-1), v)))


class T5MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.wi = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.wo = nn.Linear(4 * HIDDEN, HIDDEN, bias=False)

    def forward(self, x):
        return self.wo(F.relu(self.wi(x)))


class T5Block(nn.Module):
    def __init__(self, decoder):
        super().__init__()
        self.self_norm = RMSNorm(HIDDEN)
        self.self_attn = T5Attention()
        self.cross_norm = RMSNorm(HIDDEN) if decoder else None
        self.cross_attn = T5Attention() if decoder else None
        self.mlp_norm = RMSNorm(HIDDEN)
        self.mlp = T5MLP()

    def forward(self, x, memory=None, causal=None):
        h = self.self_norm(x)
        x = x + self.self_attn(h, h, causal)
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.cross_norm(x), memory, None)
        return x + self.mlp(self.mlp_norm(x))


class T5(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.enc_positions = nn.Embedding(SEQ, HIDDEN)
        self.dec_positions = nn.Embedding(SEQ, HIDDEN)
        self.enc = nn.ModuleList(T5Block(False) for _ in range(LAYERS))
        self.enc_norm = RMSNorm(HIDDEN)
        self.dec = nn.ModuleList(T5Block(True) for _ in range(LAYERS))
        self.dec_norm = RMSNorm(HIDDEN)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def forward(self, input_ids, decoder_input_ids):
        x = self.embed(input_ids) + self.enc_positions(torch.arange(input_ids.shape[1]))
        for block in self.enc:
            x = block(x)
        memory = self.enc_norm(x)
        s = decoder_input_ids.shape[1]
        y = self.embed(decoder_input_ids) + self.dec_positions(torch.arange(s))
        for block in self.dec:
            y = block(y, memory, self.mask[:s, :s])
        return torch.matmul(self.dec_norm(y), self.embed.weight.t())


def t5_inputs(ids):
    """The decoder's input: the targets shifted right (token 0 first)."""
    return {"decoder_input_ids": torch.cat((torch.zeros_like(ids[:, :1]), ids[:, :-1].flip(1)), 1)}


# ----------------------------------------------------------------------------
# BLOOM: an embedding LayerNorm, per-head fused QKV [heads, 3, d], no
# positions but ALiBi (a per-head linear bias over key positions added to
# the scaled scores, then masked_fill of float min), tanh GELU, tied head.
# ----------------------------------------------------------------------------
def alibi_slopes(heads):
    start = 2 ** (-(2 ** -(math.log2(heads) - 3)))
    return torch.tensor([start * start ** i for i in range(heads)])


class BloomLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.query_key_value = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.post_attention_layernorm = nn.LayerNorm(HIDDEN)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.dense_4h_to_h = nn.Linear(4 * HIDDEN, HIDDEN)
        self.register_buffer("mask", causal_bool(SEQ), persistent=False)

    def forward(self, x, alibi):
        b, s, _ = x.shape
        qkv = self.query_key_value(self.input_layernorm(x)).view(b, s, HEADS, 3, HEAD_DIM)
        q, k, v = (qkv[..., i, :].transpose(1, 2) for i in range(3))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM) + alibi
        scores = scores.masked_fill(self.mask[:s, :s], torch.finfo(torch.float32).min)
        x = x + self.dense(merge_heads(torch.matmul(torch.softmax(scores, -1), v)))
        h = self.post_attention_layernorm(x)
        return x + self.dense_4h_to_h(gelu_tanh(self.dense_h_to_4h(h)))


class Bloom(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.word_embeddings_layernorm = nn.LayerNorm(HIDDEN)
        self.h = nn.ModuleList(BloomLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.register_buffer("slopes", alibi_slopes(HEADS), persistent=False)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])[None, None, :].float()
        alibi = (self.slopes[:, None, None] * positions)[None]  # [1, heads, 1, S]
        x = self.word_embeddings_layernorm(self.word_embeddings(ids))
        for layer in self.h:
            x = layer(x, alibi)
        return torch.matmul(self.ln_f(x), self.word_embeddings.weight.t())


# ----------------------------------------------------------------------------
# Gemma 2: grouped-query attention with soft-capped scores (tanh(s / 50) *
# 50 before the mask), sandwich norms (RMSNorm after attention and MLP too),
# soft-capped logits (tanh(x / 30) * 30) from a tied head.
# ----------------------------------------------------------------------------
class Gemma2Layer(LlamaLikeLayer):
    def __init__(self):
        super().__init__(kv=2, ffn=3 * HIDDEN, theta=10000.0, plus_one=True,
                         activation=lambda x: F.gelu(x, approximate="tanh"))
        self.post_attn_norm = RMSNorm(HIDDEN, plus_one=True)
        self.post_mlp_norm = RMSNorm(HIDDEN, plus_one=True)

    def forward(self, x):
        h = self.input_layernorm(x)
        s = x.shape[1]
        q = split_heads(self.q_proj(h), HEADS)
        k, v = split_heads(self.k_proj(h), self.kv), split_heads(self.v_proj(h), self.kv)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        b, kv, _, d = k.shape
        k = k[:, :, None].expand(b, kv, HEADS // kv, s, d).reshape(b, HEADS, s, d)
        v = v[:, :, None].expand(b, kv, HEADS // kv, s, d).reshape(b, HEADS, s, d)
        scores = torch.tanh(torch.matmul(q, k.transpose(-1, -2)) * d ** -0.5 / 50.0) * 50.0
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        attn = self.o_proj(merge_heads(torch.matmul(torch.softmax(scores, -1), v)))
        x = x + self.post_attn_norm(attn)
        h = self.post_attention_layernorm(x)
        mlp = self.down_proj(self.activation(self.gate_proj(h)) * self.up_proj(h))
        return x + self.post_mlp_norm(mlp)


class Gemma2(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Gemma2Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN, plus_one=True)

    def forward(self, ids):
        x = self.embed_tokens(ids) * math.sqrt(HIDDEN)
        for layer in self.layers:
            x = layer(x)
        return torch.tanh(torch.matmul(self.norm(x), self.embed_tokens.weight.t()) / 30.0) * 30.0


# ----------------------------------------------------------------------------
# T5's relative position bias: a learned [buckets, heads] table read by the
# clamped key-query offset (torch.clamp: ONNX Clip), added unscaled to the
# scores of every layer (computed once, shared); a decoder-only stack with
# ReLU MLPs and RMSNorm.
# ----------------------------------------------------------------------------
class RelativeAttention(T5Attention):
    def forward(self, x, bias):
        q, k, v = (split_heads(p(x), HEADS) for p in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) + bias
        return self.o(merge_heads(torch.matmul(torch.softmax(scores, -1), v)))


class RelativeLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = RMSNorm(HIDDEN)
        self.attn = RelativeAttention()
        self.mlp_norm = RMSNorm(HIDDEN)
        self.mlp = T5MLP()

    def forward(self, x, bias):
        x = x + self.attn(self.attn_norm(x), bias)
        return x + self.mlp(self.mlp_norm(x))


class T5Relative(nn.Module):
    BUCKETS = 16

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.relative_attention_bias = nn.Embedding(self.BUCKETS, HEADS)
        self.layers = nn.ModuleList(RelativeLayer() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        s = ids.shape[1]
        offset = torch.arange(s)[None, :] - torch.arange(s)[:, None]
        half = self.BUCKETS // 2
        buckets = torch.clamp(offset + half, 0, self.BUCKETS - 1)
        bias = self.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # [1, heads, S, S]
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return self.lm_head(self.norm(x))


# ----------------------------------------------------------------------------
# RoBERTa / XLM-R: position ids computed from the ids (padding id 1 gets
# position 1, the others 2, 3, ... by a cumulative sum of the padding mask:
# ONNX Not, CumSum), the padding mask also additive in attention, post-LN
# BERT layers, no token types; the second sequence ends in padding.
# ----------------------------------------------------------------------------
class Roberta(nn.Module):
    PAD = 1

    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN, padding_idx=self.PAD)
        self.position_embeddings = nn.Embedding(SEQ + 2, HIDDEN, padding_idx=self.PAD)
        self.LayerNorm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layer = nn.ModuleList(BertLayer() for _ in range(LAYERS))

    def forward(self, input_ids):
        keep = input_ids.ne(self.PAD).int()
        positions = (torch.cumsum(keep, dim=1).type_as(keep) * keep).long() + self.PAD
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = self.LayerNorm(x)
        additive = (1.0 - keep[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layer:
            x = layer(x, additive)
        return x


def roberta_ids(ids):
    ids = ids.clone()
    ids[ids == Roberta.PAD] = 0
    ids[1, -3:] = Roberta.PAD
    return ids


# ----------------------------------------------------------------------------
# OLMo 2: RMSNorm of the query and key projections over their whole width
# (before the heads are split: tensor parallelism must share its
# statistics), norms after attention and MLP instead of before (x +
# norm(attn(x))), SwiGLU, untied head.
# ----------------------------------------------------------------------------
class Olmo2Layer(LlamaLikeLayer):
    def __init__(self):
        super().__init__(kv=HEADS)
        self.q_norm = RMSNorm(HIDDEN)
        self.k_norm = RMSNorm(HIDDEN)
        self.post_feedforward_layernorm = RMSNorm(HIDDEN)
        del self.input_layernorm

    def forward(self, x):
        s = x.shape[1]
        q = split_heads(self.q_norm(self.q_proj(x)), HEADS)
        k = split_heads(self.k_norm(self.k_proj(x)), HEADS)
        v = split_heads(self.v_proj(x), HEADS)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        attn = self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))
        x = x + self.post_attention_layernorm(attn)
        mlp = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return x + self.post_feedforward_layernorm(mlp)


class Olmo2(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Olmo2Layer() for _ in range(LAYERS))


# ----------------------------------------------------------------------------
# Baichuan: Llama-like with one fused W_pack linear for q, k and v, taken
# apart as view(B, S, 3, E).unsqueeze(0).transpose(0, -2).squeeze(-2) and
# indexed [0], [1], [2].
# ----------------------------------------------------------------------------
class BaichuanLayer(LlamaLikeLayer):
    def __init__(self):
        super().__init__(kv=HEADS)
        self.W_pack = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        del self.q_proj, self.k_proj, self.v_proj

    def qkv(self, h):
        b, s, _ = h.shape
        proj = self.W_pack(h).view(b, s, 3, HIDDEN).unsqueeze(0).transpose(0, -2).squeeze(-2)
        return tuple(split_heads(proj[i], HEADS) for i in range(3))


class Baichuan(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(BaichuanLayer() for _ in range(LAYERS))


# ----------------------------------------------------------------------------
# DeepSeek-V2's multi-head latent attention (MLA) with a dense SwiGLU MLP:
# the query and the keys/values through low-rank latents (a down-projection,
# an RMSNorm, an up-projection into the heads), decoupled rotary keys (one
# head, split off the key/value down-projection, broadcast to every head and
# concatenated), values of their own head size.
# ----------------------------------------------------------------------------
MLA_NOPE, MLA_ROPE, MLA_V, MLA_Q_RANK, MLA_KV_RANK = 8, 4, 8, 16, 16


class MLALayer(LlamaLikeLayer):
    def __init__(self):
        super().__init__()
        del self.q_proj, self.k_proj, self.v_proj, self.o_proj
        self.q_a_proj = nn.Linear(HIDDEN, MLA_Q_RANK, bias=False)
        self.q_a_layernorm = RMSNorm(MLA_Q_RANK)
        self.q_b_proj = nn.Linear(MLA_Q_RANK, HEADS * (MLA_NOPE + MLA_ROPE), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(HIDDEN, MLA_KV_RANK + MLA_ROPE, bias=False)
        self.kv_a_layernorm = RMSNorm(MLA_KV_RANK)
        self.kv_b_proj = nn.Linear(MLA_KV_RANK, HEADS * (MLA_NOPE + MLA_V), bias=False)
        self.o_proj = nn.Linear(HEADS * MLA_V, HIDDEN, bias=False)
        cos, sin = rotary_tables(MLA_ROPE, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(h)))
        q_nope, q_pe = torch.split(split_heads(q, HEADS), [MLA_NOPE, MLA_ROPE], dim=-1)
        latent, k_pe = torch.split(self.kv_a_proj_with_mqa(h), [MLA_KV_RANK, MLA_ROPE], dim=-1)
        k_pe = k_pe.view(b, s, 1, MLA_ROPE).transpose(1, 2)
        kv = split_heads(self.kv_b_proj(self.kv_a_layernorm(latent)), HEADS)
        k_nope, v = torch.split(kv, [MLA_NOPE, MLA_V], dim=-1)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q_pe = q_pe * cos + rotate_half(q_pe) * sin
        k_pe = k_pe * cos + rotate_half(k_pe) * sin
        q = torch.cat([q_nope, q_pe], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(b, HEADS, s, MLA_ROPE)], dim=-1)
        x = x + self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.activation(self.gate_proj(h)) * self.up_proj(h))


class DeepSeekMLA(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(MLALayer() for _ in range(LAYERS))


# ----------------------------------------------------------------------------
# ViT as timm writes it: a Conv2d patch embedding (kernel = stride), a class
# token concatenated and learned positions added, fused QKV viewed as
# [3, heads, head_dim] and moved to the front (permute(2, 0, 3, 1, 4)),
# pre-LN blocks with exact GELU, a classifier on the class token (10
# classes: not divisible by 4, so under tp=4 the head stays whole).
# ----------------------------------------------------------------------------
IMAGE, PATCH, CLASSES = 16, 4, 10


class ViTBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.softmax((q * HEAD_DIM ** -0.5) @ k.transpose(-2, -1), dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, HIDDEN, kernel_size=PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.pos_embed = nn.Parameter(torch.zeros(1, (IMAGE // PATCH) ** 2 + 1, HIDDEN))
        self.blocks = nn.ModuleList(ViTBlock() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, pixels):
        x = self.patch_embed(pixels).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


# ----------------------------------------------------------------------------
# CLIP's text encoder: learned positions, a causal mask built with
# triu(-inf), pre-LN layers with quick GELU (x * sigmoid(1.702 x), left
# decomposed), a final LayerNorm, and the hidden state at each sequence's
# end-of-text token (the largest id: ids.argmax(-1), ONNX ArgMax) projected
# to the embedding.
# ----------------------------------------------------------------------------
class CLIPLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_norm1 = nn.LayerNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN)
        self.out_proj = nn.Linear(HIDDEN, HIDDEN)
        self.layer_norm2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, mask):
        h = self.layer_norm1(x)
        q, k, v = (split_heads(p(h), HEADS) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = torch.matmul(q * HEAD_DIM ** -0.5, k.transpose(-1, -2)) + mask
        x = x + self.out_proj(merge_heads(torch.matmul(torch.softmax(scores, -1), v)))
        h = self.fc1(self.layer_norm2(x))
        return x + self.fc2(h * torch.sigmoid(1.702 * h))


class CLIPText(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding = nn.Embedding(VOCAB, HIDDEN)
        self.position_embedding = nn.Embedding(SEQ, HIDDEN)
        self.layers = nn.ModuleList(CLIPLayer() for _ in range(LAYERS))
        self.final_layer_norm = nn.LayerNorm(HIDDEN)
        self.text_projection = nn.Linear(HIDDEN, 16, bias=False)

    def forward(self, ids):
        s = ids.shape[1]
        x = self.token_embedding(ids) + self.position_embedding(torch.arange(s)[None])
        mask = torch.full((s, s), float("-inf")).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, mask)
        x = self.final_layer_norm(x)
        return self.text_projection(x[torch.arange(x.shape[0]), ids.argmax(dim=-1)])


def clip_ids(ids):
    """Each sequence ends in the end-of-text token, the largest id."""
    ids = ids.clamp(max=VOCAB - 2)
    ids[0, -1] = VOCAB - 1
    ids[1, 5] = VOCAB - 1
    return ids


# ----------------------------------------------------------------------------
# DeBERTa-v2: disentangled attention. Besides content-to-content scores,
# content-to-position (queries against projected relative-position
# embeddings) and position-to-content terms, each read at the clamped
# relative distance with torch.gather (ONNX GatherElements); the position
# projections share the key and query linears (share_att_key), the
# relative embeddings are layer-normed, the scale is sqrt(3d); post-LN
# layers, a padding mask by masked_fill(float min), an MLM head.
# ----------------------------------------------------------------------------
SPAN = 4  # relative distances -SPAN .. SPAN - 1


class DebertaAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_proj = nn.Linear(HIDDEN, HIDDEN)
        self.key_proj = nn.Linear(HIDDEN, HIDDEN)
        self.value_proj = nn.Linear(HIDDEN, HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN)

    def forward(self, x, rel, hidden):
        b, s, _ = x.shape
        q, k, v = (split_heads(p(x), HEADS) for p in (self.query_proj, self.key_proj, self.value_proj))
        scale = math.sqrt(HEAD_DIM * 3)
        pos_k = split_heads(self.key_proj(rel), HEADS)  # [1, heads, 2 SPAN, d]
        pos_q = split_heads(self.query_proj(rel), HEADS)
        distance = torch.arange(s)[:, None] - torch.arange(s)[None, :]
        c2p_at = torch.clamp(distance + SPAN, 0, 2 * SPAN - 1)[None, None].expand(b, HEADS, s, s)
        p2c_at = torch.clamp(-distance + SPAN, 0, 2 * SPAN - 1)[None, None].expand(b, HEADS, s, s)
        c2p = torch.gather(torch.matmul(q, pos_k.transpose(-1, -2)), -1, c2p_at)
        p2c = torch.gather(torch.matmul(k, pos_q.transpose(-1, -2)), -1, p2c_at).transpose(-1, -2)
        scores = (torch.matmul(q, k.transpose(-1, -2)) + c2p + p2c) / scale
        scores = scores.masked_fill(hidden, torch.finfo(torch.float32).min)
        a = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.LayerNorm(x + self.dense(merge_heads(a)))


class DebertaLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = DebertaAttention()
        self.intermediate = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.output = nn.Linear(4 * HIDDEN, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN)

    def forward(self, x, rel, hidden):
        x = self.attention(x, rel, hidden)
        return self.LayerNorm(x + self.output(F.gelu(self.intermediate(x))))


class Deberta(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.embeddings_norm = nn.LayerNorm(HIDDEN)
        self.rel_embeddings = nn.Embedding(2 * SPAN, HIDDEN)
        self.rel_norm = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList(DebertaLayer() for _ in range(LAYERS))
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids, attention_mask):
        hidden = (attention_mask == 0)[:, None, None, :]
        x = self.embeddings_norm(self.word_embeddings(ids))
        rel = self.rel_norm(self.rel_embeddings.weight)[None]
        for layer in self.layers:
            x = layer(x, rel, hidden)
        return self.lm_head(x)


# ----------------------------------------------------------------------------
# HF's BART, OPT and BLOOM as transformers (4.3x, before SDPA) writes their
# attention: batch and heads merged into one dimension around the batched
# matmuls (q [B*H, S, d] by bmm or baddbmm), the scores viewed back as
# [B, H, S, S] only to add or fill the mask. The zoo's opt and bloom are the
# same architectures with [B, H, S, d] attention.
# ----------------------------------------------------------------------------
def inverted_mask(mask, target_len):
    """[B, S] of 1 (attend) / 0 (padding) -> [B, 1, T, S] of 0 / float min."""
    b, s = mask.shape
    expanded = mask[:, None, None, :].expand(b, 1, target_len, s).float()
    inverted = 1.0 - expanded
    return inverted.masked_fill(inverted.bool(), torch.finfo(torch.float32).min)


def causal_additive(b, t):
    """[B, 1, T, T]: float min above the diagonal, 0 elsewhere."""
    mask = torch.full((t, t), torch.finfo(torch.float32).min)
    mask = mask.masked_fill(torch.arange(t)[:, None] >= torch.arange(t)[None, :], 0.0)
    return mask[None, None].expand(b, 1, t, t)


class MergedHeadsAttention(nn.Module):
    """BartAttention / OPTAttention: q scaled after its projection, k and v
    shaped [B, H, S, d], then everything viewed as [B*H, S, d] for bmm; OPT
    also clamps the masked scores at float min (`clamp`)."""

    def __init__(self, clamp=False):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HIDDEN)
        self.k_proj = nn.Linear(HIDDEN, HIDDEN)
        self.v_proj = nn.Linear(HIDDEN, HIDDEN)
        self.out_proj = nn.Linear(HIDDEN, HIDDEN)
        self.clamp = clamp

    @staticmethod
    def _shape(t, seq, bsz):
        return t.view(bsz, seq, HEADS, HEAD_DIM).transpose(1, 2).contiguous()

    def forward(self, x, memory, mask):
        bsz, tgt, _ = x.shape
        src = memory.shape[1]
        q = self._shape(self.q_proj(x) * HEAD_DIM ** -0.5, tgt, bsz)
        k = self._shape(self.k_proj(memory), -1, bsz)
        v = self._shape(self.v_proj(memory), -1, bsz)
        proj = (bsz * HEADS, -1, HEAD_DIM)
        q, k, v = q.view(*proj), k.view(*proj), v.view(*proj)
        weights = torch.bmm(q, k.transpose(1, 2))
        if mask is not None:
            weights = weights.view(bsz, HEADS, tgt, src) + mask
            if self.clamp:
                weights = torch.max(weights, torch.tensor(torch.finfo(torch.float32).min))
            weights = weights.view(bsz * HEADS, tgt, src)
        out = torch.bmm(F.softmax(weights, dim=-1), v)
        out = out.view(bsz, HEADS, tgt, HEAD_DIM).transpose(1, 2)
        return self.out_proj(out.reshape(bsz, tgt, HIDDEN))


class BartLayer(nn.Module):
    """Post-LN: each sublayer's residual sum is normalized."""

    def __init__(self, decoder):
        super().__init__()
        self.self_attn = MergedHeadsAttention()
        self.self_attn_layer_norm = nn.LayerNorm(HIDDEN)
        self.encoder_attn = MergedHeadsAttention() if decoder else None
        self.encoder_attn_layer_norm = nn.LayerNorm(HIDDEN) if decoder else None
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)
        self.final_layer_norm = nn.LayerNorm(HIDDEN)

    def forward(self, x, mask, memory=None, memory_mask=None):
        x = self.self_attn_layer_norm(x + self.self_attn(x, x, mask))
        if self.encoder_attn is not None:
            x = self.encoder_attn_layer_norm(x + self.encoder_attn(x, memory, memory_mask))
        return self.final_layer_norm(x + self.fc2(F.gelu(self.fc1(x))))


class Bart(nn.Module):
    """Encoder-decoder: learned positions offset by 2 and an embedding
    LayerNorm on each side, the encoder's padding mask on its self-attention
    and on the decoder's cross-attention, a tied head plus a logits bias."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(VOCAB, HIDDEN)
        self.enc_positions = nn.Embedding(SEQ + 2, HIDDEN)
        self.dec_positions = nn.Embedding(SEQ + 2, HIDDEN)
        self.enc_layernorm_embedding = nn.LayerNorm(HIDDEN)
        self.dec_layernorm_embedding = nn.LayerNorm(HIDDEN)
        self.encoder = nn.ModuleList(BartLayer(False) for _ in range(LAYERS))
        self.decoder = nn.ModuleList(BartLayer(True) for _ in range(LAYERS))
        # (HF's is a buffer; an ONNX initializer either way, which mp trains)
        self.final_logits_bias = nn.Parameter(torch.zeros(1, VOCAB))

    def forward(self, input_ids, attention_mask, decoder_input_ids):
        b, s = input_ids.shape
        t = decoder_input_ids.shape[1]
        x = self.shared(input_ids) + self.enc_positions(torch.arange(s) + 2)
        x = self.enc_layernorm_embedding(x)
        enc_mask = inverted_mask(attention_mask, s)
        for layer in self.encoder:
            x = layer(x, enc_mask)
        y = self.shared(decoder_input_ids) + self.dec_positions(torch.arange(t) + 2)
        y = self.dec_layernorm_embedding(y)
        causal, cross = causal_additive(b, t), inverted_mask(attention_mask, t)
        for layer in self.decoder:
            y = layer(y, causal, x, cross)
        return F.linear(y, self.shared.weight) + self.final_logits_bias


class OPTMergedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(HIDDEN)
        self.self_attn = MergedHeadsAttention(clamp=True)
        self.final_layer_norm = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, mask):
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn(h, h, mask)
        return x + self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))


class OPTMerged(nn.Module):
    """OPT as HF writes it: the causal and padding masks added (float min,
    so a masked padding position sums to -inf) and clamped at float min."""

    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.embed_positions = nn.Embedding(SEQ + 2, HIDDEN)
        self.layers = nn.ModuleList(OPTMergedLayer() for _ in range(LAYERS))
        self.final_layer_norm = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        positions = (torch.cumsum(attention_mask, dim=1) * attention_mask).long() - 1
        x = self.embed_tokens(input_ids) + self.embed_positions(positions + 2)
        mask = causal_additive(b, s) + inverted_mask(attention_mask, s)
        for layer in self.layers:
            x = layer(x, mask)
        return torch.matmul(self.final_layer_norm(x), self.embed_tokens.weight.t())


class BloomMergedAttention(nn.Module):
    """BloomAttention: the fused QKV viewed [B, S, H, 3, d], q and v as
    [B*H, S, d], k as [B*H, d, S]; ALiBi [B*H, 1, S] added by baddbmm."""

    def __init__(self):
        super().__init__()
        self.query_key_value = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x, alibi, hidden):
        b, s, _ = x.shape
        fused = self.query_key_value(x).view(b, s, HEADS, 3, HEAD_DIM)
        q, k, v = fused[..., 0, :], fused[..., 1, :], fused[..., 2, :]
        q = q.transpose(1, 2).reshape(b * HEADS, s, HEAD_DIM)
        k = k.permute(0, 2, 3, 1).reshape(b * HEADS, HEAD_DIM, s)
        v = v.transpose(1, 2).reshape(b * HEADS, s, HEAD_DIM)
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1.0 / math.sqrt(HEAD_DIM))
        scores = scores.view(b, HEADS, s, s).masked_fill(hidden, torch.finfo(torch.float32).min)
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).view(b * HEADS, s, s)
        ctx = torch.bmm(probs, v).view(b, HEADS, s, HEAD_DIM).permute(0, 2, 1, 3)
        return self.dense(ctx.reshape(b, s, HIDDEN))


class BloomMergedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.self_attention = BloomMergedAttention()
        self.post_attention_layernorm = nn.LayerNorm(HIDDEN)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.dense_4h_to_h = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, alibi, hidden):
        x = x + self.self_attention(self.input_layernorm(x), alibi, hidden)
        h = self.post_attention_layernorm(x)
        return x + self.dense_4h_to_h(gelu_tanh(self.dense_h_to_4h(h)))


class BloomMerged(nn.Module):
    """ALiBi built from the padding mask (positions count attended tokens),
    a boolean mask of future and padding keys."""

    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.word_embeddings_layernorm = nn.LayerNorm(HIDDEN)
        self.h = nn.ModuleList(BloomMergedLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.register_buffer("slopes", alibi_slopes(HEADS), persistent=False)

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        positions = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
        alibi = (self.slopes[..., None] * positions).reshape(b * HEADS, 1, s)
        future = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)[None, None]
        hidden = future | ~attention_mask.bool()[:, None, None, :]
        x = self.word_embeddings_layernorm(self.word_embeddings(input_ids))
        for layer in self.h:
            x = layer(x, alibi, hidden)
        return torch.matmul(self.ln_f(x), self.word_embeddings.weight.t())


class BigCodeAttention(nn.Module):
    """GPTBigCodeAttention, eager, multi_query: q [B, S, H*d] viewed
    [B, S*H, d] (positions and heads merged into the rows), one key/value
    head [B, S, d]; the scores [B, S*H, S] from baddbmm on a zero-filled
    tensor (its CPU path), viewed [B, S, H, S] for the mask and softmax."""

    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(HIDDEN, HIDDEN + 2 * HEAD_DIM)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x, allowed):
        b, s, _ = x.shape
        query, key_value = self.c_attn(x).split((HIDDEN, 2 * HEAD_DIM), dim=2)
        key, value = key_value.split((HEAD_DIM, HEAD_DIM), dim=-1)
        q = query.reshape(b, s * HEADS, HEAD_DIM)
        scores = torch.baddbmm(torch.zeros(b, s * HEADS, s), q, key.transpose(-1, -2),
                               beta=1, alpha=1.0 / math.sqrt(HEAD_DIM)).view(b, s, HEADS, s)
        scores = torch.where(allowed, scores, torch.full([], torch.finfo(torch.float32).min))
        probs = F.softmax(scores, dim=-1).view(b, s * HEADS, s)
        return self.c_proj(torch.bmm(probs, value).view(query.shape))


class BigCodeLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.attn = BigCodeAttention()
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.c_fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.c_proj = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x, allowed):
        x = x + self.attn(self.ln_1(x), allowed)
        return x + self.c_proj(gelu_tanh(self.c_fc(self.ln_2(x))))


class BigCode(nn.Module):
    """GPT-BigCode (SantaCoder, StarCoder): learned positions, a boolean
    mask of allowed keys [B, S, 1, S] (causal and padding), tied head."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(SEQ, HIDDEN)
        self.h = nn.ModuleList(BigCodeLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        allowed = (causal[None] & attention_mask.bool()[:, None, :])[:, :, None, :]
        x = self.wte(input_ids) + self.wpe(torch.arange(s)[None])
        for layer in self.h:
            x = layer(x, allowed)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


def glm_rope(seq, dim, base=10000.0):
    """ChatGLM's rotary table [S, dim / 2, 2] (cos, sin) over `dim` channels."""
    theta = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float), theta)
    return torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)


def glm_rotary(x, rope):
    """ChatGLM's rotary on the first half of each head of x [S, B, heads, d],
    interleaved pairs."""
    s, heads, rot = x.size(0), x.size(2), rope.shape[-2] * 2
    x, rest = x[..., :rot], x[..., rot:]
    pairs = x.reshape(s, -1, heads, rot // 2, 2)
    rope = rope[:s].view(s, -1, 1, rot // 2, 2)
    out = torch.stack([pairs[..., 0] * rope[..., 0] - pairs[..., 1] * rope[..., 1],
                       pairs[..., 1] * rope[..., 0] + pairs[..., 0] * rope[..., 1]], -1)
    return torch.cat((out.flatten(3), rest), dim=-1)


class GLMBlock(nn.Module):
    """ChatGLM2/3's block, sequence first ([S, B, H]): a fused QKV with 2
    key/value groups, rotary on half of each head, and attention as its
    PyTorch < 2 path computes it: q and k viewed [S, B*H, d], transposed
    to [B*H, S, d] for baddbmm (scaled by 1/(sqrt(d) * layer), then by the
    layer number), a boolean causal mask, bmm with v; SwiGLU from one fused
    linear."""

    FFN = 40

    def __init__(self, number):
        super().__init__()
        self.number = number
        self.input_layernorm = RMSNorm(HIDDEN)
        self.query_key_value = nn.Linear(HIDDEN, HIDDEN + 2 * 2 * HEAD_DIM)
        self.dense = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 2 * self.FFN, bias=False)
        self.dense_4h_to_h = nn.Linear(self.FFN, HIDDEN, bias=False)

    def attention(self, q, k, v, hidden):
        s, b = q.size(0), q.size(1)
        q = q.view(s, b * HEADS, -1)
        k = k.view(s, b * HEADS, -1)
        scores = torch.baddbmm(torch.empty(b * HEADS, s, s), q.transpose(0, 1),
                               k.transpose(0, 1).transpose(1, 2), beta=0.0,
                               alpha=1.0 / (math.sqrt(HEAD_DIM) * self.number))
        scores = scores.view(b, HEADS, s, s) * self.number
        probs = F.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        ctx = torch.bmm(probs.view(b * HEADS, s, -1), v.view(s, b * HEADS, -1).transpose(0, 1))
        return ctx.view(b, HEADS, s, HEAD_DIM).permute(2, 0, 1, 3).contiguous().view(s, b, HIDDEN)

    def forward(self, x, hidden, rope):
        q, k, v = self.query_key_value(self.input_layernorm(x)).split(
            [HIDDEN, 2 * HEAD_DIM, 2 * HEAD_DIM], dim=-1)
        q = glm_rotary(q.view(q.size()[:-1] + (HEADS, HEAD_DIM)), rope)
        k = glm_rotary(k.view(k.size()[:-1] + (2, HEAD_DIM)), rope)
        v = v.view(v.size()[:-1] + (2, HEAD_DIM))
        k, v = (t.unsqueeze(-2).expand(-1, -1, -1, HEADS // 2, -1).contiguous()
                .view(t.size()[:2] + (HEADS, HEAD_DIM)) for t in (k, v))
        x = x + self.dense(self.attention(q, k, v, hidden))
        gate, up = self.dense_h_to_4h(self.post_attention_layernorm(x)).chunk(2, dim=-1)
        return x + self.dense_4h_to_h(F.silu(gate) * up)


class ChatGLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(GLMBlock(i + 1) for i in range(LAYERS))
        self.final_layernorm = RMSNorm(HIDDEN)
        self.output_layer = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        b, s = input_ids.shape
        hidden = (torch.ones(b, s, s).tril_() < 0.5).unsqueeze(1)
        rope = glm_rope(s, HEAD_DIM // 2)
        x = self.word_embeddings(input_ids).transpose(0, 1).contiguous()
        for layer in self.layers:
            x = layer(x, hidden, rope)
        return self.output_layer(self.final_layernorm(x)).transpose(0, 1).contiguous()


def transpose_for_scores(x, heads):
    x = x.view(x.size()[:-1] + (heads, -1))
    return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

class DebertaV2Attention(nn.Module):
    """HF's DisentangledSelfAttention: heads merged with the batch
    ([B*H, S, d]) for bmm, the relative keys and queries [H, 2 span, d]
    repeated over the batch (Tile), c2p/p2c gathered at clamped relative
    distances in the merged form, XSoftmax in [B, H, S, S]."""
    def __init__(self):
        super().__init__()
        self.query_proj = nn.Linear(HIDDEN, HIDDEN); self.key_proj = nn.Linear(HIDDEN, HIDDEN)
        self.value_proj = nn.Linear(HIDDEN, HIDDEN); self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN)
    def forward(self, x, rel, relative_pos, hidden):
        q = transpose_for_scores(self.query_proj(x), HEADS)
        k = transpose_for_scores(self.key_proj(x), HEADS)
        v = transpose_for_scores(self.value_proj(x), HEADS)
        scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * 3)
        scores = torch.bmm(q, k.transpose(-1, -2) / scale)
        repeat = q.size(0) // HEADS
        pos_q = transpose_for_scores(self.query_proj(rel), HEADS).repeat(repeat, 1, 1)
        pos_k = transpose_for_scores(self.key_proj(rel), HEADS).repeat(repeat, 1, 1)
        c2p = torch.bmm(q, pos_k.transpose(-1, -2))
        c2p_pos = torch.clamp(relative_pos + SPAN, 0, SPAN * 2 - 1)
        c2p = torch.gather(c2p, dim=-1, index=c2p_pos.squeeze(0).expand([q.size(0), q.size(1), relative_pos.size(-1)]))
        p2c_pos = torch.clamp(-relative_pos + SPAN, 0, SPAN * 2 - 1)
        p2c = torch.bmm(k, pos_q.transpose(-1, -2))
        p2c = torch.gather(p2c, dim=-1, index=p2c_pos.squeeze(0).expand([q.size(0), k.size(-2), k.size(-2)])).transpose(-1, -2)
        scores = scores + c2p / scale + p2c / scale
        scores = scores.view(-1, HEADS, scores.size(-2), scores.size(-1))
        probs = torch.softmax(scores.masked_fill(hidden, torch.finfo(torch.float32).min), -1)
        ctx = torch.bmm(probs.view(-1, probs.size(-2), probs.size(-1)), v)
        ctx = ctx.view(-1, HEADS, ctx.size(-2), ctx.size(-1)).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (-1,))
        return self.LayerNorm(x + self.dense(ctx))

class DebertaV2Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = DebertaV2Attention()
        self.intermediate = nn.Linear(HIDDEN, 4 * HIDDEN); self.output = nn.Linear(4 * HIDDEN, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN)
    def forward(self, x, rel, relative_pos, hidden):
        x = self.attention(x, rel, relative_pos, hidden)
        return self.LayerNorm(x + self.output(F.gelu(self.intermediate(x))))

class DebertaV2(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN); self.embeddings_norm = nn.LayerNorm(HIDDEN)
        self.rel_embeddings = nn.Embedding(2 * SPAN, HIDDEN); self.rel_norm = nn.LayerNorm(HIDDEN)
        self.layers = nn.ModuleList(DebertaV2Layer() for _ in range(LAYERS))
        self.lm_head = nn.Linear(HIDDEN, VOCAB)
    def forward(self, ids, attention_mask):
        s = ids.shape[1]
        hidden = (attention_mask == 0)[:, None, None, :]
        relative_pos = (torch.arange(s)[:, None] - torch.arange(s)[None, :])[None, None]  # [1, 1, S, S]
        x = self.embeddings_norm(self.word_embeddings(ids))
        rel = self.rel_norm(self.rel_embeddings.weight)[None]
        for layer in self.layers:
            x = layer(x, rel, relative_pos, hidden)
        return self.lm_head(x)


def bart_inputs(ids):
    """A padding mask, and the decoder's input: the targets shifted right."""
    return {**padding_mask(ids), **t5_inputs(ids)}


def padding_mask(ids):
    """A padding mask: the second sequence padded after 5 tokens."""
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    return {"attention_mask": mask}


class LectureHead(nn.Module):
    """One head of Karpathy's "Let's build GPT" (ng-video-lecture gpt.py):
    its own key, query and value linears, a causal tril buffer, softmax
    attention on [B, T, head_size]."""
    def __init__(self):
        super().__init__()
        self.key = nn.Linear(HIDDEN, HEAD_DIM, bias=False)
        self.query = nn.Linear(HIDDEN, HEAD_DIM, bias=False)
        self.value = nn.Linear(HIDDEN, HEAD_DIM, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(SEQ, SEQ)))

    def forward(self, x):
        t = x.shape[1]
        k, q = self.key(x), self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:t, :t] == 0, float("-inf"))
        return F.softmax(wei, dim=-1) @ self.value(x)


class LectureBlock(nn.Module):
    """Pre-LN block: the heads as a ModuleList concatenated, then a
    projection; a ReLU MLP."""
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(LectureHead() for _ in range(HEADS))
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ffwd = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.ReLU(),
                                  nn.Linear(4 * HIDDEN, HIDDEN))
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)

    def forward(self, x):
        a = self.ln1(x)
        x = x + self.proj(torch.cat([h(a) for h in self.heads], dim=-1))
        return x + self.ffwd(self.ln2(x))


class LectureGPT(nn.Module):
    """Learned positions added to the token embeddings, blocks, a final
    LayerNorm, an untied head with a bias."""
    def __init__(self):
        super().__init__()
        self.token_embedding_table = nn.Embedding(VOCAB, HIDDEN)
        self.position_embedding_table = nn.Embedding(SEQ, HIDDEN)
        self.blocks = nn.Sequential(*[LectureBlock() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.token_embedding_table(idx) + self.position_embedding_table(torch.arange(t))
        return self.lm_head(self.ln_f(self.blocks(x)))


class TorchEncoderLM(nn.Module):
    """PyTorch's own nn.TransformerEncoder (sequence first, pre-LN, GELU)
    as a causal LM: nn.MultiheadAttention's packed in_proj_weight and its
    multi_head_attention_forward, which views q, k and v [S, B*H, d],
    transposes them to [B*H, S, d] for bmm and views the result back
    [S*B, H*d] for the output projection (a Gemm on the flattened rows)."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.positions = nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.1)
        layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, 4 * HIDDEN, dropout=0.0,
                                           activation="gelu", norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS)
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        causal = torch.triu(torch.full((s, s), float("-inf")), 1)
        x = (self.embed(input_ids) + self.positions[:s]).transpose(0, 1)
        x = self.encoder(x, mask=causal).transpose(0, 1)
        return self.head(self.norm(x))


class AlbertLM(nn.Module):
    """ALBERT's cross-layer sharing: one nn.TransformerEncoderLayer (batch
    first, post-LN, GELU) applied LAYERS times, after a factorized
    embedding (a small embedding projected up to the hidden size). The
    exporter folds the packed in_proj_weight per call: the calls must train
    one weight, as PyTorch does, not a copy each."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN // 2)
        self.project = nn.Linear(HIDDEN // 2, HIDDEN)
        self.layer = nn.TransformerEncoderLayer(HIDDEN, HEADS, 4 * HIDDEN, dropout=0.0,
                                                activation="gelu", batch_first=True)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        causal = torch.triu(torch.full((s, s), float("-inf")), 1)
        x = self.project(self.embed(input_ids))
        for _ in range(LAYERS):
            x = self.layer(x, src_mask=causal)
        return self.head(x)


class PerceiverAttention(nn.Module):
    """Queries from one sequence, keys and values from another (or the
    same), separate q/k/v/o linears."""
    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.v, self.o = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x, context):
        q = split_heads(self.q(x), HEADS)
        k = split_heads(self.k(context), HEADS)
        v = split_heads(self.v(context), HEADS)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM), dim=-1)
        return self.o(merge_heads(p @ v))


class PerceiverBlock(nn.Module):
    """Pre-LN attention of `x` to `context` (itself when None), then a GELU
    MLP; a cross-attention block normalizes the context apart."""
    def __init__(self, cross):
        super().__init__()
        self.ln_q = nn.LayerNorm(HIDDEN)
        self.ln_context = nn.LayerNorm(HIDDEN) if cross else None
        self.attn = PerceiverAttention()
        self.ln_mlp = nn.LayerNorm(HIDDEN)
        self.fc1, self.fc2 = nn.Linear(HIDDEN, 2 * HIDDEN), nn.Linear(2 * HIDDEN, HIDDEN)

    def forward(self, x, context=None):
        q = self.ln_q(x)
        c = q if self.ln_context is None else self.ln_context(context)
        x = x + self.attn(q, c)
        return x + self.fc2(F.gelu(self.fc1(self.ln_mlp(x))))


class PerceiverIO(nn.Module):
    """Perceiver IO as a token model: learned latents cross-attend to the
    embedded tokens (one block of its own), self-attention blocks process
    the latents, and learned output queries cross-attend to them (another
    block of its own) before the head. The two cross-attention blocks lie
    outside the repeated layers: what tensor parallelism must split too."""
    LATENTS = 4

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.1)
        self.latents = nn.Parameter(torch.randn(self.LATENTS, HIDDEN))
        self.encode = PerceiverBlock(cross=True)
        self.process = nn.ModuleList(PerceiverBlock(cross=False) for _ in range(LAYERS))
        self.queries = nn.Parameter(torch.randn(SEQ, HIDDEN))
        self.decode = PerceiverBlock(cross=True)
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids):
        b = input_ids.shape[0]
        x = self.embed(input_ids) + self.pos
        z = self.encode(self.latents.expand(b, -1, -1), x)
        for block in self.process:
            z = block(z)
        return self.head(self.decode(self.queries.expand(b, -1, -1), z))


# ----------------------------------------------------------------------------
# Qwen3: RMSNorm over each head's channels on the query and the key (one
# weight of head_dim shared by the heads), applied to the [B, S, heads, d]
# view before the heads are transposed.
# ----------------------------------------------------------------------------
class Qwen3Layer(LlamaLikeLayer):
    def __init__(self):
        super().__init__()
        self.q_norm = RMSNorm(HEAD_DIM)
        self.k_norm = RMSNorm(HEAD_DIM)

    def qkv(self, h):
        b, s, _ = h.shape
        q = self.q_norm(self.q_proj(h).view(b, s, -1, HEAD_DIM)).transpose(1, 2)
        k = self.k_norm(self.k_proj(h).view(b, s, -1, HEAD_DIM)).transpose(1, 2)
        return q, k, self.v_proj(h).view(b, s, -1, HEAD_DIM).transpose(1, 2)


class Qwen3(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Qwen3Layer() for _ in range(LAYERS))


# ----------------------------------------------------------------------------
# Phi-3: one fused qkv_proj sliced into q, k and v (grouped key/value
# heads), one fused gate_up_proj halved by chunk.
# ----------------------------------------------------------------------------
class Phi3Layer(LlamaLikeLayer):
    def __init__(self):
        super().__init__()
        del self.q_proj, self.k_proj, self.v_proj, self.gate_proj, self.up_proj
        self.qkv_proj = nn.Linear(HIDDEN, HIDDEN + 2 * self.kv * HEAD_DIM, bias=False)
        self.gate_up_proj = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)

    def qkv(self, h):
        qkv = self.qkv_proj(h)
        kv = self.kv * HEAD_DIM
        q, k, v = qkv[..., :HIDDEN], qkv[..., HIDDEN:HIDDEN + kv], qkv[..., HIDDEN + kv:]
        return split_heads(q, HEADS), split_heads(k, self.kv), split_heads(v, self.kv)

    def mlp(self, h):
        gate, up = self.gate_up_proj(h).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)

    def forward(self, x):
        x = self.attention(x)
        return x + self.mlp(self.post_attention_layernorm(x))


class Phi3(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Phi3Layer() for _ in range(LAYERS))


# ----------------------------------------------------------------------------
# StableLM 2 (the 12B layout): LayerNorms, q/k/v biases, a LayerNorm per
# query and key head (an nn.LayerNorm each in a ModuleList, applied to
# torch.split(x, 1, dim=1) and concatenated), rotary on the first quarter
# of each head.
# ----------------------------------------------------------------------------
class HeadLayerNorms(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(HEAD_DIM) for _ in range(heads))

    def forward(self, x):
        heads = torch.split(x, 1, dim=1)
        return torch.cat([norm(h) for norm, h in zip(self.norms, heads)], dim=1)


class StableLm2Layer(LlamaLikeLayer):
    def __init__(self):
        super().__init__(qkv_bias=True, theta=10000.0)
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.post_attention_layernorm = nn.LayerNorm(HIDDEN)
        self.q_layernorm = HeadLayerNorms(HEADS)
        self.k_layernorm = HeadLayerNorms(self.kv)
        cos, sin = rotary_tables(HEAD_DIM // 4, SEQ)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def attention(self, x):
        h = self.input_layernorm(x)
        s = x.shape[1]
        q, k, v = self.qkv(h)
        q, k = self.q_layernorm(q), self.k_layernorm(k)
        cos, sin = self.cos[:, :, :s], self.sin[:, :, :s]
        q = partial_rotary(q, cos, sin, HEAD_DIM // 4)
        k = partial_rotary(k, cos, sin, HEAD_DIM // 4)
        return x + self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))


class StableLm2(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(StableLm2Layer() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(HIDDEN)


# ----------------------------------------------------------------------------
# Mixtures of experts in place of the MLP (Mixtral's, DeepSeek-V3's,
# Qwen2-MoE's, the Switch Transformer's routing). Mixtral's router's
# softmax picks the top 2 of 4 SwiGLU experts (TopK), their gates are
# renormalised and scattered into a dense [B, S, experts] table
# (ScatterElements), and every expert runs on every token, scaled by its
# gate: the form that exports to a static graph (HF's loop over the tokens
# each expert was given has shapes that depend on the routing).
# ----------------------------------------------------------------------------
class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def top_k_gates(probs, top):
    """Mixtral's gates: the top `top` probabilities renormalised (TopK), in a
    dense [..., experts] table of zeros elsewhere (ScatterElements)."""
    weights, chosen = torch.topk(probs, top, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.zeros_like(probs).scatter(-1, chosen, weights)


class SparseMoE(nn.Module):
    def __init__(self, experts=4, top=2):
        super().__init__()
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(experts))
        self.top = top

    def forward(self, x):
        gates = top_k_gates(torch.softmax(self.gate(x), dim=-1), self.top)
        out = 0
        for e, expert in enumerate(self.experts):
            out = out + expert(x) * gates[..., e:e + 1]
        return out


class DeepSeekMoE(nn.Module):
    """DeepSeek-V3's routing: sigmoid scores, a selection bias added only to
    pick the top 2 (a buffer, not trained), the gates gathered from the
    unbiased scores (GatherElements on the picked indices), renormalised and
    scaled; a shared expert always on."""

    def __init__(self, experts=4, top=2, scale=2.5):
        super().__init__()
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.register_buffer("e_score_correction_bias", torch.randn(experts) * 0.1)
        self.experts = nn.ModuleList(Expert() for _ in range(experts))
        self.shared_experts = Expert()
        self.top, self.scale = top, scale

    def forward(self, x):
        scores = torch.sigmoid(self.gate(x))
        _, chosen = torch.topk(scores + self.e_score_correction_bias, self.top, dim=-1)
        weights = scores.gather(-1, chosen)
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20) * self.scale
        gates = torch.zeros_like(scores).scatter(-1, chosen, weights)
        out = self.shared_experts(x)
        for e, expert in enumerate(self.experts):
            out = out + expert(x) * gates[..., e:e + 1]
        return out


class QwenMoE(nn.Module):
    """Qwen2-MoE's: softmax top 2 not renormalised, the gates spread by a
    one-hot of the picks (OneHot), a shared expert scaled by the sigmoid of
    its one-output gate."""

    def __init__(self, experts=4, top=2):
        super().__init__()
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(experts))
        self.shared_expert = Expert()
        self.shared_expert_gate = nn.Linear(HIDDEN, 1, bias=False)
        self.top = top

    def forward(self, x):
        probs = torch.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(probs, self.top, dim=-1)
        picked = F.one_hot(chosen, len(self.experts)).to(x.dtype)  # [B, S, top, experts]
        gates = (picked * weights[..., None]).sum(-2)
        out = torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        for e, expert in enumerate(self.experts):
            out = out + expert(x) * gates[..., e:e + 1]
        return out


class SwitchMoE(nn.Module):
    """The Switch Transformer's top-1 routing: the argmax expert, scaled by
    its probability (a mask and the gate, two scalings)."""

    def __init__(self, experts=4):
        super().__init__()
        self.router = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = nn.ModuleList(Expert() for _ in range(experts))

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        top = probs.argmax(-1, keepdim=True)
        gate = probs.max(-1, keepdim=True).values
        out = 0
        for e, expert in enumerate(self.experts):
            out = out + expert(x) * (top == e).to(x.dtype) * gate
        return out


class StackedMoE(nn.Module):
    """Mixtral's routing with the experts' weights stacked in 3-D parameters
    [experts, ...] and applied to every token by einsum (as JAX ports and
    grouped-GEMM code hold them): "bsd,edf->bsef" contracts a dim between
    the experts and the features, no linear, until mp-raise unstacks it."""

    def __init__(self, experts=4, top=2):
        super().__init__()
        self.gate = nn.Linear(HIDDEN, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, HIDDEN, HIDDEN) * HIDDEN ** -0.5)
        self.w3 = nn.Parameter(torch.randn(experts, HIDDEN, HIDDEN) * HIDDEN ** -0.5)
        self.w2 = nn.Parameter(torch.randn(experts, HIDDEN, HIDDEN) * HIDDEN ** -0.5)
        self.top = top

    def forward(self, x):
        gates = top_k_gates(torch.softmax(self.gate(x), dim=-1), self.top)
        h = F.silu(torch.einsum("bsd,edf->bsef", x, self.w1)) * torch.einsum("bsd,edf->bsef", x, self.w3)
        y = torch.einsum("bsef,efd->bsed", h, self.w2)
        return torch.einsum("bsed,bse->bsd", y, gates)


class GptOssExperts(nn.Module):
    """GPT-OSS's experts as HF runs them in inference: the tokens flattened
    and repeated once per expert, a batched matmul (bmm) against stacked
    [experts, d, 2f] gate/up weights with a bias, gate and up interleaved
    (strided slices ::2 and 1::2), clamped, a sigmoid GLU, (up + 1) * glu,
    the stacked down projection with its bias, scaled by the dense
    [tokens, experts] gate table and summed over the experts."""

    def __init__(self, experts=4):
        super().__init__()
        f = HIDDEN
        self.gate_up_proj = nn.Parameter(torch.randn(experts, HIDDEN, 2 * f) * HIDDEN ** -0.5)
        self.gate_up_proj_bias = nn.Parameter(torch.randn(experts, 2 * f) * 0.1)
        self.down_proj = nn.Parameter(torch.randn(experts, f, HIDDEN) * f ** -0.5)
        self.down_proj_bias = nn.Parameter(torch.randn(experts, HIDDEN) * 0.1)
        self.alpha, self.limit = 1.702, 7.0

    def forward(self, x, gates):
        b = x.shape[0]
        e = gates.shape[1]
        x = x.reshape(-1, HIDDEN).repeat(e, 1).view(e, -1, HIDDEN)
        gate_up = torch.bmm(x, self.gate_up_proj) + self.gate_up_proj_bias[..., None, :]
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        y = torch.bmm((up + 1) * glu, self.down_proj) + self.down_proj_bias[..., None, :]
        y = y.view(e, b, -1, HIDDEN) * gates.transpose(0, 1).view(e, b, -1)[..., None]
        return y.sum(dim=0)


class GptOssMoE(nn.Module):
    """GPT-OSS's router (a linear with a bias over the flattened tokens, the
    top 2 logits softmaxed and scattered into a [tokens, experts] table)."""

    def __init__(self, experts=4, top=2):
        super().__init__()
        self.router = nn.Linear(HIDDEN, experts)
        self.experts = GptOssExperts(experts)
        self.top = top

    def forward(self, x):
        logits = self.router(x.reshape(-1, HIDDEN))
        value, chosen = torch.topk(logits, self.top, dim=-1)
        gates = torch.zeros_like(logits).scatter(1, chosen, torch.softmax(value, dim=1))
        return self.experts(x, gates)


class Llama4Experts(nn.Module):
    """Llama 4's experts: stacked gate/up [experts, d, 2f] applied by bmm to
    the tokens viewed as [experts, tokens, d], halved by chunk, and a
    stacked down projection; the outputs flattened back to [experts *
    tokens, d]."""

    def __init__(self, experts=4):
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.randn(experts, HIDDEN, 2 * HIDDEN) * HIDDEN ** -0.5)
        self.down_proj = nn.Parameter(torch.randn(experts, HIDDEN, HIDDEN) * HIDDEN ** -0.5)

    def forward(self, x):
        x = x.view(self.gate_up_proj.shape[0], -1, HIDDEN)
        gate, up = torch.bmm(x, self.gate_up_proj).chunk(2, dim=-1)
        return torch.bmm(up * F.silu(gate), self.down_proj).view(-1, HIDDEN)


class Llama4MoE(nn.Module):
    """Llama 4's routing: the top 1 router logit kept, the others -inf,
    a sigmoid of that (a dense [tokens, experts] table); the gates scale
    each expert's copy of the tokens before the experts (not their
    outputs), the experts' outputs summed over the experts, plus a shared
    expert."""

    def __init__(self, experts=4, top=1):
        super().__init__()
        self.router = nn.Linear(HIDDEN, experts, bias=False)
        self.experts = Llama4Experts(experts)
        self.shared_expert = Expert()
        self.top = top

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, HIDDEN)
        logits = self.router(x)
        value, chosen = torch.topk(logits, self.top, dim=1)
        scores = torch.full_like(logits, float("-inf")).scatter(1, chosen, value)
        scores = torch.sigmoid(scores).transpose(0, 1)  # [experts, tokens]
        routed = x.repeat(scores.shape[0], 1) * scores.reshape(-1, 1)
        out = self.experts(routed).view(scores.shape[0], -1, HIDDEN).sum(dim=0)
        return (self.shared_expert(x) + out).view(shape)


class MoELayer(LlamaLikeLayer):
    def __init__(self, moe):
        super().__init__()
        del self.gate_proj, self.up_proj, self.down_proj
        self.moe = moe()

    def forward(self, x):
        x = self.attention(x)
        return x + self.moe(self.post_attention_layernorm(x))


class MoEModel(LlamaLike):
    def __init__(self, moe):
        super().__init__()
        self.layers = nn.ModuleList(MoELayer(moe) for _ in range(LAYERS))


class Llama4Layer(LlamaLikeLayer):
    """Llama 4: rotary, then a weightless RMS norm (L2 norm) of each query
    and key head; the MoE above in place of the MLP."""

    def __init__(self):
        super().__init__(theta=500000.0)
        del self.gate_proj, self.up_proj, self.down_proj
        self.feed_forward = Llama4MoE()

    def attention(self, x):
        q, k, v, s = self.rotated_qkv(x)
        q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x + self.o_proj(merge_heads(attend(q, k, v, self.mask[:s, :s], "masked_fill")))

    def forward(self, x):
        x = self.attention(x)
        return x + self.feed_forward(self.post_attention_layernorm(x))


class Llama4(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Llama4Layer() for _ in range(LAYERS))


class GptOssLayer(LlamaLikeLayer):
    """GPT-OSS: q/k/v/o with biases, grouped-query attention written out
    (HF's eager path) with a learned sink logit per head concatenated to the
    scores, softmaxed with them and dropped; a sliding window on every other
    layer; the MoE above."""

    def __init__(self, window):
        super().__init__(qkv_bias=True, window=window, theta=150000.0)
        del self.gate_proj, self.up_proj, self.down_proj
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=True)
        self.sinks = nn.Parameter(torch.randn(HEADS) * 0.5)
        self.mlp = GptOssMoE()

    def forward(self, x):
        q, k, v, s = self.rotated_qkv(x)
        b, kv, _, d = k.shape
        k = k[:, :, None].expand(b, kv, HEADS // kv, s, d).reshape(b, HEADS, s, d)
        v = v[:, :, None].expand(b, kv, HEADS // kv, s, d).reshape(b, HEADS, s, d)
        scores = torch.matmul(q, k.transpose(2, 3)) * d ** -0.5
        scores = scores.masked_fill(self.mask[:s, :s], float("-inf"))
        sinks = self.sinks.reshape(1, -1, 1, 1).expand(b, -1, s, -1)
        combined = torch.cat([scores, sinks], dim=-1)
        combined = combined - combined.max(dim=-1, keepdim=True).values
        probs = torch.softmax(combined, dim=-1)[..., :-1]
        x = x + self.o_proj(merge_heads(torch.matmul(probs, v)))
        return x + self.mlp(self.post_attention_layernorm(x)).view(x.shape)


class GptOss(LlamaLike):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(GptOssLayer(window=3 if i % 2 == 0 else None)
                                    for i in range(LAYERS))


# ----------------------------------------------------------------------------
# export
# ----------------------------------------------------------------------------
# name: (constructor, seed, dynamic batch/sequence axes); models with more
# inputs than input_ids, and outputs other than logits, are in EXTRA_INPUTS
# and OUTPUTS.
MODELS = {
    "gpt_neox": (NeoX, 2001, True),
    "gptj": (GPTJ, 2002, False),
    "opt": (OPT, 2003, False),
    "qwen2": (lambda: LlamaLike(qkv_bias=True), 2004, False),
    "mistral": (lambda: LlamaLike(window=3), 2005, True),
    "phi2": (Phi, 2006, False),
    "gemma": (Gemma, 2007, False),
    "gemma_mqa": (lambda: Gemma(kv=1), 2010, False),
    "bert_pooler": (BertEncoder, 2008, True),
    "t5": (T5, 2009, False),
    "falcon": (Falcon, 2011, False),
    "bloom": (Bloom, 2012, False),
    "gemma2": (Gemma2, 2013, False),
    "t5_relative": (T5Relative, 2014, False),
    "roberta": (Roberta, 2015, True),
    "olmo2": (Olmo2, 2016, False),
    "vit": (ViT, 2017, False),
    "clip_text": (CLIPText, 2018, False),
    "baichuan": (Baichuan, 2019, False),
    "deepseek_mla": (DeepSeekMLA, 2020, False),
    "deberta": (Deberta, 2021, False),
    "bart": (Bart, 2022, True),
    "opt_merged": (OPTMerged, 2023, True),
    "bloom_merged": (BloomMerged, 2024, True),
    "gpt_bigcode": (BigCode, 2025, True),
    "chatglm": (ChatGLM, 2026, False),
    "deberta_v2": (DebertaV2, 2029, False),
    "gpt_lecture": (LectureGPT, 2030, False),
    "torch_encoder": (TorchEncoderLM, 2031, False),
    "albert": (AlbertLM, 2032, False),
    "perceiver": (PerceiverIO, 2033, False),
    "qwen3": (Qwen3, 2034, False),
    "phi3": (Phi3, 2035, False),
    "mixtral": (lambda: MoEModel(SparseMoE), 2036, True),
    "deepseek_moe": (lambda: MoEModel(DeepSeekMoE), 2037, False),
    "qwen_moe": (lambda: MoEModel(QwenMoE), 2038, False),
    "switch_moe": (lambda: MoEModel(SwitchMoE), 2039, False),
    "stacked_moe": (lambda: MoEModel(StackedMoE), 2040, False),
    "gpt_oss": (GptOss, 2041, False),
    "llama4": (Llama4, 2042, False),
    "stablelm2": (StableLm2, 2043, False),
}
# Models whose input_ids are made to carry what they exercise (padding).
INPUT_IDS = {"roberta": roberta_ids, "clip_text": clip_ids}
# Models with a PyTorch train-step reference (train/): the labels, the
# loss and every parameter's gradient.
TRAIN_REFERENCE = {"bloom", "gemma2", "t5_relative", "olmo2", "deepseek_mla", "deberta",
                   "bart", "bloom_merged", "gpt_bigcode", "chatglm", "deberta_v2",
                   "gpt_lecture", "torch_encoder", "albert", "perceiver", "qwen3", "phi3",
                   "mixtral", "deepseek_moe", "qwen_moe", "switch_moe", "stacked_moe", "gpt_oss",
                   "llama4", "stablelm2"}
EXTRA_INPUTS = {"bert_pooler": bert_inputs, "t5": t5_inputs, "deberta": padding_mask,
                "bart": bart_inputs, "opt_merged": padding_mask, "bloom_merged": padding_mask,
                "gpt_bigcode": padding_mask, "deberta_v2": padding_mask}
# Models whose input is not token ids: name -> (input name, its tensor).
PIXEL_INPUTS = {"vit": lambda g: torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)}
OUTPUTS = {"bert_pooler": ["last_hidden_state", "pooler_output"],
           "roberta": ["last_hidden_state"], "clip_text": ["text_embeds"]}


def generate(name, out_root):
    build, seed, dynamic = MODELS[name]
    torch.manual_seed(seed)
    model = build().eval()
    with torch.no_grad():  # away from the initial ones and zeros (trained-like)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed + 7))
    ids = INPUT_IDS.get(name, lambda x: x)(ids)
    inputs = {"input_ids": ids, **EXTRA_INPUTS.get(name, lambda _: {})(ids)}
    if name in PIXEL_INPUTS:
        inputs = {"pixels": PIXEL_INPUTS[name](torch.Generator().manual_seed(seed + 7))}
    outputs = OUTPUTS.get(name, ["logits"])
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "outputs"))
    axes = {n: {0: "batch", 1: "sequence"} for n in list(inputs) + outputs}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = model(*inputs.values())
        results = results if isinstance(results, tuple) else (results,)
        torch.onnx.export(model, tuple(inputs.values()), os.path.join(d, "model.onnx"),
                          opset_version=OPSET, input_names=list(inputs), output_names=outputs,
                          dynamic_axes=axes if dynamic else None)
    for n, value in inputs.items():
        np.save(os.path.join(d, "inputs", n + ".npy"), value.numpy())
    for n, value in zip(outputs, results):
        np.save(os.path.join(d, "outputs", n + ".npy"), value.numpy().astype(np.float32))
    if name in TRAIN_REFERENCE:
        write_train_reference(model, inputs, os.path.join(d, "train"), seed)
        write_folded_grads(model, os.path.join(d, "model.onnx"), os.path.join(d, "train"))
    print("wrote", d)


def write_train_reference(model, inputs, d, seed):
    """train/labels.npy (one label -100, ignored), train/loss.npy (token mean
    cross-entropy, as mp --mp-train's) and train/grads/NAME.npy for every
    parameter; a matrix also as NAME.T.npy, transposed, the name mp gives
    the transposed copy the exporter's constant folding stores."""
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed + 13))
    labels[0, 0] = -100
    logits = model(*inputs.values())
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    os.makedirs(os.path.join(d, "grads"))
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    np.save(os.path.join(d, "loss.npy"), loss.detach().numpy().astype(np.float32))
    for n, p in model.named_parameters():
        np.save(os.path.join(d, "grads", n + ".npy"), p.grad.numpy())
        if p.dim() == 2:
            np.save(os.path.join(d, "grads", n + ".T.npy"), p.grad.t().contiguous().numpy())
    # A buffer in the state dict is an initializer to mp, trained like a
    # parameter: one that reaches the loss only through comparisons (a
    # router's selection bias) has a zero gradient.
    state = model.state_dict()
    for n, b in model.named_buffers():
        if n in state and b.is_floating_point():
            np.save(os.path.join(d, "grads", n + ".npy"), np.zeros_like(b.numpy()))


def write_folded_grads(model, onnx_path, d):
    """train/grads/onnx__NAME.npy for an initializer the exporter folded
    from a view of one parameter (GPT-OSS's expert biases unsqueezed,
    `onnx::Add_N`, its sinks reshaped, `onnx::Expand_N`): that parameter's
    gradient in the initializer's shape, under the name mp gives it. Matched
    by value; an initializer that matches no parameter, or several, gets
    none."""
    import onnx
    from onnx import numpy_helper
    params = [(n, p.detach().numpy()) for n, p in model.named_parameters()]
    grads = dict(model.named_parameters())
    for init in onnx.load(onnx_path).graph.initializer:
        if not init.name.startswith("onnx::"):
            continue
        value = numpy_helper.to_array(init)
        matches = [n for n, p in params
                   if p.size == value.size and np.array_equal(p.reshape(value.shape), value)]
        if len(matches) == 1:
            grad = grads[matches[0]].grad.numpy().reshape(value.shape)
            np.save(os.path.join(d, "grads", init.name.replace("::", "__") + ".npy"), grad)


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
