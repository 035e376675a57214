#!/usr/bin/python3
"""Central finite differences of a 2-rank program's loss against the
gradients mp-autodiff's collective rules give (all_gather, all_slice,
reduce_scatter, all_reduce, and a replicated parameter's partial gradient).

  fd_collectives.py TEMPLATE.mlir.in WORKDIR --mp-opt P --mp-run P --mpirun P

The template's parameters read 9 float32 values from @DATA@ (w: 8 values,
sharded over the 2 ranks; r: 1 value, replicated). Prints each gradient
element, analytic and numeric, and fails beyond 1e-2 relative plus 2e-3 of
the largest gradient.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

H = 1e-2


def compile_and_run(args, values, name, autodiff):
    data = os.path.join(args.workdir, name + ".bin")
    values.astype(np.float32).tofile(data)
    with open(args.template) as f:
        text = f.read().replace("@DATA@", data)
    program = os.path.join(args.workdir, name + ".mlir")
    with open(program, "w") as f:
        f.write(text)
    artifact = os.path.join(args.workdir, name + "-art")
    out = os.path.join(args.workdir, name + "-out")
    subprocess.run([args.mp_opt, program] + (["--mp-autodiff"] if autodiff else []) +
                   ["--artifact", artifact], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.mpirun, "-np", "2", args.mp_run, artifact, "--output-dir", out,
                    "--warmup", "0", "--iterations", "1", "--quiet"], check=True)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("template")
    parser.add_argument("workdir")
    parser.add_argument("--mp-opt", required=True)
    parser.add_argument("--mp-run", required=True)
    parser.add_argument("--mpirun", default="mpirun")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    values = np.random.default_rng(3).uniform(-1, 1, 9).astype(np.float64)
    out = compile_and_run(args, values, "analytic", True)
    analytic = np.concatenate([np.load(os.path.join(out, "grads", "w.npy")).ravel(),
                               np.load(os.path.join(out, "grads", "r.npy")).ravel()])
    numeric = np.zeros(9)
    for k in range(9):
        losses = []
        for sign in (1, -1):
            v = values.copy()
            v[k] += sign * H
            o = compile_and_run(args, v, "fd", False)
            losses.append(float(np.load(os.path.join(o, "loss.npy"))))
        numeric[k] = (losses[0] - losses[1]) / (2 * H)
    scale = float(np.max(np.abs(numeric)))
    ok = True
    for k in range(9):
        good = abs(analytic[k] - numeric[k]) <= 1e-2 * abs(numeric[k]) + 2e-3 * scale
        ok &= good
        print("%s[%d]: analytic %.6f, numeric %.6f: %s"
              % ("w" if k < 8 else "r", k if k < 8 else 0, analytic[k], numeric[k],
                 "ok" if good else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
