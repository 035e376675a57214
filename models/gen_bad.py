#!/usr/bin/python3
"""Write small malformed / unsupported ONNX models into models/bad/ for error tests.

Needs models/gpt2/model.onnx (run gen_tiny.py first) for truncated.onnx.

  truncated.onnx               first half of models/gpt2/model.onnx's bytes (unparsable)
  missing_initializer.onnx     MatMul(x, W) where W is not an input/initializer/node output
  dynamic_dim.onnx             valid; x is [batch, 8] with symbolic dim_param "batch"
  unsupported_ops.onnx         valid; nodes hardmax_a, hardmax_b (Hardmax), det_a, det_b (Det)
  external_missing.onnx        valid structure; W [8,4] is external data in absent.bin (missing)
  external_present/model.onnx  same graph, W in external_present/weights.bin (present)
  opset11_gpt_block.onnx       valid; torch export at opset 11: Linear(8->4) (Gemm) + Softmax(axis=-1)

external_present: W = (arange(32, dtype=float32) / 10).reshape(8, 4) (row-major), y = x @ W, x [2,8].
  W[i, j] = (4*i + j) / 10; with x = ones([2, 8]), every row of y is
  sum_i W[i, j] = (112 + 8*j) / 10  ->  y = [[11.2, 12.0, 12.8, 13.6],
                                            [11.2, 12.0, 12.8, 13.6]]
  external_present/inputs/x.npy (ones) and outputs/y.npy hold exactly that.

Usage: /usr/bin/python3 models/gen_bad.py [--out DIR] [--gpt2 PATH]
"""
import argparse
import io
import os
import shutil
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = [helper.make_opsetid("", 17)]


def make_model(nodes, inputs, outputs, inits=(), name="bad"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=OPSET, producer_name="mp-gen_bad")
    m.ir_version = 8
    return m


def write(model, path):
    # raw serialization: onnx.save would try to handle external data itself
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def external_tensor(name, dims, location):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(4 * int(np.prod(dims))))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def matmul_external_model(location):
    return make_model(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [external_tensor("W", [8, 4], location)], name="external")


def check_with_placeholder(model, location):
    """onnx 1.12's checker requires the external file to exist; check a copy next to an empty one."""
    with tempfile.TemporaryDirectory() as td:
        write(model, os.path.join(td, "model.onnx"))
        open(os.path.join(td, location), "wb").close()
        onnx.checker.check_model(os.path.join(td, "model.onnx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "bad"))
    ap.add_argument("--gpt2", default=os.path.join(HERE, "gpt2", "model.onnx"))
    args = ap.parse_args()
    out = args.out
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)

    # 1. truncated protobuf
    data = open(args.gpt2, "rb").read()
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(data[: len(data) // 2])
    try:
        onnx.load_from_string(data[: len(data) // 2])
        print("note: truncated.onnx still parses with the python protobuf loader")
    except Exception as e:  # expected
        print("truncated.onnx: parse fails as intended (%s)" % type(e).__name__)

    # 2. undefined tensor W (no checker: it would reject it)
    write(make_model(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], name="missing_initializer"),
        os.path.join(out, "missing_initializer.onnx"))

    # 3. symbolic batch dim
    rng = np.random.RandomState(0)
    W = numpy_helper.from_array(rng.randn(8, 4).astype(np.float32), "W")
    m = make_model(
        [helper.make_node("MatMul", ["x", "W"], ["t"], name="matmul"),
         helper.make_node("Relu", ["t"], ["y"], name="relu")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [W], name="dynamic_dim")
    onnx.checker.check_model(m, full_check=True)
    write(m, os.path.join(out, "dynamic_dim.onnx"))

    # 4. unsupported op types (Hardmax x2, Det x2); Add is supported
    m = make_model(
        [helper.make_node("Hardmax", ["x"], ["h1"], name="hardmax_a", axis=-1),
         helper.make_node("Hardmax", ["h1"], ["h2"], name="hardmax_b", axis=-1),
         helper.make_node("Det", ["x"], ["d1"], name="det_a"),
         helper.make_node("Det", ["h2"], ["d2"], name="det_b"),
         helper.make_node("Add", ["d1", "d2"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], name="unsupported_ops")
    onnx.checker.check_model(m, full_check=True)
    write(m, os.path.join(out, "unsupported_ops.onnx"))

    # 5. external data, file missing
    m = matmul_external_model("absent.bin")
    check_with_placeholder(m, "absent.bin")
    write(m, os.path.join(out, "external_missing.onnx"))
    assert not os.path.exists(os.path.join(out, "absent.bin"))

    # 6. external data, file present
    d = os.path.join(out, "external_present")
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "outputs"))
    w = (np.arange(32, dtype=np.float32) / 10).reshape(8, 4)
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(w.astype("<f4").tobytes())
    m = matmul_external_model("weights.bin")
    write(m, os.path.join(d, "model.onnx"))
    onnx.checker.check_model(os.path.join(d, "model.onnx"), full_check=True)
    loaded = onnx.load(os.path.join(d, "model.onnx"))  # resolves weights.bin
    assert np.array_equal(numpy_helper.to_array(loaded.graph.initializer[0]), w)
    x = np.ones((2, 8), dtype=np.float32)
    y = x @ w
    assert np.allclose(y, [[11.2, 12.0, 12.8, 13.6]] * 2)
    np.save(os.path.join(d, "inputs", "x.npy"), x)
    np.save(os.path.join(d, "outputs", "y.npy"), y)

    # 7. opset-11 export from torch (for the version-converter path)
    import torch
    torch.manual_seed(11)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.softmax(self.fc(x), dim=-1)

    f = io.BytesIO()
    torch.onnx.export(Block().eval(), (torch.randn(2, 8),), f, opset_version=11,
                      input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(m, full_check=True)
    write(m, os.path.join(out, "opset11_gpt_block.onnx"))

    for root, _, files in sorted(os.walk(out)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            print("  %-45s %7d bytes" % (os.path.relpath(p, out), os.path.getsize(p)))


if __name__ == "__main__":
    main()
