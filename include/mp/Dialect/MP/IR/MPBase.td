//===- MPBase.td - mp dialect definition -------------------*- tablegen -*-===//
#ifndef MP_DIALECT_MP_IR_MPBASE_TD
#define MP_DIALECT_MP_IR_MPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def MP_Dialect : Dialect {
  let name = "mp";
  let summary = "Transformer-level ops for Megatron-style model parallelism";
  let description = [{
    The `mp` dialect holds a transformer model imported from ONNX as a global
    (unpartitioned) graph of named, high-level ops: `mp.linear`,
    `mp.layer_norm`, `mp.attention`, ... Parameters are module-level symbols
    (`mp.param`) whose data stays in the model files; functions read them with
    `mp.get_param`. Shapes are static. Communication uses the upstream `shard`
    dialect.
  }];
  let cppNamespace = "::mp";
  let useDefaultAttributePrinterParser = 0;
  let extraClassDeclaration = [{
    /// Name of the discardable attribute holding the transformer layer index.
    static constexpr ::llvm::StringLiteral getLayerAttrName() {
      return ::llvm::StringLiteral("mp.layer");
    }
    /// Name of the discardable attribute holding the pipeline chunk
    /// (virtual stage) an op runs in (mp-pipeline).
    static constexpr ::llvm::StringLiteral getStageAttrName() {
      return ::llvm::StringLiteral("mp.stage");
    }
    /// Name of the unit attribute on every op mp-autodiff adds (the
    /// backward pass; pipeline stages run it apart from the forward).
    static constexpr ::llvm::StringLiteral getBackwardAttrName() {
      return ::llvm::StringLiteral("mp.backward");
    }
    /// Name of the module attribute holding the pipeline plan.
    static constexpr ::llvm::StringLiteral getPipelineAttrName() {
      return ::llvm::StringLiteral("mp.pipeline");
    }
    /// Name of the argument/result attribute holding the ONNX tensor name.
    static constexpr ::llvm::StringLiteral getNameAttrName() {
      return ::llvm::StringLiteral("mp.name");
    }
  }];
}

class MP_Op<string mnemonic, list<Trait> traits = []>
    : Op<MP_Dialect, mnemonic, traits>;

def MP_ReduceKind : I32EnumAttr<"ReduceKind", "reduction kind", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"mean", 1>,
    I32EnumAttrCase<"max", 2>, I32EnumAttrCase<"min", 3>]> {
  let cppNamespace = "::mp";
}

def MP_ComparePredicate : I32EnumAttr<"ComparePredicate", "comparison", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mp";
}

def MP_GeluApproximation : I32EnumAttr<"GeluApproximation", "gelu form", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mp";
}

def MP_LinearActivation : I32EnumAttr<"LinearActivation",
    "activation fused into a linear's result", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"gelu", 1>,
    I32EnumAttrCase<"gelu_tanh", 2>, I32EnumAttrCase<"silu", 3>]> {
  let cppNamespace = "::mp";
}

#endif // MP_DIALECT_MP_IR_MPBASE_TD
