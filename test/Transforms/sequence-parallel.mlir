// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --mp-sequence-parallel --split-input-file | FileCheck %s

// Tests one block (an MLP with a residual and a norm): the row-parallel
// all-reduce becomes a reduce-scatter over the sequence (dim 1), the
// residual add and the norm run on the local half of the sequence, and the
// next column-parallel linear gets the whole sequence back with one
// all-gather; the function result is gathered too.
// CHECK-LABEL: func.func @block
// CHECK: %[[H:.*]] = mp.linear %arg0, {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[P:.*]] = mp.linear %{{.*}}, {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[P]] on @tp grid_axes = [0] scatter_axis = 1 {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[X:.*]] = shard.all_slice %arg0 on @tp grid_axes = [0] slice_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[R:.*]] = mp.add %[[RS]], %[[X]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[N:.*]] = mp.layer_norm %[[R]], {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[N]] on @tp grid_axes = [0] gather_axis = 1 {{.*}} -> tensor<2x4x8xf32>
// CHECK: mp.linear %[[G]], {{.*}} -> tensor<2x4x8xf32>
// CHECK: shard.reduce_scatter {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[OUT:.*]] = shard.all_gather {{.*}} gather_axis = 1 {{.*}} -> tensor<2x4x8xf32>
// CHECK: return %[[OUT]]
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
mp.param @g : tensor<8xf32> {file = "x.onnx"}
mp.param @up2 : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down2 : tensor<16x8xf32> {file = "x.onnx"}
func.func @block(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %g = mp.get_param @g {mp.layer = 0 : i64} : tensor<8xf32>
  %up2 = mp.get_param @up2 {mp.layer = 1 : i64} : tensor<8x16xf32>
  %down2 = mp.get_param @down2 {mp.layer = 1 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a = mp.gelu %h {mp.layer = 0 : i64} : tensor<2x4x16xf32>
  %p = mp.linear %a, %down {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %r = mp.add %p, %x {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = mp.layer_norm %r, %g {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h2 = mp.linear %n, %up2 {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a2 = mp.gelu %h2 {mp.layer = 1 : i64} : tensor<2x4x16xf32>
  %y = mp.linear %a2, %down2 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests a whole tensor meeting the sequence split in a broadcasting op: a
// [S, H] position table is cut with all_slice along its own sequence dim
// (0), a [H] bias broadcasts and stays whole.
// CHECK-LABEL: func.func @position_table
// CHECK: %[[RS:.*]] = shard.reduce_scatter {{.*}} scatter_axis = 1 {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[T:.*]] = shard.all_slice %arg1 on @tp grid_axes = [0] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[A:.*]] = mp.add %[[RS]], %[[T]] : (tensor<2x2x8xf32>, tensor<2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: mp.add %[[A]], %arg2 : (tensor<2x2x8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @position_table(%x: tensor<2x4x8xf32>, %pos: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %p = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %a = mp.add %p, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %c = mp.add %a, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %c : tensor<2x4x8xf32>
}

// -----

// Tests that an op needing the whole sequence (a softmax along it) gets it
// back through one all-gather, and that ops after it run whole.
// CHECK-LABEL: func.func @needs_whole_sequence
// CHECK: %[[RS:.*]] = shard.reduce_scatter {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[RS]] {{.*}} gather_axis = 1 {{.*}} -> tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = mp.softmax %[[G]] {axis = 1 : i64} : tensor<2x4x8xf32>
// CHECK-NOT: shard.
// CHECK: return %[[S]]
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @needs_whole_sequence(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %p = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %s = mp.softmax %p {axis = 1 : i64} : tensor<2x4x8xf32>
  return %s : tensor<2x4x8xf32>
}
