//===- MPOps.td - mp dialect ops ---------------------------*- tablegen -*-===//
#ifndef MP_DIALECT_MP_IR_MPOPS_TD
#define MP_DIALECT_MP_IR_MPOPS_TD

include "mp/Dialect/MP/IR/MPBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ViewLikeInterface.td"
include "mp/Dialect/MP/IR/MPInterfaces.td"

def MP_Tensor : RankedTensorOf<[AnyFloat, AnySignlessInteger]>;

// A named transformer op: the summary reports it by name.
def MP_TransformerOpTrait : NativeOpTrait<"TransformerOp"> {
  let cppNamespace = "::mp::OpTrait";
}

// How splits pass through the op, from its traits (Elementwise,
// ResultsBroadcastableShape) ...
def MP_SplitByTraits : DeclareOpInterfaceMethods<MP_SplitOpInterface>;
// ... or by its own rule (propagateSplit in MPSplit.cpp).
def MP_SplitByRule
    : DeclareOpInterfaceMethods<MP_SplitOpInterface, ["propagateSplit"]>;
// Whether dimension 0 of the results is a batch dimension, and the op built
// with it unfolded, from the op's traits ...
def MP_UnfoldByTraits : DeclareOpInterfaceMethods<MP_LeadingDimOpInterface>;
// ... or by its own rule (MPUnfold.cpp).
def MP_UnfoldByRule : DeclareOpInterfaceMethods<MP_LeadingDimOpInterface,
    ["getLeadingDimOperands", "buildUnfolded"]>;
// Results that are the same on every rank of the op's grid, though its
// operands are this rank's shards (the op reduces over the grid itself).
def MP_ReplicatedResultsTrait : NativeOpTrait<"ReplicatedResults"> {
  let cppNamespace = "::mp::OpTrait";
}

// Made by a fusion pass, which runs last: partitioning and differentiation
// refuse it.
def MP_FusedOpTrait : NativeOpTrait<"Fused"> {
  let cppNamespace = "::mp::OpTrait";
}

// Mixes its input's features nonlinearly (activations, softmax,
// attention): a column-parallel linear's split through it and into
// another linear makes a Megatron pair; through linear maps and norms
// alone the two linears are one factorized linear (mp-tensor-parallel).
def MP_MixingTrait : NativeOpTrait<"Mixing"> {
  let cppNamespace = "::mp::OpTrait";
}

// Its results are its operands' elements moved, repeated or converted: no
// arithmetic. A split that reaches the function's results through such ops
// alone has been computed on for nothing but the results
// (mp-tensor-parallel).
def MP_MovesDataTrait : NativeOpTrait<"MovesData"> {
  let cppNamespace = "::mp::OpTrait";
}

// Core attention: what selective recompute re-runs (mp-recompute).
def MP_CoreAttentionTrait : NativeOpTrait<"CoreAttention"> {
  let cppNamespace = "::mp::OpTrait";
}

// Has a derivative rule (buildAdjoints in MPAutodiff.cpp).
def MP_Differentiable : DeclareOpInterfaceMethods<MP_AutodiffOpInterface>;
// Counts its FLOPs (getFlops in MPCost.cpp).
def MP_Costed : DeclareOpInterfaceMethods<MP_CostOpInterface>;
def MP_FloatTensor : RankedTensorOf<[AnyFloat]>;
def MP_F32Tensor : RankedTensorOf<[F32]>;
def MP_F32OrHalfTensor : RankedTensorOf<[F32, BF16, F16]>;
def MP_IndexTensor : RankedTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

