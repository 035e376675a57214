// RUN: mp-opt %s --mp-fuse-epilogues --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-fuse-epilogues --mp-fuse-epilogues --split-input-file | FileCheck %s --check-prefix=TWICE
// RUN: not mp-opt %s --split-input-file --mp-fuse-epilogues --mp-tensor-parallel=tp=2 2>&1 | FileCheck %s --check-prefix=TP

// Tests each activation folded into the linear it reads (erf and tanh GELU,
// SiLU), with and without a bias: the activation op is gone and its users
// read the linear.
// CHECK-LABEL: func.func @each_activation
// CHECK: %[[G:.*]] = mp.linear %{{.*}}, %{{.*}}, %{{.*}} activation = gelu {mp.layer = 0 : i64}
// CHECK: %[[T:.*]] = mp.linear %{{.*}}, %{{.*}} activation = gelu_tanh :
// CHECK: %[[S:.*]] = mp.linear %{{.*}}, %{{.*}} activation = silu :
// CHECK-NOT: mp.gelu
// CHECK-NOT: mp.silu
// CHECK: mp.add %[[G]], %[[T]]
// CHECK: mp.add %{{.*}}, %[[S]]
// TWICE-LABEL: func.func @each_activation
// TWICE: activation = gelu {
// TP: error: 'mp.linear' op has a fused activation: mp-fuse-epilogues runs after mp-tensor-parallel, not before
mp.param @w : tensor<8x16xf32> {file = "x.onnx"}
mp.param @b : tensor<16xf32> {file = "x.onnx"}
func.func @each_activation(%x: tensor<2x8xf32>) -> tensor<2x16xf32> {
  %w = mp.get_param @w {mp.layer = 0 : i64} : tensor<8x16xf32>
  %b = mp.get_param @b {mp.layer = 0 : i64} : tensor<16xf32>
  %0 = mp.linear %x, %w, %b {mp.layer = 0 : i64} : (tensor<2x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  %1 = mp.gelu %0 {mp.layer = 0 : i64} : tensor<2x16xf32>
  %2 = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %3 = mp.gelu %2 approximate = tanh : tensor<2x16xf32>
  %4 = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %5 = mp.silu %4 : tensor<2x16xf32>
  %6 = mp.add %1, %3 : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %7 = mp.add %6, %5 : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  return %7 : tensor<2x16xf32>
}

// -----

// Tests what does not fuse: a linear whose result is also read elsewhere (as
// in a train step, where the gradient reads it), a GELU of something else,
// and a linear that already has an activation.
// CHECK-LABEL: func.func @not_fused
// CHECK: %[[L:.*]] = mp.linear %{{.*}}, %{{.*}} :
// CHECK: mp.gelu %[[L]]
// CHECK: mp.gelu %arg0
// CHECK: %[[A:.*]] = mp.linear %{{.*}}, %{{.*}} activation = silu :
// CHECK: mp.gelu %[[A]]
mp.param @w : tensor<8x8xf32> {file = "x.onnx"}
func.func @not_fused(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %w = mp.get_param @w : tensor<8x8xf32>
  %0 = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %1 = mp.gelu %0 : tensor<2x8xf32>
  %2 = mp.gelu %x : tensor<2x8xf32>
  %3 = mp.linear %x, %w activation = silu : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %4 = mp.gelu %3 : tensor<2x8xf32>
  return %0, %1, %2, %4 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests that a train step (a module with backward ops) is left alone, even
// where its forward's GELU is the linear's only reader (as under full
// recompute, whose backward reads copies), and also when it is split into
// pipeline chunks, whose forward functions have no backward ops.
// CHECK-LABEL: func.func @forward_0
// CHECK: %[[L:.*]] = mp.linear %{{.*}}, %{{.*}} :
// CHECK: mp.gelu %[[L]]
// CHECK-LABEL: func.func @backward_0
mp.param @w : tensor<8x8xf32> {file = "x.onnx"}
func.func @forward_0(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = mp.get_param @w : tensor<8x8xf32>
  %0 = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %1 = mp.gelu %0 : tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}
func.func @backward_0(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = mp.neg %x {mp.backward} : tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
