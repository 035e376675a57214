//===- HostTensorTest.cpp - import-time constant folding ------------------===//
//
// Each case compares the folder with values worked out by hand.
//
//===----------------------------------------------------------------------===//
#include "HostTensor.h"
#include "ONNXOps.h"

#include <onnx/onnx_pb.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

using namespace mp::onnx_import;

namespace {

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> values,
                DType type = DType::Int64) {
  HostTensor t;
  t.dtype = type;
  t.shape = std::move(shape);
  t.ints = std::move(values);
  return t;
}

HostTensor floats(std::vector<int64_t> shape, std::vector<double> values) {
  HostTensor t;
  t.dtype = DType::Float;
  t.shape = std::move(shape);
  t.floats = std::move(values);
  return t;
}

struct Node {
  onnx::NodeProto proto;
  explicit Node(const std::string &op, int outputs = 1) {
    proto.set_op_type(op);
    proto.set_name("test_" + op);
    for (int i = 0; i < outputs; ++i)
      proto.add_output("y" + std::to_string(i));
  }
  /// Names `n` inputs (folds of variadic or optional inputs count them).
  Node &inputs(int n) {
    for (int i = 0; i < n; ++i)
      proto.add_input("x" + std::to_string(i));
    return *this;
  }
  Node &attr(const std::string &name, int64_t v) {
    auto *a = proto.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  Node &attr(const std::string &name, std::vector<int64_t> v) {
    auto *a = proto.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
    return *this;
  }
  Node &attr(const std::string &name, const std::string &s) {
    auto *a = proto.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(s);
    return *this;
  }
};

std::vector<HostTensor> fold(const Node &node,
                             std::vector<const HostTensor *> inputs) {
  std::vector<HostTensor> out;
  std::string error;
  bool ok = foldNode(node.proto, inputs, out, error);
  EXPECT_TRUE(ok) << node.proto.op_type() << ": " << error;
  return out;
}

TEST(HostTensorFold, ReshapeCopiesZeroAndInfersMinusOne) {
  HostTensor x = floats({2, 3, 4}, std::vector<double>(24, 1.0));
  HostTensor shape = ints({3}, {0, -1, 2});
  auto out = fold(Node("Reshape"), {&x, &shape});
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 6, 2}));
}

TEST(HostTensorFold, SliceClampsHugeEndsAndWalksBackwards) {
  HostTensor x = ints({6}, {0, 1, 2, 3, 4, 5});
  HostTensor starts = ints({1}, {1});
  HostTensor ends = ints({1}, {std::numeric_limits<int64_t>::max()});
  auto fwd = fold(Node("Slice"), {&x, &starts, &ends});
  EXPECT_EQ(fwd[0].ints, (std::vector<int64_t>{1, 2, 3, 4, 5}));

  HostTensor rs = ints({1}, {-1}),
             re = ints({1}, {std::numeric_limits<int64_t>::min()});
  HostTensor axes = ints({1}, {0}), steps = ints({1}, {-2});
  auto back = fold(Node("Slice"), {&x, &rs, &re, &axes, &steps});
  EXPECT_EQ(back[0].ints, (std::vector<int64_t>{5, 3, 1}));
}

TEST(HostTensorFold, SliceCountsHugeStepsWithoutOverflow) {
  // Steps near INT64_MAX/MIN take one element (the fuzzer found the count
  // overflowing); INT64_MIN's magnitude has no int64_t.
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  constexpr int64_t min = std::numeric_limits<int64_t>::min();
  SliceRange up = normalizeSlice(9, 4, max, max);
  EXPECT_EQ(up.start, 4);
  EXPECT_EQ(up.count, 1);
  EXPECT_EQ(normalizeSlice(9, 8, -10, min).count, 1);
  EXPECT_EQ(normalizeSlice(9, 8, -10, -1).count, 9);
  EXPECT_EQ(normalizeSlice(9, 3, 3, 1).count, 0);
  EXPECT_EQ(normalizeSlice(9, 2, 7, 2).count, 3);
  EXPECT_EQ(normalizeSlice(9, 2, 7, -2).count, 0);
}

TEST(HostTensorFold, GatherNegativeIndexOnAxisOne) {
  HostTensor x = ints({2, 3}, {10, 11, 12, 20, 21, 22});
  HostTensor idx = ints({2}, {-1, 0});
  auto out = fold(Node("Gather").attr("axis", 1), {&x, &idx});
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].ints, (std::vector<int64_t>{12, 10, 22, 20}));
}

