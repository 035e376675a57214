// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --split-input-file 2>/dev/null | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN

// Tests grouped-query attention with fewer key/value heads (2) than ranks
// (4), as vLLM runs it: the query heads split (one per rank), the key and
// value linears stay whole (every rank computes both heads, said so), and
// each rank takes the head its query head reads: the heads repeated to one
// per rank ([2, 2, 4, 4] -> [2, 2, 1, 4, 4] -> [2, 2, 2, 4, 4] ->
// [2, 4, 4, 4], head h*2+i being head h), then its block with all_slice,
// which moves no data. One all-reduce, after the output projection.
// CHECK-LABEL: module
// CHECK:      mp.param @wq : tensor<16x16xf32> {file = "x.onnx", grid = @tp, shard_axis = 1 : i64}
// CHECK-NEXT: mp.param @wk : tensor<16x8xf32> {file = "x.onnx"}
// CHECK-NEXT: mp.param @wv : tensor<16x8xf32> {file = "x.onnx"}
// CHECK:      %[[K:.*]] = mp.linear %arg0, %{{.*}} {mp.layer = 0 : i64, mp.replicated = {{.*}}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK:      %[[Q:.*]] = mp.transpose {{.*}} -> tensor<2x1x4x4xf32>
// CHECK:      %[[KT:.*]] = mp.transpose {{.*}} -> tensor<2x2x4x4xf32>
// CHECK:      %[[K1:.*]] = mp.reshape %[[KT]] {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
// CHECK-NEXT: %[[K2:.*]] = mp.expand %[[K1]] {mp.layer = 0 : i64} : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
// CHECK-NEXT: %[[K4:.*]] = mp.reshape %[[K2]] {mp.layer = 0 : i64} : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[MINE:.*]] = shard.all_slice %[[K4]] on @tp grid_axes = [0] slice_axis = 1 {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x1x4x4xf32>
// CHECK:      shard.all_slice {{.*}} -> tensor<2x1x4x4xf32>
// CHECK:      mp.attention %[[Q]], %[[MINE]], %{{.*}} {causal, mp.layer = 0 : i64, scale = 5.000000e-01 : f32} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK-NOT:  mp.replicate_kv
// CHECK:      shard.all_reduce
// CHECK-NOT:  shard.all_reduce
// WARN: warning: this linear stays whole (replicated on all 4 ranks): its output reaches 'mp.attention' split along dim 1, whose key/value heads are fewer than the ranks: every rank computes them all and takes the one its query heads read
mp.param @wq : tensor<16x16xf32> {file = "x.onnx"}
mp.param @wk : tensor<16x8xf32> {file = "x.onnx"}
mp.param @wv : tensor<16x8xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<16x16xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<16x8xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<16x8xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %q = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %v = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v4 = mp.reshape %v {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vt = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %a = mp.attention %qt, %kt, %vt {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<2x4x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// Tests a fused QKV linear (Phi-3's qkv_proj: [q heads..., k heads...,
// v heads...]) of the same attention: it is cut into q, k and v linears,
// the key and value parts whole, as above.
// CHECK-LABEL: module
// CHECK:      mp.param @"wqkv[:, 0:16]" : tensor<16x16xf32> {{{.*}}grid = @tp{{.*}}shard_axis = 1 : i64}
// CHECK-NEXT: mp.param @"wqkv[:, 16:24]" : tensor<16x8xf32> {file = "x.onnx", initializer = "wqkv", part = array<i64: 1, 16, 32>, part_of = "wqkv"}
// CHECK-NEXT: mp.param @"wqkv[:, 24:32]" : tensor<16x8xf32> {file = "x.onnx", initializer = "wqkv", part = array<i64: 1, 24, 32>, part_of = "wqkv"}
// CHECK:      mp.attention {{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
mp.param @wqkv : tensor<16x32xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w = mp.get_param @wqkv {mp.layer = 0 : i64} : tensor<16x32xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %f = mp.linear %x, %w {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x32xf32>) -> tensor<2x4x32xf32>
  %q, %k, %v = mp.split %f {axis = 2 : i64, mp.layer = 0 : i64} : tensor<2x4x32xf32> -> tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v4 = mp.reshape %v {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %vt = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %a = mp.attention %qt, %kt, %vt {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<2x4x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// Tests a key that is one head broadcast to the two (an expand along
// heads) of such an attention: repeated and cut like the others, not
// narrowed as a broadcast read once would be (to 2/4 = 0 heads).
// CHECK-LABEL: module
// CHECK:       mp.expand {{.*}} : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK:       mp.attention {{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
mp.param @wq : tensor<16x16xf32> {file = "x.onnx"}
mp.param @wk : tensor<16x4xf32> {file = "x.onnx"}
mp.param @wv : tensor<16x8xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<16x16xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<16x4xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<16x8xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %q = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x4xf32>) -> tensor<2x4x4xf32>
  %v = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
  %v4 = mp.reshape %v {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x1x4xf32> -> tensor<2x1x4x4xf32>
  %ke = mp.expand %kt {mp.layer = 0 : i64} : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %vt = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %a = mp.attention %qt, %ke, %vt {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<2x4x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x4x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  return %o : tensor<2x4x16xf32>
}

// -----

// Tests attention left decomposed with HF's repeat_kv written out (2
// key/value heads unsqueezed, expanded to 2 copies each and merged into 4):
// the key linear stays whole and each rank's matmul takes its block of the
// repeated (and transposed) key, a head (all_slice along dim 1).
// CHECK-LABEL: module
// CHECK:       mp.param @wk : tensor<16x8xf32> {file = "x.onnx"}
// CHECK:       %[[R:.*]] = mp.reshape %{{.*}} : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NEXT:  %[[KT:.*]] = mp.transpose %[[R]] [0, 1, 3, 2]
// CHECK-NEXT:  %[[MINE:.*]] = shard.all_slice %[[KT]] on @tp grid_axes = [0] slice_axis = 1 {{.*}} -> tensor<2x1x4x4xf32>
// CHECK-NEXT:  mp.matmul %{{.*}}, %[[MINE]] {{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x4x4xf32>
// WARN: warning: this linear stays whole (replicated on all 4 ranks): its output reaches 'mp.reshape' split along dim 1, which repeats heads fewer than the ranks (repeat_kv): every rank computes them all and takes its block of the copies
mp.param @wq : tensor<16x16xf32> {file = "x.onnx"}
mp.param @wk : tensor<16x8xf32> {file = "x.onnx"}
mp.param @wo : tensor<16x16xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<16x16xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<16x8xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<16x16xf32>
  %q = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k1 = mp.reshape %kt {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x1x4x4xf32>
  %k2 = mp.expand %k1 {mp.layer = 0 : i64} : tensor<2x2x1x4x4xf32> -> tensor<2x2x2x4x4xf32>
  %kr = mp.reshape %k2 {mp.layer = 0 : i64} : tensor<2x2x2x4x4xf32> -> tensor<2x4x4x4xf32>
  %ktt = mp.transpose %kr [0, 1, 3, 2] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %s = mp.matmul %qt, %ktt {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = mp.softmax %s {axis = 3 : i64, mp.layer = 0 : i64} : tensor<2x4x4x4xf32>
  %a = mp.matmul %p, %qt {mp.layer = 0 : i64} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  return %o : tensor<2x4x16xf32>
}
