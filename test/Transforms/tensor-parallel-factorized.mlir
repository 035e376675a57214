// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s

// Tests a factorized linear (MLA's low-rank query: a down-projection, a
// norm, an up-projection into the heads): two linears with only linear maps
// and norms between them are not a column/row pair. The down-projection
// stays whole (said so), the up-projection is column-parallel by heads,
// and the one rotary key head, broadcast to every head and concatenated
// with the split key heads, is broadcast to the local heads (no
// collective).
// CHECK-LABEL: module
// CHECK-NOT: mp.param @down : {{.*}} grid
// CHECK: mp.param @up : tensor<4x32xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK: mp.linear %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x4xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
// CHECK: mp.expand %{{.*}} {mp.layer = 0 : i64} : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK-NEXT: mp.concat %{{.*}}, %{{.*}} {axis = 3 : i64, mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
// CHECK-NOT: shard.all_slice
// CHECK: mp.attention {{.*}} -> tensor<2x2x4x8xf32>
// CHECK: shard.all_reduce
mp.param @down : tensor<16x4xf32> {file = "x.onnx"}
mp.param @g : tensor<4xf32> {file = "x.onnx"}
mp.param @up : tensor<4x32xf32> {file = "x.onnx"}
mp.param @knope : tensor<16x16xf32> {file = "x.onnx"}
mp.param @kpe : tensor<16x4xf32> {file = "x.onnx"}
mp.param @v : tensor<16x32xf32> {file = "x.onnx"}
mp.param @o : tensor<32x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %wd = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x4xf32>
  %g = mp.get_param @g {mp.layer = 0 : i64} : tensor<4xf32>
  %wu = mp.get_param @up {mp.layer = 0 : i64} : tensor<4x32xf32>
  %wkn = mp.get_param @knope {mp.layer = 0 : i64} : tensor<16x16xf32>
  %wk = mp.get_param @kpe {mp.layer = 0 : i64} : tensor<16x4xf32>
  %wv = mp.get_param @v {mp.layer = 0 : i64} : tensor<16x32xf32>
  %wo = mp.get_param @o {mp.layer = 0 : i64} : tensor<32x16xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.linear' split along dim 2, through linear maps and norms alone: the two linears are one factorized linear (a low-rank projection, such as MLA's), whose wide factor splits instead}}
  %d = mp.linear %x, %wd {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x4xf32>) -> tensor<2x4x4xf32>
  %n = mp.rms_norm %d, %g {mp.layer = 0 : i64} : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  // expected-note @below {{the split stops here}}
  %u = mp.linear %n, %wu {mp.layer = 0 : i64} : (tensor<2x4x4xf32>, tensor<4x32xf32>) -> tensor<2x4x32xf32>
  %q4 = mp.reshape %u {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %q = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %kn0 = mp.linear %x, %wkn {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %kn4 = mp.reshape %kn0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %kn = mp.transpose %kn4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.concat' split along dim 3, which cannot run on that split}}
  %kp = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x4xf32>) -> tensor<2x4x4xf32>
  %kp4 = mp.reshape %kp {mp.layer = 0 : i64} : tensor<2x4x4xf32> -> tensor<2x1x4x4xf32>
  %kpe = mp.expand %kp4 {mp.layer = 0 : i64} : tensor<2x1x4x4xf32> -> tensor<2x4x4x4xf32>
  // expected-note @below {{the split stops here}}
  %k = mp.concat %kn, %kpe {axis = 3 : i64, mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x8xf32>
  %v0 = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %v4 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %v = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %a = mp.attention %q, %k, %v {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x32xf32>
  %y = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %y, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests two linears with nothing between them and no other split for the
// second: the pair splits column/row after all (the factorized rule only
// prefers the wide factor's own split where it has one).
// CHECK-LABEL: module
// CHECK: mp.param @a : tensor<8x4xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK: mp.param @b : tensor<4x8xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// CHECK: shard.all_reduce
mp.param @a : tensor<8x4xf32> {file = "x.onnx"}
mp.param @b : tensor<4x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %wa = mp.get_param @a {mp.layer = 0 : i64} : tensor<8x4xf32>
  %wb = mp.get_param @b {mp.layer = 0 : i64} : tensor<4x8xf32>
  %h = mp.linear %x, %wa {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %y = mp.linear %h, %wb {mp.layer = 0 : i64} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
