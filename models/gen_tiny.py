#!/usr/bin/python3
"""Generate tiny deterministic transformer models + reference data for mp tests.

For every model <name> this writes models/<name>/:
  model.onnx                 opset 17, static shapes, batch 2, seq 8
  config.json                hyper-parameters
  inputs/input_ids.npy       int64 [2, 8]
  outputs/logits.npy         float32 [2, 8, vocab]  (PyTorch fp32 forward)
  targets.npy                int64 [2, 8]
  loss.npy                   float32 scalar: mean cross-entropy(logits, targets)
  grads/<init_name>.npy      float32 d(loss)/d(param), keyed by ONNX initializer name

Rule enforced below: the set of float ONNX initializers equals the set of torch
parameter names, and every initializer has the same shape/values as the torch
parameter.  To keep it that way no nn.Linear is used (the exporter would fold
W^T into a renamed initializer); weights are stored [in, out] and applied with
torch.matmul, and export runs with do_constant_folding=False (folding would also
turn the rotary-embedding chain and the tied head's Transpose into new float
initializers).

Usage: /usr/bin/python3 models/gen_tiny.py [--out DIR] [--model NAME|all]
"""
import argparse
import json
import math
import os
import shutil
import sys
import warnings
from collections import Counter

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep models/ free of __pycache__
import onnx_np_eval  # noqa: E402  (tiny numpy ONNX interpreter, used to re-check outputs)

OPSET = 17
BATCH = 2
SEQ = 8


# ----------------------------------------------------------------------------
# building blocks
# ----------------------------------------------------------------------------
class Conv1D(nn.Module):
    """y = x @ W + b with W stored [in, out] (HF GPT-2 Conv1D layout)."""

    def __init__(self, nin, nout, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nin, nout) * 0.2)
        if bias:
            self.bias = nn.Parameter(torch.randn(nout) * 0.1)
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        y = torch.matmul(x, self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y


def layer_norm(n, eps=1e-5):
    ln = nn.LayerNorm(n, eps=eps)
    with torch.no_grad():  # non-trivial affine params so gradients are meaningful
        ln.weight.copy_(1.0 + 0.1 * torch.randn(n))
        ln.bias.copy_(0.1 * torch.randn(n))
    return ln


class ManualLayerNorm(nn.Module):
    """LayerNorm written out: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add."""

    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(n))
        self.bias = nn.Parameter(0.1 * torch.randn(n))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        xc = x - mean
        var = xc.pow(2).mean(-1, keepdim=True)
        return xc / torch.sqrt(var + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(n))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def embedding(num, dim):
    e = nn.Embedding(num, dim)
    with torch.no_grad():
        e.weight.copy_(torch.randn(num, dim) * 0.5)
    return e


