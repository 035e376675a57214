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
    /// Name of the unit attribute on ops that compute in fp32 whatever the
    /// storage type (mp-convert-precision leaves them as they are): the
    /// triangle product an integer CumSum is imported as, exact in fp32.
    static constexpr ::llvm::StringLiteral getExactF32AttrName() {
      return ::llvm::StringLiteral("mp.exact_f32");
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
    /// Names of the result attributes of a function result that is this
    /// rank's shard of a whole value (a sharded parameter's gradient, an
    /// output mp-shard-outputs left ungathered): the dimension it is cut
    /// along, and the number of groups that dimension holds (a fused weight
    /// cut group by group).
    static constexpr ::llvm::StringLiteral getShardAxisAttrName() {
      return ::llvm::StringLiteral("mp.shard_axis");
    }
    static constexpr ::llvm::StringLiteral getShardGroupsAttrName() {
      return ::llvm::StringLiteral("mp.shard_groups");
    }
    /// Result attribute, with mp.shard_axis: the whole's size along that
    /// axis once gathered, when less than the shards hold (a vocabulary
    /// padded to divide by the ranks: the padding is dropped).
    static constexpr ::llvm::StringLiteral getShardSizeAttrName() {
      return ::llvm::StringLiteral("mp.shard_size");
    }
    /// Parameter attribute: the other parameters holding the same data (a tied
    /// embedding and LM head), for --mp-summary and weight export.
    static constexpr ::llvm::StringLiteral getTiedCopiesAttrName() {
      return ::llvm::StringLiteral("mp.tied_copies");
    }
    /// Parameter attribute: exporter-made copies holding the same data, not
    /// transposed (one per call of a module called twice: DeBERTa's shared
    /// position projections), for --mp-summary and weight export.
    static constexpr ::llvm::StringLiteral getEqualCopiesAttrName() {
      return ::llvm::StringLiteral("mp.equal_copies");
    }
    /// Module attribute: the data-parallel replica count (mp-data-parallel).
    static constexpr ::llvm::StringLiteral getDataParallelAttrName() {
      return ::llvm::StringLiteral("mp.data_parallel");
    }
    /// Module attribute: the ZeRO stage the optimizer state is sharded by.
    static constexpr ::llvm::StringLiteral getZeroAttrName() {
      return ::llvm::StringLiteral("mp.zero");
    }
    /// Module attribute: the path of the ONNX model imported.
    static constexpr ::llvm::StringLiteral getSourceAttrName() {
      return ::llvm::StringLiteral("mp.source");
    }
    /// Module attribute: the ONNX opset the model was exported with.
    static constexpr ::llvm::StringLiteral getOpsetAttrName() {
      return ::llvm::StringLiteral("mp.opset");
    }
    /// Unit attribute on a shard.all_reduce that sums a distributed norm's
    /// statistics (mp-tensor-parallel): sequence parallelism leaves it.
    static constexpr ::llvm::StringLiteral getNormStatisticsAttrName() {
      return ::llvm::StringLiteral("mp.norm_statistics");
    }
    /// Module attribute: the one-element initializers named as a module's
    /// (not weight or bias) that import read as constants, not trained.
    static constexpr ::llvm::StringLiteral getScalarConstantsAttrName() {
      return ::llvm::StringLiteral("mp.scalar_constants");
    }
    /// Parameter attribute: not trained (mp-freeze: a buffer).
    static constexpr ::llvm::StringLiteral getFrozenAttrName() {
      return ::llvm::StringLiteral("mp.frozen");
    }
    /// Linear attribute: why tensor parallelism left it whole.
    static constexpr ::llvm::StringLiteral getReplicatedAttrName() {
      return ::llvm::StringLiteral("mp.replicated");
    }
    /// Train-step attribute: the arena peak of the forward pass alone.
    static constexpr ::llvm::StringLiteral getForwardArenaBytesAttrName() {
      return ::llvm::StringLiteral("mp.forward_arena_bytes");
    }
    /// Pipeline-chunk result attribute: a partial value (summed over
    /// micro-batches by the runtime).
    static constexpr ::llvm::StringLiteral getPartialAttrName() {
      return ::llvm::StringLiteral("mp.partial");
    }
    /// Pipeline-chunk argument/result attribute: the id of an activation the
    /// forward stashes for its backward.
    static constexpr ::llvm::StringLiteral getStashAttrName() {
      return ::llvm::StringLiteral("mp.stash");
    }
    /// Pipeline-chunk argument attribute: the model input it is.
    static constexpr ::llvm::StringLiteral getInputAttrName() {
      return ::llvm::StringLiteral("mp.input");
    }
    /// Pipeline-chunk result attribute: the model output it is.
    static constexpr ::llvm::StringLiteral getOutputAttrName() {
      return ::llvm::StringLiteral("mp.output");
    }
    /// Function attribute: the pipeline chunk a function runs.
    static constexpr ::llvm::StringLiteral getChunkAttrName() {
      return ::llvm::StringLiteral("mp.chunk");
    }
    /// Module attribute: the recompute policy (mp-recompute).
    static constexpr ::llvm::StringLiteral getRecomputeAttrName() {
      return ::llvm::StringLiteral("mp.recompute");
    }
    /// Op attribute: a recomputed copy of a forward op (mp-recompute).
    static constexpr ::llvm::StringLiteral getRecomputedAttrName() {
      return ::llvm::StringLiteral("mp.recomputed");
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
