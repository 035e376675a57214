//===- AutodiffTest.cpp - derivative rules vs finite differences ----------===//
//
// Each case is a small program of parameters; mp-autodiff appends its
// backward, the artifact writer lowers it and the CPU runtime runs it. The
// gradient it returns for every parameter element must match central
// finite differences of the loss L = Σ w·y (w fixed random weights), the
// loss evaluated by the same executable with the parameter nudged in place.
// Cases whose kernels take float64 run in float64 (h = 1e-5, tolerance
// 1e-7 of the largest gradient); the others in float32 (h = 1e-2,
// tolerance 2e-3, as the gradient kernels' own tests).
//
//===----------------------------------------------------------------------===//
#include "mp/Dialect/MP/IR/MPDialect.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Runtime/Executable.h"
#include "mp/Target/Artifact.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

using namespace mlir;

namespace {

using Shape = std::vector<int64_t>;

struct Case {
  std::string name;
  bool f64;
  std::vector<std::pair<std::string, Shape>> params;
  std::string body; // defines %y from the parameters' %NAME
  Shape result;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::string typeOf(const Shape &s, bool f64) {
  std::string t = "tensor<";
  for (int64_t d : s)
    t += std::to_string(d) + "x";
  return t + (f64 ? "f64>" : "f32>");
}

int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// The case's program, its parameters' data in `dataFile`: values in
/// [0.5, 1.5] (positive, for log, sqrt and pow).
std::string programOf(const Case &c, const std::string &dataFile) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> value(0.5, 1.5), weight(-1, 1);
  std::ofstream data(dataFile, std::ios::binary);
  std::ostringstream ir;
  ir << "module {\n";
  int64_t offset = 0;
  const int64_t elem = c.f64 ? 8 : 4;
  for (const auto &[name, shape] : c.params) {
    for (int64_t i = 0; i < count(shape); ++i) {
      double v = value(rng);
      float f = static_cast<float>(v);
      data.write(c.f64 ? reinterpret_cast<const char *>(&v)
                       : reinterpret_cast<const char *>(&f),
                 elem);
    }
    ir << "  mp.param @" << name << " : " << typeOf(shape, c.f64)
       << " {file = \"" << dataFile << "\", offset = " << offset
       << " : i64, length = " << count(shape) * elem << " : i64}\n";
    offset += count(shape) * elem;
  }
  ir << "  func.func @main() -> tensor<" << (c.f64 ? "f64" : "f32") << "> {\n";
  for (const auto &[name, shape] : c.params)
    ir << "    %" << name << " = mp.get_param @" << name << " : "
       << typeOf(shape, c.f64) << "\n";
  ir << c.body << "\n";
  const int64_t n = count(c.result);
  std::string flat = typeOf({n}, c.f64), shaped = typeOf(c.result, c.f64);
  ir << "    %w0 = mp.constant dense<[";
  for (int64_t i = 0; i < n; ++i)
    ir << (i ? ", " : "") << weight(rng);
  ir << "]> : " << flat << "\n";
  ir << "    %w = mp.reshape %w0 : " << flat << " -> " << shaped << "\n";
  ir << "    %yw = mp.mul %y, %w : (" << shaped << ", " << shaped << ") -> "
     << shaped << "\n";
  ir << "    %l = mp.reduce sum, %yw {axes = array<i64: ";
  for (size_t d = 0; d < c.result.size(); ++d)
    ir << (d ? ", " : "") << d;
  ir << ">, keepdims = false} : " << shaped << " -> tensor<"
     << (c.f64 ? "f64" : "f32") << ">\n";
  ir << "    return %l : tensor<" << (c.f64 ? "f64" : "f32") << ">\n  }\n}\n";
  return ir.str();
}

double valueAt(const mp::rt::Tensor &t, int64_t i) {
  return t.dtype == mp::rt::DType::F64 ? t.as<double>()[i] : t.as<float>()[i];
}

void setValue(const mp::rt::Tensor &t, int64_t i, double v) {
  if (t.dtype == mp::rt::DType::F64)
    t.as<double>()[i] = v;
  else
    t.as<float>()[i] = static_cast<float>(v);
}

class AutodiffRule : public ::testing::TestWithParam<Case> {};

TEST_P(AutodiffRule, MatchesFiniteDifferences) {
  const Case &c = GetParam();
  llvm::SmallString<128> dir;
  ASSERT_FALSE(
      llvm::sys::fs::createUniqueDirectory("mp-autodiff-" + c.name, dir));
  std::string dataFile = (dir + "/params.bin").str();
  std::string text = programOf(c, dataFile);

  DialectRegistry registry;
  registry.insert<mp::MPDialect, func::FuncDialect, shard::ShardDialect>();
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  PassManager pm(&context);
  pm.addPass(mp::createMPAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << text;
  mp::ArtifactSummary summary;
  std::string artifact = (dir + "/artifact").str();
  ASSERT_TRUE(succeeded(
      mp::writeArtifact(*module, artifact, summary, ModuleOp(), false)));

  std::unique_ptr<mp::rt::Executable> exe;
  mp::rt::Status loaded = mp::rt::Executable::load(artifact, exe);
  ASSERT_TRUE(loaded.ok) << loaded.message;
  std::vector<mp::rt::Tensor> outputs;
  auto loss = [&]() {
    EXPECT_TRUE(exe->run({}, outputs).ok);
    return valueAt(outputs[0], 0);
  };
  loss();
  const double h = c.f64 ? 1e-5 : 1e-2;
  for (const auto &param : exe->parameters()) {
    size_t g = 0;
    while (g < exe->outputs().size() &&
           exe->outputs()[g].name != "grads/" + param.name)
      ++g;
    ASSERT_LT(g, exe->outputs().size()) << param.name;
    // The analytic gradient (copied: outputs are views into the arena).
    loss();
    std::vector<double> analytic, numeric;
    for (int64_t i = 0; i < param.tensor.numel(); ++i)
      analytic.push_back(valueAt(outputs[g], i));
    for (int64_t i = 0; i < param.tensor.numel(); ++i) {
      const double x = valueAt(param.tensor, i);
      setValue(param.tensor, i, x + h);
      const double plus = loss();
      setValue(param.tensor, i, x - h);
      const double minus = loss();
      setValue(param.tensor, i, x);
      numeric.push_back((plus - minus) / (2 * h));
    }
    double scale = 0;
    for (double v : numeric)
      scale = std::max(scale, std::fabs(v));
    const double tolerance = (c.f64 ? 1e-7 : 2e-3) * std::max(scale, 1.0);
    for (size_t i = 0; i < numeric.size(); ++i)
      EXPECT_NEAR(analytic[i], numeric[i], tolerance)
          << c.name << ": d/d" << param.name << "[" << i << "]";
  }
  llvm::sys::fs::remove_directories(dir);
}

const Case kCases[] = {
    {"matmul_broadcast",
     true,
     {{"a", {2, 3, 4}}, {"b", {4, 5}}},
     "    %y = mp.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> "
     "tensor<2x3x5xf64>",
     {2, 3, 5}},
    {"softmax_middle_axis",
     true,
     {{"a", {2, 4, 3}}},
     "    %y = mp.softmax %a {axis = 1 : i64} : tensor<2x4x3xf64>",
     {2, 4, 3}},
    {"unary_chain",
     true,
     {{"a", {6}}},
     R"(    %e = mp.exp %a : tensor<6xf64>
    %lg = mp.log %e : tensor<6xf64>
    %s = mp.sqrt %a : tensor<6xf64>
    %r = mp.rsqrt %a : tensor<6xf64>
    %q = mp.reciprocal %a : tensor<6xf64>
    %t = mp.tanh %a : tensor<6xf64>
    %f = mp.erf %a : tensor<6xf64>
    %g = mp.sigmoid %a : tensor<6xf64>
    %n = mp.neg %a : tensor<6xf64>
    %u = mp.relu %n : tensor<6xf64>
    %si = mp.silu %a : tensor<6xf64>
    %c = mp.cos %a : tensor<6xf64>
    %sn = mp.sin %a : tensor<6xf64>
    %y1 = mp.add %e, %lg : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y2 = mp.add %y1, %s : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y3 = mp.add %y2, %r : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y4 = mp.mul %y3, %q : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y5 = mp.add %y4, %t : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y6 = mp.add %y5, %f : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y7 = mp.mul %y6, %g : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y8 = mp.sub %y7, %u : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y9 = mp.add %y8, %si : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y10 = mp.add %y9, %c : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
    %y = mp.add %y10, %sn : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>)",
     {6}},
    {"broadcast_sub_div_pow",
     true,
     {{"a", {2, 1, 3}}, {"b", {4, 1}}, {"e", {3}}},
     R"(    %s = mp.sub %a, %b : (tensor<2x1x3xf64>, tensor<4x1xf64>) -> tensor<2x4x3xf64>
    %d = mp.div %s, %b : (tensor<2x4x3xf64>, tensor<4x1xf64>) -> tensor<2x4x3xf64>
    %p = mp.pow %a, %e : (tensor<2x1x3xf64>, tensor<3xf64>) -> tensor<2x1x3xf64>
    %y = mp.add %d, %p : (tensor<2x4x3xf64>, tensor<2x1x3xf64>) -> tensor<2x4x3xf64>)",
     {2, 4, 3}},
    {"reductions_expand_where",
     true,
     {{"a", {3, 4}}, {"b", {1, 4}}},
     R"(    %m = mp.reduce mean, %a {axes = array<i64: 0>} : tensor<3x4xf64> -> tensor<1x4xf64>
    %x = mp.reduce max, %a {axes = array<i64: 1>} : tensor<3x4xf64> -> tensor<3x1xf64>
    %e = mp.expand %b : tensor<1x4xf64> -> tensor<3x4xf64>
    %c = mp.compare gt, %a, %e : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xi1>
    %wh = mp.where %c, %m, %x : (tensor<3x4xi1>, tensor<1x4xf64>, tensor<3x1xf64>) -> tensor<3x4xf64>
    %y = mp.mul %wh, %e : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>)",
     {3, 4}},
    {"shape_ops",
     true,
     {{"a", {2, 6}}},
     R"(    %p, %q = mp.split %a {axis = 1 : i64} : tensor<2x6xf64> -> tensor<2x2xf64>, tensor<2x4xf64>
    %s = mp.slice %q {starts = array<i64: 1, 3>, limits = array<i64: -1, -1>, strides = array<i64: -1, -2>} : tensor<2x4xf64> -> tensor<2x2xf64>
    %t = mp.transpose %s [1, 0] : tensor<2x2xf64> -> tensor<2x2xf64>
    %c = mp.concat %p, %t {axis = 0 : i64} : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<4x2xf64>
    %r = mp.reshape %c : tensor<4x2xf64> -> tensor<2x4xf64>
    %y = mp.trilu %r {diagonal = 1 : i64} : tensor<2x4xf64>)",
     {2, 4}},
    {"dropout_replays_its_mask",
     true,
     {{"a", {40}}},
     R"(    %d = mp.dropout %a {ratio = 3.000000e-01 : f32} : tensor<40xf64>
    %y = mp.mul %d, %d : (tensor<40xf64>, tensor<40xf64>) -> tensor<40xf64>)",
     {40}},
    {"layer_norm_gather_cast",
     false,
     {{"x", {3, 4}}, {"g", {4}}, {"t", {5, 4}}},
     R"(    %ids = mp.constant dense<[4, 0, 4]> : tensor<3xi64>
    %e = mp.gather %t, %ids {axis = 0 : i64} : (tensor<5x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
    %s = mp.add %x, %e : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %n = mp.layer_norm %s, %g : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    %d = mp.cast %n : tensor<3x4xf32> to tensor<3x4xf64>
    %y = mp.cast %d : tensor<3x4xf64> to tensor<3x4xf32>)",
     {3, 4}},
};

INSTANTIATE_TEST_SUITE_P(Rules, AutodiffRule, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.name;
                         });

} // namespace
