#!/usr/bin/python3
"""PyTorch reference training runs for mp's --train tests.

For each bundled model <name> (built by gen_tiny.py, weights loaded from
models/<name>/model.onnx so both sides start equal) this writes
models/<name>/train/:
  tokens.npy   int64 [12, seq + 1]: the token file (step i takes rows
               i*B ... i*B+B-1, wrapping; inputs [:, :-1], labels [:, 1:])
  losses.npy   float32 [10]: the loss of each of 10 steps of
               torch.optim.AdamW(lr 1e-3, betas (0.9, 0.95), eps 1e-8,
               weight decay 0.1 on parameters with 2+ dims, none on the
               others) with torch.nn.utils.clip_grad_norm_(1.0)
  grad_norms.npy  float32 [10]: the gradient norm of each step, before clipping

Usage: /usr/bin/python3 models/gen_train_ref.py [--model NAME|all]
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import gen_tiny  # noqa: E402

STEPS, ROWS = 10, 12


def reference(name):
    d = os.path.join(HERE, name)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    model = gen_tiny.build(name, cfg).float()
    model.eval()
    inits = {t.name: numpy_helper.to_array(t)
             for t in onnx.load(os.path.join(d, "model.onnx")).graph.initializer}
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(torch.from_numpy(inits[pname].copy()))
    g = torch.Generator().manual_seed(cfg["seed"] + 11)
    tokens = torch.randint(0, cfg["vocab"], (ROWS, cfg["seq"] + 1), generator=g,
                           dtype=torch.int64)
    params = list(model.named_parameters())
    decay = [p for n, p in params if p.dim() >= 2]
    no_decay = [p for n, p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    batch = cfg["batch"]
    losses, norms = [], []
    for step in range(STEPS):
        rows = [(step * batch + b) % ROWS for b in range(batch)]
        x, y = tokens[rows, :-1], tokens[rows, 1:]
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), y.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        norms.append(float(norm))
    out = os.path.join(d, "train")
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy())
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    np.save(os.path.join(out, "grad_norms.npy"), np.array(norms, dtype=np.float32))
    print("%-12s losses %s" % (name, " ".join("%.4f" % l for l in losses)))


TRAINED = ["gpt2", "gpt2_untied", "bert", "llama", "gpt2_vocab61"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="all",
                    choices=TRAINED + ["all"])
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for n in (TRAINED if args.model == "all" else [args.model]):
        reference(n)


if __name__ == "__main__":
    main()
