#!/usr/bin/python3
"""A decoder written with einsums, as some codebases write their layers
(Flax/T5X ports, mesh-tensorflow-style `DenseGeneral`): q/k/v projections
with [d, heads, head_dim] weights, the output projection with a
[heads, head_dim, d] one, attention scores and mixing as einsums, and the
MLP as `bsd,df->bsf`. Writes OUT/model.onnx, ids.npy, labels.npy (one
-100), loss.npy (token mean cross-entropy) and grads/NAME.npy for every
parameter, as frozen_buffers.py writes its models.

Usage: einsum_model.py OUT
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
# The sizes and the writer of the frozen-buffer models: the same inputs,
# loss and gradient files.
from frozen_buffers import HEADS, HIDDEN, SEQ, VOCAB, write  # noqa: E402

LAYERS = 2
HEAD_DIM = HIDDEN // HEADS


def weight(*shape):
    return nn.Parameter(torch.randn(*shape) * 0.2)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.wq, self.wk, self.wv = (weight(HIDDEN, HEADS, HEAD_DIM) for _ in range(3))
        self.wo = weight(HEADS, HEAD_DIM, HIDDEN)
        self.w_in, self.w_out = weight(HIDDEN, 4 * HIDDEN), weight(4 * HIDDEN, HIDDEN)

    def forward(self, x, mask):
        h = self.ln1(x)
        q = torch.einsum("bsd,dhk->bhsk", h, self.wq)
        k = torch.einsum("bsd,dhk->bhsk", h, self.wk)
        v = torch.einsum("bsd,dhk->bhsk", h, self.wv)
        scores = torch.einsum("bhqk,bhtk->bhqt", q, k) / math.sqrt(HEAD_DIM) + mask
        a = torch.einsum("bhqt,bhtk->bhqk", torch.softmax(scores, dim=-1), v)
        x = x + torch.einsum("bhsk,hkd->bsd", a, self.wo)
        m = F.gelu(torch.einsum("bsd,df->bsf", self.ln2(x), self.w_in))
        return x + torch.einsum("bsf,fd->bsd", m, self.w_out)


class EinsumDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.unembed = weight(HIDDEN, VOCAB)

    def forward(self, ids):
        mask = torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask)
        return torch.einsum("bsd,dv->bsv", self.ln_f(x), self.unembed)


def main():
    torch.manual_seed(0)
    write(EinsumDecoder().eval(), sys.argv[1], 0)


if __name__ == "__main__":
    main()
