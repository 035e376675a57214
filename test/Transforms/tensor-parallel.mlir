// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file | FileCheck %s

// Tests an MLP: the first linear is column-parallel (weight and bias split
// on the output features), the activation runs on the local features, the
// second is row-parallel with one all-reduce and its bias added after it.
// CHECK-LABEL: shard.grid @tp(shape = 2)
// CHECK: mp.param @up : tensor<8x16xf32> {{{.*}}grid = @tp, shard_axis = 1 : i64}
// CHECK: mp.param @up_b : tensor<16xf32> {{{.*}}grid = @tp, shard_axis = 0 : i64}
// CHECK: mp.param @down : tensor<16x8xf32> {{{.*}}grid = @tp, shard_axis = 0 : i64}
// CHECK: mp.param @down_b : tensor<8xf32> {file = "x.onnx"}{{$}}
// CHECK: %[[H:.*]] = mp.linear %arg0, %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[A:.*]] = mp.gelu %[[H]] {mp.layer = 0 : i64} : tensor<2x4x8xf32>
// CHECK: %[[P:.*]] = mp.linear %[[A]], %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0] {mp.layer = 0 : i64}
// CHECK: %[[Y:.*]] = mp.add %[[S]], %{{.*}} {mp.layer = 0 : i64}
// CHECK: return %[[Y]]
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @up_b : tensor<16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
mp.param @down_b : tensor<8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %up_b = mp.get_param @up_b {mp.layer = 0 : i64} : tensor<16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %down_b = mp.get_param @down_b {mp.layer = 0 : i64} : tensor<8xf32>
  %h = mp.linear %x, %up, %up_b {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %a = mp.gelu %h {mp.layer = 0 : i64} : tensor<2x4x16xf32>
  %y = mp.linear %a, %down, %down_b {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that a linear whose output goes through a softmax over its
// features, or is added to a whole activation, stays whole: no shards, no
// collectives (the program still runs replicated on the grid's ranks).
// CHECK-LABEL: shard.grid @tp(shape = 2)
// CHECK-NOT: grid = @tp
// CHECK-LABEL: func.func @main
// CHECK-NOT: shard.
// CHECK: mp.linear {{.*}} -> tensor<2x4x8xf32>
// CHECK: mp.softmax {{.*}} : tensor<2x4x8xf32>
// CHECK: mp.linear {{.*}} -> tensor<2x4x8xf32>
// CHECK: mp.add {{.*}} -> tensor<2x4x8xf32>
// CHECK-NOT: shard.
mp.param @w1 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @w2 : tensor<8x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %n = mp.softmax %h {axis = 2 : i64, mp.layer = 0 : i64} : tensor<2x4x8xf32>
  %k = mp.linear %n, %w2 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = mp.add %k, %n {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}

// -----

// Tests that a fused QKV split written with a negative axis is sharded per
// part like axis 2 (each rank's block of q, k and v).
// CHECK-LABEL: shard.grid @tp(shape = 2)
// CHECK: mp.param @qkv : tensor<8x24xf32> {{{.*}}grid = @tp, shard_axis = 1 : i64, shard_groups = 3 : i64}
mp.param @qkv : tensor<8x24xf32> {file = "x.onnx"}
mp.param @o : tensor<8x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wqkv = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<8x24xf32>
  %wo = mp.get_param @o {mp.layer = 0 : i64} : tensor<8x8xf32>
  %qkv = mp.linear %x, %wqkv {mp.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x24xf32>) -> tensor<1x4x24xf32>
  %s:3 = mp.split %qkv {axis = -1 : i64, mp.layer = 0 : i64} : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %q = mp.reshape %s#0 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %k = mp.reshape %s#1 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %v = mp.reshape %s#2 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qt = mp.transpose %q [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %kt = mp.transpose %k [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %vt = mp.transpose %v [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %a = mp.attention %qt, %kt, %vt {causal, scale = 0.5 : f32, mp.layer = 0 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %ar = mp.reshape %at {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %y = mp.linear %ar, %wo {mp.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Tests a norm over the features a column-parallel linear splits
// (NormFormer's inner LayerNorm): it runs on each rank's block, its mean and
// variance each a local sum all-reduced (mp.norm_statistics) over the whole
// width, its scale and bias cut to the block; both linears split.
// CHECK-LABEL: func.func @main
// CHECK: %[[H:.*]] = mp.linear %arg0, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-DAG: %[[G:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 {mp.layer = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
// CHECK-DAG: %[[B:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 {mp.layer = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
// CHECK: %[[S1:.*]] = mp.reduce sum, %[[H]] {axes = array<i64: 2>, mp.layer = 0 : i64} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT: %[[R1:.*]] = shard.all_reduce %[[S1]] on @tp grid_axes = [0] {mp.layer = 0 : i64, mp.norm_statistics}
// CHECK-NEXT: %[[INV:.*]] = mp.constant {mp.layer = 0 : i64} dense<1.250000e-01> : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = mp.mul %[[R1]], %[[INV]]
// CHECK-NEXT: %[[C:.*]] = mp.sub %[[H]], %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = mp.mul %[[C]], %[[C]]
// CHECK-NEXT: %[[S2:.*]] = mp.reduce sum, %[[SQ]]
// CHECK-NEXT: shard.all_reduce %[[S2]] {{.*}} mp.norm_statistics
// CHECK: mp.rsqrt
// CHECK: mp.mul %{{.*}}, %[[G]]
// CHECK-NEXT: mp.add %{{.*}}, %[[B]]
// CHECK-NEXT: mp.linear {{.*}} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: shard.all_reduce
// CHECK-NOT: mp.layer_norm
mp.param @w1 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @w2 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @g : tensor<8xf32> {file = "x.onnx"}
mp.param @b : tensor<8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %g = mp.get_param @g {mp.layer = 0 : i64} : tensor<8xf32>
  %b = mp.get_param @b {mp.layer = 0 : i64} : tensor<8xf32>
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %n = mp.layer_norm %h, %g, %b {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %k = mp.linear %n, %w2 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %r = mp.add %k, %x {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}
