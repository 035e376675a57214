#!/usr/bin/python3
"""A decoder whose feed-forward layers are pointwise convolutions, as the
Transformer paper describes them ("two convolutions with kernel size 1")
and as FastSpeech-style and conformer codebases write them: the block's
activations transposed to [batch, channels, time], nn.Conv1d(kernel_size=1)
twice, transposed back. Attention is nn.MultiheadAttention (its packed
in_proj). Writes OUT/model.onnx, ids.npy, labels.npy, loss.npy and
grads/NAME.npy for every parameter, as frozen_buffers.py writes its models.

Usage: conv_ffn_model.py OUT
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from frozen_buffers import HEADS, HIDDEN, SEQ, VOCAB, write  # noqa: E402

LAYERS = 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.attn = nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)
        self.conv1 = nn.Conv1d(HIDDEN, 4 * HIDDEN, kernel_size=1)
        self.conv2 = nn.Conv1d(4 * HIDDEN, HIDDEN, kernel_size=1)

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        f = self.conv2(F.gelu(self.conv1(self.ln2(x).transpose(1, 2))))
        return x + f.transpose(1, 2)


class ConvFeedForwardDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids):
        mask = torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def main():
    torch.manual_seed(0)
    write(ConvFeedForwardDecoder().eval(), sys.argv[1], 0)


if __name__ == "__main__":
    main()
