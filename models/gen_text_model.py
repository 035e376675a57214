#!/usr/bin/python3
"""A byte-level GPT-2-style model to train on text (mp-run --train).

Writes models/bytes_gpt/model.onnx: the bundled GPT-2 definition
(gen_tiny.GPT2) with a vocabulary of 256 (one token per byte), 2 layers,
hidden 64, 4 heads, 64 positions, tied embedding, batch 8 x 64 tokens,
freshly initialised (seed 2024). scripts/text_tokens.py turns a text file
into its token file.

Usage: /usr/bin/python3 models/gen_text_model.py
"""
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import gen_tiny  # noqa: E402

CONFIG = dict(layers=2, hidden=64, heads=4, vocab=256, max_positions=64,
              activation="gelu_erf", tied=True)
BATCH, SEQ = 8, 64


def main():
    torch.manual_seed(2024)
    model = gen_tiny.GPT2(CONFIG, tied=True).eval()
    with torch.no_grad():  # a smaller start than gen_tiny's test weights
        for p in model.parameters():
            if p.dim() >= 2:
                p.mul_(0.25)
    out = os.path.join(HERE, "bytes_gpt")
    os.makedirs(out, exist_ok=True)
    ids = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ids,), os.path.join(out, "model.onnx"), opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          do_constant_folding=False)
    print("wrote %s (%d parameters)" % (os.path.join(out, "model.onnx"),
                                        sum(p.numel() for p in model.parameters())))


if __name__ == "__main__":
    main()
