"""The inputs and numpy reference of reduced-norms.test: `inputs DIR
[scattered]` writes them, `check DIR [scattered]` compares the runs' outputs
with numpy (1e-6) and the fused runs' with the unfused one (bitwise).
`scattered`: Inputs/scattered_norms.mlir's (sequence parallelism's
reduce_scatters), else Inputs/reduced_norms.mlir's (all-reduces)."""
import os
import sys

import numpy as np


def layer_norm(h, g, b):
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return (h - m) / np.sqrt(v + 1e-5) * g + b


def rms_norm(h, g):
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * g


def reference(p, x, g, b, bo):
    h0 = x + (2 * p + bo)
    n0 = layer_norm(h0, g, 0)
    h1 = 2 * h0 + n0
    n1 = layer_norm(h1, g, b)
    h2 = h1 + (2 * n1 + bo)
    return [h0, n0, h1, n1, h2, rms_norm(h2, g)]


def scattered_reference(p, x, g, b, bo, q, y):
    # (Every rank's slice of each sum, gathered: the whole sums.)
    h0 = x + (2 * p + bo)
    n0 = layer_norm(h0, g, 0)
    h1 = 2 * n0 + h0
    n1 = layer_norm(h1, g, b)
    h2 = h1 + (2 * n1 + bo)
    h3 = y + 2 * q
    return [h0, n0, h1, n1, h2, rms_norm(h2, g), h3, rms_norm(h3, g)]


def main():
    mode, work = sys.argv[1], sys.argv[2]
    scattered = sys.argv[3:] == ["scattered"]
    names = ["p", "x", "g", "b", "bo"] + (["q", "y"] if scattered else [])
    if mode == "inputs":
        rng = np.random.default_rng(0)
        rows = (2, 6, 4) if scattered else (3, 4)
        shapes = {"p": rows, "x": rows, "q": (6, 4), "y": (6, 4)}
        for name in names:
            np.save(os.path.join(work, name + ".npy"),
                    rng.standard_normal(shapes.get(name, (4,))).astype(np.float32))
        return 0
    inputs = [np.load(os.path.join(work, n + ".npy")).astype(np.float64) for n in names]
    expected = scattered_reference(*inputs) if scattered else reference(*inputs)
    ok = True
    for run in ["fused-out", "mpi-out"]:
        for i, ref in enumerate(expected):
            name = "output%d" % i
            got = np.load(os.path.join(work, run, name + ".npy"))
            whole = np.load(os.path.join(work, "whole-out", name + ".npy"))
            err = float(np.max(np.abs(got - ref)))
            same = np.array_equal(got.view(np.uint32), whole.view(np.uint32))
            good = err < 1e-6 and same
            ok = ok and good
            print("%s %s: max error %.2g, bitwise the unfused: %s %s"
                  % (run, name, err, same, "ok" if good else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
