// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --split-input-file --verify-diagnostics -o /dev/null

// Tests a decoder step with a key/value cache (HF's use_cache=True export):
// the cached keys and values are inputs, concatenated with this step's
// before attention and returned with them. Attention splits by heads: each
// rank takes its heads' block of the cache (shard.all_slice of the input,
// which moves no data), and the present keys and values, split by heads,
// are gathered where they are returned. The result a split reaches only
// through the function's results stays whole (second case).
// CHECK-LABEL: shard.grid @tp(shape = 2)
// CHECK-DAG: mp.param @wq : tensor<8x8xf32> {{{.*}}grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @wk : tensor<8x8xf32> {{{.*}}grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @wv : tensor<8x8xf32> {{{.*}}grid = @tp, shard_axis = 1 : i64}
// CHECK-DAG: mp.param @wo : tensor<8x8xf32> {{{.*}}grid = @tp, shard_axis = 0 : i64}
// CHECK-LABEL: func.func @main
// CHECK: %[[PK:.*]] = shard.all_slice %arg1 on @tp grid_axes = [0] slice_axis = 1 {{.*}}: tensor<2x2x3x4xf32> -> tensor<2x1x3x4xf32>
// CHECK: %[[K:.*]] = mp.concat %[[PK]], %{{.*}} {axis = 2 : i64{{.*}}} : (tensor<2x1x3x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK: %[[PV:.*]] = shard.all_slice %arg2 on @tp grid_axes = [0] slice_axis = 1
// CHECK: %[[V:.*]] = mp.concat %[[PV]], %{{.*}} {axis = 2 : i64{{.*}}} : (tensor<2x1x3x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x1x4x4xf32>
// CHECK: mp.attention %{{.*}}, %[[K]], %[[V]] {{.*}} -> tensor<2x1x1x4xf32>
// CHECK: shard.all_reduce
// CHECK: %[[GK:.*]] = shard.all_gather %[[K]] on @tp grid_axes = [0] gather_axis = 1 : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK: %[[GV:.*]] = shard.all_gather %[[V]] on @tp grid_axes = [0] gather_axis = 1 : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK: return %{{.*}}, %[[GK]], %[[GV]]
mp.param @wq : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wk : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wv : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wo : tensor<8x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x1x8xf32>, %past_k: tensor<2x2x3x4xf32>, %past_v: tensor<2x2x3x4xf32>) -> (tensor<2x1x8xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<8x8xf32>
  %q0 = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
  %k0 = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %k1 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
  %k2 = mp.transpose %k1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
  %k = mp.concat %past_k, %k2 {axis = 2 : i64, mp.layer = 0 : i64} : (tensor<2x2x3x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x4x4xf32>
  %v0 = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %v1 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
  %v2 = mp.transpose %v1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
  %v = mp.concat %past_v, %v2 {axis = 2 : i64, mp.layer = 0 : i64} : (tensor<2x2x3x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x4x4xf32>
  %a = mp.attention %q, %k, %v {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x1x4xf32>
  %a1 = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x1x4xf32> -> tensor<2x1x2x4xf32>
  %a2 = mp.reshape %a1 {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x1x8xf32>
  %o = mp.linear %a2, %wo {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %y = mp.add %x, %o {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<2x1x8xf32>) -> tensor<2x1x8xf32>
  return %y, %k, %v : tensor<2x1x8xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
}

// -----

// Tests the rule on plain linears: a column-parallel result that the
// program also reads on (here by a row-parallel linear) is gathered where
// it is returned...
// CHECK-LABEL: func.func @read_on
// CHECK: %[[H:.*]] = mp.linear %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[P:.*]] = mp.linear %[[H]], %{{.*}} : (tensor<2x4x4xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: shard.all_reduce %[[P]]
// CHECK: %[[G:.*]] = shard.all_gather %[[H]] on @tp grid_axes = [0] gather_axis = 2 : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
// CHECK: return %[[G]], %{{.*}}
mp.param @w1 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @w2 : tensor<8x16xf32> {file = "x.onnx"}
func.func @read_on(%x: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x16xf32>) {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<8x16xf32>
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %p = mp.linear %h, %w2 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  return %h, %p : tensor<2x4x8xf32>, tensor<2x4x16xf32>
}

// -----

// ...while one that only the function's results read stops there, said so
// (gathering it would stand in for the row-parallel linear that should
// follow), and a pair of linears with nothing between them whose second
// result only the function returns pairs column/row, rather than being
// taken for a factorized pair's wide factor.
// CHECK-LABEL: func.func @returned_only
// CHECK: mp.linear %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[U:.*]] = mp.linear %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[P:.*]] = mp.linear %[[U]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: shard.all_reduce %[[P]]
// CHECK-NOT: all_gather
mp.param @w1 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @returned_only(%x: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'func.return' split along dim 2, through data movement alone}}
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %u = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %d = mp.linear %u, %down {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  // expected-note @below {{the split stops here}}
  return %h, %d : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Tests other cache layouts: GPT-2's older stacked cache [2, B, H, P, D]
// indexed past[0] (a slice and a reshape of the input: each rank takes its
// heads of that view), a cache cast to bf16 first (mp-convert-precision's
// boundary cast), and presents returned through data movement alone (a
// transpose sibling to attention's, a cast back to f32) while attention
// computes on the same split: each gathered where returned.
// CHECK-LABEL: func.func @layouts
// CHECK: %[[K0:.*]] = mp.reshape %{{.*}} : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
// CHECK: shard.all_slice %[[K0]] on @tp grid_axes = [0] slice_axis = 1
// CHECK: %[[VB:.*]] = mp.cast %arg1 : tensor<2x2x3x4xf32> to tensor<2x2x3x4xbf16>
// CHECK: shard.all_slice %[[VB]] on @tp grid_axes = [0] slice_axis = 1
// CHECK: mp.attention {{.*}} : (tensor<2x1x1x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x1x1x4xf32>
// CHECK: shard.all_reduce
// CHECK-NEXT: %[[PK:.*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 1 : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[PV:.*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 1 : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
// CHECK-NEXT: return %{{.*}}, %[[PK]], %[[PV]]
mp.param @wq : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wk : tensor<8x8xf32> {file = "x.onnx"}
mp.param @wv : tensor<8x8xbf16> {file = "x.onnx"}
mp.param @wo : tensor<8x8xf32> {file = "x.onnx"}
func.func @layouts(%x: tensor<2x1x8xf32>, %past_v: tensor<2x2x3x4xf32>, %stacked: tensor<2x2x2x3x4xf32>) -> (tensor<2x1x8xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<8x8xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<8x8xbf16>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<8x8xf32>
  %q0 = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %q1 = mp.reshape %q0 {mp.layer = 0 : i64} : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
  %q = mp.transpose %q1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
  %pk0 = mp.slice %stacked {limits = array<i64: 1, 2, 2, 3, 4>, mp.layer = 0 : i64, starts = array<i64: 0, 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1, 1>} : tensor<2x2x2x3x4xf32> -> tensor<1x2x2x3x4xf32>
  %pk = mp.reshape %pk0 {mp.layer = 0 : i64} : tensor<1x2x2x3x4xf32> -> tensor<2x2x3x4xf32>
  %k0 = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  %k1 = mp.reshape %k0 {mp.layer = 0 : i64} : tensor<2x1x8xf32> -> tensor<2x1x2x4xf32>
  %k2 = mp.transpose %k1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x2x1x4xf32>
  %k = mp.concat %pk, %k2 {axis = 2 : i64, mp.layer = 0 : i64} : (tensor<2x2x3x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x4x4xf32>
  %kt = mp.transpose %k [0, 1, 3, 2] {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %present_k = mp.transpose %k [0, 1, 3, 2] {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %kk = mp.transpose %kt [0, 1, 3, 2] {mp.layer = 0 : i64} : tensor<2x2x4x4xf32> -> tensor<2x2x4x4xf32>
  %xb = mp.cast %x {mp.layer = 0 : i64} : tensor<2x1x8xf32> to tensor<2x1x8xbf16>
  %v0 = mp.linear %xb, %wv {mp.layer = 0 : i64} : (tensor<2x1x8xbf16>, tensor<8x8xbf16>) -> tensor<2x1x8xbf16>
  %v1 = mp.reshape %v0 {mp.layer = 0 : i64} : tensor<2x1x8xbf16> -> tensor<2x1x2x4xbf16>
  %v2 = mp.transpose %v1 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x1x2x4xbf16> -> tensor<2x2x1x4xbf16>
  %pvb = mp.cast %past_v : tensor<2x2x3x4xf32> to tensor<2x2x3x4xbf16>
  %vb = mp.concat %pvb, %v2 {axis = 2 : i64, mp.layer = 0 : i64} : (tensor<2x2x3x4xbf16>, tensor<2x2x1x4xbf16>) -> tensor<2x2x4x4xbf16>
  %v = mp.cast %vb {mp.layer = 0 : i64} : tensor<2x2x4x4xbf16> to tensor<2x2x4x4xf32>
  %present_v = mp.cast %vb : tensor<2x2x4x4xbf16> to tensor<2x2x4x4xf32>
  %a = mp.attention %q, %kk, %v {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<2x2x1x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x1x4xf32>
  %a1 = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<2x2x1x4xf32> -> tensor<2x1x2x4xf32>
  %a2 = mp.reshape %a1 {mp.layer = 0 : i64} : tensor<2x1x2x4xf32> -> tensor<2x1x8xf32>
  %o = mp.linear %a2, %wo {mp.layer = 0 : i64} : (tensor<2x1x8xf32>, tensor<8x8xf32>) -> tensor<2x1x8xf32>
  return %o, %present_k, %present_v : tensor<2x1x8xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
}