TEST(HostTensorFold, GatherOutOfRangeIsAnError) {
  HostTensor x = ints({3}, {1, 2, 3});
  HostTensor idx = ints({}, {3});
  std::vector<HostTensor> out;
  std::string error;
  EXPECT_FALSE(foldNode(Node("Gather").proto, {&x, &idx}, out, error));
  EXPECT_EQ(error, "gather index 3 is out of range");
}

TEST(HostTensorFold, TriluLowerAndUpperWithDiagonal) {
  HostTensor x = ints({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  auto lower = fold(Node("Trilu").attr("upper", int64_t(0)), {&x});
  EXPECT_EQ(lower[0].ints, (std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  HostTensor k = ints({}, {1});
  auto upper = fold(Node("Trilu"), {&x, &k});
  EXPECT_EQ(upper[0].ints, (std::vector<int64_t>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
}

/// CumSum along an axis, plain, exclusive and reversed; Not; Clip; Max.
TEST(HostTensorFold, CumSumNotClipAndMax) {
  HostTensor x = ints({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor axis1 = ints({}, {1}), axis0 = ints({}, {0});
  EXPECT_EQ(fold(Node("CumSum"), {&x, &axis1})[0].ints,
            (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(
      fold(Node("CumSum").attr("exclusive", int64_t(1)), {&x, &axis1})[0].ints,
      (std::vector<int64_t>{0, 1, 3, 0, 4, 9}));
  EXPECT_EQ(
      fold(Node("CumSum").attr("reverse", int64_t(1)), {&x, &axis0})[0].ints,
      (std::vector<int64_t>{5, 7, 9, 4, 5, 6}));
  HostTensor b = ints({3}, {1, 0, 1}, DType::Bool);
  EXPECT_EQ(fold(Node("Not"), {&b})[0].ints, (std::vector<int64_t>{0, 1, 0}));
  HostTensor f = floats({4}, {-3, 0.5, 2, 1}), lo = floats({}, {-1}),
             hi = floats({}, {1});
  EXPECT_EQ(fold(Node("Clip").inputs(3), {&f, &lo, &hi})[0].floats,
            (std::vector<double>{-1, 0.5, 1, 1}));
  HostTensor g = floats({4}, {0, 1, 3, -2});
  EXPECT_EQ(fold(Node("Max").inputs(2), {&f, &g})[0].floats,
            (std::vector<double>{0, 1, 3, 1}));
}

TEST(HostTensorFold, RangeAndEinsumBuildRotaryTable) {
  HostTensor start = floats({}, {0}), limit = floats({}, {3}),
             delta = floats({}, {1});
  auto t = fold(Node("Range"), {&start, &limit, &delta});
  EXPECT_EQ(t[0].floats, (std::vector<double>{0, 1, 2}));
  HostTensor freq = floats({2}, {1.0, 0.5});
  auto table = fold(Node("Einsum").attr("equation", "i,j->ij"), {&t[0], &freq});
  EXPECT_EQ(table[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(table[0].floats, (std::vector<double>{0, 0, 1, 0.5, 2, 1}));
}

TEST(HostTensorFold, EinsumContractsAndTakesDiagonals) {
  HostTensor a = floats({2, 2}, {1, 2, 3, 4});
  auto trace = fold(Node("Einsum").attr("equation", "ii->"), {&a});
  EXPECT_EQ(trace[0].floats, (std::vector<double>{5}));
  auto mm = fold(Node("Einsum").attr("equation", "ij,jk->ik"), {&a, &a});
  EXPECT_EQ(mm[0].floats, (std::vector<double>{7, 10, 15, 22}));
}

TEST(HostTensorFold, WhereBroadcastsAllThreeOperands) {
  HostTensor cond = ints({2, 1}, {1, 0}, DType::Bool);
  HostTensor x = floats({2}, {1, 2});
  HostTensor y = floats({}, {-9});
  auto out = fold(Node("Where"), {&cond, &x, &y});
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out[0].floats, (std::vector<double>{1, 2, -9, -9}));
}

TEST(HostTensorFold, ConstantOfShapeUsesValueAttribute) {
  Node node("ConstantOfShape");
  auto *a = node.proto.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(7);
  HostTensor shape = ints({2}, {2, 2});
  auto out = fold(node, {&shape});
  EXPECT_EQ(out[0].dtype, DType::Int64);
  EXPECT_EQ(out[0].ints, (std::vector<int64_t>{7, 7, 7, 7}));
}

TEST(HostTensorFold, CastTruncatesAndRoundsToFloat32) {
  HostTensor x = floats({3}, {1.7, -1.7, 0.1});
  auto toInt =
      fold(Node("Cast").attr("to", int64_t(onnx::TensorProto::INT64)), {&x});
  EXPECT_EQ(toInt[0].ints, (std::vector<int64_t>{1, -1, 0}));
  auto toBool =
      fold(Node("Cast").attr("to", int64_t(onnx::TensorProto::BOOL)), {&x});
  EXPECT_EQ(toBool[0].ints, (std::vector<int64_t>{1, 1, 1}));
  auto toFloat =
      fold(Node("Cast").attr("to", int64_t(onnx::TensorProto::FLOAT)), {&x});
  EXPECT_EQ(toFloat[0].floats[2], static_cast<double>(0.1f));
}

TEST(HostTensorFold, ConcatSplitExpandAndReduce) {
  HostTensor a = ints({2, 1}, {1, 2}), b = ints({2, 2}, {3, 4, 5, 6});
  auto cat = fold(Node("Concat").attr("axis", int64_t(1)), {&a, &b});
  EXPECT_EQ(cat[0].ints, (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));

  HostTensor sizes = ints({2}, {1, 2});
  auto parts =
      fold(Node("Split", 2).attr("axis", int64_t(1)), {&cat[0], &sizes});
  EXPECT_EQ(parts[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(parts[1].ints, (std::vector<int64_t>{3, 4, 5, 6}));

  HostTensor shape = ints({3}, {2, 2, 1});
  auto expanded = fold(Node("Expand"), {&a, &shape});
  EXPECT_EQ(expanded[0].shape, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(expanded[0].ints, (std::vector<int64_t>{1, 2, 1, 2}));

  HostTensor f = floats({2, 2}, {1, 2, 3, 5});
  auto mean = fold(Node("ReduceMean")
                       .attr("axes", std::vector<int64_t>{1})
                       .attr("keepdims", int64_t(0)),
                   {&f});
  EXPECT_EQ(mean[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(mean[0].floats, (std::vector<double>{1.5, 4}));
}

TEST(HostTensorFold, IntegerDivisionByZeroIsAnError) {
  HostTensor a = ints({1}, {4}), b = ints({1}, {0});
  std::vector<HostTensor> out;
  std::string error;
  EXPECT_FALSE(foldNode(Node("Div").proto, {&a, &b}, out, error));
  EXPECT_EQ(error, "integer division by zero");
}

TEST(HostTensorFold, UnknownOpIsNotFoldedWithoutError) {
  HostTensor a = floats({1}, {1});
  std::vector<HostTensor> out;
  std::string error;
  EXPECT_FALSE(
      foldNode(Node("LayerNormalization").proto, {&a, &a}, out, error));
  EXPECT_TRUE(error.empty());
}

TEST(HostTensorDecode, RawTypedAndMismatchedData) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  float raw[2] = {1.5f, -2.0f};
  t.set_raw_data(std::string(reinterpret_cast<char *>(raw), sizeof(raw)));
  HostTensor out;
  std::string error;
  ASSERT_TRUE(decodeTensor(t, nullptr, out, error)) << error;
  EXPECT_EQ(out.floats, (std::vector<double>{1.5, -2.0}));

  t.set_raw_data(std::string(4, '\0'));
  EXPECT_FALSE(decodeTensor(t, nullptr, out, error));
  EXPECT_EQ(error, "tensor 'w' has 4 bytes of data but its shape needs 8");

  onnx::TensorProto half;
  half.set_name("h");
  half.set_data_type(onnx::TensorProto::FLOAT16);
  half.add_dims(1);
  half.add_int32_data(0x3C00); // 1.0 in IEEE half
  ASSERT_TRUE(decodeTensor(half, nullptr, out, error)) << error;
  EXPECT_EQ(out.floats, (std::vector<double>{1.0}));

  onnx::TensorProto str;
  str.set_name("s");
  str.set_data_type(onnx::TensorProto::STRING);
  EXPECT_FALSE(decodeTensor(str, nullptr, out, error));
  EXPECT_EQ(error, "tensor 's' has unsupported element type STRING");
}

} // namespace