# ----------------------------------------------------------------------------
# GPT-2
# ----------------------------------------------------------------------------
class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.c_attn = Conv1D(hidden, 3 * hidden)
        self.c_proj = Conv1D(hidden, hidden)

    def forward(self, x):
        B, S, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, S, self.h, self.d).transpose(1, 2)  # [B,H,S,D]
        k = k.view(B, S, self.h, self.d).transpose(1, 2)
        v = v.view(B, S, self.h, self.d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        mask = torch.tril(torch.ones(S, S, device=scores.device)).bool()
        scores = torch.where(mask, scores,
                             torch.tensor(-1e9, dtype=scores.dtype, device=scores.device))
        p = torch.softmax(scores, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, S, C)
        return self.c_proj(o)


class GPT2MLP(nn.Module):
    def __init__(self, hidden, ffn, act):
        super().__init__()
        self.c_fc = Conv1D(hidden, ffn)
        self.c_proj = Conv1D(ffn, hidden)
        self.act = act

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, act, manual_ln1=False):
        super().__init__()
        self.ln_1 = ManualLayerNorm(hidden) if manual_ln1 else layer_norm(hidden)
        self.attn = GPT2Attention(hidden, heads)
        self.ln_2 = layer_norm(hidden)
        self.mlp = GPT2MLP(hidden, 4 * hidden, act)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    def __init__(self, cfg, tied=True):
        super().__init__()
        H = cfg["hidden"]
        act = gelu_erf if cfg["activation"] == "gelu_erf" else gelu_tanh
        self.wte = embedding(cfg["vocab"], H)
        self.wpe = embedding(cfg["max_positions"], H)
        self.h = nn.ModuleList(
            [GPT2Block(H, cfg["heads"], act, manual_ln1=(i == 0 and cfg.get("manual_ln1", False)))
             for i in range(cfg["layers"])])
        self.ln_f = layer_norm(H)
        self.tied = tied
        if not tied:
            self.lm_head = Conv1D(H, cfg["vocab"], bias=False)

    def forward(self, input_ids):
        S = input_ids.shape[1]
        pos = torch.arange(S, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        x = self.ln_f(x)
        if self.tied:
            return torch.matmul(x, self.wte.weight.t())
        return self.lm_head(x)


# ----------------------------------------------------------------------------
# BERT (post-norm, bidirectional)
# ----------------------------------------------------------------------------
class BertEmbeddings(nn.Module):
    def __init__(self, vocab, pos, hidden):
        super().__init__()
        self.word_embeddings = embedding(vocab, hidden)
        self.position_embeddings = embedding(pos, hidden)
        self.LayerNorm = layer_norm(hidden, eps=1e-12)

    def forward(self, input_ids):
        S = input_ids.shape[1]
        pos = torch.arange(S, dtype=torch.long)
        return self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(pos))


class BertSelfOutput(nn.Module):
    def __init__(self, nin, hidden):
        super().__init__()
        self.dense = Conv1D(nin, hidden)
        self.LayerNorm = layer_norm(hidden, eps=1e-12)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class BertAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.h, self.d = heads, hidden // heads
        self.query = Conv1D(hidden, hidden)
        self.key = Conv1D(hidden, hidden)
        self.value = Conv1D(hidden, hidden)
        self.output = BertSelfOutput(hidden, hidden)

    def forward(self, x):
        B, S, C = x.shape
        q = self.query(x).view(B, S, self.h, self.d).transpose(1, 2)
        k = self.key(x).view(B, S, self.h, self.d).transpose(1, 2)
        v = self.value(x).view(B, S, self.h, self.d).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v).transpose(1, 2).reshape(B, S, C)
        return self.output(ctx, x)


