"""Writes calls.onnx to the directory named, exported by torch with
constant folding (each call of a linear gets its own transposed copy of
the weight, equal copies stored once and repeated as Identity nodes):

  shared   one Linear with a bias called twice (as DeBERTa's query and key
           projections): one parameter
  fc, fc_1 two Linears with biases, both zero-initialized (equal weights,
           as fresh adapters): two parameters
  proj     one Linear without a bias called twice (a recurrent-depth or
           ALBERT-style model without biases): one parameter
  adapter_1, adapter_2
           two Linears without biases, both zero-initialized: two
           parameters (their scopes end in different call-like suffixes)
  head.decoder
           a Linear without its own bias that adds its parent's, as HF's
           BERT head does (decoder.bias = head.bias, exported as
           head.bias): named head.decoder.weight, not head.weight
"""
import os
import sys
import warnings

import torch
import torch.nn as nn


class Head(nn.Module):
    """HF's BertLMPredictionHead: the decoder adds its parent's bias."""
    def __init__(self):
        super().__init__()
        self.decoder = nn.Linear(4, 4, bias=False)
        self.bias = nn.Parameter(torch.zeros(4))
        self.decoder.bias = self.bias

    def forward(self, h):
        return self.decoder(h)


class Calls(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.fc = nn.Linear(4, 4)
        self.fc_1 = nn.Linear(4, 4)
        self.proj = nn.Linear(4, 4, bias=False)
        self.adapter_1 = nn.Linear(4, 4, bias=False)
        self.adapter_2 = nn.Linear(4, 4, bias=False)
        for m in (self.adapter_1, self.adapter_2):
            nn.init.zeros_(m.weight)
        self.head = Head()
        for m in (self.fc, self.fc_1):
            nn.init.zeros_(m.weight)

    def forward(self, x):
        h = self.shared(x) + self.shared(2 * x)
        h = h + self.fc(h) + self.fc_1(3 * h)
        h = self.proj(self.proj(h).tanh())
        h = h + self.adapter_1(h) + self.adapter_2(2 * h)
        return self.head(h)


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
with torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(Calls().eval(), (torch.randn(1, 2, 4),), os.path.join(out, "calls.onnx"),
                      opset_version=17, input_names=["x"], output_names=["y"])
