#!/usr/bin/python3
"""Benchmark: every GEMM of the benchmark models, forward and backward,
through each CPU GEMM library mp can use and through PyTorch, in one run.

For the GPT-2-small shape (12 layers, hidden 768, vocab 50304, tied head)
and a Llama-style shape of similar size (hidden 768, SwiGLU 2048, vocab
32000, untied head), batch 4 x 128 tokens: each linear's forward (x.W), its
input gradient (dy.W^T) and its weight gradient (x^T.dy), as mp lays them
out. Columns (GFLOP/s, median of --repeats): OpenBLAS as mp calls it,
oneDNN with the weight read in place, oneDNN with the weight packed once
(what mp-run uses for inference), PyTorch's torch.mm (its BLAS) and, for
forward, PyTorch's own oneDNN path (torch.utils.mkldnn). Not a test: run it
by hand; --markdown prints the README's table.

  /usr/bin/python3 bench/gemm_table.py [--threads N] [--repeats R] [--markdown]
"""
import argparse
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
from gpt2_small import median_seconds  # noqa: E402
TOKENS = 4 * 128

# (model, linear, in features, out features, weight stored [out, in])
LINEARS = [
    ("GPT-2", "QKV", 768, 2304, False),
    ("GPT-2", "attention out", 768, 768, False),
    ("GPT-2", "MLP up", 768, 3072, False),
    ("GPT-2", "MLP down", 3072, 768, False),
    ("GPT-2", "LM head (tied)", 768, 50304, True),
    ("Llama", "Q, K, V, O", 768, 768, False),
    ("Llama", "gate, up", 768, 2048, False),
    ("Llama", "down", 2048, 768, False),
    ("Llama", "LM head", 768, 32000, False),
]


def gemms(k_in, n_out, transposed):
    """(pass, M, N, K, transA, transB) of one linear's three GEMMs."""
    t = TOKENS
    forward = ("forward", t, n_out, k_in, 0, int(transposed))
    input_grad = ("input grad", t, k_in, n_out, 0, int(not transposed))
    weight_grad = (("weight grad", n_out, k_in, t, 1, 0) if transposed
                   else ("weight grad", k_in, n_out, t, 1, 0))
    return [forward, input_grad, weight_grad]


def torch_rates(m, n, k, ta, tb, forward, repeats):
    """(torch.mm GFLOP/s, torch oneDNN linear GFLOP/s or None)."""
    a = torch.randn(k, m) if ta else torch.randn(m, k)
    b = torch.randn(n, k) if tb else torch.randn(k, n)
    opa = a.t() if ta else a
    opb = b.t() if tb else b
    flop = 2.0 * m * n * k
    mm = flop / median_seconds(lambda: torch.mm(opa, opb), 1, repeats) / 1e9
    mkl = None
    if forward:
        import torch.utils.mkldnn as mkldnn
        lin = torch.nn.Linear(k, n, bias=False).eval()
        packed = mkldnn.to_mkldnn(lin)
        with torch.no_grad():
            mkl = flop / median_seconds(lambda: packed(opa), 1, repeats) / 1e9
    return mm, mkl


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    rows = []
    for model, name, k_in, n_out, transposed in LINEARS:
        for g in gemms(k_in, n_out, transposed):
            rows.append((model, name) + g)
    shapes = []
    for row in rows:
        shapes += [str(v) for v in row[3:]]
    bench = os.path.join(args.build, "bin", "mp-gemm-bench")
    out = subprocess.run([bench, "--threads", str(args.threads), "--repeats",
                          str(args.repeats)] + shapes, check=True,
                         capture_output=True, text=True).stdout
    libraries = out.splitlines()[0].lstrip("# ")
    mp = {}
    for line in out.splitlines()[1:]:
        m, n, k, ta, tb, lib, rate = line.split()
        mp[(int(m), int(n), int(k), int(ta), int(tb), lib)] = float(rate)

    print("CPU GEMMs, f32, %d threads, %s (GFLOP/s, median of %d; mp uses "
          "oneDNN packed for inference, oneDNN in place for training, where "
          "oneDNN has AVX-512 kernels)" % (args.threads, libraries, args.repeats))
    header = ["model", "linear", "pass", "M×N×K", "OpenBLAS", "oneDNN",
              "oneDNN packed", "PyTorch mm", "PyTorch oneDNN", "mp / PyTorch"]
    lines = []
    best_mp, best_torch = [], []
    for model, name, what, m, n, k, ta, tb in rows:
        key = (m, n, k, ta, tb)
        blas = mp.get(key + ("openblas",))
        dnnl = mp.get(key + ("onednn",))
        packed = mp.get(key + ("onednn-packed",))
        mm, mkl = torch_rates(m, n, k, ta, tb, what == "forward", args.repeats)
        used = (packed if what == "forward" else dnnl) or blas
        ours = max(v for v in (blas, dnnl, packed) if v)
        theirs = max(v for v in (mm, mkl) if v)
        best_mp.append(ours)
        best_torch.append(theirs)
        fmt = lambda v: "%.0f" % v if v else "–"
        lines.append([model, name, what, "%d×%d×%d" % (m, n, k), fmt(blas),
                      fmt(dnnl), fmt(packed), fmt(mm), fmt(mkl),
                      "%.2f×" % (used / theirs)])
        if not args.markdown:
            print("  ".join(lines[-1]), flush=True)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    print("best rate measured: mp %.0f, PyTorch %.0f GFLOP/s"
          % (max(best_mp), max(best_torch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
