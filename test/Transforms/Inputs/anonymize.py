"""Writes a copy of an ONNX model with every name gone: nodes unnamed,
initializers, graph inputs/outputs and intermediate values renamed to v0,
v1, ... Passes must not depend on what an exporter called things."""
import sys

import onnx

model = onnx.load(sys.argv[1])
graph = model.graph
names = {}


def rename(name):
    if not name:
        return name
    if name not in names:
        names[name] = f"v{len(names)}"
    return names[name]


for value in list(graph.input) + list(graph.output) + list(graph.value_info):
    value.name = rename(value.name)
for init in graph.initializer:
    init.name = rename(init.name)
for node in graph.node:
    node.name = ""
    node.input[:] = [rename(n) for n in node.input]
    node.output[:] = [rename(n) for n in node.output]
onnx.save(model, sys.argv[2])
