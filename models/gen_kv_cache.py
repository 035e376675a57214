#!/usr/bin/python3
"""Decoders exported for generation with a key/value cache (HF's
use_cache=True, the form inference deployments export): besides the
tokens, each layer's cached keys and values from earlier steps come in
(past_key_values.N.key/value [B, kv heads, P, head dim]) and this step's,
appended to them, go out (present.N.key/value). Tensor parallelism must
split the cache by heads, as Megatron's inference keeps each rank's heads'
cache, rather than leave the attention whole.

For every model NAME this writes models/kv_cache/NAME/:
  model.onnx         opset 17, static shapes
  inputs/NAME.npy    input_ids, the past keys and values (and
                     attention_mask where the model takes one)
  outputs/NAME.npy   logits and the present keys and values, from
                     PyTorch's fp32 forward

  llama_decode   Llama: one new token after 5 cached (S=1), GQA with 2
                 key/value heads for 4 query heads, rotary at the offset
                 of the cache, RMSNorm, SwiGLU, untied head
  gpt2_prefill   GPT-2: 4 new tokens after 5 cached, fused c_attn split
                 into q/k/v, learned positions from the cache's length,
                 an attention_mask input [B, P+S] with left padding in
                 the second row (HF's additive finfo.min mask) and the
                 causal mask sliced from a stored table, tanh GELU, tied
                 head
  falcon_mqa     Falcon-7B style multi-query attention: one key/value
                 head in a fused QKV, parallel attention and MLP from one
                 LayerNorm, one new token after 5 cached
  llama_merged   llama_decode as Optimum merges it (decoder_model_merged):
                 the first step and the cached steps in one graph, an If
                 on the input use_cache_branch choosing; dynamic axes

Usage: /usr/bin/python3 models/gen_kv_cache.py [--model NAME|all]
"""
import argparse
import math
import os
import shutil
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import helper

import gen_zoo as zoo

OPSET = 17
BATCH, PAST, VOCAB, HIDDEN, HEADS, LAYERS = 2, 5, 64, 32, 4, 2
HEAD_DIM = HIDDEN // HEADS


def softmax_attention(q, k, v, additive):
    """q [B, h, S, d] over k, v [B, kv, P+S, d], kv heads repeated (HF's
    repeat_kv), `additive` added to the scaled scores."""
    if k.shape[1] != q.shape[1]:
        b, kv, s, d = k.shape
        rep = q.shape[1] // kv
        k = k[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)
        v = v[:, :, None].expand(b, kv, rep, s, d).reshape(b, kv * rep, s, d)
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(scores + additive, dim=-1), v)


def causal_additive(seq, past):
    """0 where query i (at position past + i) may see key j, else -inf."""
    i = torch.arange(seq)[:, None] + past
    j = torch.arange(past + seq)[None, :]
    return torch.zeros(seq, past + seq).masked_fill(j > i, float("-inf"))


def rotary_cached_attention(layer, q, k, v, past_k, past_v):
    """Rotary (from the layer's cos/sin tables, at the cache's offset) on
    this step's q and k, k and v appended to the cache, causal attention;
    the attention and the present keys and values."""
    s, p = q.shape[2], 0 if past_k is None else past_k.shape[2]
    cos, sin = layer.cos[:, :, p:p + s], layer.sin[:, :, p:p + s]
    q = q * cos + zoo.rotate_half(q) * sin
    k = k * cos + zoo.rotate_half(k) * sin
    if past_k is not None:  # (None: the first step, no cache yet)
        k = torch.cat((past_k, k), dim=2)
        v = torch.cat((past_v, v), dim=2)
    return softmax_attention(q, k, v, causal_additive(s, p)), k, v


def through_layers(layers, x, past, *extra):
    """x through each layer with its cached keys and values (past[2i],
    past[2i + 1]); the final x and every layer's present keys and values."""
    present = []
    for i, layer in enumerate(layers):
        x, k, v = layer(x, past[2 * i], past[2 * i + 1], *extra)
        present += [k, v]
    return x, present


class LlamaLayer(nn.Module):
    KV = 2

    def __init__(self, seq):
        super().__init__()
        self.input_layernorm = zoo.RMSNorm(HIDDEN)
        self.post_attention_layernorm = zoo.RMSNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k_proj = nn.Linear(HIDDEN, self.KV * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, self.KV * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gate_proj = nn.Linear(HIDDEN, 64, bias=False)
        self.up_proj = nn.Linear(HIDDEN, 64, bias=False)
        self.down_proj = nn.Linear(64, HIDDEN, bias=False)
        cos, sin = zoo.rotary_tables(HEAD_DIM, PAST + seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, past_k, past_v):
        h = self.input_layernorm(x)
        q = zoo.split_heads(self.q_proj(h), HEADS)
        k = zoo.split_heads(self.k_proj(h), self.KV)
        v = zoo.split_heads(self.v_proj(h), self.KV)
        a, k, v = rotary_cached_attention(self, q, k, v, past_k, past_v)
        x = x + self.o_proj(zoo.merge_heads(a))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h)), k, v


