// RUN: mp-opt %s --split-input-file | mp-opt --split-input-file | FileCheck %s
// RUN: mp-opt %s --split-input-file --mlir-print-op-generic | mp-opt --split-input-file | FileCheck %s

// Tests that parameters and their accessors round-trip.
// CHECK-LABEL: mp.param @w : tensor<4x8xf32> {file = "model.onnx"}
// CHECK: mp.param @ext : tensor<2xf32> {file = "w.bin", length = 8 : i64, offset = 16 : i64}
// CHECK: mp.param @shape_only : tensor<3xbf16>
// CHECK: mp.param @pv : tensor<3xf32> {file = "m.onnx", preview = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>}
// CHECK: mp.get_param @w : tensor<4x8xf32>
mp.param @w : tensor<4x8xf32> {file = "model.onnx"}
mp.param @ext : tensor<2xf32> {file = "w.bin", offset = 16 : i64, length = 8 : i64}
mp.param @shape_only : tensor<3xbf16>
mp.param @pv : tensor<3xf32> {file = "m.onnx", preview = dense<[1.0, 2.0]> : tensor<2xf32>}
func.func @params() -> tensor<4x8xf32> {
  %0 = mp.get_param @w : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Tests elementwise ops with broadcasting.
// CHECK-LABEL: func.func @elementwise
// CHECK: mp.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: mp.sub
// CHECK: mp.mul
// CHECK: mp.div
// CHECK: mp.pow
// CHECK: mp.compare lt, %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
// CHECK: mp.where
// CHECK: mp.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK: mp.gelu %{{.*}} approximate = tanh : tensor<2x3xf32>
// CHECK: mp.gelu %{{.*}} : tensor<2x3xf32>
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf16> {
  %0 = mp.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = mp.sub %0, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = mp.mul %1, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = mp.div %2, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = mp.pow %3, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = mp.compare lt, %4, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %6 = mp.where %5, %4, %a : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = mp.neg %6 : tensor<2x3xf32>
  %8 = mp.exp %7 : tensor<2x3xf32>
  %9 = mp.log %8 : tensor<2x3xf32>
  %10 = mp.sqrt %9 : tensor<2x3xf32>
  %11 = mp.rsqrt %10 : tensor<2x3xf32>
  %12 = mp.reciprocal %11 : tensor<2x3xf32>
  %13 = mp.tanh %12 : tensor<2x3xf32>
  %14 = mp.erf %13 : tensor<2x3xf32>
  %15 = mp.sigmoid %14 : tensor<2x3xf32>
  %16 = mp.relu %15 : tensor<2x3xf32>
  %17 = mp.silu %16 : tensor<2x3xf32>
  %18 = mp.cos %17 : tensor<2x3xf32>
  %19 = mp.sin %18 : tensor<2x3xf32>
  %20 = mp.cast %19 : tensor<2x3xf32> to tensor<2x3xf16>
  %21 = mp.gelu %19 approximate = tanh : tensor<2x3xf32>
  %22 = mp.gelu %21 : tensor<2x3xf32>
  return %20 : tensor<2x3xf16>
}

// -----

// Tests the transformer ops.
// CHECK-LABEL: func.func @transformer
// CHECK: mp.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
// CHECK: mp.linear %{{.*}}, %{{.*}} {transpose_weight}
// CHECK: mp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 5.000000e-01 : f32}
// CHECK: mp.rms_norm
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.353553385 : f32}
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK: mp.softmax %{{.*}} {axis = 3 : i64}
// CHECK: mp.reduce mean, %{{.*}} {axes = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
// CHECK: mp.reduce max, %{{.*}} {axes = array<i64: 1, 2>, keepdims = false}
// CHECK: mp.matmul
// CHECK: mp.embedding
// CHECK: mp.gather %{{.*}}, %{{.*}} {axis = 1 : i64}
// CHECK: mp.dropout %{{.*}} {ratio = 1.000000e-01 : f32}
// CHECK: mp.cross_entropy
// CHECK: mp.einsum "i,j->ij"
// CHECK: mp.trilu %{{.*}} {diagonal = 1 : i64, upper}
func.func @transformer(%x: tensor<2x8x32xf32>, %w: tensor<32x96xf32>, %b: tensor<96xf32>,
                       %wt: tensor<96x32xf32>, %s: tensor<32xf32>,
                       %q: tensor<2x4x8x8xf32>, %kv: tensor<2x2x8x8xf32>,
                       %mask: tensor<8x8xf32>, %ids: tensor<2x8xi64>,
                       %table: tensor<64x32xf32>, %v1: tensor<4xf32>, %v2: tensor<5xf32>) {
  %0 = mp.linear %x, %w, %b : (tensor<2x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
  %1 = mp.linear %x, %wt {transpose_weight} : (tensor<2x8x32xf32>, tensor<96x32xf32>) -> tensor<2x8x96xf32>
  %2 = mp.layer_norm %x, %s, %s {epsilon = 0.5 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %3 = mp.rms_norm %x, %s : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %4 = mp.attention %q, %kv, %kv {causal, scale = 0.353553385 : f32} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  %5 = mp.attention %q, %q, %q, %mask {scale = 0.125 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %6 = mp.softmax %5 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %7 = mp.reduce mean, %x {axes = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %8 = mp.reduce max, %x {axes = array<i64: 1, 2>, keepdims = false} : tensor<2x8x32xf32> -> tensor<2xf32>
  %9 = mp.matmul %q, %q : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %10 = mp.embedding %table, %ids : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  %11 = mp.gather %x, %ids {axis = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<2x2x8x32xf32>
  %12 = mp.dropout %x {ratio = 0.1 : f32} : tensor<2x8x32xf32>
  %13 = mp.linear %x, %table {transpose_weight} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
  %14 = mp.cross_entropy %13, %ids : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<f32>
  %15 = mp.einsum "i,j->ij" %v1, %v2 : (tensor<4xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %16 = mp.trilu %mask {upper, diagonal = 1 : i64} : tensor<8x8xf32>
  return
}

// -----

// Tests the shape ops.
// CHECK-LABEL: func.func @shapes
// CHECK: mp.reshape %{{.*}} : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: mp.transpose %{{.*}} [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: mp.slice %{{.*}} {limits = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 2, 1>}
// CHECK: mp.slice %{{.*}} {limits = array<i64: 2, -1, 32>, starts = array<i64: 0, 7, 0>, strides = array<i64: 1, -1, 1>}
// CHECK: mp.concat %{{.*}}, %{{.*}} {axis = 2 : i64}
// CHECK: mp.split %{{.*}} {axis = 2 : i64} : tensor<2x8x32xf32> -> tensor<2x8x8xf32>, tensor<2x8x24xf32>
// CHECK: mp.expand %{{.*}} : tensor<8x1xf32> -> tensor<2x8x32xf32>
// CHECK: mp.constant dense<1.000000e+00> : tensor<2x2xf32>
func.func @shapes(%x: tensor<2x8x32xf32>, %c: tensor<8x1xf32>) {
  %0 = mp.reshape %x : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
  %1 = mp.transpose %0 [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  %2 = mp.slice %x {starts = array<i64: 0, 0, 16>, limits = array<i64: 2, 8, 32>, strides = array<i64: 1, 2, 1>} : tensor<2x8x32xf32> -> tensor<2x4x16xf32>
  %3 = mp.slice %x {starts = array<i64: 0, 7, 0>, limits = array<i64: 2, -1, 32>, strides = array<i64: 1, -1, 1>} : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  %4 = mp.concat %x, %3 {axis = 2 : i64} : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  %5:2 = mp.split %x {axis = 2 : i64} : tensor<2x8x32xf32> -> tensor<2x8x8xf32>, tensor<2x8x24xf32>
  %6 = mp.expand %c : tensor<8x1xf32> -> tensor<2x8x32xf32>
  %7 = mp.constant dense<1.0> : tensor<2x2xf32>
  return
}

// -----

// Tests sharded parameters (local type on get_param) and a vocab-parallel
// embedding next to the upstream shard collectives.
// CHECK-LABEL: shard.grid @tp(shape = 2)
// CHECK: mp.param @qkv : tensor<32x96xf32> {grid = @tp, shard_axis = 1 : i64, shard_groups = 3 : i64}
// CHECK: mp.get_param @qkv : tensor<32x48xf32>
// CHECK: mp.embedding %{{.*}}, %{{.*}} {grid = @tp} : (tensor<32x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
// CHECK: shard.all_reduce
shard.grid @tp(shape = 2)
mp.param @qkv : tensor<32x96xf32> {grid = @tp, shard_axis = 1 : i64, shard_groups = 3 : i64}
mp.param @wte : tensor<64x32xf32> {grid = @tp, shard_axis = 0 : i64}
func.func @sharded(%ids: tensor<2x8xi64>) -> tensor<2x8x32xf32> {
  %w = mp.get_param @qkv : tensor<32x48xf32>
  %t = mp.get_param @wte : tensor<32x32xf32>
  %e = mp.embedding %t, %ids {grid = @tp} : (tensor<32x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  %r = shard.all_reduce %e on @tp grid_axes = [0] : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
  return %r : tensor<2x8x32xf32>
}

// -----

// Tests the gradient ops (what mp-autodiff's rules build).
// CHECK-LABEL: func.func @gradients
// CHECK: mp.linear_weight_grad %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x8x32xf32>, tensor<2x8x96xf32>) -> tensor<96x32xf32>
// CHECK: mp.layer_norm_grad {{.*}} {axis = 2 : i64, epsilon = {{.*}}} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
// CHECK: mp.rms_norm_grad
// CHECK: mp.gelu_grad %{{.*}}, %{{.*}} approximate = tanh : tensor<2x8x32xf32>
// CHECK: mp.attention_grad {{.*}} {causal, scale = {{.*}}} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
// CHECK: mp.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8xi64>, tensor<2x8x32xf32>) -> tensor<64x32xf32>
// CHECK: mp.cross_entropy_grad
// CHECK: mp.slice_grad %{{.*}} {limits = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 2, 1>} : tensor<2x4x16xf32> -> tensor<2x8x32xf32>
func.func @gradients(%x: tensor<2x8x32xf32>, %dy: tensor<2x8x96xf32>, %s: tensor<32xf32>,
                     %q: tensor<2x4x8x8xf32>, %k: tensor<2x2x8x8xf32>, %ids: tensor<2x8xi64>,
                     %logits: tensor<2x8x64xf32>, %one: tensor<f32>, %part: tensor<2x4x16xf32>) {
  %0 = mp.linear_weight_grad %x, %dy {transpose_weight} : (tensor<2x8x32xf32>, tensor<2x8x96xf32>) -> tensor<96x32xf32>
  %1:2 = mp.layer_norm_grad %x, %s, %x {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
  %2:2 = mp.rms_norm_grad %x, %s, %x {epsilon = 1.0e-6 : f32} : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>)
  %3 = mp.gelu_grad %x, %x approximate = tanh : tensor<2x8x32xf32>
  %4:3 = mp.attention_grad %q, %k, %k, %q, %q {causal, scale = 0.35 : f32} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %5 = mp.embedding_grad %ids, %x : (tensor<2x8xi64>, tensor<2x8x32xf32>) -> tensor<64x32xf32>
  %6 = mp.cross_entropy_grad %logits, %ids, %one : (tensor<2x8x64xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x64xf32>
  %7 = mp.slice_grad %part {starts = array<i64: 0, 0, 16>, limits = array<i64: 2, 8, 32>, strides = array<i64: 1, 2, 1>} : tensor<2x4x16xf32> -> tensor<2x8x32xf32>
  return
}
