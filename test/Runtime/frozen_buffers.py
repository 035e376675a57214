#!/usr/bin/python3
"""Models with registered buffers, which ONNX stores as initializers like
the parameters: OUT/sinpos (a sinusoidal position table `pe` added to the
token embeddings) and OUT/alibi (ALiBi biases `alibi` [1, heads, 1, S] added
to the scores, with a causal mask), and OUT/gated (logits scaled by a gate
nn.Linear(HIDDEN, 1), whose bias has one element) and OUT/tril (nanoGPT's
causal masks from a tril buffer per block, sequence axis dynamic), and
OUT/fresh (sinpos as initialized, norm weights all ones). Each directory
holds
model.onnx,
ids.npy, labels.npy (one -100), loss.npy (token mean cross-entropy) and
grads/NAME.npy for every parameter (NAME.T.npy too for a matrix, as mp
names the transposed copy the exporter folds), and for every buffer zeros:
PyTorch trains no buffer.

Usage: frozen_buffers.py OUT
"""
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, HEADS, SEQ, BATCH = 32, 16, 2, 8, 2
HEAD_DIM = HIDDEN // HEADS


class Block(nn.Module):
    """Pre-LN attention (separate q/k/v/o) and a GELU MLP."""
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.q, self.k = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.v, self.o = nn.Linear(HIDDEN, HIDDEN), nn.Linear(HIDDEN, HIDDEN)
        self.fc1, self.fc2 = nn.Linear(HIDDEN, 2 * HIDDEN), nn.Linear(2 * HIDDEN, HIDDEN)

    def forward(self, x, bias):
        b, s, _ = x.shape
        heads = lambda t: t.view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        h = self.ln1(x)
        q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM) + bias
        a = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, HIDDEN)
        x = x + self.o(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def causal():
    return torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1)


class SinPos(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        position = torch.arange(SEQ).float()[:, None]
        rate = torch.exp(torch.arange(0, HIDDEN, 2).float() * (-math.log(10000.0) / HIDDEN))
        pe = torch.zeros(SEQ, HIDDEN)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(position * rate), torch.cos(position * rate)
        self.register_buffer("pe", pe)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.ln_f, self.head = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids):
        x = self.embed(input_ids) + self.pe
        for block in self.blocks:
            x = block(x, causal())
        return self.head(self.ln_f(x))


class Alibi(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / HEADS) for h in range(HEADS)])
        self.register_buffer("alibi", (slopes[:, None, None] * torch.arange(SEQ).float())[None])
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.ln_f, self.head = nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x, self.alibi + causal())
        return self.head(self.ln_f(x))


class Temperature(nn.Module):
    """A one-element buffer (not a weight or bias): a constant."""
    def __init__(self):
        super().__init__()
        self.register_buffer("value", torch.tensor([2.0]))

    def forward(self, x):
        return x / self.value


class Gated(nn.Module):
    """Logits scaled per token by a gate, nn.Linear(HIDDEN, 1): its bias is
    a one-element parameter (as a value or reward head's is)."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.block = Block()
        self.gate, self.head = nn.Linear(HIDDEN, 1), nn.Linear(HIDDEN, VOCAB)
        self.temperature = Temperature()

    def forward(self, input_ids):
        x = self.block(self.embed(input_ids), causal())
        return self.temperature(self.head(x) * torch.sigmoid(self.gate(x)))


class TrilBlock(Block):
    """A block with its own tril buffer, as nanoGPT's attention has."""
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ)))

    def forward(self, x):
        s = x.shape[1]
        bias = torch.zeros(s, s).masked_fill(self.mask[:s, :s] == 0, float("-inf"))
        return super().forward(x, bias)


class TrilBuffer(nn.Module):
    """nanoGPT's causal masks: a tril buffer per block, sliced to the
    sequence and compared (exported with a dynamic sequence, so the slice
    stays in the graph)."""
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(TrilBlock() for _ in range(2))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def write(model, d, seed, dynamic=False, fresh=False):
    torch.manual_seed(seed)
    with torch.no_grad():  # away from the initial ones and zeros
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05 * (not fresh))
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels[0, 0] = -100
    os.makedirs(os.path.join(d, "grads"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        axes = {"input_ids": {1: "sequence"}, "logits": {1: "sequence"}}
        torch.onnx.export(model, (ids,), os.path.join(d, "model.onnx"), opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          dynamic_axes=axes if dynamic else None)
    loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    np.save(os.path.join(d, "ids.npy"), ids.numpy())
    np.save(os.path.join(d, "labels.npy"), labels.numpy())
    np.save(os.path.join(d, "loss.npy"), loss.detach().numpy())
    for n, p in model.named_parameters():
        np.save(os.path.join(d, "grads", n + ".npy"), p.grad.numpy())
        if p.dim() == 2:
            np.save(os.path.join(d, "grads", n + ".T.npy"), p.grad.t().contiguous().numpy())
    for n, b in model.named_buffers():
        np.save(os.path.join(d, "grads", n + ".npy"), np.zeros_like(b.numpy()))


def main():
    out = sys.argv[1]
    write(SinPos().eval(), os.path.join(out, "sinpos"), 1)
    write(Alibi().eval(), os.path.join(out, "alibi"), 2)
    write(Gated().eval(), os.path.join(out, "gated"), 3)
    write(TrilBuffer().eval(), os.path.join(out, "tril"), 4, dynamic=True)
    # As initialized: the exporter stores the equal norm weights (ones) as one
    # initializer under the first one's name.
    write(SinPos().eval(), os.path.join(out, "fresh"), 5, fresh=True)


if __name__ == "__main__":
    main()
