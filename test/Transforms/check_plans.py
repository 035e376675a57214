#!/usr/bin/python3
"""Checks mp-auto-plan's full listing (top large, memory ample) against an
enumeration of the layouts its rules allow, done here independently: every
layout listed once, none missing, fastest first.

check_plans.py LISTING GPUS GLOBAL_BATCH
"""
import re
import sys


def divisors(n):
    return [k for k in range(1, n + 1) if n % k == 0]


def expected(layers, heads, vocab, seq, gpus, batch):
    out = set()
    for t in divisors(min(gpus, 8)):
        if heads % t or gpus % t or vocab % t:
            continue
        for p in divisors(gpus // t):
            if p > layers:
                continue
            d = gpus // (t * p)
            if batch % d:
                continue
            v = 1
            while p * v <= layers:
                if layers % (p * v) == 0 and not (v > 1 and p == 1):
                    for b in divisors(batch // d):
                        m = batch // d // b
                        if (p > 1 and m < p) or (v > 1 and m % p):
                            continue
                        for sp in ([False, True] if t > 1 and seq % t == 0 else [False]):
                            for r in ("none", "selective", "full"):
                                out.add((t, p, v, d, b, m, sp, r))
                v += 1
    return out


def parse(line):
    b = int(re.search(r"micro-batch (\d+)", line).group(1))
    opts = dict(kv.split("=") for kv in line.split("micro-batch")[1].split()[1:])
    t, p, v = int(opts.get("tp", 1)), int(opts.get("pp", 1)), int(opts.get("vp", 1))
    d, m = int(opts.get("dp", 1)), int(opts.get("microbatches", 0))
    return (t, p, v, d, b, m or None, opts.get("sp") == "true",
            opts.get("recompute", "none"))


def main():
    text = open(sys.argv[1]).read().splitlines()
    gpus, batch = int(sys.argv[2]), int(sys.argv[3])
    model = dict(kv.split("=") for kv in text[1].split(":")[1].split())
    layers, heads = int(model["layers"]), int(model["heads"])
    vocab = int(model["vocab"])
    seq = int(re.search(r"of (\d+) tokens", text[0]).group(1))
    rows = [l for l in text[2:] if "s/step" in l]
    times = [float(l.split()[0]) for l in rows]
    listed = []
    for row in rows:
        t, p, v, d, b, m, sp, r = parse(row)
        if m is None:  # no pipeline: one micro-batch of the replica's rows
            m = batch // d // b
        listed.append((t, p, v, d, b, m, sp, r))
    want = expected(layers, heads, vocab, seq, gpus, batch)
    print("%d listed, %d expected, %d duplicates, %d missing, %d extra, sorted %s"
          % (len(listed), len(want), len(listed) - len(set(listed)),
             len(want - set(listed)), len(set(listed) - want),
             times == sorted(times)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