class BertIntermediate(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.dense = Conv1D(hidden, ffn)

    def forward(self, x):
        return gelu_erf(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attention = BertAttention(hidden, heads)
        self.intermediate = BertIntermediate(hidden, ffn)
        self.output = BertSelfOutput(ffn, hidden)

    def forward(self, x):
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class Bert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden"]
        self.embeddings = BertEmbeddings(cfg["vocab"], cfg["max_positions"], H)
        self.layer = nn.ModuleList([BertLayer(H, cfg["heads"], cfg["ffn"]) for _ in range(cfg["layers"])])
        self.lm_head = Conv1D(H, cfg["vocab"])

    def forward(self, input_ids):
        x = self.embeddings(input_ids)
        for blk in self.layer:
            x = blk(x)
        return self.lm_head(x)


# ----------------------------------------------------------------------------
# Llama (RMSNorm, RoPE, GQA, SwiGLU)
# ----------------------------------------------------------------------------
def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, theta):
        super().__init__()
        self.h, self.kv, self.d, self.theta = heads, kv_heads, hidden // heads, theta
        self.q_proj = Conv1D(hidden, heads * self.d, bias=False)
        self.k_proj = Conv1D(hidden, kv_heads * self.d, bias=False)
        self.v_proj = Conv1D(hidden, kv_heads * self.d, bias=False)
        self.o_proj = Conv1D(heads * self.d, hidden, bias=False)

    def rope(self, q):
        # sizes taken from the traced tensor (not python ints) so the exporter's
        # JIT constant propagation does not fold the whole chain into one constant
        S, d = q.shape[-2], q.shape[-1]
        inv_freq = 1.0 / torch.pow(self.theta, torch.arange(0, d, 2, dtype=torch.float32) / d)
        t = torch.arange(S, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def forward(self, x):
        B, S, C = x.shape
        q = self.q_proj(x).view(B, S, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.kv, self.d).transpose(1, 2)
        cos, sin = self.rope(q)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv  # repeat_kv (HF): expand + reshape
        k = k[:, :, None, :, :].expand(B, self.kv, rep, S, self.d).reshape(B, self.h, S, self.d)
        v = v[:, :, None, :, :].expand(B, self.kv, rep, S, self.d).reshape(B, self.h, S, self.d)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        scores = scores + torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
        p = torch.softmax(scores, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, S, self.h * self.d)
        return self.o_proj(o)


class LlamaMLP(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = Conv1D(hidden, ffn, bias=False)
        self.up_proj = Conv1D(hidden, ffn, bias=False)
        self.down_proj = Conv1D(ffn, hidden, bias=False)

    def forward(self, x):
        g = self.gate_proj(x)
        return self.down_proj(g * torch.sigmoid(g) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden"]
        self.input_layernorm = RMSNorm(H, cfg["eps"])
        self.self_attn = LlamaAttention(H, cfg["heads"], cfg["kv_heads"], cfg["rope_theta"])
        self.post_attention_layernorm = RMSNorm(H, cfg["eps"])
        self.mlp = LlamaMLP(H, cfg["ffn"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = embedding(cfg["vocab"], cfg["hidden"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg) for _ in range(cfg["layers"])])
        self.norm = RMSNorm(cfg["hidden"], cfg["eps"])

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        for blk in self.layers:
            x = blk(x)
        return self.norm(x)


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = Conv1D(cfg["hidden"], cfg["vocab"], bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))


# ----------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------
COMMON = dict(batch=BATCH, seq=SEQ, vocab=64, max_positions=16, opset=OPSET, dtype="float32")
CONFIGS = {
    "gpt2": dict(COMMON, arch="gpt2", seed=1001, layers=2, hidden=32, heads=4, kv_heads=4, ffn=128,
                 tied=True, norm="layernorm", norm_position="pre", eps=1e-5, activation="gelu_erf",
                 causal=True, positions="learned", qkv="fused", bias=True),
    "gpt2_untied": dict(COMMON, arch="gpt2", seed=1002, layers=2, hidden=32, heads=4, kv_heads=4, ffn=128,
                        tied=False, norm="layernorm", norm_position="pre", eps=1e-5, activation="gelu_tanh",
                        causal=True, positions="learned", qkv="fused", bias=True, manual_ln1=True),
    "bert": dict(COMMON, arch="bert", seed=1003, layers=2, hidden=48, heads=6, kv_heads=6, ffn=192,
                 tied=False, norm="layernorm", norm_position="post", eps=1e-12, activation="gelu_erf",
                 causal=False, positions="learned", qkv="separate", bias=True),
    "llama": dict(COMMON, arch="llama", seed=1004, layers=2, hidden=32, heads=4, kv_heads=2, ffn=64,
                  tied=False, norm="rmsnorm", norm_position="pre", eps=1e-6, activation="swiglu",
                  causal=True, positions="rope", rope_theta=10000.0, qkv="separate", bias=False,
                  max_positions=None),
}
# Same model/weights/reference data as "llama", but exported with the exporter's
# ONNX shape inference switched off (private torch.onnx.utils._export(...,
# onnx_shape_inference=False)).  With it on (the public API), torch 1.13 folds
# every size-derived value, so no Range/Shape survives in a static export; this
# variant keeps Shape->Gather->Range/Reshape chains (all still computable from
# the static input shape), like HF exports made with dynamic axes.
CONFIGS["llama_range"] = dict(CONFIGS["llama"], export_shape_inference=False)
# A vocabulary of 61 (prime, like GPT-2's odd 50257 and RoBERTa's 50265):
# tensor parallelism must pad it to divide by the ranks. GPT-2's head is
# tied to the embedding; BERT's is untied with a bias.
CONFIGS["gpt2_vocab61"] = dict(CONFIGS["gpt2"], seed=1005, vocab=61)
CONFIGS["bert_vocab61"] = dict(CONFIGS["bert"], seed=1006, vocab=61)


def build(name, cfg):
    if cfg["arch"] == "gpt2":
        return GPT2(cfg, tied=cfg["tied"])
    if cfg["arch"] == "bert":
        return Bert(cfg)
    if cfg["arch"] == "llama":
        return Llama(cfg)
    raise ValueError(name)


# ----------------------------------------------------------------------------
# generation
# ----------------------------------------------------------------------------
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
               onnx.TensorProto.BFLOAT16}


def save(path, arr):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, arr)


def generate(name, out_root):
    cfg = dict(CONFIGS[name])
    cfg["head_dim"] = cfg["hidden"] // cfg["heads"]
    torch.manual_seed(cfg["seed"])
    model = build(name, cfg).float()
    model.eval()  # no dropout anywhere; eval just to be explicit

    g = torch.Generator().manual_seed(cfg["seed"] + 7)
    input_ids = torch.randint(0, cfg["vocab"], (BATCH, SEQ), generator=g, dtype=torch.int64)
    targets = torch.randint(0, cfg["vocab"], (BATCH, SEQ), generator=g, dtype=torch.int64)

    # reference forward / loss / grads
    model.zero_grad()
    logits = model(input_ids)
    loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), targets.reshape(-1))
    loss.backward()
    params = dict(model.named_parameters())
    cfg["num_params"] = int(sum(p.numel() for p in params.values()))

    d = os.path.join(out_root, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    onnx_path = os.path.join(d, "model.onnx")
    export_kw = dict(opset_version=OPSET, input_names=["input_ids"], output_names=["logits"],
                     do_constant_folding=False, export_params=True,
                     training=torch.onnx.TrainingMode.EVAL)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        if cfg.get("export_shape_inference", True):
            torch.onnx.export(model, (input_ids,), onnx_path, **export_kw)
        else:
            torch.onnx.utils._export(model, (input_ids,), onnx_path, onnx_shape_inference=False,
                                     **export_kw)

    save(os.path.join(d, "inputs", "input_ids.npy"), input_ids.numpy())
    save(os.path.join(d, "outputs", "logits.npy"), logits.detach().numpy().astype(np.float32))
    save(os.path.join(d, "targets.npy"), targets.numpy())
    save(os.path.join(d, "loss.npy"), np.array(loss.item(), dtype=np.float32))
    for pname, p in params.items():
        save(os.path.join(d, "grads", pname + ".npy"), p.grad.detach().numpy().astype(np.float32))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")

    # ---- checks ----
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ["input_ids"], [i.name for i in m.graph.input]
    assert [o.name for o in m.graph.output] == ["logits"], [o.name for o in m.graph.output]
    finits = {t.name: t for t in m.graph.initializer if t.data_type in FLOAT_TYPES}
    if set(finits) != set(params):
        raise SystemExit("%s: float initializer names != torch param names\n  extra in onnx: %s\n"
                         "  missing in onnx: %s" % (name, sorted(set(finits) - set(params)),
                                                    sorted(set(params) - set(finits))))
    for pname, t in finits.items():
        a = numpy_helper.to_array(t)
        ref = params[pname].detach().numpy()
        assert a.shape == ref.shape and np.array_equal(a, ref), "layout/value mismatch for " + pname
    # re-check the reference output by evaluating the ONNX graph with numpy
    got = onnx_np_eval.run(m, {"input_ids": input_ids.numpy()})["logits"]
    ref = logits.detach().numpy()
    err = float(np.max(np.abs(got - ref)))
    assert got.shape == ref.shape and err < 1e-4, "%s: numpy ONNX eval mismatch %g" % (name, err)

    ops = Counter(n.op_type for n in m.graph.node)
    print("%-12s params=%d loss=%.6f onnx-vs-torch max|diff|=%.2e ops=%s"
          % (name, cfg["num_params"], loss.item(), err, dict(sorted(ops.items()))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE, help="output root (default: this script's directory)")
    ap.add_argument("--model", default="all", choices=sorted(CONFIGS) + ["all"])
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    names = sorted(CONFIGS) if args.model == "all" else [args.model]
    for n in names:
        generate(n, args.out)


if __name__ == "__main__":
    main()
