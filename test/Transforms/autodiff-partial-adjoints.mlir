// RUN: mp-opt %s --split-input-file --mp-autodiff | FileCheck %s

// Tests where the backward reduces the part of a replicated value's adjoint
// that rank-local consumers give (a column-parallel linear's input
// gradient). A value cut only into slices covering it (a gates table, an
// expert's gate each, scaling rank-local expert outputs) passes the parts on
// unreduced through the slices: one all-reduce of the table, not one per
// slice.
// CHECK-LABEL: func.func @gates
// CHECK-COUNT-1: shard.all_reduce {{.*}} : tensor<2x4x2xf32> -> tensor<2x4x2xf32>
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<2x4x1xf32>
shard.grid @tp(shape = 2)
mp.param @g : tensor<2x4x2xf32> {file = "x.onnx"}
mp.param @w : tensor<8x8xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
func.func @gates(%x: tensor<2x4x8xf32>) -> tensor<f32> {
  %g = mp.get_param @g : tensor<2x4x2xf32>
  %t = mp.tanh %g : tensor<2x4x2xf32>
  %g0 = mp.slice %t {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 1>, strides = array<i64: 1, 1, 1>} : tensor<2x4x2xf32> -> tensor<2x4x1xf32>
  %g1 = mp.slice %t {starts = array<i64: 0, 0, 1>, limits = array<i64: 2, 4, 2>, strides = array<i64: 1, 1, 1>} : tensor<2x4x2xf32> -> tensor<2x4x1xf32>
  %w = mp.get_param @w : tensor<8x4xf32>
  %y = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %e0 = mp.mul %y, %g0 : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  %e1 = mp.mul %y, %g1 : (tensor<2x4x4xf32>, tensor<2x4x1xf32>) -> tensor<2x4x4xf32>
  %s = mp.add %e0, %e1 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %r = mp.reduce sum, %s {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x4xf32> -> tensor<f32>
  %l = shard.all_reduce %r on @tp grid_axes = [0] : tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a slice of a value read otherwise too (the last token of the
// hidden states) reduces its own part where it is: passed on, the part
// would be padded to the whole value (64 times the bytes).
// CHECK-LABEL: func.func @last_token
// CHECK: shard.all_reduce {{.*}} : tensor<2x1x16xf32> -> tensor<2x1x16xf32>
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<2x64x16xf32>
shard.grid @tp(shape = 2)
mp.param @h : tensor<2x64x16xf32> {file = "x.onnx"}
mp.param @w : tensor<16x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
func.func @last_token() -> tensor<f32> {
  %h = mp.get_param @h : tensor<2x64x16xf32>
  %t = mp.tanh %h : tensor<2x64x16xf32>
  %s = mp.slice %t {starts = array<i64: 0, 63, 0>, limits = array<i64: 2, 64, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x64x16xf32> -> tensor<2x1x16xf32>
  %w = mp.get_param @w : tensor<16x8xf32>
  %y = mp.linear %s, %w : (tensor<2x1x16xf32>, tensor<16x8xf32>) -> tensor<2x1x8xf32>
  %r = mp.reduce sum, %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x1x8xf32> -> tensor<f32>
  %m = mp.reduce sum, %t {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x64x16xf32> -> tensor<f32>
  %l = shard.all_reduce %r on @tp grid_axes = [0] : tensor<f32> -> tensor<f32>
  %o = mp.add %l, %m : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %o : tensor<f32>
}

// -----

// Tests that a cast reduces its part in the width the local consumer used.
// CHECK-LABEL: func.func @narrowed
// CHECK: shard.all_reduce {{.*}} : tensor<2x8x16xbf16> -> tensor<2x8x16xbf16>
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<2x8x16xf32>
shard.grid @tp(shape = 2)
mp.param @v : tensor<2x8x16xf32> {file = "x.onnx"}
mp.param @wb : tensor<16x16xbf16> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
func.func @narrowed() -> tensor<f32> {
  %v = mp.get_param @v : tensor<2x8x16xf32>
  %t = mp.tanh %v : tensor<2x8x16xf32>
  %c = mp.cast %t : tensor<2x8x16xf32> to tensor<2x8x16xbf16>
  %w = mp.get_param @wb : tensor<16x8xbf16>
  %y = mp.linear %c, %w : (tensor<2x8x16xbf16>, tensor<16x8xbf16>) -> tensor<2x8x8xbf16>
  %f = mp.cast %y : tensor<2x8x8xbf16> to tensor<2x8x8xf32>
  %r = mp.reduce sum, %f {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x8x8xf32> -> tensor<f32>
  %l = shard.all_reduce %r on @tp grid_axes = [0] : tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}
