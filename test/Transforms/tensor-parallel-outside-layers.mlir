// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --mp-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --mp-sequence-parallel --split-input-file 2>/dev/null | FileCheck %s --check-prefix=SP

// Tests linears outside the repeated layers (no mp.layer: a Perceiver's
// cross-attention block, a block unlike the others): they split as a
// block's do, column then row, with no warning for any.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @up : tensor<16x32xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @down : tensor<32x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// CHECK: shard.all_reduce
mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %u = mp.get_param @up : tensor<16x32xf32>
  %d = mp.get_param @down : tensor<32x16xf32>
  %h = mp.linear %x, %u : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g = mp.gelu %h : tensor<2x4x32xf32>
  %o = mp.linear %g, %d : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %o, %x : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests a transform before the LM head (ESM's, RoBERTa's lm_head.dense):
// the head splits along its vocabulary, so the dense linear before it,
// outside the layers, stays whole instead of making the head row-parallel
// (which would need its weight sharded two ways with a tied embedding).
// CHECK-LABEL: module
// CHECK-DAG: mp.param @dense : tensor<16x16xf32> {file = "x.onnx"}
// CHECK-DAG: mp.param @head : tensor<16x8xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK-NOT: shard.all_reduce
// CHECK: shard.all_gather
mp.param @dense : tensor<16x16xf32> {file = "x.onnx"}
mp.param @head : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x8xf32> {
  %w = mp.get_param @dense : tensor<16x16xf32>
  %v = mp.get_param @head : tensor<16x8xf32>
  %h = mp.linear %x, %w : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %g = mp.gelu %h : tensor<2x4x16xf32>
  %o = mp.linear %g, %v : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests an outside pair whose sizes (3 hidden, 5 out) do not divide by tp:
// both stay whole, where a block's would be an error, and the summary
// says why.
// SUMMARY: replicated  2 linears outside the layers left whole by tensor parallelism:
// SUMMARY-NEXT: @up: its split would cut dim 2 of the result (3) of 'mp.linear', which does not divide by the 2 ranks
// SUMMARY-NEXT: @down: its split would cut dim 2 of the result (5) of 'mp.linear', which does not divide by the 2 ranks
// CHECK-LABEL: module
// CHECK-DAG: mp.param @up : tensor<5x3xf32> {file = "x.onnx"}
// CHECK-DAG: mp.param @down : tensor<3x5xf32> {file = "x.onnx"}
// CHECK-NOT: shard.all
mp.param @up : tensor<5x3xf32> {file = "x.onnx"}
mp.param @down : tensor<3x5xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x5xf32>) -> tensor<2x4x5xf32> {
  %u = mp.get_param @up : tensor<5x3xf32>
  %d = mp.get_param @down : tensor<3x5xf32>
  %h = mp.linear %x, %u : (tensor<2x4x5xf32>, tensor<5x3xf32>) -> tensor<2x4x3xf32>
  %g = mp.gelu %h : tensor<2x4x3xf32>
  %o = mp.linear %g, %d : (tensor<2x4x3xf32>, tensor<3x5xf32>) -> tensor<2x4x5xf32>
  %r = mp.add %o, %x : (tensor<2x4x5xf32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
  return %r : tensor<2x4x5xf32>
}

// -----

// Tests an outside pair on pooled [B, C] vectors (a classifier's MLP, a
// diffusion transformer's timestep MLP) with a batch (3) that does not
// divide by tp: it splits, and sequence parallelism, with no dim to
// scatter, leaves its all-reduce an all-reduce instead of failing.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @up : tensor<16x32xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK: shard.all_reduce
// SP: shard.all_reduce {{.*}} : tensor<3x16xf32> -> tensor<3x16xf32>
// SP-NOT: shard.reduce_scatter
mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %u = mp.get_param @up : tensor<16x32xf32>
  %d = mp.get_param @down : tensor<32x16xf32>
  %h = mp.linear %x, %u : (tensor<3x16xf32>, tensor<16x32xf32>) -> tensor<3x32xf32>
  %g = mp.gelu %h : tensor<3x32xf32>
  %o = mp.linear %g, %d : (tensor<3x32xf32>, tensor<32x16xf32>) -> tensor<3x16xf32>
  %r = mp.add %o, %x : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
  return %r : tensor<3x16xf32>
}