class LlamaDecode(nn.Module):
    SEQ = 1

    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(LlamaLayer(self.SEQ) for _ in range(LAYERS))
        self.norm = zoo.RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids, *past):
        x, present = through_layers(self.layers, self.embed_tokens(ids), past)
        return (self.lm_head(self.norm(x)), *present)


class GPT2Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(HIDDEN)
        self.ln_2 = nn.LayerNorm(HIDDEN)
        self.c_attn = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.c_proj = nn.Linear(HIDDEN, HIDDEN)
        self.c_fc = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.mlp_proj = nn.Linear(4 * HIDDEN, HIDDEN)
        n = 16
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool))[None, None],
                             persistent=False)

    def forward(self, x, past_k, past_v, padding):
        s, p = x.shape[1], past_k.shape[2]
        q, k, v = self.c_attn(self.ln_1(x)).split(HIDDEN, dim=2)
        q, k, v = (zoo.split_heads(t, HEADS) for t in (q, k, v))
        k = torch.cat((past_k, k), dim=-2)
        v = torch.cat((past_v, v), dim=-2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        causal = self.bias[:, :, p:p + s, :p + s]
        scores = torch.where(causal, scores, torch.tensor(torch.finfo(torch.float32).min))
        a = torch.matmul(torch.softmax(scores + padding, dim=-1), v)
        x = x + self.c_proj(zoo.merge_heads(a))
        return x + self.mlp_proj(zoo.gelu_tanh(self.c_fc(self.ln_2(x)))), k, v


class GPT2Prefill(nn.Module):
    SEQ = 4

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(16, HIDDEN)
        self.h = nn.ModuleList(GPT2Layer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, ids, attention_mask, *past):
        p = past[0].shape[2]
        positions = torch.arange(p, p + ids.shape[1])[None]
        x = self.wte(ids) + self.wpe(positions)
        padding = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x, present = through_layers(self.h, x, past, padding)
        return (F.linear(self.ln_f(x), self.wte.weight), *present)


class FalconLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(HIDDEN)
        self.query_key_value = nn.Linear(HIDDEN, HIDDEN + 2 * HEAD_DIM, bias=False)
        self.dense = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.dense_h_to_4h = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.dense_4h_to_h = nn.Linear(4 * HIDDEN, HIDDEN, bias=False)
        cos, sin = zoo.rotary_tables(HEAD_DIM, PAST + 1)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        qkv = self.query_key_value(h).view(b, s, HEADS + 2, HEAD_DIM)
        q = qkv[:, :, :-2].transpose(1, 2)
        k = qkv[:, :, -2:-1].transpose(1, 2)
        v = qkv[:, :, -1:].transpose(1, 2)
        a, k, v = rotary_cached_attention(self, q, k, v, past_k, past_v)
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(h)))
        return x + self.dense(zoo.merge_heads(a)) + mlp, k, v


class FalconMQA(nn.Module):
    SEQ = 1

    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.h = nn.ModuleList(FalconLayer() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids, *past):
        x, present = through_layers(self.h, self.word_embeddings(ids), past)
        return (self.lm_head(self.ln_f(x)), *present)


# name -> (model class, seed, key/value heads, takes attention_mask)
MODELS = {
    "llama_decode": (LlamaDecode, 3001, LlamaLayer.KV, False),
    "gpt2_prefill": (GPT2Prefill, 3002, HEADS, True),
    "falcon_mqa": (FalconMQA, 3003, 1, False),
}


def generate(name, out_root):
    build, seed, kv, masked = MODELS[name]
    torch.manual_seed(seed)
    model = build().eval()
    with torch.no_grad():  # away from the initial ones and zeros (trained-like)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    g = torch.Generator().manual_seed(seed + 7)
    seq = build.SEQ
    inputs = {"input_ids": torch.randint(0, VOCAB, (BATCH, seq), generator=g)}
    if masked:
        mask = torch.ones(BATCH, PAST + seq, dtype=torch.int64)
        mask[1, :2] = 0  # the second sequence is left-padded by 2
        inputs["attention_mask"] = mask
    for i in range(LAYERS):
        for part in ("key", "value"):
            inputs[f"past_key_values.{i}.{part}"] = torch.randn(BATCH, kv, PAST, HEAD_DIM, generator=g)
    outputs = ["logits"] + [f"present.{i}.{part}" for i in range(LAYERS) for part in ("key", "value")]
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "outputs"))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = model(*inputs.values())
        torch.onnx.export(model, tuple(inputs.values()), os.path.join(d, "model.onnx"),
                          opset_version=OPSET, input_names=list(inputs), output_names=outputs)
    for n, value in inputs.items():
        np.save(os.path.join(d, "inputs", n + ".npy"), value.numpy())
    for n, value in zip(outputs, results):
        np.save(os.path.join(d, "outputs", n + ".npy"), value.numpy())
    print("wrote", d)


