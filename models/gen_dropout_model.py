#!/usr/bin/python3
"""GPT-2-style models with dropout, exported in training mode, for mp's
training-dropout tests.

Writes models/dropout_gpt2/model.onnx: gen_tiny's GPT-2 shape (2 layers,
hidden 32, 4 heads, vocab 64, batch 2 x 8) with dropout 0.1 after the
embeddings, on both residual branches of each block and on the MLP's hidden
activation (inside the tensor-parallel region), exported with
TrainingMode.TRAINING so that each is an ONNX Dropout with training_mode
true. models/dropout_gpt2_resid/ is the same without the MLP-hidden
dropout: every dropout acts on activations tensor parallelism replicates.

Usage: /usr/bin/python3 models/gen_dropout_model.py
"""
import math
import os
import sys
import warnings

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import gen_tiny  # noqa: E402

H, HEADS, LAYERS, VOCAB, POS, P = 32, 4, 2, 64, 16, 0.1


class Block(nn.Module):
    def __init__(self, hidden_dropout):
        super().__init__()
        self.ln_1 = gen_tiny.layer_norm(H)
        self.attn = gen_tiny.GPT2Attention(H, HEADS)
        self.ln_2 = gen_tiny.layer_norm(H)
        self.c_fc = gen_tiny.Conv1D(H, 4 * H)
        self.c_proj = gen_tiny.Conv1D(4 * H, H)
        self.drop_attn = nn.Dropout(P)
        self.drop_hidden = nn.Dropout(P if hidden_dropout else 0.0)
        self.drop_mlp = nn.Dropout(P)

    def forward(self, x):
        x = x + self.drop_attn(self.attn(self.ln_1(x)))
        h = self.drop_hidden(gen_tiny.gelu_erf(self.c_fc(self.ln_2(x))))
        return x + self.drop_mlp(self.c_proj(h))


class Model(nn.Module):
    def __init__(self, hidden_dropout):
        super().__init__()
        self.wte = gen_tiny.embedding(VOCAB, H)
        self.wpe = gen_tiny.embedding(POS, H)
        self.drop = nn.Dropout(P)
        self.h = nn.ModuleList([Block(hidden_dropout) for _ in range(LAYERS)])
        self.ln_f = gen_tiny.layer_norm(H)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], dtype=torch.long)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for blk in self.h:
            x = blk(x)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


def main():
    for name, hidden in (("dropout_gpt2", True), ("dropout_gpt2_resid", False)):
        torch.manual_seed(1011)
        model = Model(hidden)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.mul_(0.5)
        model.train()
        out = os.path.join(HERE, name)
        os.makedirs(out, exist_ok=True)
        ids = torch.zeros(2, 8, dtype=torch.int64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (ids,), os.path.join(out, "model.onnx"), opset_version=17,
                              input_names=["input_ids"], output_names=["logits"],
                              do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
        print("wrote %s" % os.path.join(out, "model.onnx"))


if __name__ == "__main__":
    main()
