"""Writes small models with If nodes to the directory named, with inputs
and the outputs each branch computes (numpy), for test/Import/ONNX/if.test:

  flag.onnx       y = If(flag) then x @ w_then + 1 (nested: If(inner) on a
                  Constant true, whose else branch is never taken) else
                  x * 2 + p, where p is an input only the else branch reads;
                  w_then is the then branch's own initializer
  constant.onnx   an If on a Constant node (false): the else branch
  computed.onnx   an If on Greater(x[0, 0], 0): known only at run time
  vector.onnx     an If on a two-element initializer
  siblings.onnx   both branches hold an initializer named w (legal: each
                  branch is its own scope)
  two_ifs.onnx    y = If(c) + If(c) on a Constant with value_int, both
                  taken branches defining `tmp`, plus Cast(n) of an int64
                  input n
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(11)
x = rng.standard_normal((2, 4)).astype(np.float32)
p = rng.standard_normal((2, 4)).astype(np.float32)
w = rng.standard_normal((4, 4)).astype(np.float32)
X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
P = helper.make_tensor_value_info("p", TensorProto.FLOAT, [2, 4])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
FLAG = helper.make_tensor_value_info("flag", TensorProto.BOOL, [1])


def branch(name, nodes, output, initializers=()):
    return helper.make_graph(nodes, name, [],
                             [helper.make_tensor_value_info(output, TensorProto.FLOAT, [2, 4])],
                             list(initializers))


def save(name, graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, name + ".onnx"))


one = helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, np.float32)))
inner = helper.make_node(
    "If", ["inner_cond"], ["then_y"], name="inner_if",
    then_branch=branch("inner_then", [helper.make_node("Add", ["xw", "one"], ["xw1"])], "xw1"),
    else_branch=branch("inner_else", [helper.make_node("Sub", ["xw", "one"], ["xw0"])], "xw0"))
then_graph = branch("then", [
    helper.make_node("MatMul", ["x", "w_then"], ["xw"]),
    one,
    helper.make_node("Constant", [], ["inner_cond"], value=numpy_helper.from_array(np.array(True))),
    inner], "then_y", [numpy_helper.from_array(w, "w_then")])
two = helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2, np.float32)))
else_graph = branch("else", [two, helper.make_node("Mul", ["x", "two"], ["x2"]),
                             helper.make_node("Add", ["x2", "p"], ["else_y"])], "else_y")
save("flag", helper.make_graph(
    [helper.make_node("If", ["flag"], ["y"], name="outer_if", then_branch=then_graph,
                      else_branch=else_graph)], "flag", [X, P, FLAG], [Y]))

cond = helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array([False])))
save("constant", helper.make_graph(
    [cond, helper.make_node("If", ["cond"], ["y"], name="const_if",
                            then_branch=branch("t", [helper.make_node("Neg", ["x"], ["ny"])], "ny"),
                            else_branch=branch("e", [helper.make_node("Abs", ["x"], ["ay"])], "ay"))],
    "constant", [X], [Y]))

computed = [
    helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.float32))),
    helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
    helper.make_node("Greater", ["m", "zero"], ["positive"]),
    helper.make_node("If", ["positive"], ["y"], name="data_if",
                     then_branch=branch("t", [helper.make_node("Neg", ["x"], ["ny"])], "ny"),
                     else_branch=branch("e", [helper.make_node("Abs", ["x"], ["ay"])], "ay"))]
save("computed", helper.make_graph(computed, "computed", [X], [Y]))

save("vector", helper.make_graph(
    [helper.make_node("If", ["pair"], ["y"], name="pair_if",
                      then_branch=branch("t", [helper.make_node("Neg", ["x"], ["ny"])], "ny"),
                      else_branch=branch("e", [helper.make_node("Abs", ["x"], ["ay"])], "ay"))],
    "vector", [X], [Y], [numpy_helper.from_array(np.array([True, False]), "pair")]))

w2 = rng.standard_normal((4, 4)).astype(np.float32)
save("siblings", helper.make_graph(
    [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
     helper.make_node("If", ["c"], ["y"], name="siblings_if",
                      then_branch=branch("t", [helper.make_node("MatMul", ["x", "w"], ["t_y"])], "t_y",
                                         [numpy_helper.from_array(w, "w")]),
                      else_branch=branch("e", [helper.make_node("MatMul", ["x", "w"], ["e_y"])], "e_y",
                                         [numpy_helper.from_array(w2, "w")]))],
    "siblings", [X], [Y]))


def tmp_branch(name, op):
    return branch(name, [helper.make_node(op, ["x"], ["tmp"]),
                         helper.make_node("Identity", ["tmp"], [name + "_out"])], name + "_out")


N = helper.make_tensor_value_info("n", TensorProto.INT64, [1])
save("two_ifs", helper.make_graph(
    [helper.make_node("Constant", [], ["c"], value_int=1),
     helper.make_node("If", ["c"], ["a"], name="first_if", then_branch=tmp_branch("t1", "Neg"),
                      else_branch=tmp_branch("e1", "Relu")),
     helper.make_node("If", ["c"], ["b"], name="second_if", then_branch=tmp_branch("t2", "Abs"),
                      else_branch=tmp_branch("e2", "Relu")),
     helper.make_node("Add", ["a", "b"], ["ab"]),
     helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
     helper.make_node("Add", ["ab", "nf"], ["y"])],
    "two_ifs", [X, N], [Y]))

np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "p.npy"), p)
for name, y in [("then", x @ w + 1), ("else", x * 2 + p), ("abs", np.abs(x)),
                ("two", -x + np.abs(x) + 3)]:
    os.makedirs(os.path.join(out, name), exist_ok=True)
    np.save(os.path.join(out, name, "y.npy"), y.astype(np.float32))
