#!/usr/bin/python3
"""ONNX backend node tests (Debian's libonnx-testdata) for every op the
importer claims: imports each test model with mp-opt (which verifies the IR),
compiles it to an artifact, runs it with mp-run on the test's inputs and
compares the outputs with the expected ones at the backend tests' tolerance
(rtol 1e-3, atol 1e-7). Results are checked against node-tests.txt.

Each test reaches a level: fail (does not import) < imported (imports, but
does not compile, run or match) < pass (outputs match). A test below its
recorded level is a regression: the script exits non-zero. Better results
are reported; rerun with --update to record them.
"""
import argparse
import collections
import concurrent.futures
import os
import subprocess
import sys

import shutil
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data/node"


def op_types(model_path):
    model = onnx.load(model_path, load_external_data=False)
    return sorted({n.op_type for n in model.graph.node})


def select_tests(data, claimed):
    """Tests whose graph uses only claimed ops, with the op they test."""
    tests = []
    for name in sorted(os.listdir(data)):
        path = os.path.join(data, name, "model.onnx")
        if not os.path.exists(path):
            continue
        ops = op_types(path)
        if ops and set(ops) <= claimed:
            # The op under test: the one named in the test, else the first.
            tested = next((o for o in ops if o.lower() in name.replace("_", "")),
                          ops[0])
            tests.append((name, tested, path))
    return tests


INTEGER_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
# Inputs of other types that decide output shapes: (op type, input index).
SHAPE_INPUTS = {("OneHot", 1)}  # depth, the size of the new axis


