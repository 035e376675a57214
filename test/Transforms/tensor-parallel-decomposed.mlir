// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// Only the last case leaves a linear whole; the first warning is its.
// WARN-NOT: warning
// WARN: warning: this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.add' split along dim 2, which reads whole the output of a linear sharded per part of a fused output

// Tests attention the raise leaves decomposed (soft-capped scores, as Gemma
// 2's) with a per-head bias from a parameter (as T5's relative positions):
// the products split by heads as batch dims (no linear stays whole), and
// the bias, computed from a parameter alone, is cut by heads with
// shard.all_slice where the split scores meet it.
// CHECK-LABEL: func.func @main
// CHECK: %[[Q:.*]] = mp.transpose %{{.*}} [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK: %[[S:.*]] = mp.matmul %[[Q]], %{{.*}} {mp.layer = 0 : i64} : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: mp.tanh {{.*}} : tensor<2x2x4x4xf32>
// CHECK: %[[B:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 {mp.layer = 0 : i64} : tensor<1x4x4x4xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT: mp.add %{{.*}}, %[[B]] {mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: mp.matmul %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
// CHECK: %[[O:.*]] = mp.linear %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
// CHECK-NEXT: shard.all_reduce %[[O]]
mp.param @wq : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wk : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wv : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wo : tensor<32x32xf32> {file = "x.onnx"}
mp.param @table : tensor<4x4x4xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x32xf32>) -> tensor<2x4x32xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<32x32xf32>
  %table = mp.get_param @table {mp.layer = 0 : i64} : tensor<4x4x4xf32>
  %bias = mp.reshape %table {mp.layer = 0 : i64} : tensor<4x4x4xf32> -> tensor<1x4x4x4xf32>
  %q0 = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %k0 = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %v0 = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %k1 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %v1 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %kt = mp.transpose %k1 [0, 2, 3, 1] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x8x4xf32>
  %v = mp.transpose %v1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %s0 = mp.matmul %q, %kt {mp.layer = 0 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  %cap = mp.constant dense<5.0e+01> : tensor<f32>
  %s1 = mp.div %s0, %cap {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %s2 = mp.tanh %s1 {mp.layer = 0 : i64} : tensor<2x4x4x4xf32>
  %s3 = mp.mul %s2, %cap {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %s4 = mp.add %s3, %bias {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = mp.softmax %s4 {axis = -1 : i64, mp.layer = 0 : i64} : tensor<2x4x4x4xf32>
  %a0 = mp.matmul %p, %v {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %a1 = mp.transpose %a0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %a = mp.reshape %a1 {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x32xf32>
  %o = mp.linear %a, %wo {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  return %o : tensor<2x4x32xf32>
}

// -----

// Tests a soft-capped LM head (Gemma 2's tanh(x / c) * c on the logits)
// after a tied embedding: the head stays vocab-parallel, the capping runs
// on each rank's vocabulary slice, and the logits are gathered after it
// and after the narrowing cast (fewer bytes; a widening cast stays after
// the gather, as in the bf16 test of tensor-parallel.test).
// CHECK-LABEL: func.func @main
// CHECK: mp.embedding {{.*}}grid = @tp
// CHECK: %[[H:.*]] = mp.linear %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: mp.div %[[H]], %{{.*}} : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: mp.tanh {{.*}} : tensor<2x4x8xf32>
// CHECK-NEXT: %[[C:.*]] = mp.mul {{.*}} : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[W:.*]] = mp.cast %[[C]] : tensor<2x4x8xf32> to tensor<2x4x8xf16>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[W]] on @tp grid_axes = [0] gather_axis = 2 : tensor<2x4x8xf16> -> tensor<2x4x16xf16>
// CHECK-NEXT: return %[[G]]
mp.param @embed : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf16> {
  %e = mp.get_param @embed : tensor<16x8xf32>
  %x = mp.embedding %e, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %h = mp.linear %x, %e {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %cap = mp.constant dense<3.0e+01> : tensor<f32>
  %c0 = mp.div %h, %cap : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %c1 = mp.tanh %c0 : tensor<2x4x16xf32>
  %c2 = mp.mul %c1, %cap : (tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %w = mp.cast %c2 : tensor<2x4x16xf32> to tensor<2x4x16xf16>
  return %w : tensor<2x4x16xf16>
}

// -----

// Tests a head followed by an op that keeps the vocabulary last but moves
// the other dims: the gather has the moved value's shape.
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = mp.transpose %{{.*}} [1, 0, 2] : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK-NEXT: shard.all_gather %[[T]] on @tp grid_axes = [0] gather_axis = 2 : tensor<4x2x8xf32> -> tensor<4x2x16xf32>
mp.param @embed : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>) -> tensor<4x2x16xf32> {
  %e = mp.get_param @embed : tensor<16x8xf32>
  %x = mp.embedding %e, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %h = mp.linear %x, %e {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %t = mp.transpose %h [1, 0, 2] : tensor<2x4x16xf32> -> tensor<4x2x16xf32>
  return %t : tensor<4x2x16xf32>
}

// -----

// Tests an attention mask that is a per-head ALiBi bias plus a padding
// mask read from an input: the mask is cut by heads all the same (it is
// never an activation whose replication a cut would hide).
// CHECK-LABEL: func.func @main
// CHECK: %[[M:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 {mp.layer = 0 : i64} : tensor<2x4x1x4xf32> -> tensor<2x2x1x4xf32>
// CHECK-NEXT: mp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {{.*}} -> tensor<2x2x4x8xf32>
mp.param @wqkv : tensor<32x96xf32> {file = "x.onnx"}
mp.param @wo : tensor<32x32xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x32xf32>, %pad: tensor<2x1x1x4xf32>) -> tensor<2x4x32xf32> {
  %w = mp.get_param @wqkv {mp.layer = 0 : i64} : tensor<32x96xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<32x32xf32>
  %alibi = mp.constant dense<1.0> : tensor<1x4x1x4xf32>
  %mask = mp.add %alibi, %pad {mp.layer = 0 : i64} : (tensor<1x4x1x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x4x1x4xf32>
  %l = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x96xf32>) -> tensor<2x4x96xf32>
  %r = mp.reshape %l {mp.layer = 0 : i64} : tensor<2x4x96xf32> -> tensor<2x4x4x24xf32>
  %t = mp.transpose %r [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x24xf32> -> tensor<2x4x4x24xf32>
  %q = mp.slice %t {limits = array<i64: 2, 4, 4, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x24xf32> -> tensor<2x4x4x8xf32>
  %k = mp.slice %t {limits = array<i64: 2, 4, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x24xf32> -> tensor<2x4x4x8xf32>
  %v = mp.slice %t {limits = array<i64: 2, 4, 4, 24>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 16>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x24xf32> -> tensor<2x4x4x8xf32>
  %a = mp.attention %q, %k, %v, %mask {causal, mp.layer = 0 : i64, scale = 0.35 : f32} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x1x4xf32>) -> tensor<2x4x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %am = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x32xf32>
  %o = mp.linear %am, %wo {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  return %o : tensor<2x4x32xf32>
}

// -----

// Tests a fused QKV linear sharded per part (its output split into q, k,
// v) whose output is also read whole elsewhere: that reader would see each
// rank's block of every part, not a contiguous slice, so the linear stays
// whole, with a warning.
// CHECK-LABEL: func.func @main
// CHECK-NOT: shard_groups
mp.param @wqkv : tensor<32x96xf32> {file = "x.onnx"}
mp.param @bias : tensor<96xf32> {file = "x.onnx"}
mp.param @w2 : tensor<96x32xf32> {file = "x.onnx"}
mp.param @wo : tensor<32x32xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x32xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x32xf32>) {
  %w = mp.get_param @wqkv {mp.layer = 0 : i64} : tensor<32x96xf32>
  %b = mp.get_param @bias {mp.layer = 0 : i64} : tensor<96xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<96x32xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<32x32xf32>
  %l = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x96xf32>) -> tensor<2x4x96xf32>
  %q, %k, %v = mp.split %l {axis = 2 : i64, mp.layer = 0 : i64} : tensor<2x4x96xf32> -> tensor<2x4x32xf32>, tensor<2x4x32xf32>, tensor<2x4x32xf32>
  %s = mp.add %q, %k {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %o = mp.linear %s, %wo {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %p = mp.add %l, %b {mp.layer = 0 : i64} : (tensor<2x4x96xf32>, tensor<96xf32>) -> tensor<2x4x96xf32>
  %y = mp.linear %p, %w2 {mp.layer = 0 : i64} : (tensor<2x4x96xf32>, tensor<96x32xf32>) -> tensor<2x4x32xf32>
  return %o, %y : tensor<2x4x32xf32>, tensor<2x4x32xf32>
}

// -----

// Tests that the word embedding is the one tied to the LM head, though a
// position table read by run-time ids has more rows: it is split, the
// position table stays whole.
// CHECK-LABEL: mp.param @word : tensor<16x8xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
// CHECK-NEXT: mp.param @pos : tensor<32x8xf32> {file = "x.onnx"}{{$}}
mp.param @word : tensor<16x8xf32> {file = "x.onnx"}
mp.param @pos : tensor<32x8xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>, %pids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %e = mp.get_param @word : tensor<16x8xf32>
  %p = mp.get_param @pos : tensor<32x8xf32>
  %x = mp.embedding %e, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = mp.embedding %p, %pids : (tensor<32x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %s = mp.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %h = mp.linear %s, %e {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %h : tensor<2x4x16xf32>
}

// -----

// Tests GPT-OSS's attention sinks and interleaved gate/up: a learned logit
// per head concatenated to the scores, whose row maximum (mp.reduce along
// the keys, keepdims) is subtracted before the softmax and which is sliced
// off after it; the reduction splits by heads like the scores, the sinks
// are cut by heads with shard.all_slice. The MLP's gate and up are the
// even and odd columns of one projection (strided slices of the split
// dim): each rank's block of its columns holds its block of both, so the
// projection is column-parallel and the slices run on the block. A sum
// over the batch (keepdims false) passes the split to the dim it lands on.
// CHECK-LABEL: func.func @attention_sinks
// CHECK: %[[SINKS:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 {mp.layer = 0 : i64} : tensor<2x4x4x1xf32> -> tensor<2x2x4x1xf32>
// CHECK: %[[C:.*]] = mp.concat %{{.*}}, %[[SINKS]] {axis = 3 : i64, mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x5xf32>
// CHECK: mp.reduce max, %[[C]] {axes = array<i64: 3>, mp.layer = 0 : i64} : tensor<2x2x4x5xf32> -> tensor<2x2x4x1xf32>
// CHECK: %[[GU:.*]] = mp.linear %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
// CHECK: mp.slice %[[GU]] {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 2>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
// CHECK: mp.slice %[[GU]] {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 1>, strides = array<i64: 1, 1, 2>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
// CHECK: %[[B:.*]] = mp.reduce sum, %{{.*}} {axes = array<i64: 0>, keepdims = false, mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<4x16xf32>
// CHECK: %[[D:.*]] = mp.linear %[[B]], %{{.*}} {mp.layer = 0 : i64} : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: shard.all_reduce %[[D]]
mp.param @wq : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wk : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wv : tensor<32x32xf32> {file = "x.onnx"}
mp.param @wo : tensor<32x32xf32> {file = "x.onnx"}
mp.param @sinks : tensor<4xf32> {file = "x.onnx"}
mp.param @gate_up : tensor<32x64xf32> {file = "x.onnx"}
mp.param @down : tensor<32x32xf32> {file = "x.onnx"}
func.func @attention_sinks(%x: tensor<2x4x32xf32>) -> (tensor<2x4x32xf32>, tensor<4x32xf32>) {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<32x32xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<32x32xf32>
  %sink0 = mp.get_param @sinks {mp.layer = 0 : i64} : tensor<4xf32>
  %sink1 = mp.reshape %sink0 {mp.layer = 0 : i64} : tensor<4xf32> -> tensor<1x4x1x1xf32>
  %sink = mp.expand %sink1 {mp.layer = 0 : i64} : tensor<1x4x1x1xf32> -> tensor<2x4x4x1xf32>
  %q0 = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %k0 = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %v0 = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %k1 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %v1 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %kt = mp.transpose %k1 [0, 2, 3, 1] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x8x4xf32>
  %v = mp.transpose %v1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %s0 = mp.matmul %q, %kt {mp.layer = 0 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x4x4xf32>
  %s1 = mp.concat %s0, %sink {axis = 3 : i64, mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x1xf32>) -> tensor<2x4x4x5xf32>
  %m = mp.reduce max, %s1 {axes = array<i64: 3>, mp.layer = 0 : i64} : tensor<2x4x4x5xf32> -> tensor<2x4x4x1xf32>
  %s2 = mp.sub %s1, %m {mp.layer = 0 : i64} : (tensor<2x4x4x5xf32>, tensor<2x4x4x1xf32>) -> tensor<2x4x4x5xf32>
  %p0 = mp.softmax %s2 {axis = -1 : i64, mp.layer = 0 : i64} : tensor<2x4x4x5xf32>
  %p = mp.slice %p0 {starts = array<i64: 0, 0, 0, 0>, limits = array<i64: 2, 4, 4, 4>, strides = array<i64: 1, 1, 1, 1>, mp.layer = 0 : i64} : tensor<2x4x4x5xf32> -> tensor<2x4x4x4xf32>
  %a0 = mp.matmul %p, %v {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
  %a1 = mp.transpose %a0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %a = mp.reshape %a1 {mp.layer = 0 : i64} : tensor<2x4x4x8xf32> -> tensor<2x4x32xf32>
  %o = mp.linear %a, %wo {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x32xf32>) -> tensor<2x4x32xf32>
  %wgu = mp.get_param @gate_up {mp.layer = 0 : i64} : tensor<32x64xf32>
  %wd = mp.get_param @down {mp.layer = 0 : i64} : tensor<32x32xf32>
  %gu = mp.linear %o, %wgu {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<32x64xf32>) -> tensor<2x4x64xf32>
  %gate = mp.slice %gu {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 64>, strides = array<i64: 1, 1, 2>, mp.layer = 0 : i64} : tensor<2x4x64xf32> -> tensor<2x4x32xf32>
  %up = mp.slice %gu {starts = array<i64: 0, 0, 1>, limits = array<i64: 2, 4, 64>, strides = array<i64: 1, 1, 2>, mp.layer = 0 : i64} : tensor<2x4x64xf32> -> tensor<2x4x32xf32>
  %h = mp.mul %gate, %up {mp.layer = 0 : i64} : (tensor<2x4x32xf32>, tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %hb = mp.reduce sum, %h {axes = array<i64: 0>, keepdims = false, mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<4x32xf32>
  %d = mp.linear %hb, %wd {mp.layer = 0 : i64} : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
  return %o, %d : tensor<2x4x32xf32>, tensor<4x32xf32>
}

// -----

// Tests a gather along the keys of per-head scores (DeBERTa's
// content-to-position term, GatherElements imported as a reshape and a
// Gather with known indices): the heads split passes it, the indices stay
// whole.
// CHECK-LABEL: func.func @gather_per_head
// CHECK: %[[F:.*]] = mp.reshape %{{.*}} : tensor<2x1x4x8xf32> -> tensor<2x1x32xf32>
// CHECK: mp.gather %[[F]], %{{.*}} {axis = 2 : i64{{.*}}} : (tensor<2x1x32xf32>, tensor<16xi64>) -> tensor<2x1x16xf32>
// CHECK: shard.all_reduce
mp.param @wq : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wo : tensor<8x8xf32> {file = "x.onnx"}
func.func @gather_per_head(%x: tensor<2x4x8xf32>, %pos: tensor<2x1x8x4xf32>, %idx: tensor<16xi64>) -> tensor<2x4x8xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<8x8xf32>
  %q0 = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %pk = mp.expand %pos {mp.layer = 0 : i64} : tensor<2x1x8x4xf32> -> tensor<2x2x8x4xf32>
  %pt = mp.transpose %pk [0, 1, 3, 2] {mp.layer = 0 : i64} : tensor<2x2x8x4xf32> -> tensor<2x2x4x8xf32>
  %c2p = mp.matmul %q, %pt {mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %flat = mp.reshape %c2p {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x2x32xf32>
  %g = mp.gather %flat, %idx {axis = 2 : i64, mp.layer = 0 : i64} : (tensor<2x2x32xf32>, tensor<16xi64>) -> tensor<2x2x16xf32>
  %s = mp.reshape %g {mp.layer = 0 : i64} : tensor<2x2x16xf32> -> tensor<2x2x4x4xf32>
  %p = mp.softmax %s {axis = 3 : i64, mp.layer = 0 : i64} : tensor<2x2x4x4xf32>
  %a = mp.matmul %p, %q {mp.layer = 0 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %a1 = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %a2 = mp.reshape %a1 {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %o = mp.linear %a2, %wo {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
