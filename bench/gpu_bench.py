#!/usr/bin/env python3
"""GPU benchmark (run by scripts/gpu-check.sh on a GPU machine): mp-run
--device cuda against PyTorch eager on the same GPU, on

  - the GPT-2-small shape (12 layers, hidden 768, 12 heads, vocab 50304,
    batch 4 x 128 tokens, forward, fp32), and
  - one GPT layer with hidden 4096 (32 heads, 2048 tokens), in fp32 and in
    bf16 (fp32 accumulation on both sides).

mp-run uses the synthetic-weight artifacts from scripts/gpu-prepare.sh; the
PyTorch models use random weights of the same shapes (the timing does not
depend on the values). Prints tokens/s, achieved TFLOP/s and the ratio, and
the ratio against PyTorch doing the copies a mp-run run does (ids to the
device, logits to the host).

`--device cpu` runs the same harness on the CPU (PyTorch on the CPU,
mp-run --device cpu, fp32 cases only): a rehearsal of the GPU check on a
machine without a GPU (scripts/gpu-check.sh --dry-run), not a benchmark.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.dont_write_bytecode = True
import gen_tiny  # noqa: E402

CASES = [  # (artifact, config, batch, seq, dtype)
    ("gpt2_small", dict(layers=12, hidden=768, heads=12, vocab=50304), 4, 128, torch.float32),
    ("layer4096", dict(layers=1, hidden=4096, heads=32, vocab=256), 1, 2048, torch.float32),
    ("layer4096_bf16", dict(layers=1, hidden=4096, heads=32, vocab=256), 1, 2048, torch.bfloat16),
]


def flops(cfg, batch, seq):
    h, l, v, t = cfg["hidden"], cfg["layers"], cfg["vocab"], batch * seq
    layer = 2 * t * 12 * h * h + 4 * batch * seq * seq * h
    return l * layer + 2 * t * h * v


def timed_ms(run, device):
    """Milliseconds one call of `run` takes on `device`."""
    if device != "cuda":
        start = time.perf_counter()
        run()
        return (time.perf_counter() - start) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def torch_ms(cfg, batch, seq, dtype, iterations, warmup, device):
    """Median milliseconds of PyTorch's forward alone (ids and logits stay
    on the device), and of the forward with the ids copied in from the host
    and the logits copied out, as a `mp-run` run does."""
    torch.manual_seed(0)
    model = gen_tiny.GPT2(dict(cfg, max_positions=seq, activation="gelu_erf"),
                          tied=True).to(device).to(dtype).eval()
    host_ids = torch.randint(0, cfg["vocab"], (batch, seq))
    ids = host_ids.to(device)
    medians = []
    with torch.no_grad():
        for run in (lambda: model(ids), lambda: model(host_ids.to(device)).cpu()):
            for _ in range(warmup):
                run()
            if device == "cuda":
                torch.cuda.synchronize()
            times = [timed_ms(run, device) for _ in range(iterations)]
            medians.append(sorted(times)[len(times) // 2])
    return medians


def mp_ms(mp_run, carry, name, cfg, batch, seq, iterations, warmup, device, work):
    ids = os.path.join(work, name + "_ids.npy")
    np.save(ids, np.random.default_rng(1).integers(0, cfg["vocab"], (batch, seq)).astype(np.int64))
    run = subprocess.run([mp_run,
                          os.path.join(carry, "artifacts", name + "_synthetic"),
                          "--device", device, "--input", "input_ids=" + ids,
                          "--warmup", str(warmup), "--iterations", str(iterations)],
                         capture_output=True, text=True)
    out = run.stdout
    print(out, end="")
    if run.returncode != 0:  # mp-run's own error says what went wrong
        sys.stderr.write(run.stderr)
        sys.exit("gpu_bench: mp-run failed on %s (exit status %d)" % (name, run.returncode))
    return float(re.search(r"([0-9.]+) ms/run \(median", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--carry", default=os.path.join(ROOT, "build-gpu-carry"))
    parser.add_argument("--mp-run", help="the mp-run to time (default: the carry's)")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--work", default="/tmp")
    args = parser.parse_args()
    if args.device == "cuda":
        print("GPU:", torch.cuda.get_device_name(0), "| PyTorch", torch.__version__)
    else:
        print("rehearsal on the CPU (not a benchmark) | PyTorch", torch.__version__)
    for name, cfg, batch, seq, dtype in CASES:
        if args.device == "cpu" and dtype != torch.float32:
            print("%s: skipped on the CPU (mp-run runs fp16/bf16 programs on CUDA only)" % name)
            continue
        tokens, f = batch * seq, flops(cfg, batch, seq)
        t, t_copies = torch_ms(cfg, batch, seq, dtype, args.iterations, args.warmup,
                               args.device)
        mp_run = args.mp_run or os.path.join(args.carry, "bin", "mp-run")
        m = mp_ms(mp_run, args.carry, name, cfg, batch, seq, args.iterations, args.warmup,
                  args.device, args.work)
        print("%s (batch %d x %d, %s): PyTorch %.2f ms (%.0f tokens/s, %.1f TFLOP/s); "
              "mp-run %.2f ms (%.0f tokens/s, %.1f TFLOP/s); mp-run speed / PyTorch speed %.2fx"
              % (name, batch, seq, str(dtype).replace("torch.", ""), t, tokens / t * 1e3, f / t / 1e9, m,
                 tokens / m * 1e3, f / m / 1e9, t / m))
        # mp-run's time includes copying the ids in and the outputs out.
        print("%s: PyTorch with the same copies (ids in, logits out) %.2f ms; "
              "mp-run speed / PyTorch speed %.2fx" % (name, t_copies, t_copies / m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
