#!/usr/bin/python3
"""Compares two mp-run --train --log files step by step: each step's loss
and gradient norm within --tolerance relative.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("log")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()
    a, b = load(args.log), load(args.reference)
    if len(a) != len(b):
        print("%d steps, the reference %d" % (len(a), len(b)))
        return 1
    ok = True
    for s, r in zip(a, b):
        rel = max(abs(s[k] - r[k]) / abs(r[k]) for k in ("loss", "grad_norm"))
        good = rel <= args.tolerance and s["step"] == r["step"]
        ok &= good
        print("step %d: loss %.6f vs %.6f, grad_norm %.5g vs %.5g, relative %.2g: %s"
              % (s["step"], s["loss"], r["loss"], s["grad_norm"], r["grad_norm"], rel,
                 "ok" if good else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
