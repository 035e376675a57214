#!/usr/bin/python3
"""Benchmark: mp's tensor parallelism against upstream MLIR's
(sharding-propagation + shard-partition) on the same chain of Megatron MLP
matmul pairs (column-parallel then row-parallel, an all-reduce after each
pair), GPT-3 175B sizes (2048 tokens, hidden 12288, 4x MLP), tp=8, side by
side in one run: mlir-opt on linalg.matmul with shard annotations on the
weights and activations, mp-opt --mp-tensor-parallel on mp.linear, which
finds the pairs itself. Both produce the same program (the same local
shapes, one all-reduce per pair); only the time and memory differ. Not a
test: run it by hand.

  /usr/bin/python3 bench/upstream_shard.py [--layers 96 960] [--mlir-opt PATH]
"""
import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
T, H, TP = 2048, 12288, 8
F = 4 * H


def upstream_ir(layers):
    """linalg.matmul pairs; weights annotated column/row split, each pair's
    result annotated replicated (sharding-propagation fills in the rest)."""
    t = lambda a, b: "tensor<%dx%dxf32>" % (a, b)
    out = ["shard.grid @grid(shape = %d)" % TP]
    args = ["%%x: %s" % t(T, H)]
    for l in range(layers):
        args += ["%%w1_%d: %s" % (l, t(H, F)), "%%w2_%d: %s" % (l, t(F, H))]
    out.append("func.func @main(%s) -> %s {" % (", ".join(args), t(T, H)))
    out.append("  %zero = arith.constant 0.0 : f32")
    out.append("  %rep = shard.sharding @grid split_axes = [[]] : !shard.sharding")
    out.append("  %col = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding")
    out.append("  %row = shard.sharding @grid split_axes = [[0]] : !shard.sharding")
    out.append("  %%a0 = shard.shard %%x to %%rep : %s" % t(T, H))
    for l in range(layers):
        out.append("  %%c%d = shard.shard %%w1_%d to %%col : %s" % (l, l, t(H, F)))
        out.append("  %%r%d = shard.shard %%w2_%d to %%row : %s" % (l, l, t(F, H)))
        for name, (a, b) in (("h", (T, F)), ("y", (T, H))):
            out.append("  %%e%s%d = tensor.empty() : %s" % (name, l, t(a, b)))
            out.append("  %%z%s%d = linalg.fill ins(%%zero : f32) outs(%%e%s%d : %s) -> %s"
                       % (name, l, name, l, t(a, b), t(a, b)))
        out.append("  %%h%d = linalg.matmul ins(%%a%d, %%c%d : %s, %s) outs(%%zh%d : %s) -> %s"
                   % (l, l, l, t(T, H), t(H, F), l, t(T, F), t(T, F)))
        out.append("  %%y%d = linalg.matmul ins(%%h%d, %%r%d : %s, %s) outs(%%zy%d : %s) -> %s"
                   % (l, l, l, t(T, F), t(F, H), l, t(T, H), t(T, H)))
        out.append("  %%a%d = shard.shard %%y%d to %%rep annotate_for_users : %s"
                   % (l + 1, l, t(T, H)))
    out.append("  return %%a%d : %s\n}" % (layers, t(T, H)))
    return "\n".join(out) + "\n"


def mp_ir(layers):
    """The same chain as mp.linear pairs on parameters, one layer each."""
    t = lambda *d: "tensor<%sxf32>" % "x".join(str(v) for v in d)
    out = []
    for l in range(layers):
        out.append('mp.param @w1_%d : %s {file = "x.onnx"}' % (l, t(H, F)))
        out.append('mp.param @w2_%d : %s {file = "x.onnx"}' % (l, t(F, H)))
    out.append("func.func @main(%%x: %s) -> %s {" % (t(1, T, H), t(1, T, H)))
    prev = "%x"
    for l in range(layers):
        attr = "{mp.layer = %d : i64}" % l
        out.append("  %%w1_%d = mp.get_param @w1_%d %s : %s" % (l, l, attr, t(H, F)))
        out.append("  %%w2_%d = mp.get_param @w2_%d %s : %s" % (l, l, attr, t(F, H)))
        out.append("  %%h%d = mp.linear %s, %%w1_%d %s : (%s, %s) -> %s"
                   % (l, prev, l, attr, t(1, T, H), t(H, F), t(1, T, F)))
        out.append("  %%y%d = mp.linear %%h%d, %%w2_%d %s : (%s, %s) -> %s"
                   % (l, l, l, attr, t(1, T, F), t(F, H), t(1, T, H)))
        prev = "%%y%d" % l
    out.append("  return %s : %s\n}" % (prev, t(1, T, H)))
    return "\n".join(out) + "\n"


def timed(cmd):
    """(seconds, peak KB, stdout) of one run under /usr/bin/time."""
    proc = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M"] + cmd, check=True,
                          capture_output=True, text=True)
    seconds, kb = re.search(r"TIME ([0-9.]+) ([0-9]+)", proc.stderr).groups()
    return float(seconds), int(kb), proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, nargs="+", default=[96, 960])
    parser.add_argument("--mlir-opt", default="/usr/lib/llvm-22/bin/mlir-opt")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    mp_opt = os.path.join(args.build, "bin", "mp-opt")
    work = tempfile.mkdtemp(prefix="mp-shard-bench-")
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    print("MLP matmul pairs, %d tokens, hidden %d, tp=%d; time and peak memory" % (T, H, TP))
    for layers in args.layers:
        up, mp = os.path.join(work, "upstream.mlir"), os.path.join(work, "mp.mlir")
        with open(up, "w") as f:
            f.write(upstream_ir(layers))
        with open(mp, "w") as f:
            f.write(mp_ir(layers))
        up_s, up_kb, up_out = timed([args.mlir_opt, up, "--pass-pipeline=builtin.module("
                                     "func.func(sharding-propagation,shard-partition))"])
        mp_s, mp_kb, mp_out = timed([mp_opt, mp, "--mp-tensor-parallel=tp=%d" % TP])
        reduces = (up_out.count("shard.all_reduce"), mp_out.count("shard.all_reduce"))
        print("  %4d layers: upstream %6.2f s %7.0f MB   mp %6.2f s %7.0f MB   "
              "mp/upstream time %.2fx   all-reduces %d / %d"
              % (layers, up_s, up_kb / 1024, mp_s, mp_kb / 1024, mp_s / up_s, *reduces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
