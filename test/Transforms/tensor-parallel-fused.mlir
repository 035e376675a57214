// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file 2>/dev/null | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --mp-summary -o /dev/null 2>/dev/null | FileCheck %s --check-prefix=SUMMARY

// Tests a fused QKV linear whose parts split differently (Falcon's layout
// [q heads..., k, v] with one key/value head, viewed as heads + 2 and
// sliced): it is cut into a linear per part, each reading a parameter that
// is its block of the fused weight (part_of, part = [axis, start, whole]).
// The query part splits over the ranks; the key and value parts, which
// multi-query attention reads whole, stay whole and say so (a warning each,
// at the fused linear: the diagnostic verifier counts them as one).
// CHECK-LABEL: module
// CHECK-DAG: mp.param @"qkv[:, 0:16]" : tensor<16x16xf32> {file = "x.onnx", grid = @tp, initializer = "qkv", part = array<i64: 1, 0, 32>, part_of = "qkv", shard_axis = 1 : i64}
// CHECK-DAG: mp.param @"qkv[:, 16:24]" : tensor<16x8xf32> {file = "x.onnx", initializer = "qkv", part = array<i64: 1, 16, 32>, part_of = "qkv"}
// CHECK-DAG: mp.param @"qkv[:, 24:32]" : tensor<16x8xf32> {file = "x.onnx", initializer = "qkv", part = array<i64: 1, 24, 32>, part_of = "qkv"}
// CHECK-NOT: mp.param @qkv :
// CHECK: %[[WQ:.*]] = mp.get_param @"qkv[:, 0:16]" {mp.layer = 0 : i64} : tensor<16x8xf32>
// CHECK-NEXT: %[[WK:.*]] = mp.get_param @"qkv[:, 16:24]" {mp.layer = 0 : i64} : tensor<16x8xf32>
// CHECK: %[[Q:.*]] = mp.linear %arg0, %[[WQ]] {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK: mp.reshape %[[Q]] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
// CHECK: mp.linear %arg0, %[[WK]] {mp.layer = 0 : i64, mp.replicated = {{.*}}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK: mp.attention {{.*}} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// CHECK: shard.all_reduce
// SUMMARY: cut         @qkv into 3 parts (a fused linear whose parts split differently): @qkv[:, 0:16] @qkv[:, 16:24] @qkv[:, 24:32]
// SUMMARY: replicated  2 block linears left whole by tensor parallelism:
// SUMMARY-NEXT: @qkv[:, 16:24]: {{.*}} multi-query attention reads its one key/value head whole on every rank
// SUMMARY-NEXT: @qkv[:, 24:32]: {{.*}} multi-query attention reads its one key/value head whole on every rank
mp.param @qkv : tensor<16x32xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x32xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.attention' split along dim 3, and multi-query attention reads its one key/value head whole on every rank}}
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %v4 = mp.reshape %f {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x4x8xf32>
  %q = mp.slice %v4 {limits = array<i64: 2, 4, 2, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x8xf32> -> tensor<2x4x2x8xf32>
  %k = mp.slice %v4 {limits = array<i64: 2, 4, 3, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 2, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x8xf32> -> tensor<2x4x1x8xf32>
  %v = mp.slice %v4 {limits = array<i64: 2, 4, 4, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 3, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x4x8xf32> -> tensor<2x4x1x8xf32>
  %qt = mp.transpose %q [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %kt = mp.transpose %k [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x1x8xf32> -> tensor<2x1x4x8xf32>
  %vt = mp.transpose %v [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x1x8xf32> -> tensor<2x1x4x8xf32>
  // expected-note @below {{the split stops here}}
  %a = mp.attention %qt, %kt, %vt {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %o, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests a fused linear whose output is read in parts that overlap: it is
// not cut (its parts do not tile it), and stays whole, said so.
// CHECK-LABEL: module
// CHECK: mp.param @qkv : tensor<16x32xf32> {file = "x.onnx"}
// CHECK-NOT: part_of
mp.param @qkv : tensor<16x32xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> (tensor<2x4x24xf32>, tensor<2x4x16xf32>) {
  %w = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x32xf32>
  // expected-warning @below {{this linear stays whole}}
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  // expected-note @below {{the split stops here}}
  %a = mp.slice %f {limits = array<i64: 2, 4, 24>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x24xf32>
  %b = mp.slice %f {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
  return %a, %b : tensor<2x4x24xf32>, tensor<2x4x16xf32>
}

// -----

// Tests a fused linear whose parts' names are taken: it is not cut (the
// model's own parameter keeps its name), and stays whole, said so.
// CHECK-LABEL: module
// CHECK: mp.param @"w[:, 0:16]" : tensor<16x8xf32> {file = "x.onnx"}
// CHECK: mp.param @w : tensor<16x32xf32> {file = "x.onnx"}
// CHECK-NOT: part_of
mp.param @"w[:, 0:16]" : tensor<16x8xf32> {file = "x.onnx"}
mp.param @w : tensor<16x32xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>) {
  %w = mp.get_param @w {mp.layer = 0 : i64} : tensor<16x32xf32>
  %o = mp.get_param @"w[:, 0:16]" {mp.layer = 0 : i64} : tensor<16x8xf32>
  // expected-warning @below {{this linear stays whole}}
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  // expected-note @below {{the split stops here}}
  %a = mp.slice %f {limits = array<i64: 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
  %b = mp.slice %f {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>
  // expected-warning @below {{this linear stays whole}}
  %c = mp.linear %x, %o {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  // expected-note @below {{the split stops here}}
  return %a, %b, %c : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x8xf32>
}

// -----

// Tests timm's fused QKV (ViT, DeiT, Swin): the output viewed as
// [3, heads, head_dim] and moved to the front (permute(2, 0, 3, 1, 4)),
// then taken as qkv[0], qkv[1], qkv[2]. It is cut into q, k and v linears
// (each viewed and moved as the whole was), whose heads split.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @"qkv[:, 0:16]" : tensor<16x16xf32> {file = "x.onnx", grid = @tp, initializer = "qkv", part = array<i64: 1, 0, 48>, part_of = "qkv", shard_axis = 1 : i64}
// CHECK-DAG: mp.param @"qkv[:, 32:48]" : tensor<16x16xf32> {file = "x.onnx", grid = @tp, initializer = "qkv", part = array<i64: 1, 32, 48>, part_of = "qkv", shard_axis = 1 : i64}
// CHECK: %[[Q:.*]] = mp.linear %arg0, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[QV:.*]] = mp.reshape %[[Q]] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x1x1x8xf32>
// CHECK-NEXT: mp.transpose %[[QV]] [2, 0, 3, 1, 4] {mp.layer = 0 : i64} : tensor<2x4x1x1x8xf32> -> tensor<1x2x1x4x8xf32>
// CHECK: mp.attention {{.*}} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// CHECK: shard.all_reduce
// SUMMARY: cut         @qkv into 3 parts (a fused linear whose parts split differently): @qkv[:, 0:16] @qkv[:, 16:32] @qkv[:, 32:48]
// SUMMARY-NOT: replicated
mp.param @qkv : tensor<16x48xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x48xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %v5 = mp.reshape %f {mp.layer = 0 : i64} : tensor<2x4x48xf32> -> tensor<2x4x3x2x8xf32>
  %p = mp.transpose %v5 [2, 0, 3, 1, 4] {mp.layer = 0 : i64} : tensor<2x4x3x2x8xf32> -> tensor<3x2x2x4x8xf32>
  %q1 = mp.slice %p {limits = array<i64: 1, 2, 2, 4, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %k1 = mp.slice %p {limits = array<i64: 2, 2, 2, 4, 8>, mp.layer = 0 : i64, starts = array<i64: 1, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %v1 = mp.slice %p {limits = array<i64: 3, 2, 2, 4, 8>, mp.layer = 0 : i64, starts = array<i64: 2, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1, 1>} : tensor<3x2x2x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %q = mp.reshape %q1 {mp.layer = 0 : i64} : tensor<1x2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  %k = mp.reshape %k1 {mp.layer = 0 : i64} : tensor<1x2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  %v = mp.reshape %v1 {mp.layer = 0 : i64} : tensor<1x2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  %a = mp.attention %q, %k, %v {mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %o, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests Baichuan's W_pack: view(B, S, 3, E).unsqueeze(0).transpose(0, -2)
// .squeeze(-2), then [0], [1], [2]: the parts axis is carried through a
// reshape that regroups the leading dims, a transpose and a reshape that
// drops a dim, and each part is taken through the same chain.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @"qkv[:, 16:32]" : tensor<16x16xf32> {file = "x.onnx", grid = @tp, initializer = "qkv", part = array<i64: 1, 16, 48>, part_of = "qkv", shard_axis = 1 : i64}
// CHECK: %[[K:.*]] = mp.linear %arg0, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[KV:.*]] = mp.reshape %[[K]] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<1x2x4x1x8xf32>
// CHECK-NEXT: %[[KT:.*]] = mp.transpose %[[KV]] [3, 1, 2, 0, 4] {mp.layer = 0 : i64} : tensor<1x2x4x1x8xf32> -> tensor<1x2x4x1x8xf32>
// CHECK-NEXT: mp.reshape %[[KT]] {mp.layer = 0 : i64} : tensor<1x2x4x1x8xf32> -> tensor<1x2x4x8xf32>
// CHECK: mp.attention {{.*}} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// SUMMARY: cut         @qkv into 3 parts (a fused linear whose parts split differently): @qkv[:, 0:16] @qkv[:, 16:32] @qkv[:, 32:48]
// SUMMARY-NOT: replicated
mp.param @qkv : tensor<16x48xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x48xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %v5 = mp.reshape %f {mp.layer = 0 : i64} : tensor<2x4x48xf32> -> tensor<1x2x4x3x16xf32>
  %t = mp.transpose %v5 [3, 1, 2, 0, 4] {mp.layer = 0 : i64} : tensor<1x2x4x3x16xf32> -> tensor<3x2x4x1x16xf32>
  %p = mp.reshape %t {mp.layer = 0 : i64} : tensor<3x2x4x1x16xf32> -> tensor<3x2x4x16xf32>
  %q1 = mp.slice %p {limits = array<i64: 1, 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<3x2x4x16xf32> -> tensor<1x2x4x16xf32>
  %k1 = mp.slice %p {limits = array<i64: 2, 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 1, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<3x2x4x16xf32> -> tensor<1x2x4x16xf32>
  %v1 = mp.slice %p {limits = array<i64: 3, 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 2, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<3x2x4x16xf32> -> tensor<1x2x4x16xf32>
  %q2 = mp.reshape %q1 {mp.layer = 0 : i64} : tensor<1x2x4x16xf32> -> tensor<2x4x2x8xf32>
  %k2 = mp.reshape %k1 {mp.layer = 0 : i64} : tensor<1x2x4x16xf32> -> tensor<2x4x2x8xf32>
  %v2 = mp.reshape %v1 {mp.layer = 0 : i64} : tensor<1x2x4x16xf32> -> tensor<2x4x2x8xf32>
  %q = mp.transpose %q2 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = mp.transpose %k2 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = mp.transpose %v2 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %a = mp.attention %q, %k, %v {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %o, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests a fused QKV read by two calls of its module (ALBERT's one layer
// applied twice; nn.MultiheadAttention's packed projection, taken as three
// slices): one weight and one bias for both, each read by its own linear
// (and the bias by one read both use). They are cut once into parts that
// both calls read, and every linear splits.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @"qkv[:, 0:16]" : tensor<16x16xf32> {file = "x.onnx", grid = @tp, initializer = "qkv", part = array<i64: 1, 0, 48>, part_of = "qkv", shard_axis = 1 : i64}
// CHECK-DAG: mp.param @"b[16:32]" : tensor<16xf32> {file = "x.onnx", grid = @tp, initializer = "b", part = array<i64: 0, 16, 48>, part_of = "b", shard_axis = 0 : i64}
// CHECK-NOT: mp.param @qkv :
// CHECK-NOT: mp.param @b :
// CHECK-COUNT-3: mp.linear %{{.*}}, %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-COUNT-3: mp.linear %{{.*}}, %{{.*}}, %{{.*}} {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// SUMMARY: cut         @qkv into 3 parts (a fused linear whose parts split differently): @qkv[:, 0:16] @qkv[:, 16:32] @qkv[:, 32:48]
// SUMMARY-NEXT: cut         @b into 3 parts (a fused linear whose parts split differently): @b[0:16] @b[16:32] @b[32:48]
// SUMMARY-NOT: replicated
mp.param @qkv : tensor<16x48xf32> {file = "x.onnx"}
mp.param @b : tensor<48xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %b = mp.get_param @b {mp.layer = 0 : i64} : tensor<48xf32>
  %w0 = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x48xf32>
  %f0 = mp.linear %x, %w0, %b {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
  %q0 = mp.slice %f0 {limits = array<i64: 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %qh0 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %qt0 = mp.transpose %qh0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k0 = mp.slice %f0 {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %kh0 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %kt0 = mp.transpose %kh0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v0 = mp.slice %f0 {limits = array<i64: 2, 4, 48>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %vh0 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %vt0 = mp.transpose %vh0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %a0 = mp.attention %qt0, %kt0, %vt0 {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at0 = mp.transpose %a0 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m0 = mp.reshape %at0 {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %wo0 = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %o0 = mp.linear %m0, %wo0 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r0 = mp.add %o0, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %w1 = mp.get_param @qkv {mp.layer = 1 : i64} : tensor<16x48xf32>
  %f1 = mp.linear %r0, %w1, %b {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
  %q1 = mp.slice %f1 {limits = array<i64: 2, 4, 16>, mp.layer = 1 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %qh1 = mp.reshape %q1 {mp.layer = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %qt1 = mp.transpose %qh1 [0, 2, 1, 3] {mp.layer = 1 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k1 = mp.slice %f1 {limits = array<i64: 2, 4, 32>, mp.layer = 1 : i64, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %kh1 = mp.reshape %k1 {mp.layer = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %kt1 = mp.transpose %kh1 [0, 2, 1, 3] {mp.layer = 1 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v1 = mp.slice %f1 {limits = array<i64: 2, 4, 48>, mp.layer = 1 : i64, starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %vh1 = mp.reshape %v1 {mp.layer = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %vt1 = mp.transpose %vh1 [0, 2, 1, 3] {mp.layer = 1 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %a1 = mp.attention %qt1, %kt1, %vt1 {causal, mp.layer = 1 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at1 = mp.transpose %a1 [0, 2, 1, 3] {mp.layer = 1 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m1 = mp.reshape %at1 {mp.layer = 1 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %wo1 = mp.get_param @wo {mp.layer = 1 : i64} : tensor<16x16xf32>
  %o1 = mp.linear %m1, %wo1 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r1 = mp.add %o1, %r0 {mp.layer = 1 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r1 : tensor<2x4x16xf32>
}

// -----

// Tests a fused QKV clamped before it is read in parts (MPT's and DBRX's
// clip_qkv: mp-raise makes the clamp compares and wheres against scalar
// bounds): it is cut, each part clamped alike, and every part splits by
// heads; nothing stays whole.
// CHECK-LABEL: module
// CHECK-DAG: mp.param @"qkv[:, 0:16]" : tensor<16x16xf32> {{{.*}}grid = @tp{{.*}}shard_axis = 1 : i64}
// CHECK-DAG: mp.param @"qkv[:, 16:32]" : tensor<16x16xf32> {{{.*}}grid = @tp{{.*}}shard_axis = 1 : i64}
// CHECK-DAG: mp.param @"qkv[:, 32:48]" : tensor<16x16xf32> {{{.*}}grid = @tp{{.*}}shard_axis = 1 : i64}
// CHECK-COUNT-3: mp.where %{{.*}}, %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x8xi1>, tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT: mp.slice
// CHECK: mp.attention {{.*}} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// CHECK: shard.all_reduce
mp.param @qkv : tensor<16x48xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %lo = mp.constant dense<-6.0> : tensor<f32>
  %hi = mp.constant dense<6.0> : tensor<f32>
  %w = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<16x48xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x48xf32>) -> tensor<2x4x48xf32>
  %below = mp.compare lt, %f, %lo {mp.layer = 0 : i64} : (tensor<2x4x48xf32>, tensor<f32>) -> tensor<2x4x48xi1>
  %raised = mp.where %below, %lo, %f {mp.layer = 0 : i64} : (tensor<2x4x48xi1>, tensor<f32>, tensor<2x4x48xf32>) -> tensor<2x4x48xf32>
  %above = mp.compare lt, %hi, %raised {mp.layer = 0 : i64} : (tensor<f32>, tensor<2x4x48xf32>) -> tensor<2x4x48xi1>
  %c = mp.where %above, %hi, %raised {mp.layer = 0 : i64} : (tensor<2x4x48xi1>, tensor<f32>, tensor<2x4x48xf32>) -> tensor<2x4x48xf32>
  %q = mp.slice %c {limits = array<i64: 2, 4, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %k = mp.slice %c {limits = array<i64: 2, 4, 32>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 16>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %v = mp.slice %c {limits = array<i64: 2, 4, 48>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 32>, strides = array<i64: 1, 1, 1>} : tensor<2x4x48xf32> -> tensor<2x4x16xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %v4 = mp.reshape %v {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %vt = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %a = mp.attention %qt, %kt, %vt {causal, mp.layer = 0 : i64, scale = 0.353553385 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x4x8xf32> -> tensor<2x4x2x8xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x2x8xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %r = mp.add %o, %x {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests an expert's fused gate/up (Llama 4's stacked [experts, d, 2f]
// weights unstacked by mp-raise, halved by chunk): its weight is a part of
// the stacked parameter already, so it is not cut again; its output, taken
// in equal halves (through the view that gives it its unit experts dim),
// is sharded per part as a split into equal parts is (shard_groups = 2:
// each rank's block of the gate and of the up), each half's slice then
// taking the rank's block.
// CHECK-LABEL: module
// CHECK: mp.param @"w13[1:2]" : tensor<1x16x32xf32> {file = "x.onnx", grid = @tp, initializer = "w13", part = array<i64: 0, 1, 2>, part_of = "w13", shard_axis = 2 : i64, shard_groups = 2 : i64}
// CHECK: %[[H:.*]] = mp.linear %arg0, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[V:.*]] = mp.reshape %[[H]] {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x1x16xf32>
// CHECK-NEXT: mp.slice %[[V]] {limits = array<i64: 2, 4, 1, 8>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x1x16xf32> -> tensor<2x4x1x8xf32>
// CHECK-NEXT: mp.slice %[[V]] {limits = array<i64: 2, 4, 1, 16>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 8>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x1x16xf32> -> tensor<2x4x1x8xf32>
// CHECK: mp.linear %{{.*}}, %{{.*}} {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: shard.all_reduce
// SUMMARY: cut @w13 into 1 experts (stacked experts' weights: a linear per expert): @w13[1:2]
// SUMMARY-NOT: parts split differently
mp.param @"w13[1:2]" : tensor<1x16x32xf32> {file = "x.onnx", initializer = "w13", part = array<i64: 0, 1, 2>, part_of = "w13"}
mp.param @"w2[1:2]" : tensor<1x16x16xf32> {file = "x.onnx", initializer = "w2", part = array<i64: 0, 1, 2>, part_of = "w2"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %p = mp.get_param @"w13[1:2]" {mp.layer = 0 : i64} : tensor<1x16x32xf32>
  %w = mp.reshape %p {mp.layer = 0 : i64} : tensor<1x16x32xf32> -> tensor<16x32xf32>
  %h = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %v = mp.reshape %h {mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x1x32xf32>
  %g = mp.slice %v {starts = array<i64: 0, 0, 0, 0>, limits = array<i64: 2, 4, 1, 16>, strides = array<i64: 1, 1, 1, 1>, mp.layer = 0 : i64} : tensor<2x4x1x32xf32> -> tensor<2x4x1x16xf32>
  %u = mp.slice %v {starts = array<i64: 0, 0, 0, 16>, limits = array<i64: 2, 4, 1, 32>, strides = array<i64: 1, 1, 1, 1>, mp.layer = 0 : i64} : tensor<2x4x1x32xf32> -> tensor<2x4x1x16xf32>
  %a = mp.silu %g {mp.layer = 0 : i64} : tensor<2x4x1x16xf32>
  %m = mp.mul %a, %u {mp.layer = 0 : i64} : (tensor<2x4x1x16xf32>, tensor<2x4x1x16xf32>) -> tensor<2x4x1x16xf32>
  %r = mp.reshape %m {mp.layer = 0 : i64} : tensor<2x4x1x16xf32> -> tensor<2x4x16xf32>
  %p2 = mp.get_param @"w2[1:2]" {mp.layer = 0 : i64} : tensor<1x16x16xf32>
  %w2 = mp.reshape %p2 {mp.layer = 0 : i64} : tensor<1x16x16xf32> -> tensor<16x16xf32>
  %y = mp.linear %r, %w2 {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