def MP_ParamOp : MP_Op<"param", [Symbol,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a model parameter (weight) held at module level";
  let description = [{
    Declares a parameter. Its data is not held in the IR: `file` names where it
    lives. Without `offset` the data is the ONNX initializer of the same name
    inside the ONNX model `file` (or the one `initializer` names: PyTorch's
    exporter stores parameters that are equal once and writes the others as
    `Identity` nodes, which import as parameters of their own reading the
    stored one's data); with `offset` and `length` it is raw
    little-endian bytes at that offset in `file` (ONNX external data). A
    parameter without `file` has a shape only (imported with
    `--mp-shape-only`). `preview` optionally holds its first few values.

    After tensor parallelism a parameter may be sharded over the `shard.grid`
    `grid`: dimension `shard_axis` is viewed as `shard_groups` (default 1)
    equal blocks, each split evenly over the grid's ranks, so rank r holds
    block-slice r of every group (a fused QKV weight is sharded per q, k and
    v). `type` stays the global type; `mp.get_param` returns the local one.

    `source_type`, when set, is the element type the data is stored in (the
    parameter was converted to a lower precision after import).

    `part_of` and `part = [axis, start, whole]`, when set, make this
    parameter a block of the stored one: its data is elements
    [start, start + size) along `axis` of the tensor the data attributes
    describe, whose dimension `axis` is `whole` (tensor parallelism cuts a
    fused linear whose parts split differently, such as Falcon's QKV with
    its one key/value head, into a linear per part). A part may run past
    the end of `axis`: those elements are zeros (tensor parallelism pads a
    vocabulary that does not divide by the ranks, as Megatron does).
    `part_of` names the parameter the user wrote, which training writes the
    trained parts back into (without the padding).

    ```mlir
    mp.param @h.0.attn.c_attn.weight : tensor<32x96xf32> {file = "gpt2.onnx"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<MP_Tensor>:$type,
                       OptionalAttr<StrAttr>:$file,
                       OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<I64Attr>:$length,
                       OptionalAttr<ElementsAttr>:$preview,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<I64Attr>:$shard_axis,
                       OptionalAttr<I64Attr>:$shard_groups,
                       OptionalAttr<TypeAttr>:$source_type,
                       OptionalAttr<StrAttr>:$initializer,
                       OptionalAttr<StrAttr>:$part_of,
                       OptionalAttr<DenseI64ArrayAttr>:$part);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let builders = [
    // A parameter with a name and a type only; data attributes are set
    // after.
    OpBuilder<(ins "::llvm::StringRef":$symName, "::mlir::Type":$type), [{
      $_state.addAttribute(getSymNameAttrName($_state.name),
                           $_builder.getStringAttr(symName));
      $_state.addAttribute(getTypeAttrName($_state.name),
                           ::mlir::TypeAttr::get(type));
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// True when the IR knows where the parameter's data lives.
    bool hasData() { return getFile().has_value(); }
    /// The type of the data its attributes describe: the parameter's own,
    /// or the whole of which it is a `part`, in the stored element type.
    ::mlir::RankedTensorType getStoredType();
    /// This rank's shard type (the global type when not sharded).
    /// (Emits the problem on this op only when `emitErrors`.)
    ::mlir::FailureOr<::mlir::RankedTensorType>
    getLocalType(::mlir::SymbolTableCollection &symbolTable,
                 bool emitErrors = true);
    /// A new parameter, inserted before this one, holding elements
    /// [start, start + size) along `axis` of this one's data (zeros past
    /// its end), named getPartName(...).
    ParamOp clonePart(int64_t axis, int64_t start, int64_t size);
    /// The name of that part, in numpy's notation: "W[:, 0:32]".
    std::string getPartName(int64_t axis, int64_t start, int64_t size);
  }];
}

def MP_GetParamOp : MP_Op<"get_param",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter by symbol";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def MP_ConstantOp : MP_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class MP_UnaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : MP_Op<mnemonic, !listconcat([MP_Differentiable, Pure, Elementwise,
                                   SameOperandsAndResultType,
                                   InferTypeOpInterface, MP_SplitByTraits,
                                   MP_UnfoldByTraits],
                                  traits)> {
  let summary = desc;
  let arguments = (ins MP_Tensor:$input);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def MP_NegOp : MP_UnaryOp<"neg", "elementwise negation">;
def MP_ExpOp : MP_UnaryOp<"exp", "elementwise exponential",
    [MP_MixingTrait]>;
def MP_LogOp : MP_UnaryOp<"log", "elementwise natural logarithm",
    [MP_MixingTrait]>;
def MP_SqrtOp : MP_UnaryOp<"sqrt", "elementwise square root">;
def MP_RsqrtOp : MP_UnaryOp<"rsqrt", "elementwise reciprocal square root">;
def MP_ReciprocalOp : MP_UnaryOp<"reciprocal", "elementwise 1/x">;
def MP_TanhOp : MP_UnaryOp<"tanh", "elementwise hyperbolic tangent",
    [MP_MixingTrait]>;
def MP_ErfOp : MP_UnaryOp<"erf", "elementwise error function",
    [MP_MixingTrait]>;
def MP_SigmoidOp : MP_UnaryOp<"sigmoid", "elementwise logistic sigmoid",
    [MP_MixingTrait]>;
def MP_ReluOp : MP_UnaryOp<"relu", "elementwise max(x, 0)",
    [MP_MixingTrait]>;
def MP_SiluOp : MP_UnaryOp<"silu", "elementwise x * sigmoid(x)",
                           [MP_TransformerOpTrait, MP_MixingTrait]>;
def MP_CosOp : MP_UnaryOp<"cos", "elementwise cosine">;
def MP_SinOp : MP_UnaryOp<"sin", "elementwise sine">;

def MP_GeluOp : MP_Op<"gelu", [MP_Differentiable,
    Pure, Elementwise, SameOperandsAndResultType,
                               InferTypeOpInterface, MP_SplitByTraits,
                               MP_UnfoldByTraits,
                               MP_TransformerOpTrait, MP_MixingTrait]> {
  let summary = "Gaussian error linear unit (exact erf form or tanh form)";
  let arguments = (ins MP_FloatTensor:$input,
      DefaultValuedAttr<MP_GeluApproximation,
                        "::mp::GeluApproximation::none">:$approximate);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` `=` $approximate^)? attr-dict `:` type($result)
  }];
}