def bindings(path):
    """Integer inputs (shapes, axes, indices, k) and OneHot's depth bound to
    the test's values: mp imports static graphs, and these decide output
    shapes."""
    model = onnx.load(path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    data = os.path.join(os.path.dirname(path), "test_data_set_0")
    shaping = {n.input[i] for n in model.graph.node for (op, i) in SHAPE_INPUTS
               if n.op_type == op and len(n.input) > i}
    bound = []
    for index, value in enumerate(inputs):
        pb = os.path.join(data, "input_%d.pb" % index)
        decides = value.type.tensor_type.elem_type in INTEGER_TYPES or value.name in shaping
        if decides and os.path.exists(pb):
            bound.append("%s=%s" % (value.name, pb))
    return bound


LEVELS = {"fail": 0, "imported": 1, "pass": 2}


def first_error(stderr, returncode):
    lines = [l for l in stderr.splitlines() if "error:" in l]
    return lines[0].split("error:", 1)[1].strip() if lines else "exit %d" % returncode


def run_test(mp_opt, mp_run, path, work):
    """Imports, compiles, runs and compares one node test."""
    bound = bindings(path)
    bind = ["--mp-bind-input=" + ",".join(bound)] if bound else []

    def import_only():
        return subprocess.run([mp_opt, path, "-o", os.devnull] + bind,
                              capture_output=True, text=True, timeout=60)

    if not mp_run:
        proc = import_only()
        if proc.returncode != 0:
            return "fail", first_error(proc.stderr, proc.returncode)
        return "imported", "not run (no mp-run)"
    # Compiling the artifact imports too, so the import alone runs only to
    # tell a model that does not import from one that does not compile.
    artifact = os.path.join(work, "artifact")
    proc = subprocess.run([mp_opt, path, "--artifact", artifact] + bind,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        imported = import_only()
        if imported.returncode != 0:
            return "fail", first_error(imported.stderr, imported.returncode)
        return "imported", "artifact: " + first_error(proc.stderr, proc.returncode)

    model = onnx.load(path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    bound_names = {b.split("=", 1)[0] for b in bound}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    data = os.path.join(os.path.dirname(path), "test_data_set_0")
    command = [mp_run, artifact, "--warmup", "0", "--iterations", "1", "--quiet",
               "--threads", "1", "--output-dir", os.path.join(work, "out")]
    for index, name in enumerate(inputs):
        if name in bound_names:
            continue
        tensor = onnx.TensorProto()
        tensor.ParseFromString(open(os.path.join(data, "input_%d.pb" % index), "rb").read())
        npy = os.path.join(work, "input_%d.npy" % index)
        # (np.ascontiguousarray would make a scalar input 1-d)
        np.save(npy, numpy_helper.to_array(tensor).copy(order="C"))
        command += ["--input", "%s=%s" % (name, npy)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return "imported", "run: " + first_error(proc.stderr, proc.returncode)
    for index, output in enumerate(model.graph.output):
        tensor = onnx.TensorProto()
        tensor.ParseFromString(open(os.path.join(data, "output_%d.pb" % index), "rb").read())
        expected = numpy_helper.to_array(tensor)
        actual = np.load(os.path.join(work, "out", output.name + ".npy"))
        if actual.shape != expected.shape:
            return "imported", "output %s has shape %s, expected %s" % (
                output.name, actual.shape, expected.shape)
        if expected.dtype.kind in "fc":
            ok = np.allclose(actual, expected, rtol=1e-3, atol=1e-7, equal_nan=True)
        else:
            ok = np.array_equal(actual, expected.astype(actual.dtype))
        if not ok:
            err = np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))
            return "imported", "output %s differs (max abs error %.3g)" % (output.name, err)
    return "pass", ""


def read_expected(path):
    expected = {}
    if os.path.exists(path):
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            fields = line.rstrip("\n").split("\t")
            expected[fields[0]] = fields[2]
    return expected


def write_results(path, results):
    by_op = collections.defaultdict(lambda: [0, 0, 0])
    for name, op, status, _ in results:
        by_op[op][0] += 1
        by_op[op][1] += status != "fail"
        by_op[op][2] += status == "pass"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# ONNX node tests (libonnx-testdata 1.12): imported by mp-opt, then\n")
        f.write("# compiled and run by mp-run and compared (rtol 1e-3, atol 1e-7).\n")
        f.write("# Regenerate: test/Import/ONNX/node_tests.py --mp-opt build/bin/mp-opt --mp-run build/bin/mp-run --update\n")
        f.write("# op\ttests\timported\tpassed\n")
        for op in sorted(by_op):
            f.write("#   %s\t%d\t%d\t%d\n" % ((op,) + tuple(by_op[op])))
        f.write("# test\top\tresult\treason\n")
        for name, op, status, reason in results:
            f.write("%s\t%s\t%s\t%s\n" % (name, op, status, reason))
    os.replace(tmp, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mp-opt", default="mp-opt")
    parser.add_argument("--mp-run", default=shutil.which("mp-run"),
                        help="mp-run binary (omit to only import)")
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--expected", default=os.path.join(here, "node-tests.txt"))
    parser.add_argument("--update", action="store_true",
                        help="rewrite the expected results")
    args = parser.parse_args()

    if not os.path.isdir(args.data):
        sys.exit("error: %s not found (install libonnx-testdata)" % args.data)
    claimed = set(subprocess.run([args.mp_opt, "--mp-list-onnx-ops"],
                                 capture_output=True, text=True,
                                 check=True).stdout.split())
    # The tests run one process each at a time, so they run side by side, a
    # test per CPU (process start-up is most of their time).
    with tempfile.TemporaryDirectory() as work:
        def run_one(test):
            name, op, path = test
            test_dir = os.path.join(work, name)
            os.makedirs(test_dir)
            status, reason = run_test(args.mp_opt, args.mp_run, path, test_dir)
            return name, op, status, reason

        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            results = list(pool.map(run_one, select_tests(args.data, claimed)))

    imported = sum(r[2] != "fail" for r in results)
    passed = sum(r[2] == "pass" for r in results)
    summary = "node tests: %d of %d import, %d run and match" % (
        imported, len(results), passed)
    if args.update:
        write_results(args.expected, results)
        print("wrote %s; %s" % (args.expected, summary))
        return 0

    expected = read_expected(args.expected)
    level = lambda status: LEVELS.get(status, 0)
    regressions = [r for r in results
                   if r[0] in expected and level(r[2]) < level(expected[r[0]])]
    unlisted = [r[0] for r in results if r[0] not in expected]
    improved = [r[0] for r in results
                if r[0] in expected and level(r[2]) > level(expected[r[0]])]
    for name, op, _, reason in regressions:
        print("REGRESSION %s (%s): %s" % (name, op, reason))
    for name in unlisted:
        print("UNLISTED %s: rerun with --update" % name)
    for name in improved:
        print("NOW PASSING %s: rerun with --update to record it" % name)
    print(summary)
    return 1 if regressions or unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
