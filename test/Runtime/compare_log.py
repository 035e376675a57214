#!/usr/bin/python3
"""Compares the losses (and gradient norms) of an mp-run --train --log file
with a reference run's, step by step.

Prints each step's loss, the reference's and their relative difference, and
fails when one exceeds --tolerance (or the step counts differ).
"""
import argparse
import json
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("log")
    parser.add_argument("ref_dir", help="holds losses.npy and grad_norms.npy")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    with open(args.log) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    losses = np.load(args.ref_dir + "/losses.npy")
    norms = np.load(args.ref_dir + "/grad_norms.npy")
    if len(steps) != len(losses):
        print("%d steps logged, %d in the reference" % (len(steps), len(losses)))
        return 1
    worst = 0.0
    for i, (s, ref, ref_norm) in enumerate(zip(steps, losses, norms)):
        if s["step"] != i + 1:
            print("step %d logged as %s" % (i + 1, s["step"]))
            return 1
        rel = abs(s["loss"] - ref) / abs(ref)
        rel_norm = abs(s["grad_norm"] - ref_norm) / abs(ref_norm)
        worst = max(worst, rel, rel_norm)
        print("step %d: loss %.6f, reference %.6f, relative %.2g; grad_norm "
              "%.5g, reference %.5g, relative %.2g: %s"
              % (i + 1, s["loss"], ref, rel, s["grad_norm"], ref_norm, rel_norm,
                 "ok" if max(rel, rel_norm) <= args.tolerance else "FAIL"))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
