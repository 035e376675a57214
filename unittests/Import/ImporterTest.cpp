//===- ImporterTest.cpp - ONNX importer end to end ------------------------===//
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

using namespace mlir;

namespace {

class ImporterTest : public ::testing::Test {
protected:
  ImporterTest() {
    context.loadDialect<mp::MPDialect, func::FuncDialect>();
    handler = std::make_unique<ScopedDiagnosticHandler>(
        &context, [this](Diagnostic &diag) {
          diagnostics.push_back(diag.str());
          return success();
        });
  }
  OwningOpRef<ModuleOp> import(const std::string &model,
                               mp::ImportOptions options = {}) {
    return mp::importONNXFile(std::string(MP_MODELS_DIR) + "/" + model,
                              &context, options);
  }

  MLIRContext context;
  std::unique_ptr<ScopedDiagnosticHandler> handler;
  std::vector<std::string> diagnostics;
};

/// Every parameter PyTorch has a gradient for must be an mp.param of the
/// same name and shape-compatible size; nothing else may be a parameter.
TEST_F(ImporterTest, ParametersMatchThePyTorchParameterNames) {
  for (const char *model : {"gpt2", "gpt2_untied", "bert", "llama"}) {
    OwningOpRef<ModuleOp> module = import(std::string(model) + "/model.onnx");
    ASSERT_TRUE(module) << model;
    std::set<std::string> params, grads;
    for (auto p : module->getOps<mp::ParamOp>())
      params.insert(p.getSymName().str());
    for (auto &entry : std::filesystem::directory_iterator(
             std::string(MP_MODELS_DIR) + "/" + model + "/grads"))
      grads.insert(entry.path().stem().string());
    EXPECT_EQ(params, grads) << model;
  }
}

TEST_F(ImporterTest, MainFunctionHasNamedStaticInputsAndOutputs) {
  OwningOpRef<ModuleOp> module = import("gpt2/model.onnx");
  ASSERT_TRUE(module);
  auto main = module->lookupSymbol<func::FuncOp>("main");
  ASSERT_TRUE(main);
  ASSERT_EQ(main.getNumArguments(), 1u);
  EXPECT_EQ(main.getArgAttrOfType<StringAttr>(0, "mp.name").getValue(),
            "input_ids");
  EXPECT_EQ(cast<RankedTensorType>(main.getArgumentTypes()[0]).getShape(),
            (ArrayRef<int64_t>{2, 8}));
  EXPECT_EQ(main.getResultAttrOfType<StringAttr>(0, "mp.name").getValue(),
            "logits");
  // No op of the ONNX shape machinery survives: it is all folded.
  int64_t shapeOps = 0;
  main.walk([&](Operation *op) {
    shapeOps += isa<mp::TriluOp, mp::CastOp, mp::CompareOp>(op);
  });
  EXPECT_EQ(shapeOps, 0);
}

TEST_F(ImporterTest, PinnedShapesReachTheFunctionType) {
  mp::ImportOptions options;
  std::string error;
  ASSERT_TRUE(mp::parseInputShapes("x=5x8", options.inputShapes, error));
  OwningOpRef<ModuleOp> module = import("bad/dynamic_dim.onnx", options);
  ASSERT_TRUE(module);
  auto main = module->lookupSymbol<func::FuncOp>("main");
  EXPECT_EQ(cast<RankedTensorType>(main.getResultTypes()[0]).getShape(),
            (ArrayRef<int64_t>{5, 4}));
}

TEST_F(ImporterTest, UnsupportedOpsAreAllListed) {
  EXPECT_FALSE(import("bad/unsupported_ops.onnx"));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_NE(diagnostics[0].find("Hardmax (e.g. node 'hardmax_a')"),
            std::string::npos);
  EXPECT_NE(diagnostics[0].find("Det (e.g. node 'det_a')"), std::string::npos);
}

TEST(ParseInputShapes, AcceptsListsAndRejectsGarbage) {
  std::map<std::string, std::vector<int64_t>> shapes;
  std::string error;
  ASSERT_TRUE(mp::parseInputShapes("a=2x16, b=4", shapes, error));
  EXPECT_EQ(shapes["a"], (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(shapes["b"], (std::vector<int64_t>{4}));
  EXPECT_FALSE(mp::parseInputShapes("a", shapes, error));
  EXPECT_EQ(error, "malformed shape 'a': expected NAME=D0xD1x... (e.g. "
                   "input_ids=2x16)");
  EXPECT_FALSE(mp::parseInputShapes("a=2x-1", shapes, error));
  EXPECT_EQ(error, "malformed dimension '-1' in shape of 'a'");
}

} // namespace
