// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --mp-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=SUMMARY

// Tests contractions with a parameter that are not linears: an einsum with
// a [d, heads, head_dim] weight (JAX-style projections) and a matmul with a
// 3-D weight. Tensor parallelism splits linears only, so they stay whole,
// said so (a warning in the layers, a replicated line of the summary).
// SUMMARY: layer 0     1 einsum, 1 matmul
// SUMMARY: replicated  2 block ops left whole by tensor parallelism:
// SUMMARY-NEXT: ('mp.einsum'): it reads parameter 'wq' as a weight, and tensor parallelism splits linears only
// SUMMARY-NEXT: ('mp.matmul'): it reads parameter 'wc' as a weight
mp.param @wq : tensor<16x2x8xf32> {file = "x.onnx"}
mp.param @wc : tensor<2x16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x4x16xf32>) {
  %w = mp.get_param @wq {mp.layer = 0 : i64} : tensor<16x2x8xf32>
  // expected-warning @below {{this 'mp.einsum' stays whole (replicated on all 2 ranks): it reads parameter 'wq' as a weight, and tensor parallelism splits linears only (mp-raise makes them of a MatMul, Gemm or einsum with a 2-D weight): this contraction is not one}}
  %q = mp.einsum "bsd,dhk->bshk" %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x2x8xf32>) -> tensor<2x4x2x8xf32>
  %c = mp.get_param @wc {mp.layer = 0 : i64} : tensor<2x16x16xf32>
  // expected-warning @below {{this 'mp.matmul' stays whole}}
  %m = mp.matmul %x, %c {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x16x16xf32>) -> tensor<2x4x16xf32>
  return %q, %m : tensor<2x4x2x8xf32>, tensor<2x4x16xf32>
}
