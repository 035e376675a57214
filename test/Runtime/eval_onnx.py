#!/usr/bin/python3
"""Evaluates an ONNX model with the numpy interpreter of models/onnx_np_eval.py
(an ONNX tool independent of mp) and writes every output as OUT/NAME.npy.

  eval_onnx.py MODEL.onnx NAME=FILE.npy ... --output-dir OUT
"""
import argparse
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
sys.dont_write_bytecode = True
import onnx_np_eval  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--output-dir", required=True)
    args = parser.parse_args()
    feeds = {}
    for item in args.inputs:
        name, path = item.split("=", 1)
        feeds[name] = np.load(path)
    outs = onnx_np_eval.run(onnx.load(args.model), feeds)
    os.makedirs(args.output_dir, exist_ok=True)
    for name, value in outs.items():
        np.save(os.path.join(args.output_dir, name + ".npy"), value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
