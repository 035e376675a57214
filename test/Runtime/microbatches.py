#!/usr/bin/python3
"""Writes a step's batch of M distinct micro-batches for a pipeline test.

microbatches.py OUT IDS.npy LABELS.npy M: micro-batch k is IDS and LABELS
rolled k positions along the sequence (same tokens, another order, so each
micro-batch computes something else). Writes OUT/ids{k}.npy and
OUT/labels{k}.npy per micro-batch, and OUT/ids{n}x.npy, OUT/labels{n}x.npy:
the first n micro-batches stacked along the batch axis, for n = 2 and M.
"""
import os
import sys

import numpy as np


def main():
    out, ids_path, labels_path, count = sys.argv[1:5]
    count = int(count)
    ids, labels = np.load(ids_path), np.load(labels_path)
    os.makedirs(out, exist_ok=True)
    parts = []
    for k in range(count):
        pair = (np.roll(ids, k, axis=1), np.roll(labels, k, axis=1))
        np.save(os.path.join(out, "ids%d.npy" % k), pair[0])
        np.save(os.path.join(out, "labels%d.npy" % k), pair[1])
        parts.append(pair)
    for n in sorted({2, count}):
        np.save(os.path.join(out, "ids%dx.npy" % n),
                np.concatenate([p[0] for p in parts[:n]]))
        np.save(os.path.join(out, "labels%dx.npy" % n),
                np.concatenate([p[1] for p in parts[:n]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
