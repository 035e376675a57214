#!/usr/bin/python3
"""Compares every REF_DIR/NAME.npy with OUT_DIR/NAME.npy.

Prints, per output, the max absolute error, the reference's scale (max |x|)
and their ratio, and fails when the ratio exceeds --tolerance. With --floor F,
a scale is at least F times the largest scale of all the references (for
gradients that are zero in exact arithmetic, whose reference is rounding
noise). --names compares only the given names.
"""
import argparse
import os
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out_dir")
    parser.add_argument("ref_dir")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="max |out - ref| / max |ref| (default 1e-4)")
    parser.add_argument("--floor", type=float, default=0.0,
                        help="least scale, as a fraction of the largest (default 0)")
    parser.add_argument("--names", nargs="+", help="compare only these")
    args = parser.parse_args()
    names = args.names or sorted(f[:-4] for f in os.listdir(args.ref_dir)
                                 if f.endswith(".npy"))
    largest = max(float(np.max(np.abs(np.load(os.path.join(args.ref_dir, n + ".npy")))))
                  if np.load(os.path.join(args.ref_dir, n + ".npy")).size else 0.0
                  for n in names) if names else 0.0
    if not names:
        sys.exit("error: no .npy files in %s" % args.ref_dir)
    worst = 0.0
    for name in names:
        ref = np.load(os.path.join(args.ref_dir, name + ".npy"))
        path = os.path.join(args.out_dir, name + ".npy")
        if not os.path.exists(path):
            print("%s: missing from %s" % (name, args.out_dir))
            return 1
        out = np.load(path)
        if out.shape != ref.shape:
            print("%s: shape %s, expected %s" % (name, out.shape, ref.shape))
            return 1
        err = float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        scale = max(scale, args.floor * largest)
        rel = err / scale if scale > 0 else err
        worst = max(worst, rel)
        verdict = "ok" if rel <= args.tolerance else "FAIL"
        print("%s: max abs error %.3g, scale %.3g, relative %.3g (tolerance %g): %s"
              % (name, err, scale, rel, args.tolerance, verdict))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
