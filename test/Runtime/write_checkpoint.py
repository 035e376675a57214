#!/usr/bin/python3
"""Writes a one-rank mp checkpoint (rank0.safetensors and manifest.json, as
mp-run --train --save writes them) holding the given float32 .npy files.

  write_checkpoint.py DIR NAME=FILE.npy ...
"""
import json
import os
import struct
import sys

import numpy as np


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    header, data, params = {}, b"", []
    for item in sys.argv[2:]:
        name, path = item.split("=", 1)
        a = np.load(path).astype(np.float32)
        for key in (name, "master/" + name, "exp_avg/" + name, "exp_avg_sq/" + name):
            raw = a.tobytes() if not key.startswith("exp_") else np.zeros_like(a).tobytes()
            header[key] = {"dtype": "F32", "shape": list(a.shape),
                           "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        params.append({"name": name, "dtype": "f32", "local_shape": list(a.shape),
                       "shard_axis": -1, "shard_groups": 1})
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(out, "rank0.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"format": "mp-checkpoint", "version": 1, "step": 1, "ranks": 1,
                   "data_parallel": 1, "zero": 0, "parameters": params}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
