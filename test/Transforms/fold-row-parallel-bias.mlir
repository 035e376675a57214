// RUN: mp-opt %s --mp-fold-row-parallel-bias --split-input-file | FileCheck %s

// Tests a row-parallel linear's bias, added after the sum over 2 ranks,
// moved into each rank's GEMM as b/2: after an all_reduce and after a
// reduce_scatter (sequence parallelism); the reduced value is read directly.
// CHECK-LABEL: func.func @folds
// CHECK: %[[B:.*]] = mp.get_param @b
// CHECK: %[[HALF:.*]] = mp.constant {mp.layer = 3 : i64} dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SHARE:.*]] = mp.mul %[[B]], %[[HALF]] {mp.layer = 3 : i64} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
// CHECK: %[[Y:.*]] = mp.linear %{{.*}}, %{{.*}}, %[[SHARE]] {mp.layer = 3 : i64}
// CHECK: %[[R:.*]] = shard.all_reduce %[[Y]]
// CHECK: mp.linear %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK: %[[S:.*]] = shard.reduce_scatter
// CHECK-NOT: mp.add
// CHECK: return %[[R]], %[[S]]
shard.grid @tp(shape = 2)
mp.param @w : tensor<8x16xf32> {file = "x.onnx"}
mp.param @b : tensor<16xf32> {file = "x.onnx"}
func.func @folds(%x: tensor<2x4x8xf32>) -> (tensor<2x4x16xf32>, tensor<2x2x16xf32>) {
  %w = mp.get_param @w : tensor<8x16xf32>
  %0 = mp.linear %x, %w {mp.layer = 3 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = shard.all_reduce %0 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %b = mp.get_param @b : tensor<16xf32>
  %2 = mp.add %1, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %3 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %4 = shard.reduce_scatter %3 on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x4x16xf32> -> tensor<2x2x16xf32>
  %5 = mp.add %b, %4 : (tensor<16xf32>, tensor<2x2x16xf32>) -> tensor<2x2x16xf32>
  return %2, %5 : tensor<2x4x16xf32>, tensor<2x2x16xf32>
}

// -----

// Tests what does not fold: 3 ranks (b/3 is not exact), a max, a partial
// product read elsewhere too, a sum read elsewhere too, a linear that has a
// bias already, and an add of two full tensors (a residual).
// CHECK-LABEL: func.func @not_folded
// CHECK-NOT: mp.mul
// CHECK-COUNT-6: mp.add
shard.grid @three(shape = 3)
shard.grid @tp(shape = 2)
mp.param @w : tensor<8x16xf32> {file = "x.onnx"}
mp.param @b : tensor<16xf32> {file = "x.onnx"}
func.func @not_folded(%x: tensor<2x4x8xf32>, %r: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %w = mp.get_param @w : tensor<8x16xf32>
  %b = mp.get_param @b : tensor<16xf32>
  %0 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = shard.all_reduce %0 on @three grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %2 = mp.add %1, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %3 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %4 = shard.all_reduce %3 on @tp grid_axes = [0] reduction = max : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %5 = mp.add %4, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %6 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %7 = shard.all_reduce %6 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %8 = mp.add %7, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %9 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %10 = shard.all_reduce %9 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %11 = mp.add %10, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %12 = mp.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %13 = shard.all_reduce %12 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %14 = mp.add %13, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %15 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %16 = shard.all_reduce %15 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %17 = mp.add %16, %r : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %2, %5, %6, %8, %10, %11, %14, %17 : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Tests a train step left as it is (recompute copies forward ops that must
// compute bit for bit what they copy).
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: mp.mul
// CHECK: mp.add %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16xf32>)
shard.grid @tp(shape = 2)
mp.param @w : tensor<8x16xf32> {file = "x.onnx"}
mp.param @b : tensor<16xf32> {file = "x.onnx"}
func.func @train_step(%x: tensor<2x4x8xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x8xf32>) {
  %w = mp.get_param @w : tensor<8x16xf32>
  %b = mp.get_param @b : tensor<16xf32>
  %0 = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %1 = shard.all_reduce %0 on @tp grid_axes = [0] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %2 = mp.add %1, %b : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %3 = mp.neg %x {mp.backward} : tensor<2x4x8xf32>
  return %2, %3 : tensor<2x4x16xf32>, tensor<2x4x8xf32>
}
