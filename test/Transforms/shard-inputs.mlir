// RUN: mp-opt %s --mp-shard-inputs --split-input-file | FileCheck %s

// Tests an input that every rank only cuts (a decoder's cached keys, split
// by heads): the function takes this rank's block, marked with the slice's
// axis as mp.shard_axis, and the slices are gone (two of the same input
// included). The argument's other attributes stay; an input read whole is
// untouched.
// CHECK-LABEL: func.func @cache
// CHECK-SAME: (%arg0: tensor<2x1x3x4xf32> {mp.name = "past_key_values.0.key", mp.shard_axis = 1 : i64}, %arg1: tensor<2x1x8xf32> {mp.name = "x"})
// CHECK-NOT: shard.all_slice
// CHECK: mp.concat %arg0, %arg0
// CHECK: mp.add %arg0, %arg0
shard.grid @tp(shape = 2)
func.func @cache(%past: tensor<2x2x3x4xf32> {mp.name = "past_key_values.0.key"}, %x: tensor<2x1x8xf32> {mp.name = "x"}) -> (tensor<2x1x6x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x8xf32>) {
  %s = shard.all_slice %past on @tp grid_axes = [0] slice_axis = 1 : tensor<2x2x3x4xf32> -> tensor<2x1x3x4xf32>
  %c = mp.concat %s, %s {axis = 2 : i64} : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x6x4xf32>
  %s2 = shard.all_slice %past on @tp grid_axes = [0] slice_axis = 1 : tensor<2x2x3x4xf32> -> tensor<2x1x3x4xf32>
  %a = mp.add %s2, %s2 : (tensor<2x1x3x4xf32>, tensor<2x1x3x4xf32>) -> tensor<2x1x3x4xf32>
  return %c, %a, %x : tensor<2x1x6x4xf32>, tensor<2x1x3x4xf32>, tensor<2x1x8xf32>
}

// -----

// Tests a cache that precision conversion casts to bf16 before it is cut:
// the block is taken before the cast, so each rank casts only its block
// and the input becomes that block.
// CHECK-LABEL: func.func @cast_first
// CHECK-SAME: (%arg0: tensor<2x1x3x4xf32> {mp.shard_axis = 1 : i64})
// CHECK-NEXT: %[[B:.*]] = mp.cast %arg0 : tensor<2x1x3x4xf32> to tensor<2x1x3x4xbf16>
// CHECK-NEXT: mp.add %[[B]], %[[B]]
shard.grid @tp(shape = 2)
func.func @cast_first(%past: tensor<2x2x3x4xf32>) -> tensor<2x1x3x4xbf16> {
  %b = mp.cast %past : tensor<2x2x3x4xf32> to tensor<2x2x3x4xbf16>
  %s = shard.all_slice %b on @tp grid_axes = [0] slice_axis = 1 : tensor<2x2x3x4xbf16> -> tensor<2x1x3x4xbf16>
  %a = mp.add %s, %s : (tensor<2x1x3x4xbf16>, tensor<2x1x3x4xbf16>) -> tensor<2x1x3x4xbf16>
  return %a : tensor<2x1x3x4xbf16>
}

// -----

// Tests the inputs that stay whole: one also read whole, one cut along two
// axes, one cut over one axis of a two-dimensional grid (mp-run hands out
// inputs over the whole grid), and the inputs of a function that is called
// (its caller passes them whole).
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>)
// CHECK-NOT: mp.shard_axis
// CHECK-COUNT-4: shard.all_slice
shard.grid @tp(shape = 2)
shard.grid @tp2d(shape = 2x2)
func.func @kept(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %c: tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>, tensor<1x4xf32>, tensor<2x2xf32>, tensor<1x4xf32>) {
  %s = shard.all_slice %a on @tp grid_axes = [0] slice_axis = 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  %b0 = shard.all_slice %b on @tp grid_axes = [0] slice_axis = 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  %b1 = shard.all_slice %b on @tp grid_axes = [0] slice_axis = 0 : tensor<2x4xf32> -> tensor<1x4xf32>
  %c0 = shard.all_slice %c on @tp2d grid_axes = [0] slice_axis = 0 : tensor<2x4xf32> -> tensor<1x4xf32>
  return %s, %a, %b1, %b0, %c0 : tensor<2x2xf32>, tensor<2x4xf32>, tensor<1x4xf32>, tensor<2x2xf32>, tensor<1x4xf32>
}

// CHECK-LABEL: func.func private @called
// CHECK-SAME: (%arg0: tensor<2x4xf32>)
// CHECK: shard.all_slice
func.func private @called(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
func.func @caller(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %y = func.call @called(%x) : (tensor<2x4xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