class MP_BinaryOp<string mnemonic, string desc, list<Trait> traits = []>
    : MP_Op<mnemonic, !listconcat([MP_Differentiable, Pure,
                       ResultsBroadcastableShape,
                       AllElementTypesMatch<["lhs", "rhs", "result"]>,
                       InferTypeOpAdaptor, MP_SplitByTraits,
                       MP_UnfoldByTraits], traits)> {
  let summary = desc # " with ONNX (numpy) broadcasting";
  let arguments = (ins MP_Tensor:$lhs, MP_Tensor:$rhs);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_AddOp : MP_BinaryOp<"add", "elementwise addition", [Commutative]>;
def MP_SubOp : MP_BinaryOp<"sub", "elementwise subtraction">;
def MP_MulOp : MP_BinaryOp<"mul", "elementwise multiplication", [Commutative]>;
def MP_DivOp : MP_BinaryOp<"div", "elementwise division">;
def MP_PowOp : MP_BinaryOp<"pow", "elementwise power">;

def MP_CompareOp : MP_Op<"compare", [Pure, ResultsBroadcastableShape,
                                     AllElementTypesMatch<["lhs", "rhs"]>,
                                     InferTypeOpAdaptor, MP_SplitByTraits,
                                     MP_UnfoldByTraits]> {
  let summary = "elementwise comparison with broadcasting, giving i1";
  let arguments = (ins MP_ComparePredicate:$predicate, MP_Tensor:$lhs,
                       MP_Tensor:$rhs);
  let results = (outs RankedTensorOf<[I1]>:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_WhereOp : MP_Op<"where", [MP_Differentiable,
    Pure, ResultsBroadcastableShape,
    AllElementTypesMatch<["on_true", "on_false", "result"]>,
    InferTypeOpAdaptor, MP_SplitByTraits, MP_UnfoldByTraits]> {
  let summary = "elementwise select: condition ? on_true : on_false";
  let arguments = (ins RankedTensorOf<[I1]>:$condition, MP_Tensor:$on_true,
                       MP_Tensor:$on_false);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_CastOp : MP_Op<"cast", [MP_MovesDataTrait, MP_Differentiable,
    Pure, Elementwise, SameOperandsAndResultShape,
                               MP_SplitByTraits, MP_UnfoldByTraits]> {
  let summary = "elementwise element-type conversion";
  let arguments = (ins MP_Tensor:$input);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

def MP_MatmulOp : MP_Op<"matmul", [MP_Differentiable, MP_Costed, Pure,
    AllElementTypesMatch<["lhs", "rhs", "result"]>, InferTypeOpAdaptor,
    MP_SplitByRule, MP_TransformerOpTrait,
    DeclareOpInterfaceMethods<MP_LeadingDimOpInterface,
                              ["getLeadingDimOperands"]>]> {
  let summary = "batched matrix product with ONNX MatMul semantics";
  let description = [{
    `lhs` is `[..., M, K]`, `rhs` is `[..., K, N]`; batch dimensions broadcast;
    rank-1 operands are promoted as in numpy.matmul.
  }];
  let arguments = (ins MP_Tensor:$lhs, MP_Tensor:$rhs);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_LinearOp : MP_Op<"linear", [MP_Differentiable, MP_Costed, Pure,
                                   InferTypeOpAdaptor,
                                   MP_TransformerOpTrait,
    DeclareOpInterfaceMethods<MP_LeadingDimOpInterface,
                              ["getLeadingDimOperands"]>]> {
  let summary = "x · W + b over the last dimension of x";
  let description = [{
    `input` is `[..., K]`; `weight` is `[K, N]`, or `[N, K]` with
    `transpose_weight`; the optional `bias` is `[N]`. The result is `[..., N]`.
    `activation` (`gelu`, `gelu_tanh`, `silu`) applies that function to the
    result, as the GEMM's epilogue: `mp-fuse-epilogues` folds the op that
    follows a linear into it, after partitioning and differentiation, which
    refuse such a linear.
  }];
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$weight,
                       Optional<MP_FloatTensor>:$bias,
                       UnitAttr:$transpose_weight,
                       DefaultValuedAttr<MP_LinearActivation,
                                         "::mp::LinearActivation::none">:$activation);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`activation` `=` $activation^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_LayerNormOp : MP_Op<"layer_norm", [MP_Differentiable,
    Pure, InferTypeOpAdaptor,
                                          MP_SplitByRule, MP_UnfoldByRule,
                                          MP_TransformerOpTrait]> {
  let summary = "layer normalization over the trailing dims from `axis`";
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$scale,
                       Optional<MP_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getInput());
    }
  }];
}

def MP_RMSNormOp : MP_Op<"rms_norm", [MP_Differentiable,
    Pure, InferTypeOpAdaptor, MP_SplitByRule,
    DeclareOpInterfaceMethods<MP_LeadingDimOpInterface,
                              ["getLeadingDimOperands"]>,
                                      MP_TransformerOpTrait]> {
  let summary = "root-mean-square normalization over the last dimension";
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$scale,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// Residual add and norm in one pass over memory (mp-fuse-residual-norms).
class MP_AddNormOp<string mnemonic, string norm> : MP_Op<mnemonic, [Pure,
    MP_FusedOpTrait, MP_TransformerOpTrait,
    MP_InPlaceOpInterface,
    AllTypesMatch<["lhs", "rhs", "sum", "result"]>]> {
  let summary = "`lhs + rhs`, and `mp." # norm # "` of that sum";
  let description = [{
    Both results of a residual add and the norm that reads it: `sum` is
    `lhs + rhs` (the residual stream, for its other readers) and `result`
    is `mp.}] # norm # [{` of `sum`, computed on each row while it is in
    cache rather than in another pass over memory. In bf16 or f16 the sum
    is rounded to its type and the norm reads the rounded sum, as the two
    ops it replaces do (each computing in f32 and rounding its result), so
    the results are theirs bit for bit. The memory plan may put `sum` in
    `lhs`'s bytes and `result` in `rhs`'s, where nothing reads them after
    it.
    `mp-fuse-residual-norms` makes it, last, from an `mp.add` of two
    operands of the same type and a norm that reads it; partitioning and
    differentiation refuse it.
  }];
  let hasVerifier = 1;
}

def MP_AddLayerNormOp : MP_AddNormOp<"add_layer_norm", "layer_norm"> {
  let arguments = (ins MP_F32OrHalfTensor:$lhs, MP_F32OrHalfTensor:$rhs,
                       MP_F32OrHalfTensor:$scale,
                       Optional<MP_F32OrHalfTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs MP_F32OrHalfTensor:$sum, MP_F32OrHalfTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $scale (`,` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getLhs());
    }
  }];
}

def MP_AddRMSNormOp : MP_AddNormOp<"add_rms_norm", "rms_norm"> {
  let arguments = (ins MP_F32OrHalfTensor:$lhs, MP_F32OrHalfTensor:$rhs,
                       MP_F32OrHalfTensor:$scale,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs MP_F32OrHalfTensor:$sum, MP_F32OrHalfTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $scale attr-dict `:` functional-type(operands, results)
  }];
}

