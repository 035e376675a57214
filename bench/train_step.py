#!/usr/bin/python3
"""Benchmark: one training step (forward, backward, AdamW) of a GPT-2-small-
shaped model (12 layers, hidden 768, 12 heads, vocab 50304, batch 4 x 128
tokens) run by mp-run --train on CPU against PyTorch eager on the same model,
data and optimizer settings with the same number of threads.

Prints the median tokens/s of both and their ratio, and checks that the first
steps' losses agree. Not a test: run it by hand.

  /usr/bin/python3 bench/train_step.py [--threads N] [--steps N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import gpt2_small  # noqa: E402  (the model and its shape)

BATCH, SEQ = gpt2_small.BATCH, gpt2_small.SEQ
OPTIM = dict(lr=1e-4, betas=(0.9, 0.95), eps=1e-8)


def torch_steps(model, tokens, steps, threads):
    torch.set_num_threads(threads)
    params = list(model.parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], **OPTIM)
    vocab = gpt2_small.CONFIG["vocab"]
    losses, times = [], []
    for step in range(steps):
        rows = [(step * BATCH + b) % tokens.shape[0] for b in range(BATCH)]
        x, y = tokens[rows, :-1], tokens[rows, 1:]
        start = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, times


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--workdir", default=None,
                        help="where the model and artifact go, kept (default: a temp dir, removed at exit)")
    args = parser.parse_args()
    mp_opt = os.path.join(args.build, "bin", "mp-opt")
    mp_run = os.path.join(args.build, "bin", "mp-run")
    work = args.workdir or gpt2_small.temporary_workdir("mp-train-bench-")
    os.makedirs(work, exist_ok=True)

    model = gpt2_small.build_model()
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, gpt2_small.CONFIG["vocab"], (4 * BATCH, SEQ + 1), generator=g)
    onnx_path = os.path.join(work, "gpt2_small.onnx")
    tokens_path = os.path.join(work, "tokens.npy")
    np.save(tokens_path, tokens.numpy())
    print("exporting GPT-2-small shape (%.1fM parameters) ..."
          % (sum(p.numel() for p in model.parameters()) / 1e6), flush=True)
    torch.onnx.export(model, (tokens[:BATCH, :-1],), onnx_path, opset_version=17,
                      input_names=["input_ids"], output_names=["logits"],
                      do_constant_folding=False)
    artifact = os.path.join(work, "artifact")
    start = time.perf_counter()
    subprocess.run([mp_opt, onnx_path, "--mp-train", "--artifact", artifact], check=True)
    print("compiled in %.1f s" % (time.perf_counter() - start))

    log = os.path.join(work, "log.jsonl")
    proc = subprocess.run([mp_run, artifact, "--train", "--data", tokens_path,
                           "--steps", str(args.steps), "--threads", str(args.threads),
                           "--lr", str(OPTIM["lr"]), "--log", log],
                          check=True, capture_output=True, text=True)
    print(proc.stdout, end="")
    with open(log) as f:
        mp_losses = [json.loads(line)["loss"] for line in f]
    mp_rates = [float(m) for m in re.findall(r"([0-9.]+) tokens/s\n", proc.stdout)]
    mp_tps = sorted(mp_rates[1:args.steps])[len(mp_rates[1:args.steps]) // 2]

    torch_losses, torch_times = torch_steps(model, tokens, args.steps, args.threads)
    torch_s = sorted(torch_times[1:])[len(torch_times[1:]) // 2]
    tokens_per_step = BATCH * SEQ
    print()
    print("GPT-2-small shape, batch %d x %d tokens, train step (forward, backward, "
          "AdamW), %d threads" % (BATCH, SEQ, args.threads))
    print("  PyTorch %s eager: %8.1f ms/step  %8.0f tokens/s (median of steps 2..)"
          % (torch.__version__, torch_s * 1e3, tokens_per_step / torch_s))
    print("  mp-run --train:    %8.1f ms/step  %8.0f tokens/s (median of steps 2..)"
          % (tokens_per_step / mp_tps * 1e3, mp_tps))
    print("  ratio mp/PyTorch:  %.2fx tokens/s" % (mp_tps / (tokens_per_step / torch_s)))
    diffs = [abs(a - b) / abs(b) for a, b in zip(mp_losses, torch_losses)]
    print("  losses, mp vs PyTorch: " + ", ".join(
        "%.5f/%.5f" % (a, b) for a, b in zip(mp_losses, torch_losses)))
    print("  max relative loss difference: %.2e" % max(diffs))
    return 0 if max(diffs) < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
