// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --mp-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s --check-prefix=LOCAL

// Tests contractions with a parameter that are not linears: an einsum with
// a [heads, d, head_dim] weight (its contracted dim between the kept ones,
// which mp-raise leaves an einsum) and a matmul with a 3-D weight. Tensor
// parallelism splits linears only, so they stay whole, said so (a warning
// in the layers, a replicated line of the summary).
// SUMMARY: layer 0     1 einsum, 1 matmul
// SUMMARY: replicated  2 block ops left whole by tensor parallelism:
// SUMMARY-NEXT: ('mp.einsum'): it reads parameter 'wq' as a weight, and tensor parallelism splits linears only
// SUMMARY-NEXT: ('mp.matmul'): it reads parameter 'wc' as a weight
mp.param @wq : tensor<2x16x8xf32> {file = "x.onnx"}
mp.param @wc : tensor<2x16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x4x16xf32>) {
  %w = mp.get_param @wq {mp.layer = 0 : i64} : tensor<2x16x8xf32>
  // expected-warning @below {{this 'mp.einsum' stays whole (replicated on all 2 ranks): it reads parameter 'wq' as a weight, and tensor parallelism splits linears only (mp-raise makes them of a MatMul or Gemm with a 2-D weight, and of an einsum that contracts a weight's leading or trailing dims): this contraction is not one}}
  %q = mp.einsum "bsd,hdk->bshk" %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x2x8xf32>
  %c = mp.get_param @wc {mp.layer = 0 : i64} : tensor<2x16x16xf32>
  // expected-warning @below {{this 'mp.matmul' stays whole}}
  %m = mp.matmul %x, %c {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x16x16xf32>) -> tensor<2x4x16xf32>
  return %q, %m : tensor<2x4x2x8xf32>, tensor<2x4x16xf32>
}

// -----

// Tests linears reading a parameter viewed 2-D (a reshape of its
// mp.get_param, as mp-raise makes of an einsum's [d, heads, head_dim]
// weight): the split of the view's dim is a split of the parameter's first
// dim merged into it, the parameter sharded along that dim (wh: 4 heads
// along dim 1; w3 along dim 0) and the view reshaped to the local shape;
// a view whose split dim starts with a parameter dim that does not divide
// by the ranks (3 heads) stays whole, said why.
// SUMMARY: replicated  2 block linears left whole by tensor parallelism:
// SUMMARY-NEXT: @wv: it reads parameter 'wv' 16x3x8 viewed as 16x24, and no dim of the parameter splits like dim 1 of the view into 2 blocks
// LOCAL: mp.param @wv : tensor<16x3x8xf32> {file = "x.onnx"}
// LOCAL: mp.param @wh : tensor<16x4x8xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// LOCAL: mp.param @w3 : tensor<2x16x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// LOCAL: mp.reshape %{{.*}} : tensor<16x3x8xf32> -> tensor<16x24xf32>
// LOCAL: mp.get_param @wh {{.*}} : tensor<16x2x8xf32>
// LOCAL: mp.reshape %{{.*}} : tensor<16x2x8xf32> -> tensor<16x16xf32>
// LOCAL: mp.get_param @w3 {{.*}} : tensor<1x16x16xf32>
// LOCAL: mp.reshape %{{.*}} : tensor<1x16x16xf32> -> tensor<16x16xf32>
// LOCAL: shard.all_reduce
mp.param @wv : tensor<16x3x8xf32> {file = "x.onnx"}
mp.param @w2 : tensor<24x16xf32> {file = "x.onnx"}
mp.param @wh : tensor<16x4x8xf32> {file = "x.onnx"}
mp.param @w3 : tensor<2x16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %w = mp.get_param @wv {mp.layer = 0 : i64} : tensor<16x3x8xf32>
  %v = mp.reshape %w {mp.layer = 0 : i64} : tensor<16x3x8xf32> -> tensor<16x24xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): it reads parameter 'wv' 16x3x8 viewed as 16x24, and no dim of the parameter splits like dim 1 of the view into 2 blocks}}
  // expected-note @below {{the split stops here}}
  %h = mp.linear %x, %v {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x24xf32>) -> tensor<2x4x24xf32>
  %g = mp.gelu %h {mp.layer = 0 : i64} : tensor<2x4x24xf32>
  %o = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<24x16xf32>
  // expected-warning @below {{this linear stays whole}}
  %y = mp.linear %g, %o {mp.layer = 0 : i64} : (tensor<2x4x24xf32>, tensor<24x16xf32>) -> tensor<2x4x16xf32>
  %a = mp.get_param @wh {mp.layer = 0 : i64} : tensor<16x4x8xf32>
  %av = mp.reshape %a {mp.layer = 0 : i64} : tensor<16x4x8xf32> -> tensor<16x32xf32>
  %h2 = mp.linear %x, %av {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g2 = mp.gelu %h2 {mp.layer = 0 : i64} : tensor<2x4x32xf32>
  %o2 = mp.get_param @w3 {mp.layer = 0 : i64} : tensor<2x16x16xf32>
  %ov = mp.reshape %o2 {mp.layer = 0 : i64} : tensor<2x16x16xf32> -> tensor<32x16xf32>
  %y2 = mp.linear %g2, %ov {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  // expected-note @below {{the split stops here}}
  return %y, %y2 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}
