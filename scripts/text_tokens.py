#!/usr/bin/python3
"""Turns a text file into an mp-run --train token file: its bytes (vocabulary
256) cut into rows of SEQ+1 consecutive tokens, each row starting SEQ bytes
after the previous one (the last token of a row is the first of the next).

  scripts/text_tokens.py TEXT OUT.npy [--seq 64]
"""
import argparse

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("text")
    parser.add_argument("out")
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()
    data = np.frombuffer(open(args.text, "rb").read(), dtype=np.uint8).astype(np.int64)
    rows = (len(data) - 1) // args.seq
    tokens = np.stack([data[i * args.seq: i * args.seq + args.seq + 1] for i in range(rows)])
    np.save(args.out, tokens)
    print("%s: %d bytes, %d rows of %d tokens" % (args.out, len(data), rows, args.seq + 1))


if __name__ == "__main__":
    main()
