// RUN: mp-opt %s --mp-shard-outputs --split-input-file | FileCheck %s

// Tests a result gathered only to be returned (tensor parallelism's logits):
// the function returns the gather's operand, the shard, with the gather's
// axis as the result's mp.shard_axis, and the gather is gone. The result's
// other attributes stay; a result that is not gathered is untouched.
// CHECK-LABEL: func.func @logits
// CHECK-SAME: -> (tensor<2x8x32xf32> {mp.name = "logits", mp.shard_axis = 2 : i64}, tensor<2x8x16xf32> {mp.name = "hidden"})
// CHECK-NOT: shard.all_gather
// CHECK: %[[L:.*]] = mp.linear
// CHECK-NEXT: return %[[L]], %{{.*}} : tensor<2x8x32xf32>, tensor<2x8x16xf32>
shard.grid @tp(shape = 2)
mp.param @w : tensor<64x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
func.func @logits(%h: tensor<2x8x16xf32>) -> (tensor<2x8x64xf32> {mp.name = "logits"}, tensor<2x8x16xf32> {mp.name = "hidden"}) {
  %w = mp.get_param @w : tensor<32x16xf32>
  %l = mp.linear %h, %w {transpose_weight} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %g = shard.all_gather %l on @tp grid_axes = [0] gather_axis = 2 : tensor<2x8x32xf32> -> tensor<2x8x64xf32>
  return %g, %h : tensor<2x8x64xf32>, tensor<2x8x16xf32>
}

// -----

// Tests the gathers that stay: one whose result is also read by another op,
// one over one axis of a two-dimensional grid (mp-run gathers outputs over
// the whole grid), and one returned by a function that is called (its
// caller reads the result whole).
// CHECK-LABEL: func.func @kept
// CHECK-SAME: -> (tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>)
// CHECK: shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 1
// CHECK: shard.all_gather %{{.*}} on @tp2d grid_axes = [0] gather_axis = 0
// CHECK-NOT: mp.shard_axis
shard.grid @tp(shape = 2)
shard.grid @tp2d(shape = 2x2)
func.func @kept(%x: tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>) {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
  %s = mp.add %g, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g2 = shard.all_gather %x on @tp2d grid_axes = [0] gather_axis = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  return %g, %g2, %s : tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func private @called
// CHECK-SAME: -> tensor<2x8xf32>
// CHECK: shard.all_gather
func.func private @called(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}
func.func @caller(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %y = func.call @called(%x) : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests logits of a padded vocabulary (61 padded to 62 under tp=2): the
// gather and the slice back to 61 both go; the result is the padded shard,
// with mp.shard_size 61 (mp-run drops the padding once gathered).
// CHECK-LABEL: func.func @padded
// CHECK-SAME: -> (tensor<2x8x31xf32> {mp.name = "logits", mp.shard_axis = 2 : i64, mp.shard_size = 61 : i64})
// CHECK-NOT: shard.all_gather
// CHECK-NOT: mp.slice
shard.grid @tp(shape = 2)
mp.param @"w[0:62]" : tensor<62x16xf32> {file = "x.onnx", grid = @tp, initializer = "w", part = array<i64: 0, 0, 61>, part_of = "w", shard_axis = 0 : i64}
func.func @padded(%h: tensor<2x8x16xf32>) -> (tensor<2x8x61xf32> {mp.name = "logits"}) {
  %w = mp.get_param @"w[0:62]" : tensor<31x16xf32>
  %l = mp.linear %h, %w {transpose_weight} : (tensor<2x8x16xf32>, tensor<31x16xf32>) -> tensor<2x8x31xf32>
  %g = shard.all_gather %l on @tp grid_axes = [0] gather_axis = 2 : tensor<2x8x31xf32> -> tensor<2x8x62xf32>
  %s = mp.slice %g {limits = array<i64: 2, 8, 61>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x8x62xf32> -> tensor<2x8x61xf32>
  return %s : tensor<2x8x61xf32>
}
