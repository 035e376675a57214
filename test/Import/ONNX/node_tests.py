#!/usr/bin/python3
"""ONNX backend node tests (Debian's libonnx-testdata) for every op the
importer claims: imports each test model with mp-opt (which verifies the IR)
and compares with the checked-in results in node-tests.txt.

A test that is listed as passing and now fails is a regression: the script
exits non-zero. Newly passing tests are reported; rerun with --update to
record them. The runtime issue extends this to executing the tests.
"""
import argparse
import collections
import os
import subprocess
import sys

import onnx

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


def bindings(path):
    """Integer inputs (shapes, axes, indices, k) bound to the test's values:
    mp imports static graphs, and these decide output shapes."""
    model = onnx.load(path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    data = os.path.join(os.path.dirname(path), "test_data_set_0")
    bound = []
    for index, value in enumerate(inputs):
        pb = os.path.join(data, "input_%d.pb" % index)
        if value.type.tensor_type.elem_type in INTEGER_TYPES and os.path.exists(pb):
            bound.append("%s=%s" % (value.name, pb))
    return bound


def run_import(mp_opt, path):
    command = [mp_opt, path, "-o", os.devnull]
    bound = bindings(path)
    if bound:
        command.append("--mp-bind-input=" + ",".join(bound))
    proc = subprocess.run(command,
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return "pass", ""
    lines = [l for l in proc.stderr.splitlines() if "error:" in l]
    reason = lines[0].split("error:", 1)[1].strip() if lines else "exit %d" % proc.returncode
    return "fail", reason


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
    by_op = collections.defaultdict(lambda: [0, 0])
    for name, op, status, _ in results:
        by_op[op][0] += 1
        by_op[op][1] += status == "pass"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# ONNX node tests (libonnx-testdata 1.12) imported by mp-opt.\n")
        f.write("# Regenerate: test/Import/ONNX/node_tests.py --update\n")
        f.write("# op\ttests\timported\n")
        for op in sorted(by_op):
            f.write("#   %s\t%d\t%d\n" % (op, by_op[op][0], by_op[op][1]))
        f.write("# test\top\tresult\treason\n")
        for name, op, status, reason in results:
            f.write("%s\t%s\t%s\t%s\n" % (name, op, status, reason))
    os.replace(tmp, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mp-opt", default="mp-opt")
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
    results = []
    for name, op, path in select_tests(args.data, claimed):
        status, reason = run_import(args.mp_opt, path)
        results.append((name, op, status, reason))

    passed = sum(r[2] == "pass" for r in results)
    if args.update:
        write_results(args.expected, results)
        print("wrote %s: %d of %d node tests import" % (args.expected, passed, len(results)))
        return 0

    expected = read_expected(args.expected)
    regressions = [r for r in results if expected.get(r[0]) == "pass" and r[2] != "pass"]
    unlisted = [r[0] for r in results if r[0] not in expected]
    improved = [r[0] for r in results if expected.get(r[0]) == "fail" and r[2] == "pass"]
    for name, op, _, reason in regressions:
        print("REGRESSION %s (%s): %s" % (name, op, reason))
    for name in unlisted:
        print("UNLISTED %s: rerun with --update" % name)
    for name in improved:
        print("NOW PASSING %s: rerun with --update to record it" % name)
    print("node tests: %d of %d import (%d listed as passing)" %
          (passed, len(results), sum(v == "pass" for v in expected.values())))
    return 1 if regressions or unlisted else 0


if __name__ == "__main__":
    sys.exit(main())