// Rotary position embedding in one pass over memory (mp-fuse-rotary).
def MP_RotaryOp : MP_Op<"rotary", [Pure, MP_FusedOpTrait,
    MP_TransformerOpTrait, MP_InPlaceOpInterface,
    AllTypesMatch<["input", "result"]>,
    AllTypesMatch<["cos", "sin"]>]> {
  let summary = "rotary position embedding of the first `rotary_dim` "
                "channels";
  let description = [{
    `input * cos + rotate(input) * sin` on the first `rotary_dim` channels
    of the last dim, the others passed through. `rotate` takes the channels
    in pairs and gives `(-b, a)` for `(a, b)`: the pairs are channel `c` and
    `c + rotary_dim / 2` (`rotate_half`: Llama, GPT-NeoX, Phi, Qwen), or
    `2i` and `2i + 1` with `interleaved` (GPT-J's `rotate_every_two`).
    `cos` and `sin` have `rotary_dim` channels and broadcast along the
    other dims of `input`. Each output is `x * cos + (-y) * sin` or
    `x * cos + y * sin`, rounded after each product as the ops it replaces
    are, so it gives their bits (a NaN's sign aside). f32 only. `mp-fuse-rotary` makes it, last,
    from the decomposed form an exporter writes; partitioning and
    differentiation refuse it. The memory plan may put the result in the
    input's bytes (each pair is read before it is written).
  }];
  let arguments = (ins MP_F32Tensor:$input, MP_F32Tensor:$cos,
                       MP_F32Tensor:$sin, I64Attr:$rotary_dim,
                       UnitAttr:$interleaved);
  let results = (outs MP_F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// A row-parallel linear's all-reduce, its bias, the residual add and the
// norm after them, as one collective (mp-fuse-reduced-norms).
class MP_AllReduceAddNormOp<string mnemonic, string norm,
                            list<Trait> traits = []> : MP_Op<mnemonic,
    !listconcat([Pure, MP_FusedOpTrait, MP_TransformerOpTrait,
                 MP_InPlaceOpInterface, MP_ReplicatedResultsTrait,
                 AllTypesMatch<["partial", "residual", "sum", "result"]>],
                traits)> {
  let summary = "`residual + (all_reduce(partial) + addend)`, and `mp."
                # norm # "` of that sum";
  let description = [{
    `sum` is `residual + (s + addend)`, where `s` is the sum of `partial`
    over the ranks along `grid_axis` of `grid` (`shard.all_reduce`) and
    `addend` (optional) a bias broadcast along the rows; `result` is
    `mp.}] # norm # [{` of `sum`. Both are the same on every rank. Ranks
    that share memory each sum, add and normalize 1/n of the rows and write
    them into every rank's results, so the norm that each rank of a
    tensor-parallel layer would compute whole is divided among them;
    elsewhere the runtime runs the all-reduce and then the rest. Either way
    each element is summed in rank order and each row computed by one
    rank: the bits of the ops it replaces. `residual`, `addend`, `scale`
    and `bias` must be the same on every rank (one rank's rows go to all).
    f32 only. The memory plan may put `sum` in `residual`'s bytes and
    `result` in `partial`'s.
    `mp-fuse-reduced-norms` makes it, last, in inference programs;
    partitioning and differentiation refuse it.
  }];
  let hasVerifier = 1;
}

def MP_AllReduceAddLayerNormOp
    : MP_AllReduceAddNormOp<"all_reduce_add_layer_norm", "layer_norm",
                            [AttrSizedOperandSegments]> {
  let arguments = (ins MP_F32Tensor:$partial, MP_F32Tensor:$residual,
                       MP_F32Tensor:$scale, Optional<MP_F32Tensor>:$bias,
                       Optional<MP_F32Tensor>:$addend,
                       FlatSymbolRefAttr:$grid, I64Attr:$grid_axis,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs MP_F32Tensor:$sum, MP_F32Tensor:$result);
  let assemblyFormat = [{
    $partial `,` $residual `,` $scale (`bias` $bias^)? (`addend` $addend^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getPartial());
    }
  }];
}

def MP_AllReduceAddRMSNormOp
    : MP_AllReduceAddNormOp<"all_reduce_add_rms_norm", "rms_norm"> {
  let arguments = (ins MP_F32Tensor:$partial, MP_F32Tensor:$residual,
                       MP_F32Tensor:$scale, Optional<MP_F32Tensor>:$addend,
                       FlatSymbolRefAttr:$grid, I64Attr:$grid_axis,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs MP_F32Tensor:$sum, MP_F32Tensor:$result);
  let assemblyFormat = [{
    $partial `,` $residual `,` $scale (`addend` $addend^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

// Sequence parallelism's reduce_scatter, the bias, the residual add, the
// norm and the all_gather of the norm, as one collective
// (mp-fuse-reduced-norms).
class MP_ReduceScatterAddNormOp<string mnemonic, string norm,
                                list<Trait> traits = []> : MP_Op<mnemonic,
    !listconcat([Pure, MP_FusedOpTrait, MP_TransformerOpTrait,
                 MP_InPlaceOpInterface,
                 AllTypesMatch<["residual", "sum"]>,
                 AllTypesMatch<["partial", "result"]>],
                traits)> {
  let summary = "`residual + (reduce_scatter(partial) + addend)`, and the "
                "all_gather of `mp." # norm # "` of that sum";
  let description = [{
    `sum` is `residual + (s + addend)`, where `s` is this rank's slice along
    `scatter_axis` of the sum of `partial` over the ranks along `grid_axis`
    of `grid` (`shard.reduce_scatter`) and `addend` (optional) a bias
    broadcast along the rows; `result` is every rank's `mp.}] # norm # [{`
    of its `sum`, gathered along `scatter_axis` (`shard.all_gather`): the
    same on every rank, while `sum` is this rank's slice (sequence
    parallelism's residual stream). Ranks that share memory sum and
    normalize their rows and write the norms straight into every rank's
    `result`: one meeting where the unfused ops hold two collectives.
    Elsewhere the runtime runs the reduce_scatter, the rest, then the
    all_gather. Either way each element is summed in rank order and each
    row computed by its rank: the bits of the ops it replaces. f32 only;
    the norm's axis comes after `scatter_axis`. The memory plan may put
    `sum` in `residual`'s bytes and `result` in `partial`'s.
    `mp-fuse-reduced-norms` makes it, last, in inference programs;
    partitioning and differentiation refuse it.
  }];
  let hasVerifier = 1;
}

def MP_ReduceScatterAddLayerNormOp
    : MP_ReduceScatterAddNormOp<"reduce_scatter_add_layer_norm", "layer_norm",
                                [AttrSizedOperandSegments]> {
  let arguments = (ins MP_F32Tensor:$partial, MP_F32Tensor:$residual,
                       MP_F32Tensor:$scale, Optional<MP_F32Tensor>:$bias,
                       Optional<MP_F32Tensor>:$addend,
                       FlatSymbolRefAttr:$grid, I64Attr:$grid_axis,
                       I64Attr:$scatter_axis,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon);
  let results = (outs MP_F32Tensor:$sum, MP_F32Tensor:$result);
  let assemblyFormat = [{
    $partial `,` $residual `,` $scale (`bias` $bias^)? (`addend` $addend^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getPartial());
    }
  }];
}

def MP_ReduceScatterAddRMSNormOp
    : MP_ReduceScatterAddNormOp<"reduce_scatter_add_rms_norm", "rms_norm"> {
  let arguments = (ins MP_F32Tensor:$partial, MP_F32Tensor:$residual,
                       MP_F32Tensor:$scale, Optional<MP_F32Tensor>:$addend,
                       FlatSymbolRefAttr:$grid, I64Attr:$grid_axis,
                       I64Attr:$scatter_axis,
                       DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon);
  let results = (outs MP_F32Tensor:$sum, MP_F32Tensor:$result);
  let assemblyFormat = [{
    $partial `,` $residual `,` $scale (`addend` $addend^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def MP_SoftmaxOp : MP_Op<"softmax", [MP_Differentiable, MP_CoreAttentionTrait,
    MP_MixingTrait,
    Pure, SameOperandsAndResultType,
                                     InferTypeOpInterface, MP_SplitByRule,
                                     MP_UnfoldByRule,
                                     MP_TransformerOpTrait]> {
  let summary = "softmax along one axis";
  let arguments = (ins MP_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getInput());
    }
  }];
}

def MP_ReduceOp : MP_Op<"reduce", [MP_Differentiable,
    Pure, SameOperandsAndResultElementType,
                                   InferTypeOpAdaptor, MP_SplitByRule]> {
  let summary = "reduction (sum, mean, max, min) over the given axes";
  let arguments = (ins MP_ReduceKind:$kind, MP_Tensor:$input,
                       DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdims);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $kind `,` $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MP_AttentionOp : MP_Op<"attention", [MP_Differentiable, MP_Costed,
    MP_CoreAttentionTrait, MP_MixingTrait,
    Pure, InferTypeOpAdaptor,
                                         MP_SplitByRule,
                                         MP_TransformerOpTrait]> {
  let summary = "scaled dot-product attention: softmax(q·kᵀ·scale + mask)·v";
  let description = [{
    `query` is `[B, H, Sq, D]`, `key` and `value` are `[B, Hkv, Sk, D]` with
    `H` a multiple of `Hkv` (grouped-query attention). `causal` masks keys
    after the query position (aligned at the end when `Sq != Sk`); the optional
    additive `mask` broadcasts to `[B, H, Sq, Sk]`.
  }];
  let arguments = (ins MP_FloatTensor:$query, MP_FloatTensor:$key,
                       MP_FloatTensor:$value, Optional<MP_FloatTensor>:$mask,
                       F32Attr:$scale, UnitAttr:$causal);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`,` $mask^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_EmbeddingOp : MP_Op<"embedding", [MP_Differentiable,
    Pure, InferTypeOpAdaptor,
                                         MP_TransformerOpTrait]> {
  let summary = "rows of a [V, H] table picked by integer ids";
  let description = [{
    With `grid`, the table is this rank's contiguous 1/n of the vocabulary
    rows (vocab-parallel, over the grid's ranks): ids outside the local range
    give zero rows, and an all-reduce over the grid completes the lookup.
    `vocab`, when set, is the vocabulary the ids index, fewer than the
    table's rows (padded to divide by the ranks): ids must be in
    [-vocab, vocab), negative ones counting from its end.
  }];
  let arguments = (ins MP_FloatTensor:$table, MP_IndexTensor:$indices,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_GatherOp : MP_Op<"gather", [MP_Differentiable,
    Pure, InferTypeOpAdaptor, MP_SplitByRule, MP_UnfoldByRule]> {
  let summary = "ONNX Gather: slices of `input` along `axis` picked by indices";
  let arguments = (ins MP_Tensor:$input, MP_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getInput());
    }
  }];
}

def MP_DropoutOp : MP_Op<"dropout", [MP_Differentiable,
    Elementwise, SameOperandsAndResultType,
                                     InferTypeOpInterface, MP_SplitByTraits,
                                     MP_TransformerOpTrait]> {
  let summary = "dropout with the given ratio (identity in inference)";
  let description = [{
    The identity unless `seed_id` is set: mp-autodiff sets it on every
    dropout of a train step (and its backward applies the same op to the
    result's gradient). Then each element is kept with probability
    1 − ratio and scaled by 1 / (1 − ratio), by a counter-based random
    stream keyed on the run's seed and step, `seed_id`, the element's index
    and, with `rank_stream`, the rank in the grid: Megatron's rule, the
    same stream on every tensor-parallel rank for replicated activations,
    a rank's own inside tensor-parallel regions and on sequence shards.
  }];
  let arguments = (ins MP_FloatTensor:$input, F32Attr:$ratio,
                       OptionalAttr<I64Attr>:$seed_id, UnitAttr:$rank_stream);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

// The loss's element type is chosen (fp32 under a bf16 program): not inferred.
def MP_CrossEntropyOp : MP_Op<"cross_entropy", [MP_Differentiable,
    Pure, MP_TransformerOpTrait]> {
  let summary = "mean softmax cross-entropy of logits [..., V] vs targets [...]";
  let arguments = (ins MP_FloatTensor:$logits, MP_IndexTensor:$targets);
  let results = (outs 0DTensorOf<[AnyFloat]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_VocabParallelCrossEntropyOp : MP_Op<"vocab_parallel_cross_entropy",
    [Pure, MP_Differentiable, MP_ReplicatedResultsTrait,
     MP_TransformerOpTrait]> {
  let summary = "mean cross-entropy of vocab-parallel logits (Megatron's)";
  let description = [{
    `logits` `[..., V/n]` are this rank's contiguous slice of the vocabulary
    (a column-parallel LM head over the `grid`'s n ranks); the loss is that
    of the whole vocabulary against `targets` (−100 ignored), without
    gathering the logits: each rank's row maxima, sums of exponentials and
    target logits (when the target is in its slice) are exchanged over the
    grid. Both results are the same on every rank: the loss and each
    position's log-sum-exp, which the backward reads (it then needs no
    communication). `vocab`, when set, is the number of classes targets may
    name, fewer than the logits' (a padded vocabulary, whose padding
    columns the logits hold far below any real one).
  }];
  let arguments = (ins MP_FloatTensor:$logits, MP_IndexTensor:$targets,
                       FlatSymbolRefAttr:$grid, OptionalAttr<I64Attr>:$vocab);
  let results = (outs 0DTensorOf<[F32]>:$loss, MP_FloatTensor:$logsumexp);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_EinsumOp : MP_Op<"einsum", [Pure, InferTypeOpAdaptor, MP_Costed,
    MP_Differentiable, MP_TransformerOpTrait]> {
  let summary = "Einstein summation with an explicit equation";
  let arguments = (ins Variadic<MP_Tensor>:$inputs, StrAttr:$equation);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $equation $inputs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_TriluOp : MP_Op<"trilu", [MP_Differentiable,
    Pure, SameOperandsAndResultType,
                                 InferTypeOpInterface]> {
  let summary = "keeps the upper or lower triangle of the last two dims";
  let arguments = (ins MP_Tensor:$input, UnitAttr:$upper,
                       DefaultValuedAttr<I64Attr, "0">:$diagonal);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def MP_ReshapeOp : MP_Op<"reshape", [MP_MovesDataTrait, MP_Differentiable,
    Pure,
    AllElementTypesMatch<["input", "result"]>, MP_SplitByRule,
    DeclareOpInterfaceMethods<ViewLikeOpInterface>]> {
  let summary = "reinterprets a tensor with a new static shape";
  let arguments = (ins MP_Tensor:$input);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MP_TransposeOp : MP_Op<"transpose", [MP_MovesDataTrait,
    MP_Differentiable, Pure,
    AllElementTypesMatch<["input", "result"]>, InferTypeOpAdaptor,
    MP_SplitByRule, MP_UnfoldByRule]> {
  let summary = "permutes dimensions: result dim i = input dim perm[i]";
  let arguments = (ins MP_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MP_SliceOp : MP_Op<"slice", [MP_MovesDataTrait, MP_Differentiable,
    Pure,
    AllElementTypesMatch<["input", "result"]>, InferTypeOpAdaptor,
    MP_SplitByRule, MP_UnfoldByRule]> {
  let summary = "static strided slice (one start, limit and stride per dim)";
  let description = [{
    Result dim `i` has `ceil((limits[i] - starts[i]) / strides[i])` elements;
    negative strides walk backwards (`limits[i]` may then be -1).
  }];
  let arguments = (ins MP_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let builders = [
    // The elements [start, limit) of `input` along `axis`, every other dim
    // whole.
    OpBuilder<(ins "::mlir::Value":$input, "int64_t":$axis, "int64_t":$start,
                   "int64_t":$limit)>
  ];
}

def MP_ConcatOp : MP_Op<"concat", [MP_MovesDataTrait, MP_Differentiable,
    Pure, InferTypeOpAdaptor, MP_SplitByRule, MP_UnfoldByRule]> {
  let summary = "concatenation along an axis";
  let arguments = (ins Variadic<MP_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getResult());
    }
  }];
}

def MP_SplitOp : MP_Op<"split", [MP_MovesDataTrait, MP_Differentiable, Pure,
    MP_SplitByRule]> {
  let summary = "splits a tensor along an axis; sizes come from result types";
  let arguments = (ins MP_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<MP_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// `axis` made non-negative.
    int64_t getNormalizedAxis() {
      return ::mp::detail::nonNegativeAxis(getAxis(), getInput());
    }
  }];
}

def MP_ExpandOp : MP_Op<"expand", [MP_MovesDataTrait, MP_Differentiable,
    Pure,
    AllElementTypesMatch<["input", "result"]>, MP_SplitByRule]> {
  let summary = "broadcasts a tensor to the result shape (numpy rules)";
  let arguments = (ins MP_Tensor:$input);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

include "mp/Dialect/MP/IR/MPGradOps.td"

#endif // MP_DIALECT_MP_IR_MPOPS_TD
