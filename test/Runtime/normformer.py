"""A NormFormer-style decoder (Shleifer et al. 2021): a LayerNorm of the
MLP's inner activation (4 x hidden wide, with a bias) and of the attention
output before its projection, both over a dimension tensor parallelism
splits, exported as PyTorch exports it, with its logits and a train-step
reference (labels with one -100, the loss, every parameter's gradient;
a matrix's also transposed, as NAME.T).
Usage: normformer.py DIR"""
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN, HEADS, VOCAB, SEQ = 16, 4, 32, 8


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.attn_ln = nn.LayerNorm(HIDDEN)  # heads merged, then normed
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.ffn_ln = nn.LayerNorm(4 * HIDDEN)
        self.fc2 = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(HIDDEN, dim=2)
        q, k, v = (t.view(b, s, HEADS, -1).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        a = torch.softmax(scores + torch.full((s, s), float("-inf")).triu(1), -1) @ v
        x = x + self.proj(self.attn_ln(a.transpose(1, 2).reshape(b, s, HIDDEN)))
        return x + self.fc2(self.ffn_ln(F.gelu(self.fc1(self.ln2(x)))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, HIDDEN)
        self.wpe = nn.Embedding(SEQ, HIDDEN)
        self.layers = nn.ModuleList(Layer() for _ in range(2))
        self.ln_f = nn.LayerNorm(HIDDEN)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for layer in self.layers:
            x = layer(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "ref", "grads"), exist_ok=True)
    torch.manual_seed(3)
    model = Model()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(4))
    labels = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(5))
    labels[0, 0] = -100
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), os.path.join(out, "model.onnx"), opset_version=17,
                          input_names=["input_ids"], output_names=["logits"])
    logits = model(ids)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    loss.backward()
    np.save(os.path.join(out, "input_ids.npy"), ids.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    np.save(os.path.join(out, "ref", "logits.npy"), logits.detach().numpy())
    np.save(os.path.join(out, "ref", "loss.npy"), loss.detach().numpy().astype(np.float32))
    for n, p in model.named_parameters():
        np.save(os.path.join(out, "ref", "grads", n + ".npy"), p.grad.numpy())
        if p.dim() == 2:  # the name mp gives the transposed copy folding stores
            np.save(os.path.join(out, "ref", "grads", n + ".T.npy"), p.grad.t().contiguous().numpy())


if __name__ == "__main__":
    main()
