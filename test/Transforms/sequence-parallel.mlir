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

// -----

// Tests a head-split query gated by a value of the sequence-split residual
// stream, broadcast over the heads (sigmoid(h)[:, None]): the gate is
// gathered to the whole sequence, not the query cut by sequence (each rank
// holds other heads: cutting them as if every rank held them whole mixed
// the ranks' heads).
// CHECK-LABEL: func.func @main
// CHECK: %[[G:.*]] = mp.sigmoid %{{.*}} {mp.layer = 0 : i64} : tensor<2x2x8xf32>
// CHECK: %[[GV:.*]] = mp.reshape %[[G]] {mp.layer = 0 : i64} : tensor<2x2x8xf32> -> tensor<2x1x2x8xf32>
// CHECK: %[[GW:.*]] = shard.all_gather %[[GV]] on @tp grid_axes = [0] gather_axis = 2
// CHECK: mp.mul %{{.*}}, %[[GW]] {mp.layer = 0 : i64} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// CHECK-NOT: shard.all_slice
mp.param @w1 : tensor<8x16xf32> {file = "x.onnx"}
mp.param @w2 : tensor<16x8xf32> {file = "x.onnx"}
mp.param @g : tensor<8xf32> {file = "x.onnx"}
mp.param @q : tensor<8x16xf32> {file = "x.onnx"}
mp.param @k : tensor<8x16xf32> {file = "x.onnx"}
mp.param @v : tensor<8x16xf32> {file = "x.onnx"}
mp.param @o : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x16xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<16x8xf32>
  %g = mp.get_param @g {mp.layer = 0 : i64} : tensor<8xf32>
  %wq = mp.get_param @q {mp.layer = 0 : i64} : tensor<8x16xf32>
  %wk = mp.get_param @k {mp.layer = 0 : i64} : tensor<8x16xf32>
  %wv = mp.get_param @v {mp.layer = 0 : i64} : tensor<8x16xf32>
  %wo = mp.get_param @o {mp.layer = 0 : i64} : tensor<16x8xf32>
  %u = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %a0 = mp.gelu %u {mp.layer = 0 : i64} : tensor<2x4x16xf32>
  %d = mp.linear %a0, %w2 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %r = mp.add %x, %d {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h = mp.rms_norm %r, %g {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %q0 = mp.linear %h, %wq {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %gate = mp.sigmoid %h {mp.layer = 0 : i64} : tensor<2x4x8xf32>
  %gate4 = mp.reshape %gate {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
  %qg = mp.mul %q, %gate4 {mp.layer = 0 : i64} : (tensor<2x2x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %k0 = mp.linear %h, %wk {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %k1 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %k = mp.transpose %k1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v0 = mp.linear %h, %wv {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %v1 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %v = mp.transpose %v1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %at = mp.attention %qg, %k, %v {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %m1 = mp.transpose %at [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m = mp.reshape %m1 {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %y = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %out = mp.add %r, %y {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// -----

// Tests a sequence-first model ([S, B, H], as ChatGLM): the embedding's
// all-reduce, batch first, splits its sequence (dim 1); the transpose to
// sequence first carries the split to dim 0, and the layer's all-reduce,
// whose sum meets that residual, splits dim 0 too, though its dim before
// the hidden size (the batch, 2) divides: one split meets the other in the
// residual add, no all-gather between them.
// CHECK-LABEL: func.func @sequence_first
// CHECK: %[[E:.*]] = shard.reduce_scatter {{.*}} scatter_axis = 1 {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[T:.*]] = mp.transpose %[[E]] [1, 0, 2] {{.*}} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[T]] on @tp grid_axes = [0] gather_axis = 0 {{.*}} -> tensor<4x2x8xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter {{.*}} scatter_axis = 0 {{.*}} -> tensor<2x2x8xf32>
// CHECK-NOT: shard.all_gather
// CHECK: mp.add %[[RS]], %[[T]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: shard.all_gather {{.*}} gather_axis = 0 {{.*}} -> tensor<4x2x8xf32>
mp.param @up0 : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down0 : tensor<16x8xf32> {file = "x.onnx"}
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @sequence_first(%x: tensor<2x4x8xf32>) -> tensor<4x2x8xf32> {
  %up0 = mp.get_param @up0 {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down0 = mp.get_param @down0 {mp.layer = 0 : i64} : tensor<16x8xf32>
  %up = mp.get_param @up {mp.layer = 1 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 1 : i64} : tensor<16x8xf32>
  %e0 = mp.linear %x, %up0 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %e = mp.linear %e0, %down0 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %s = mp.transpose %e [1, 0, 2] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  %h = mp.linear %s, %up {mp.layer = 1 : i64} : (tensor<4x2x8xf32>, tensor<8x16xf32>) -> tensor<4x2x16xf32>
  %p = mp.linear %h, %down {mp.layer = 1 : i64} : (tensor<4x2x16xf32>, tensor<16x8xf32>) -> tensor<4x2x8xf32>
  %r = mp.add %p, %s {mp.layer = 1 : i64} : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %r : tensor<4x2x8xf32>
}

// -----

// Tests a sequence-first batch of one ([S, 1, H]): the dim before the
// hidden size does not divide, so the reduce-scatter splits the sequence,
// dim 0.
// CHECK-LABEL: func.func @batch_of_one
// CHECK: %[[RS:.*]] = shard.reduce_scatter {{.*}} scatter_axis = 0 {{.*}} -> tensor<2x1x8xf32>
// CHECK: %[[N:.*]] = mp.layer_norm %[[RS]], {{.*}} -> tensor<2x1x8xf32>
// CHECK: shard.all_gather %[[N]] on @tp grid_axes = [0] gather_axis = 0 {{.*}} -> tensor<4x1x8xf32>
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
mp.param @g : tensor<8xf32> {file = "x.onnx"}
func.func @batch_of_one(%x: tensor<4x1x8xf32>) -> tensor<4x1x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %g = mp.get_param @g {mp.layer = 0 : i64} : tensor<8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<4x1x8xf32>, tensor<8x16xf32>) -> tensor<4x1x16xf32>
  %p = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<4x1x16xf32>, tensor<16x8xf32>) -> tensor<4x1x8xf32>
  %n = mp.layer_norm %p, %g {mp.layer = 0 : i64} : (tensor<4x1x8xf32>, tensor<8xf32>) -> tensor<4x1x8xf32>
  return %n : tensor<4x1x8xf32>
}

// -----

// Tests slices of the sequence-split residual stream: a slice taking the
// whole sequence (and part of the hidden size) runs on the local block, its
// bounds made local; one taking every other position needs the whole
// sequence and reads it all-gathered.
// CHECK-LABEL: func.func @slices
// CHECK: %[[H:.*]] = mp.add %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
// CHECK: %[[G:.*]] = shard.all_gather %[[H]] on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4x32xf32> -> tensor<2x8x32xf32>
// CHECK: mp.slice %[[G]] {limits = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 2, 1>} : tensor<2x8x32xf32> -> tensor<2x4x32xf32>
// CHECK: mp.slice %[[H]] {limits = array<i64: 2, 4, 16>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
mp.param @w1 : tensor<32x64xf32> {file = "x.onnx"}
mp.param @w2 : tensor<64x32xf32> {file = "x.onnx"}
func.func @slices(%x: tensor<2x8x32xf32>) -> (tensor<2x4x32xf32>, tensor<2x8x16xf32>) {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<32x64xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<64x32xf32>
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %r = mp.linear %h, %w2 {mp.layer = 0 : i64} : (tensor<2x8x64xf32>, tensor<64x32xf32>) -> tensor<2x8x32xf32>
  %y = mp.add %x, %r {mp.layer = 0 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %s = mp.slice %y {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 8, 32>, strides = array<i64: 1, 2, 1>} : tensor<2x8x32xf32> -> tensor<2x4x32xf32>
  %t = mp.slice %y {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 8, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x8x32xf32> -> tensor<2x8x16xf32>
  return %s, %t : tensor<2x4x32xf32>, tensor<2x8x16xf32>
}
