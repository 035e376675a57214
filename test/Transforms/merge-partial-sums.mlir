// RUN: mp-opt %s --mp-merge-partial-sums --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-merge-partial-sums --mp-merge-partial-sums --split-input-file | FileCheck %s

// Tests a GPT-J block, x + attn + (mlp + b): the attention's and the MLP's
// partial products are added, reduced once, then the bias and the residual
// are added (the form of a sequential block). The second run finds nothing
// more to merge.
// CHECK-LABEL: func.func @gptj
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[PA:.*]]: tensor<2x4x8xf32>, %[[PM:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[B:.*]] = mp.get_param @b
// CHECK: %[[P:.*]] = mp.add %[[PA]], %[[PM]] {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0] {mp.layer = 1 : i64}
// CHECK-NEXT: %[[RB:.*]] = mp.add %[[R]], %[[B]] {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[Y:.*]] = mp.add %[[X]], %[[RB]] {mp.layer = 1 : i64}
// CHECK-NEXT: return %[[Y]]
shard.grid @tp(shape = 2)
mp.param @b : tensor<8xf32> {file = "x.onnx"}
func.func @gptj(%x: tensor<2x4x8xf32>, %pa: tensor<2x4x8xf32>, %pm: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %b = mp.get_param @b : tensor<8xf32>
  %ra = shard.all_reduce %pa on @tp grid_axes = [0] {mp.layer = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %h = mp.add %x, %ra {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %rm = shard.all_reduce %pm on @tp grid_axes = [0] {mp.layer = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %m = mp.add %rm, %b {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %h, %m {mp.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests Phi-2's form, x + (attn + b1) + (mlp + b2): the two biases are added
// at their own size, then once to the reduced sum. Falcon's, without
// biases, is the residual plus the one all-reduce. Three sums (a third
// branch) reduce as one.
// CHECK-LABEL: func.func @phi2
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[PA:.*]]: tensor<2x4x8xf32>, %[[PM:.*]]: tensor<2x4x8xf32>)
// CHECK-DAG: %[[B1:.*]] = mp.get_param @b1
// CHECK-DAG: %[[B2:.*]] = mp.get_param @b2
// CHECK: %[[P:.*]] = mp.add %[[PA]], %[[PM]]
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]]
// CHECK-NEXT: %[[BS:.*]] = mp.add %[[B1]], %[[B2]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[RB:.*]] = mp.add %[[R]], %[[BS]]
// CHECK-NEXT: %[[Y:.*]] = mp.add %[[X]], %[[RB]]
// CHECK-NEXT: return %[[Y]]
// CHECK-LABEL: func.func @falcon
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[PA:.*]]: tensor<2x4x8xf32>, %[[PM:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[P:.*]] = mp.add %[[PA]], %[[PM]]
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]]
// CHECK-NEXT: %[[Y:.*]] = mp.add %[[X]], %[[R]]
// CHECK-NEXT: return %[[Y]]
// CHECK-LABEL: func.func @three
// CHECK-SAME: (%[[P0:.*]]: tensor<2x4x8xf32>, %[[P1:.*]]: tensor<2x4x8xf32>, %[[P2:.*]]: tensor<2x4x8xf32>)
// CHECK-NEXT: %[[S:.*]] = mp.add %[[P0]], %[[P1]]
// CHECK-NEXT: %[[P:.*]] = mp.add %[[S]], %[[P2]]
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]]
// CHECK-NEXT: return %[[R]]
shard.grid @tp(shape = 2)
mp.param @b1 : tensor<8xf32> {file = "x.onnx"}
mp.param @b2 : tensor<8xf32> {file = "x.onnx"}
func.func @phi2(%x: tensor<2x4x8xf32>, %pa: tensor<2x4x8xf32>, %pm: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %b1 = mp.get_param @b1 : tensor<8xf32>
  %b2 = mp.get_param @b2 : tensor<8xf32>
  %ra = shard.all_reduce %pa on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %a = mp.add %ra, %b1 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = mp.add %x, %a : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %rm = shard.all_reduce %pm on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %m = mp.add %rm, %b2 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %h, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @falcon(%x: tensor<2x4x8xf32>, %pa: tensor<2x4x8xf32>, %pm: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %ra = shard.all_reduce %pa on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %h = mp.add %x, %ra : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %rm = shard.all_reduce %pm on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %h, %rm : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @three(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %p2: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %r2 = shard.all_reduce %p2 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %s = mp.add %r0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %s, %r2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests sums over two grids in one tree: each grid's sums merge into one
// collective (the first group's takes the bias), a lone sum stays.
// CHECK-LABEL: func.func @groups
// CHECK-SAME: (%[[P0:.*]]: tensor<2x4x8xf32>, %[[P1:.*]]: tensor<2x4x8xf32>, %[[P2:.*]]: tensor<2x4x8xf32>, %[[P3:.*]]: tensor<2x4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[L:.*]] = shard.all_reduce %[[P0]] on @lone
// CHECK-NEXT: %[[T:.*]] = mp.add %[[P1]], %[[P3]]
// CHECK-NEXT: %[[RT:.*]] = shard.all_reduce %[[T]] on @tp
// CHECK-NEXT: %[[D:.*]] = mp.add %[[P2]], %[[P0]]
// CHECK-NEXT: %[[RD:.*]] = shard.all_reduce %[[D]] on @dp
// CHECK-NEXT: %[[S:.*]] = mp.add %[[RT]], %[[B]]
// CHECK-NEXT: %[[S2:.*]] = mp.add %[[RD]], %[[S]]
// CHECK-NEXT: %[[Y:.*]] = mp.add %[[L]], %[[S2]]
// CHECK-NEXT: return %[[Y]]
shard.grid @tp(shape = 2)
shard.grid @dp(shape = 2)
shard.grid @lone(shape = 2)
func.func @groups(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %p2: tensor<2x4x8xf32>, %p3: tensor<2x4x8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %l = shard.all_reduce %p0 on @lone grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %t1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %d1 = shard.all_reduce %p2 on @dp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %t2 = shard.all_reduce %p3 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %d2 = shard.all_reduce %p0 on @dp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %a = mp.add %l, %t1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %c = mp.add %a, %d1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %e = mp.add %t2, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %f = mp.add %c, %e : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %f, %d2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests what is not merged: sums over other grids or axes, a max, a sum
// read outside the tree (the embedding's all-reduce that a layer's residual
// stream starts from), a reduced value broadcast into the tree, sums in
// different pipeline stages, a norm's statistics with another sum, sums
// that widen bf16 to f32 (the partials would be added in bf16), and
// reduce_scatters of different dims. Two along the same dim (run after
// sequence parallelism) are merged.
// CHECK-LABEL: func.func @not_merged
// CHECK-COUNT-16: shard.all_reduce
// CHECK-NOT: shard.all_reduce
// CHECK: shard.reduce_scatter %{{.*}} scatter_axis = 1
// CHECK-NEXT: shard.reduce_scatter %{{.*}} scatter_axis = 2
// CHECK: %[[P:.*]] = mp.add %arg0, %arg1
// CHECK-NEXT: %[[S:.*]] = shard.reduce_scatter %[[P]] on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK-NEXT: return {{.*}}, %[[S]] :
shard.grid @tp(shape = 2)
shard.grid @other(shape = 2)
shard.grid @two(shape = 2x2)
func.func @not_merged(%p: tensor<2x4x8xf32>, %q: tensor<2x4x8xf32>, %v: tensor<8xf32>, %r: tensor<2x2x16xf32>, %n: tensor<2x4x8xbf16>)
    -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xf32>) {
  %a0 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %a1 = shard.all_reduce %q on @other grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %grids = mp.add %a0, %a1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %b0 = shard.all_reduce %p on @two grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %b1 = shard.all_reduce %q on @two grid_axes = [1] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %axes = mp.add %b0, %b1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %c0 = shard.all_reduce %p on @tp grid_axes = [0] reduction = max : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %c1 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %max = mp.add %c0, %c1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %d0 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %d1 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %shared = mp.add %d0, %d1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %e0 = shard.all_reduce %v on @tp grid_axes = [0] : tensor<8xf32> -> tensor<8xf32>
  %e1 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %broadcast = mp.add %e1, %e0 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %f0 = shard.all_reduce %p on @tp grid_axes = [0] {mp.stage = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %f1 = shard.all_reduce %q on @tp grid_axes = [0] {mp.stage = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %stages = mp.add %f0, %f1 {mp.stage = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s0 = shard.all_reduce %p on @tp grid_axes = [0] {mp.norm_statistics} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %s1 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %statistics = mp.add %s0, %s1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %w0 = shard.all_reduce %n on @tp grid_axes = [0] : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %w1 = shard.all_reduce %n on @tp grid_axes = [0] : tensor<2x4x8xbf16> -> tensor<2x4x8xf32>
  %widened = mp.add %w0, %w1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g0 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  %g1 = shard.reduce_scatter %r on @tp grid_axes = [0] scatter_axis = 2 : tensor<2x2x16xf32> -> tensor<2x2x8xf32>
  %dims = mp.add %g0, %g1 : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %h0 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  %h1 = shard.reduce_scatter %q on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  %scattered = mp.add %h0, %h1 : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  return %grids, %axes, %max, %shared, %d0, %broadcast, %stages, %statistics, %widened, %dims, %scattered : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x2x8xf32>, tensor<2x2x8xf32>
}

// -----

// Tests a mixture of experts computed densely, x + sum_e all_reduce(p_e) *
// g_e: each gate (from the whole router) is the same on every rank, so the
// scalings move before their all-reduces and the experts' partial products
// are reduced once.
// CHECK-LABEL: func.func @experts
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[P0:.*]]: tensor<2x4x8xf32>, %[[P1:.*]]: tensor<2x4x8xf32>, %[[GATES:.*]]: tensor<2x4x2xf32>)
// CHECK-DAG: %[[G0:.*]] = mp.slice %[[GATES]] {limits = array<i64: 2, 4, 1>
// CHECK-DAG: %[[G1:.*]] = mp.slice %[[GATES]] {limits = array<i64: 2, 4, 2>
// CHECK-DAG: %[[S0:.*]] = mp.mul %[[P0]], %[[G0]] {mp.layer = 0 : i64}
// CHECK-DAG: %[[S1:.*]] = mp.mul %[[G1]], %[[P1]] {mp.layer = 0 : i64}
// CHECK: %[[P:.*]] = mp.add %[[S0]], %[[S1]]
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[P]]
// CHECK-NEXT: %[[Y:.*]] = mp.add %[[X]], %[[R]]
// CHECK-NEXT: return %[[Y]]
shard.grid @tp(shape = 2)
func.func @experts(%x: tensor<2x4x8xf32>, %p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %gates: tensor<2x4x2xf32>) -> tensor<2x4x8xf32> {
  %g0 = mp.slice %gates {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 1>, strides = array<i64: 1, 1, 1>} : tensor<2x4x2xf32> -> tensor<2x4x1xf32>
  %g1 = mp.slice %gates {starts = array<i64: 0, 0, 1>, limits = array<i64: 2, 4, 2>, strides = array<i64: 1, 1, 1>} : tensor<2x4x2xf32> -> tensor<2x4x1xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g0 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] {mp.layer = 0 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e1 = mp.mul %g1, %r1 {mp.layer = 0 : i64} : (tensor<2x4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %m = mp.add %e0, %e1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %x, %m {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests scalings that differ between ranks, which stay after their sums: a
// sharded parameter, a scattered sum, a rank's block of an input, and a
// scaling that is not added to another sum.
// CHECK-LABEL: func.func @rank_dependent
// CHECK: %[[R:.*]] = shard.all_reduce
// CHECK-NEXT: mp.mul %[[R]]
// CHECK-NEXT: shard.all_reduce
// CHECK-LABEL: func.func @scattered
// CHECK-COUNT-2: shard.all_reduce
// CHECK-LABEL: func.func @sharded_input
// CHECK-COUNT-2: shard.all_reduce
// CHECK-LABEL: func.func @alone
// CHECK: %[[R:.*]] = shard.all_reduce
// CHECK-NEXT: mp.mul %[[R]]
shard.grid @tp(shape = 2)
mp.param @w : tensor<16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
func.func @rank_dependent(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = mp.get_param @w : tensor<8xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @scattered(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %q: tensor<2x8x8xf32>) -> tensor<2x4x8xf32> {
  %g = shard.reduce_scatter %q on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x8x8xf32> -> tensor<2x4x8xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @sharded_input(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %g: tensor<2x4x1xf32> {mp.shard_axis = 1 : i64}) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @alone(%p0: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = mp.add %x, %e0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests stacked experts' outputs (mp-raise's linear per expert, each
// all-reduced) concatenated along the experts and combined by their gates
// in one einsum: the einsum is the sum of an einsum per expert, each
// linear in its expert's sum, so the sums move after them and merge into
// one. With gates that differ between ranks, the sums stay before the
// einsum, concatenated: one collective of the same bytes.
// CHECK-LABEL: func.func @stacked_combine
// CHECK-SAME: (%[[P0:.*]]: tensor<2x4x8xf32>, %[[P1:.*]]: tensor<2x4x8xf32>, %[[G:.*]]: tensor<2x4x2xf32>)
// CHECK-NOT: shard.all_reduce
// CHECK-DAG: %[[G0:.*]] = mp.slice %[[G]] {limits = array<i64: 2, 4, 1>
// CHECK-DAG: %[[G1:.*]] = mp.slice %[[G]] {limits = array<i64: 2, 4, 2>
// CHECK-DAG: %[[E0:.*]] = mp.einsum "bsed,bse->bsd" %{{.*}}, %[[G0]]
// CHECK-DAG: %[[E1:.*]] = mp.einsum "bsed,bse->bsd" %{{.*}}, %[[G1]]
// CHECK: %[[S:.*]] = mp.add %[[E0]], %[[E1]]
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]]
// CHECK-NEXT: return %[[R]]
// CHECK-LABEL: func.func @rank_gates
// CHECK: %[[C:.*]] = mp.concat
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[C]] on @tp grid_axes = [0] : tensor<2x4x2x8xf32> -> tensor<2x4x2x8xf32>
// CHECK-NEXT: mp.einsum "bsed,bse->bsd" %[[R]]
shard.grid @tp(shape = 2)
func.func @stacked_combine(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %g: tensor<2x4x2xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %v0 = mp.reshape %r0 : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %v1 = mp.reshape %r1 : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
  %all = mp.concat %v0, %v1 {axis = 2 : i64} : (tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>) -> tensor<2x4x2x8xf32>
  %y = mp.einsum "bsed,bse->bsd" %all, %g : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @rank_gates(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %q: tensor<2x8x2xf32>) -> tensor<2x4x8xf32> {
  %g = shard.reduce_scatter %q on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x8x2xf32> -> tensor<2x4x2xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %v0 = mp.reshape %r0 : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %v1 = mp.reshape %r1 : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
  %all = mp.concat %v0, %v1 {axis = 2 : i64} : (tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>) -> tensor<2x4x2x8xf32>
  %y = mp.einsum "bsed,bse->bsd" %all, %g : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests experts' outputs stacked and summed (torch.stack(...).sum(0)): the
// sum over the stacked dim is the sum of each expert's, whose scaled sums
// over ranks then merge into one.
// CHECK-LABEL: func.func @stacked_sum
// CHECK-NOT: shard.all_reduce
// CHECK: mp.reduce sum
// CHECK: mp.reduce sum
// CHECK: %[[S:.*]] = mp.add
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]]
// CHECK-NEXT: return %[[R]]
shard.grid @tp(shape = 2)
func.func @stacked_sum(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %g0: tensor<2x4x1xf32>, %g1: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g0 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %v0 = mp.reshape %e0 : tensor<2x4x8xf32> -> tensor<1x2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e1 = mp.mul %r1, %g1 : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %v1 = mp.reshape %e1 : tensor<2x4x8xf32> -> tensor<1x2x4x8xf32>
  %all = mp.concat %v0, %v1 {axis = 0 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %y = mp.reduce sum, %all {axes = array<i64: 0>, keepdims = false} : tensor<2x2x4x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests scalings that are not the same on every rank the sum sums over,
// which stay after their sums: a sharded parameter deeper in the chain, a
// dropout, an all-reduce over another grid axis.
// CHECK-LABEL: func.func @deeper_shard
// CHECK: %[[R:.*]] = shard.all_reduce
// CHECK-NEXT: mp.mul %[[R]]
// CHECK-LABEL: func.func @dropped
// CHECK: %[[R:.*]] = shard.all_reduce
// CHECK-NEXT: mp.mul %[[R]]
// CHECK-LABEL: func.func @other_axis
// CHECK: %[[R:.*]] = shard.all_reduce %arg0
// CHECK: mp.mul %[[R]]
shard.grid @tp(shape = 2)
shard.grid @grid2(shape = 2x2)
mp.param @w : tensor<16xf32> {file = "x.onnx", grid = @tp, shard_axis = 0 : i64}
func.func @deeper_shard(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %g: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %w = mp.get_param @w : tensor<8xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %s0 = mp.mul %e0, %g : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %s0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @dropped(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %g: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %d = mp.dropout %g {ratio = 1.000000e-01 : f32} : tensor<2x4x1xf32>
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %d : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @other_axis(%p0: tensor<2x4x8xf32>, %p1: tensor<2x4x8xf32>, %q: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %g = shard.all_reduce %q on @grid2 grid_axes = [1] : tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %r0 = shard.all_reduce %p0 on @grid2 grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p1 on @grid2 grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests GPT-OSS's experts (stacked weights unstacked by mp-raise: a
// row-parallel linear per expert, each all-reduced, concatenated along the
// experts), a bias per expert added after the concatenation, the tokens
// viewed back as [experts, B, S, d], scaled by the gates and summed over the
// experts: the concatenation of sums is the sum of the concatenation, the
// bias is carried apart through the view, the scaling and the sum, and the
// one all-reduce moves after the sum over the experts (E times fewer
// bytes): all_reduce(sum_e(p_e * g_e)) + sum_e(b_e * g_e).
// CHECK-LABEL: func.func @gpt_oss
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[P0:.*]]: tensor<8x8xf32>, %[[P1:.*]]: tensor<8x8xf32>, %[[G:.*]]: tensor<2x2x4x1xf32>)
// CHECK-NOT: shard.all_reduce
// CHECK: %[[C:.*]] = mp.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<2x8x8xf32>
// CHECK: %[[BE:.*]] = mp.expand %{{.*}} : tensor<2x1x8xf32> -> tensor<2x8x8xf32>
// CHECK: %[[V:.*]] = mp.reshape %[[C]] : tensor<2x8x8xf32> -> tensor<2x2x4x8xf32>
// CHECK: %[[BV:.*]] = mp.reshape %[[BE]] : tensor<2x8x8xf32> -> tensor<2x2x4x8xf32>
// CHECK: %[[S:.*]] = mp.mul %[[V]], %[[G]]
// CHECK: %[[BS:.*]] = mp.mul %[[BV]], %[[G]]
// CHECK: %[[PS:.*]] = mp.reduce sum, %[[S]] {axes = array<i64: 0>, keepdims = false} : tensor<2x2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[BR:.*]] = mp.reduce sum, %[[BS]] {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[R:.*]] = shard.all_reduce %[[PS]] on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[T:.*]] = mp.add %[[R]], %[[BR]]
// CHECK-NEXT: mp.add %[[X]], %[[T]]
// CHECK-NOT: shard.all_reduce
// CHECK: return
//
// Tests stacked experts applied to tokens flattened first ("td,edf->tef"):
// the concatenated sums are viewed as [B, S, experts, d] before the gates'
// einsum; the one all-reduce moves after the einsum.
// CHECK-LABEL: func.func @flattened
// CHECK: %[[E:.*]] = mp.einsum "bsed,bse->bsd"
// CHECK-NEXT: shard.all_reduce %[[E]] on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NOT: shard.all_reduce
//
// Tests a concatenation of sums with a part that is not one, and of sums
// of which only one adds a bias: nothing moves.
// CHECK-LABEL: func.func @mixed
// CHECK-COUNT-2: shard.all_reduce
// CHECK: mp.concat
// CHECK-LABEL: func.func @one_bias
// CHECK-COUNT-2: shard.all_reduce
// CHECK: mp.concat
shard.grid @tp(shape = 2)
mp.param @b : tensor<2x1x8xf32> {file = "x.onnx"}
func.func @gpt_oss(%x: tensor<2x4x8xf32>, %p0: tensor<8x8xf32>, %p1: tensor<8x8xf32>, %g: tensor<2x2x4x1xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %v0 = mp.reshape %r0 : tensor<8x8xf32> -> tensor<1x8x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %v1 = mp.reshape %r1 : tensor<8x8xf32> -> tensor<1x8x8xf32>
  %all = mp.concat %v0, %v1 {axis = 0 : i64} : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<2x8x8xf32>
  %b = mp.get_param @b : tensor<2x1x8xf32>
  %biased = mp.add %all, %b : (tensor<2x8x8xf32>, tensor<2x1x8xf32>) -> tensor<2x8x8xf32>
  %tokens = mp.reshape %biased : tensor<2x8x8xf32> -> tensor<2x2x4x8xf32>
  %scaled = mp.mul %tokens, %g : (tensor<2x2x4x8xf32>, tensor<2x2x4x1xf32>) -> tensor<2x2x4x8xf32>
  %y = mp.reduce sum, %scaled {axes = array<i64: 0>, keepdims = false} : tensor<2x2x4x8xf32> -> tensor<2x4x8xf32>
  %out = mp.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}
func.func @flattened(%p0: tensor<8x8xf32>, %p1: tensor<8x8xf32>, %g: tensor<2x4x2xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %v0 = mp.reshape %r0 : tensor<8x8xf32> -> tensor<8x1x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %v1 = mp.reshape %r1 : tensor<8x8xf32> -> tensor<8x1x8xf32>
  %all = mp.concat %v0, %v1 {axis = 1 : i64} : (tensor<8x1x8xf32>, tensor<8x1x8xf32>) -> tensor<8x2x8xf32>
  %tokens = mp.reshape %all : tensor<8x2x8xf32> -> tensor<2x4x2x8xf32>
  %y = mp.einsum "bsed,bse->bsd" %tokens, %g : (tensor<2x4x2x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @mixed(%p0: tensor<8x8xf32>, %p1: tensor<8x8xf32>, %q: tensor<8x8xf32>) -> tensor<24x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %w = mp.exp %q : tensor<8x8xf32>
  %all = mp.concat %r0, %w, %r1 {axis = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<24x8xf32>
  return %all : tensor<24x8xf32>
}
func.func @one_bias(%p0: tensor<8x8xf32>, %p1: tensor<8x8xf32>, %c: tensor<8x8xf32>) -> tensor<16x8xf32> {
  %r0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %b0 = mp.add %r0, %c : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %r1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>
  %v1 = mp.neg %r1 : tensor<8x8xf32>
  %all = mp.concat %b0, %v1 {axis = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %all : tensor<16x8xf32>
}

// -----

// Tests a layer's sum over ranks carried through the residual add to a
// pooling after the layers (a classifier's sum over the sequence): the sum
// moves after the pooling and, being outside the layers there, loses the
// layer's tag (sequence parallelism leaves such a sum an all-reduce).
// CHECK-LABEL: func.func @pooled
// CHECK: %[[S:.*]] = mp.reduce sum, %arg0 {axes = array<i64: 1>, keepdims = false} : tensor<3x8x32xf32> -> tensor<3x32xf32>
// CHECK: %[[X:.*]] = mp.reduce sum, %arg1
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]] on @tp grid_axes = [0] : tensor<3x32xf32> -> tensor<3x32xf32>
// CHECK-NEXT: mp.add %[[R]], %[[X]] : (tensor<3x32xf32>, tensor<3x32xf32>) -> tensor<3x32xf32>
shard.grid @tp(shape = 2)
func.func @pooled(%p: tensor<3x8x32xf32>, %x: tensor<3x8x32xf32>) -> tensor<3x32xf32> {
  %r = shard.all_reduce %p on @tp grid_axes = [0] {mp.layer = 1 : i64} : tensor<3x8x32xf32> -> tensor<3x8x32xf32>
  %h = mp.add %x, %r {mp.layer = 1 : i64} : (tensor<3x8x32xf32>, tensor<3x8x32xf32>) -> tensor<3x8x32xf32>
  %s = mp.reduce sum, %h {axes = array<i64: 1>, keepdims = false} : tensor<3x8x32xf32> -> tensor<3x32xf32>
  return %s : tensor<3x32xf32>
}

// -----

// Tests a norm's statistics (an all-reduce of local sums, mp.norm_statistics)
// scaled where another sum meets it: statistics are not activations, so the
// sum stays before its scaling, with its mark.
// CHECK-LABEL: func.func @statistics
// CHECK: %[[S:.*]] = shard.all_reduce %arg0 on @tp grid_axes = [0] {mp.norm_statistics}
// CHECK-NEXT: mp.mul %[[S]], %arg2
shard.grid @tp(shape = 2)
func.func @statistics(%s: tensor<2x4x8xf32>, %p: tensor<2x4x8xf32>, %g: tensor<2x4x1xf32>) -> tensor<2x4x8xf32> {
  %r0 = shard.all_reduce %s on @tp grid_axes = [0] {mp.norm_statistics} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %e0 = mp.mul %r0, %g : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r1 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %y = mp.add %e0, %r1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
