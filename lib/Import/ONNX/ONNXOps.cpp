//===- ONNXOps.cpp - the table of supported ONNX op types -----------------===//
//
// The one place that says which ONNX op types the importer supports and,
// for each, which function imports a node as mp ops and which one folds it
// on known inputs. The supported op list, the import dispatch (Importer.cpp)
// and the fold dispatch (foldNode, below) are all read from this table.
//
//===----------------------------------------------------------------------===//
#include "ONNXOps.h"

#include "Fold.h"
#include "Importer.h"

#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <cassert>
#include <cmath>
#include <functional>

using namespace mlir;

namespace mp::onnx_import {

/// The import of op types that are only ever folded: reached when an input
/// is not known at import.
static LogicalResult emitNeedsConstants(NodeEmitter &e) {
  for (int i = 0; i < e.node.input_size(); ++i)
    if (e.hasInput(i) && !e.entry(i)->constant)
      return e.error() << "input " << i << " ('" << e.node.input(i)
                       << "') must be known at import: the output shape "
                          "would otherwise be dynamic";
  return e.error() << "cannot evaluate this node at import";
}

static const ONNXOpDef opDefs[] = {
    // Elementwise with broadcasting, and casts.
    {"Add", emitBinary<AddOp>, foldArithmetic<std::plus, rt::wrapAdd<int64_t>>},
    {"Sub", emitBinary<SubOp>,
     foldArithmetic<std::minus, rt::wrapSub<int64_t>>},
    {"Mul", emitBinary<MulOp>,
     foldArithmetic<std::multiplies, rt::wrapMul<int64_t>>},
    {"Div", emitBinary<DivOp>, foldDiv},
    {"Pow", emitBinary<PowOp>, foldPow},
    {"Equal", emitCompare<ComparePredicate::eq>, foldComparison<std::equal_to>},
    {"Less", emitCompare<ComparePredicate::lt>, foldComparison<std::less>},
    {"LessOrEqual", emitCompare<ComparePredicate::le>,
     foldComparison<std::less_equal>},
    {"Greater", emitCompare<ComparePredicate::gt>,
     foldComparison<std::greater>},
    {"GreaterOrEqual", emitCompare<ComparePredicate::ge>,
     foldComparison<std::greater_equal>},
    {"And", emitLogical<LogicalKind::And>, foldLogical<std::logical_and>},
    {"Or", emitLogical<LogicalKind::Or>, foldLogical<std::logical_or>},
    {"Xor", emitLogical<LogicalKind::Xor>, foldLogical<std::not_equal_to>},
    {"Where", emitWhere, foldWhere},
    {"Clip", emitClip, foldClip, FoldInputs::Present},
    {"Not", emitNot,
     [](Folder &f) {
       return f.unary([](double x) { return x == 0 ? 1.0 : 0.0; },
                      [](int64_t x) -> int64_t { return x == 0; });
     }},
    {"Max", [](NodeEmitter &e) { return emitExtremum(e, true); },
     [](Folder &f) { return foldExtremum(f, true); }},
    {"Min", [](NodeEmitter &e) { return emitExtremum(e, false); },
     [](Folder &f) { return foldExtremum(f, false); }},
    {"Cast", emitCast, foldCast},

    // Elementwise unary.
    {"Sqrt", emitUnary<SqrtOp>,
     [](Folder &f) { return f.unary([](double x) { return std::sqrt(x); }); }},
    {"Reciprocal", emitUnary<ReciprocalOp>,
     [](Folder &f) { return f.unary([](double x) { return 1.0 / x; }); }},
    {"Neg", emitUnary<NegOp>,
     [](Folder &f) {
       return f.unary([](double x) { return -x; },
                      [](int64_t x) { return rt::wrapSub<int64_t>(0, x); });
     }},
    {"Exp", emitUnary<ExpOp>,
     [](Folder &f) { return f.unary([](double x) { return std::exp(x); }); }},
    {"Log", emitUnary<LogOp>,
     [](Folder &f) { return f.unary([](double x) { return std::log(x); }); }},
    {"Erf", emitUnary<ErfOp>,
     [](Folder &f) { return f.unary([](double x) { return std::erf(x); }); }},
    {"Tanh", emitUnary<TanhOp>,
     [](Folder &f) { return f.unary([](double x) { return std::tanh(x); }); }},
    {"Sigmoid", emitUnary<SigmoidOp>,
     [](Folder &f) {
       return f.unary([](double x) { return 1 / (1 + std::exp(-x)); });
     }},
    {"Relu", emitUnary<ReluOp>,
     [](Folder &f) {
       return f.unary([](double x) { return x > 0 ? x : 0.0; },
                      [](int64_t x) { return std::max<int64_t>(x, 0); });
     }},
    {"Abs", emitAbs,
     [](Folder &f) {
       return f.unary(
           [](double x) { return std::fabs(x); },
           [](int64_t x) { return x < 0 ? rt::wrapSub<int64_t>(0, x) : x; });
     }},
    {"Sign", emitSign,
     [](Folder &f) {
       return f.unary([](double x) { return double((x > 0) - (x < 0)); },
                      [](int64_t x) -> int64_t { return (x > 0) - (x < 0); });
     }},
    {"Softplus", emitSoftplus,
     [](Folder &f) {
       return f.unary(
           [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); });
     }},
    {"Cos", emitUnary<CosOp>,
     [](Folder &f) { return f.unary([](double x) { return std::cos(x); }); }},
    {"Sin", emitUnary<SinOp>,
     [](Folder &f) { return f.unary([](double x) { return std::sin(x); }); }},

