//===- MPGradOps.td - mp dialect gradient ops --------------*- tablegen -*-===//
//
// Included by MPOps.td: the ops the derivative rules build (their verifiers
// are in MPGradOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MP_DIALECT_MP_IR_MPGRADOPS_TD
#define MP_DIALECT_MP_IR_MPGRADOPS_TD

//===----------------------------------------------------------------------===//
// Gradient ops: what the derivative rules build where composing the forward
// ops would be slow or need storage the forward does not.
//===----------------------------------------------------------------------===//

def MP_LinearWeightGradOp : MP_Op<"linear_weight_grad", [Pure, MP_Costed,
    AllElementTypesMatch<["input", "result_grad", "result"]>]> {
  let summary = "weight gradient of mp.linear: Σ xᵀ·dy over the leading dims";
  let description = [{
    `input` is the linear's input `[..., K]` and `result_grad` the gradient
    of its result `[..., N]`; the result is the weight's gradient in the
    weight's layout: `[K, N]`, or `[N, K]` with `transpose_weight`.
  }];
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$result_grad,
                       UnitAttr:$transpose_weight);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_LayerNormGradOp : MP_Op<"layer_norm_grad", [Pure,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad"]>]> {
  let summary = "gradients of mp.layer_norm's input and scale";
  let description = [{
    Recomputes the row statistics from `input`; the bias gradient is the sum
    of `result_grad` over the leading dims (built by the rule, not here).
  }];
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$scale,
                       MP_FloatTensor:$result_grad, I64Attr:$axis,
                       F32Attr:$epsilon);
  let results = (outs MP_FloatTensor:$input_grad, MP_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $result_grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_RMSNormGradOp : MP_Op<"rms_norm_grad", [Pure,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["scale", "scale_grad"]>]> {
  let summary = "gradients of mp.rms_norm's input and scale";
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$scale,
                       MP_FloatTensor:$result_grad, F32Attr:$epsilon);
  let results = (outs MP_FloatTensor:$input_grad, MP_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $result_grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_GeluGradOp : MP_Op<"gelu_grad", [Pure, Elementwise,
    SameOperandsAndResultType]> {
  let summary = "gradient of mp.gelu: result_grad · gelu'(input)";
  let arguments = (ins MP_FloatTensor:$input, MP_FloatTensor:$result_grad,
      DefaultValuedAttr<MP_GeluApproximation,
                        "::mp::GeluApproximation::none">:$approximate);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $result_grad (`approximate` `=` $approximate^)? attr-dict `:`
    type($result)
  }];
}

def MP_AttentionGradOp : MP_Op<"attention_grad", [Pure, MP_Costed,
    AllTypesMatch<["query", "query_grad"]>, AllTypesMatch<["key", "key_grad"]>,
    AllTypesMatch<["value", "value_grad"]>,
    AllTypesMatch<["result", "result_grad"]>]> {
  let summary = "gradients of mp.attention's query, key and value";
  let description = [{
    Recomputes each query row's scores from `query` and `key` (the S×S
    probabilities are never stored) and takes the softmax correction from
    the saved `result` (Σ result·result_grad per row), as FlashAttention's
    backward does. Grouped-query key/value gradients sum over the query
    heads that share them. The mask gets no gradient.
  }];
  let arguments = (ins MP_FloatTensor:$query, MP_FloatTensor:$key,
                       MP_FloatTensor:$value, MP_FloatTensor:$result,
                       MP_FloatTensor:$result_grad,
                       Optional<MP_FloatTensor>:$mask, F32Attr:$scale,
                       UnitAttr:$causal);
  let results = (outs MP_FloatTensor:$query_grad, MP_FloatTensor:$key_grad,
                      MP_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $result `,` $result_grad (`,` $mask^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_EmbeddingGradOp : MP_Op<"embedding_grad", [Pure]> {
  let summary = "embedding table gradient: result_grad rows summed by id";
  let description = [{
    The result has the table's type `[V, H]`: row `v` is the sum of the rows
    of `result_grad` (`indices`' shape + `[H]`) whose id is `v` (negative
    ids count from the end). With `grid`, the table is this rank's
    vocab-parallel slice, as for mp.embedding: foreign ids add nothing.
    `vocab` as for mp.embedding.
  }];
  let arguments = (ins MP_IndexTensor:$indices, MP_FloatTensor:$result_grad,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       OptionalAttr<I64Attr>:$vocab);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $result_grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_CrossEntropyGradOp : MP_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of mp.cross_entropy's logits";
  let description = [{
    `loss_grad` (a scalar) · (softmax(logits) − onehot(target)) / n, n the
    number of targets that are not ignored (−100 gives a zero row).
  }];
  let arguments = (ins MP_FloatTensor:$logits, MP_IndexTensor:$targets,
                       0DTensorOf<[AnyFloat]>:$loss_grad);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $loss_grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MP_SliceGradOp : MP_Op<"slice_grad", [Pure,
    AllElementTypesMatch<["result_grad", "result"]>]> {
  let summary = "gradient of mp.slice: result_grad placed where the slice read";
  let description = [{
    The result has the sliced input's type: zeros, except the elements the
    slice (same `starts`, `limits`, `strides`) read, which hold
    `result_grad`.
  }];
  let arguments = (ins MP_Tensor:$result_grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs MP_Tensor:$result);
  let assemblyFormat = [{
    $result_grad attr-dict `:` type($result_grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MP_VocabParallelCrossEntropyGradOp
    : MP_Op<"vocab_parallel_cross_entropy_grad", [Pure,
            AllTypesMatch<["logits", "result"]>]> {
  let summary = "gradient of mp.vocab_parallel_cross_entropy's local logits";
  let description = [{
    `loss_grad` · (exp(logits − logsumexp) − onehot(target)) / n on this
    rank's vocabulary slice, from the forward's saved log-sum-exp: no
    communication.
  }];
  let arguments = (ins MP_FloatTensor:$logits, MP_IndexTensor:$targets,
                       MP_FloatTensor:$logsumexp,
                       0DTensorOf<[AnyFloat]>:$loss_grad,
                       FlatSymbolRefAttr:$grid, OptionalAttr<I64Attr>:$vocab);
  let results = (outs MP_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $logsumexp `,` $loss_grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MP_DIALECT_MP_IR_MPGRADOPS_TD
