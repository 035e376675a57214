#!/usr/bin/python3
"""Compares the float initializers of two ONNX models.

Prints how many are equal (with --exact: fails unless all are, bit for bit)
or how many changed; with --tolerance T, fails unless every initializer is
within T of the reference's (max |a - b| / max |b|).
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("reference")
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--tolerance", type=float)
    args = parser.parse_args()
    a = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.model).graph.initializer}
    b = {t.name: numpy_helper.to_array(t) for t in onnx.load(args.reference).graph.initializer}
    names = [n for n in b if b[n].dtype.kind == "f"]
    if set(names) - set(a):
        print("missing: %s" % sorted(set(names) - set(a)))
        return 1
    for n in names:
        if a[n].shape != b[n].shape or a[n].dtype != b[n].dtype:
            print("%s: %s %s, reference %s %s" % (n, a[n].dtype, a[n].shape, b[n].dtype, b[n].shape))
            return 1
    changed = [n for n in names if not np.array_equal(a[n], b[n])]
    if args.tolerance is not None:
        worst = max(float(np.max(np.abs(a[n] - b[n])) / max(np.max(np.abs(b[n])), 1e-30))
                    for n in names)
        print("%d initializers, worst relative difference %.2g: %s"
              % (len(names), worst, "ok" if worst <= args.tolerance else "FAIL"))
        return 0 if worst <= args.tolerance else 1
    if args.exact:
        if changed:
            print("differ: %s" % changed)
            return 1
        print("%d initializers equal" % len(names))
    else:
        print("%d initializers, %d changed" % (len(names), len(changed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
