#!/usr/bin/python3
"""Writes OUT/NAME.npy = the mean over DIR... of each DIR/NAME.npy.

The reference of a pipeline step over micro-batches: the unpartitioned
program run on each micro-batch alone, its loss and gradients averaged (a
step's loss is the mean of its micro-batches' mean losses).
"""
import os
import sys

import numpy as np


def main():
    if len(sys.argv) < 3:
        print("usage: mean_npy.py OUT DIR [DIR ...]")
        return 2
    out, dirs = sys.argv[1], sys.argv[2:]
    for root, _, files in os.walk(dirs[0]):
        for f in files:
            if not f.endswith(".npy"):
                continue
            rel = os.path.relpath(os.path.join(root, f), dirs[0])
            arrays = [np.load(os.path.join(d, rel)) for d in dirs]
            mean = sum(a.astype(np.float64) for a in arrays) / len(arrays)
            os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
            np.save(os.path.join(out, rel), mean.astype(arrays[0].dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
