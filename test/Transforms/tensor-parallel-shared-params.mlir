// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s

// Tests a feed-forward module called in two layers (ALBERT's shared layer,
// a module reused): its linears read the same parameters in both calls.
// Both calls split column/row, so each parameter is sharded once, the same
// way for both.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @up : tensor<16x32xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @down : tensor<32x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// CHECK-COUNT-2: shard.all_reduce
mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %u0 = mp.get_param @up {mp.layer = 0 : i64} : tensor<16x32xf32>
  %d0 = mp.get_param @down {mp.layer = 0 : i64} : tensor<32x16xf32>
  %h0 = mp.linear %x, %u0 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g0 = mp.gelu %h0 {mp.layer = 0 : i64} : tensor<2x4x32xf32>
  %o0 = mp.linear %g0, %d0 {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r0 = mp.add %o0, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %u1 = mp.get_param @up {mp.layer = 1 : i64} : tensor<16x32xf32>
  %d1 = mp.get_param @down {mp.layer = 1 : i64} : tensor<32x16xf32>
  %h1 = mp.linear %r0, %u1 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g1 = mp.gelu %h1 {mp.layer = 1 : i64} : tensor<2x4x32xf32>
  %o1 = mp.linear %g1, %d1 {mp.layer = 1 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r1 = mp.add %o1, %r0 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r1 : tensor<2x4x16xf32>
}

// -----

// Tests the same module whose second call also reads its hidden activation
// in a way that cannot run split (a slice of the features): that call stays
// whole, so its parameters are needed whole, and the first call stays whole
// too, said so, instead of failing with a parameter both whole and sharded.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
// CHECK-DAG: mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
// CHECK-NOT: shard.all_reduce
mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %u0 = mp.get_param @up {mp.layer = 0 : i64} : tensor<16x32xf32>
  %d0 = mp.get_param @down {mp.layer = 0 : i64} : tensor<32x16xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): a parameter it reads is also read by 'mp.linear', which reads it whole, and a parameter is split one way or kept whole (the calls of one module share their weights)}}
  %h0 = mp.linear %x, %u0 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g0 = mp.gelu %h0 {mp.layer = 0 : i64} : tensor<2x4x32xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): a parameter it reads is also read by 'mp.linear', which reads it whole}}
  %o0 = mp.linear %g0, %d0 {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r0 = mp.add %o0, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %u1 = mp.get_param @up {mp.layer = 1 : i64} : tensor<16x32xf32>
  %d1 = mp.get_param @down {mp.layer = 1 : i64} : tensor<32x16xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.slice' split along dim 2, which cannot run on that split}}
  // expected-note @below {{the split stops here}}
  %h1 = mp.linear %r0, %u1 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g1 = mp.gelu %h1 {mp.layer = 1 : i64} : tensor<2x4x32xf32>
  // expected-warning @below {{this linear stays whole}}
  // expected-note @below {{the split stops here}}
  %o1 = mp.linear %g1, %d1 {mp.layer = 1 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  // expected-note @below {{the split stops here}}
  %s1 = mp.slice %h1 {limits = array<i64: 2, 4, 16>, mp.layer = 1 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
  // expected-note @below {{the split stops here}}
  %p1 = mp.add %o1, %s1 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %r1 = mp.add %p1, %r0 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r1 : tensor<2x4x16xf32>
}

// -----

// Tests the same module whose second call reads the output of another
// column-parallel linear (@p): that call would be row-parallel where the
// first is column-parallel. Only @p stays whole, so both calls split
// column/row alike (dropping the first call too would not come back).
// CHECK-LABEL: module
// CHECK-DAG: mp.param @p : tensor<16x16xf32> {file = "x.onnx"}
// CHECK-DAG: mp.param @up : tensor<16x32xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @down : tensor<32x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// CHECK-COUNT-2: shard.all_reduce
mp.param @p : tensor<16x16xf32> {file = "x.onnx"}
mp.param @up : tensor<16x32xf32> {file = "x.onnx"}
mp.param @down : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %u0 = mp.get_param @up {mp.layer = 0 : i64} : tensor<16x32xf32>
  %d0 = mp.get_param @down {mp.layer = 0 : i64} : tensor<32x16xf32>
  %h0 = mp.linear %x, %u0 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g0 = mp.gelu %h0 {mp.layer = 0 : i64} : tensor<2x4x32xf32>
  %o0 = mp.linear %g0, %d0 {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r0 = mp.add %o0, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %pw = mp.get_param @p {mp.layer = 1 : i64} : tensor<16x16xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.linear', which would be row-parallel, but another reader of that linear's parameters splits it another way}}
  %p1 = mp.linear %r0, %pw {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q1 = mp.gelu %p1 {mp.layer = 1 : i64} : tensor<2x4x16xf32>
  %u1 = mp.get_param @up {mp.layer = 1 : i64} : tensor<16x32xf32>
  %d1 = mp.get_param @down {mp.layer = 1 : i64} : tensor<32x16xf32>
  // expected-note @below {{the split stops here}}
  %h1 = mp.linear %q1, %u1 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %g1 = mp.gelu %h1 {mp.layer = 1 : i64} : tensor<2x4x32xf32>
  %o1 = mp.linear %g1, %d1 {mp.layer = 1 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r1 = mp.add %o1, %r0 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r1 : tensor<2x4x16xf32>
}
