"""Convolutions as transformers use them, exported by PyTorch, with
PyTorch's outputs: a ViT patch embedding (kernel = stride 4 on a 10 x 10
image: the last 2 rows and columns are not read), and Whisper's audio front
end (Conv1d kernel 3, padding 1, then stride 2), a grouped Conv1d (wav2vec 2's
positional convolution) and a depthwise Conv2d with a channel multiplier of 2, and wav2vec 2's first
feature layer (Conv1d, GroupNorm, GELU).
Usage: conv_models.py DIR"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class Whisper(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(3, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(8, 8, kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.conv2(torch.nn.functional.gelu(self.conv1(x)))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    models = {"patch": (nn.Conv2d(3, 8, kernel_size=4, stride=4), (2, 3, 10, 10)),
              "whisper": (Whisper(), (2, 3, 9)),
              # wav2vec 2's positional convolution (groups 16 of 768 there)
              "grouped": (nn.Conv1d(8, 8, kernel_size=5, padding=2, groups=4), (2, 8, 11)),
              "depthwise": (nn.Conv2d(4, 8, kernel_size=3, padding=1, groups=4), (2, 4, 5, 6)),
              # wav2vec 2's first feature layer; GroupNorm exports as
              # InstanceNormalization (of 2 groups here: through a reshape)
              "groupnorm": (nn.Sequential(nn.Conv1d(1, 4, kernel_size=10, stride=5, bias=False),
                                          nn.GroupNorm(2, 4), nn.GELU()), (2, 1, 40))}
    for name, (model, shape) in models.items():
        x = torch.randn(*shape)
        with torch.no_grad():
            y = model(x)
        torch.onnx.export(model, (x,), os.path.join(out, name + ".onnx"),
                          opset_version=17, input_names=["x"], output_names=["y"])
        np.save(os.path.join(out, name + "_x.npy"), x.numpy())
        os.makedirs(os.path.join(out, name + "_ref"), exist_ok=True)
        np.save(os.path.join(out, name + "_ref", "y.npy"), y.numpy())


if __name__ == "__main__":
    main()
