#!/usr/bin/python3
"""A decoder written with einsums, as some codebases write their layers
(Flax/T5X ports, mesh-tensorflow-style `DenseGeneral`): q/k/v projections
with [d, heads, head_dim] weights, the output projection with a
[heads, head_dim, d] one, attention scores and mixing as einsums, and the
MLP as `bsd,df->bsf`. Writes OUT/model.onnx, ids.npy, labels.npy (one
-100), loss.npy (token mean cross-entropy) and grads/NAME.npy for every
parameter.

Usage: einsum_model.py OUT
"""
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, HEADS, SEQ, BATCH, LAYERS = 32, 16, 2, 8, 2, 2
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
    out = sys.argv[1]
    torch.manual_seed(0)
    model = EinsumDecoder().eval()
    with torch.no_grad():  # norms away from their initial ones and zeros
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    labels[0, 0] = -100
    os.makedirs(os.path.join(out, "grads"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), os.path.join(out, "model.onnx"), opset_version=17,
                          input_names=["input_ids"], output_names=["logits"])
    loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    np.save(os.path.join(out, "ids.npy"), ids.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    np.save(os.path.join(out, "loss.npy"), loss.detach().numpy())
    for n, p in model.named_parameters():
        np.save(os.path.join(out, "grads", n + ".npy"), p.grad.numpy())


if __name__ == "__main__":
    main()