class FirstStep(nn.Module):
    """A decoder's first step: no cache in, this step's keys and values out."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, ids):
        return self.decoder(ids, *([None] * (2 * LAYERS)))


def as_branch(model, prefix, outer_initializers=None):
    """`model`'s graph as an If branch: its inputs read from the outer
    scope, every other name prefixed (names are unique across a model's
    graphs), its initializers kept in the branch or moved to
    `outer_initializers`."""
    g = model.graph
    outer = {i.name for i in g.input}

    def rename(name):
        return name if name in outer or not name else prefix + name

    branch = onnx.GraphProto(name=prefix + "branch")
    for init in g.initializer:
        moved = onnx.TensorProto()
        moved.CopyFrom(init)
        moved.name = rename(init.name)
        (branch.initializer if outer_initializers is None else outer_initializers).append(moved)
    for node in g.node:
        n = onnx.NodeProto()
        n.CopyFrom(node)
        n.name = prefix + node.name
        n.input[:] = [rename(x) for x in node.input]
        n.output[:] = [rename(x) for x in node.output]
        branch.node.append(n)
    for out in g.output:
        info = onnx.ValueInfoProto()
        info.CopyFrom(out)
        info.name = rename(out.name)
        branch.output.append(info)
    return branch


def write_merged(out_root):
    """llama_merged/: Optimum's decoder_model_merged.onnx form of
    llama_decode (the same weights): one graph holding the first step and
    the steps with a cache, chosen by an If on the bool input
    use_cache_branch [1], with dynamic batch, sequence and past axes. The
    cache branch's initializers are the outer graph's, the first step's
    its own. inputs/, outputs/: the cache branch (llama_decode's data);
    first/inputs, first/outputs: the first step on 4 tokens."""
    build, seed, _, _ = MODELS["llama_decode"]
    torch.manual_seed(seed)
    decoder = build().eval()
    with torch.no_grad():  # as generate() perturbs them
        for p in decoder.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    d = os.path.join(out_root, "llama_merged")
    shutil.rmtree(d, ignore_errors=True)
    cached = os.path.join(out_root, "llama_decode")
    shutil.copytree(os.path.join(cached, "inputs"), os.path.join(d, "inputs"))
    shutil.copytree(os.path.join(cached, "outputs"), os.path.join(d, "outputs"))
    ids = torch.randint(0, VOCAB, (BATCH, 4), generator=torch.Generator().manual_seed(seed + 11))
    outputs = ["logits"] + [f"present.{i}.{part}" for i in range(LAYERS) for part in ("key", "value")]
    first = os.path.join(d, "first")
    os.makedirs(os.path.join(first, "inputs"))
    os.makedirs(os.path.join(first, "outputs"))
    path = os.path.join(d, "first.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = FirstStep(decoder)(ids)
        torch.onnx.export(FirstStep(decoder), (ids,), path, opset_version=OPSET,
                          input_names=["input_ids"], output_names=outputs)
    np.save(os.path.join(first, "inputs", "input_ids.npy"), ids.numpy())
    for n, value in zip(outputs, results):
        np.save(os.path.join(first, "outputs", n + ".npy"), value.numpy())
    first_model = onnx.load(path)
    os.remove(path)
    cache_model = onnx.load(os.path.join(cached, "model.onnx"))
    outer_inits = []
    with_cache = as_branch(cache_model, "with_past/", outer_inits)
    without = as_branch(first_model, "first/")
    kv = LlamaLayer.KV
    inputs = [helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch", "sequence"])]
    inputs += [helper.make_tensor_value_info(f"past_key_values.{i}.{part}", onnx.TensorProto.FLOAT,
                                             ["batch", kv, "past", HEAD_DIM])
               for i in range(LAYERS) for part in ("key", "value")]
    inputs.append(helper.make_tensor_value_info("use_cache_branch", onnx.TensorProto.BOOL, [1]))
    outs = [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["batch", "sequence", VOCAB])]
    outs += [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, ["batch", kv, "total", HEAD_DIM])
             for n in outputs[1:]]
    branch = helper.make_node("If", ["use_cache_branch"], outputs, name="optimum::if",
                              then_branch=with_cache, else_branch=without)
    graph = helper.make_graph([branch], "merged", inputs, outs, initializer=outer_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="gen_kv_cache.py")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(d, "model.onnx"))
    print("wrote", d)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "kv_cache"))
    parser.add_argument("--model", default="all", choices=["all"] + sorted(MODELS))
    args = parser.parse_args()
    for name in sorted(MODELS) if args.model == "all" else [args.model]:
        generate(name, args.out)
    if args.model in ("all", "llama_decode"):
        write_merged(args.out)


if __name__ == "__main__":
    main()