    // Transformer compute.
    {"MatMul", emitMatMul, foldMatMul},
    {"Gemm", emitGemm},
    {"Softmax", emitSoftmax, foldSoftmax},
    {"LogSoftmax", emitLogSoftmax},
    {"LayerNormalization", emitLayerNorm},
    {"InstanceNormalization", emitInstanceNorm},
    {"ReduceMean", emitReduce<ReduceKind::mean>,
     [](Folder &f) { return foldReduce(f, "mean"); }, FoldInputs::Present},
    {"ReduceSum", emitReduce<ReduceKind::sum>,
     [](Folder &f) { return foldReduce(f, "sum"); }, FoldInputs::Present},
    {"ReduceMax", emitReduce<ReduceKind::max>,
     [](Folder &f) { return foldReduce(f, "max"); }, FoldInputs::Present},
    {"ReduceMin", emitReduce<ReduceKind::min>,
     [](Folder &f) { return foldReduce(f, "min"); }, FoldInputs::Present},
    {"ReduceL2", emitCompositeReduce<CompositeReduce::L2>},
    {"ReduceSumSquare", emitCompositeReduce<CompositeReduce::SumSquare>},
    {"ReduceLogSumExp", emitCompositeReduce<CompositeReduce::LogSumExp>},
    {"ArgMax", [](NodeEmitter &e) { return emitArgExtremum(e, true); },
     [](Folder &f) { return foldArgExtremum(f, true); }},
    {"ArgMin", [](NodeEmitter &e) { return emitArgExtremum(e, false); },
     [](Folder &f) { return foldArgExtremum(f, false); }},
    {"Einsum", emitEinsum, foldEinsum},
    {"Conv", emitConv},
    {"Trilu", emitTrilu, foldTrilu, FoldInputs::Present},
    {"CumSum", emitCumSum, foldCumSum},

    // Shapes and data movement.
    {"Reshape", emitReshape, foldReshape},
    {"Unsqueeze", emitUnsqueeze, foldUnsqueeze},
    {"Squeeze", emitSqueeze, foldSqueeze, FoldInputs::Present},
    {"Flatten", emitFlatten, foldFlatten},
    {"Tile", emitTile, foldTile},
    {"Pad", emitPad},
    {"Transpose", emitTranspose, foldTranspose},
    {"Split", emitSplit, foldSplit, FoldInputs::Present},
    {"Concat", emitConcat, foldConcat},
    {"Slice", emitSlice, foldSlice, FoldInputs::Present},
    {"Gather", emitGather, foldGather},
    {"GatherElements", emitGatherElements, foldGatherElements},
    {"ScatterElements", emitScatterElements},
    {"TopK", emitTopK},
    {"OneHot", emitOneHot},
    {"Expand", emitExpand, foldExpand},
    {"Identity", emitIdentity, foldIdentity},
    {"Dropout", emitDropout},

    // Ops that only fold (Constant and Shape always can): their import says
    // which input is not known at import.
    {"Constant", emitNeedsConstants, foldConstant, FoldInputs::None},
    {"Shape", emitNeedsConstants, foldShape, FoldInputs::None},
    {"ConstantOfShape", emitNeedsConstants, foldConstantOfShape},
    {"Range", emitNeedsConstants, foldRange},
};

llvm::ArrayRef<ONNXOpDef> getONNXOpDefs() { return opDefs; }

const ONNXOpDef *lookupONNXOp(llvm::StringRef name) {
  static const llvm::StringMap<const ONNXOpDef *> byName = [] {
    llvm::StringMap<const ONNXOpDef *> map;
    for (const ONNXOpDef &op : opDefs) {
      bool inserted = map.try_emplace(op.name, &op).second;
      assert(inserted && "op type listed twice");
      (void)inserted;
    }
    return map;
  }();
  return byName.lookup(name);
}

bool foldNode(const ONNXOpDef &op, const onnx::NodeProto &node,
              const std::vector<const HostTensor *> &inputs,
              const std::vector<Shape> &shapes,
              std::vector<HostTensor> &outputs, std::string &error) {
  error.clear();
  outputs.clear();
  if (!op.fold)
    return false;
  switch (op.foldInputs) {
  case FoldInputs::All:
    for (const HostTensor *input : inputs)
      if (!input)
        return false;
    [[fallthrough]];
  case FoldInputs::Present:
    if (inputs.empty() || !inputs[0])
      return false;
    break;
  case FoldInputs::None: break;
  }
  Folder folder{node, inputs, shapes, outputs, error};
  return op.fold(folder);
}

bool foldNode(const onnx::NodeProto &node,
              const std::vector<const HostTensor *> &inputs,
              std::vector<HostTensor> &outputs, std::string &error) {
  const ONNXOpDef *op = lookupONNXOp(node.op_type());
  if (!op) {
    error.clear();
    outputs.clear();
    return false;
  }
  std::vector<Shape> shapes;
  for (const HostTensor *input : inputs)
    shapes.push_back(input ? input->shape : Shape());
  return foldNode(*op, node, inputs, shapes, outputs, error);
}

} // namespace mp::onnx_import
