// RUN: mp-opt %s --mp-fuse-reduced-norms --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-fuse-reduced-norms --mp-fuse-reduced-norms --split-input-file | FileCheck %s --check-prefix=TWICE
// RUN: not mp-opt %s --split-input-file --mp-fuse-reduced-norms --mp-tensor-parallel=tp=2 2>&1 | FileCheck %s --check-prefix=TP
// RUN: mp-opt %s --split-input-file --mp-fuse-reduced-norms --mp-plan-memory=print=true -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: not mp-opt %s --split-input-file --mp-plan-memory --mp-fuse-reduced-norms -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLANNED

// Tests two row-parallel linears' all-reduces, as a GPT-2 layer has them
// after mp-fuse-residual-norms: the first's bias (added after the sum, on
// either side) becomes the addend; the second has no bias. Each all-reduce,
// bias add and add-and-norm become one op with both results, the grid
// axis the all-reduce's and the norm's attributes and layer carried over;
// the second reads the first's sum as its residual.
// CHECK-LABEL: func.func @two_reductions
// CHECK: %[[H:.*]], %[[N:.*]] = mp.all_reduce_add_layer_norm %arg0, %arg1, %arg3 bias %arg4 addend %arg2 {epsilon = 1.000000e-03 : f32, grid = @tp, grid_axis = 1 : i64, mp.layer = 0 : i64} :
// CHECK-SAME: -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
// CHECK: %[[M:.*]] = mp.gelu %[[N]]
// CHECK: %[[H2:.*]], %[[R:.*]] = mp.all_reduce_add_rms_norm %[[M]], %[[H]], %arg3 {grid = @tp, grid_axis = 1 : i64} :
// CHECK-NOT: shard.all_reduce
// CHECK-NOT: mp.add
// CHECK: return %[[H2]], %[[R]]
// TWICE-LABEL: func.func @two_reductions
// TWICE-COUNT-2: mp.all_reduce_add
// TP: error: 'mp.all_reduce_add_layer_norm' op is a fusion: mp-fuse-reduced-norms runs after mp-tensor-parallel, not before
shard.grid @tp(shape = 1x2)
func.func @two_reductions(%p: tensor<2x4x16xf32>, %x: tensor<2x4x16xf32>, %bo: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %r = shard.all_reduce %p on @tp grid_axes = [1] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %rb = mp.add %bo, %r : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %h, %n = mp.add_layer_norm %x, %rb, %g, %b {epsilon = 1.0e-3 : f32, mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %m = mp.gelu %n : tensor<2x4x16xf32>
  %r2 = shard.all_reduce %m on @tp grid_axes = [1] : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %h2, %n2 = mp.add_rms_norm %r2, %h, %g : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  return %h2, %n2 : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// Tests what does not fuse: a sum read twice; a bias add read twice; an
// addend that is not one value per feature; a max, not a sum; a sum over two
// grid axes; an all-reduce read by a plain norm (no residual add); one
// added to itself; an add-and-norm in another pipeline chunk; and a
// residual that differs between the ranks (each rank's slice of a value):
// the fused op would send one rank's rows to all.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: mp.all_reduce_add
// CHECK: return
shard.grid @tp(shape = 2x2)
func.func @not_fused(%p: tensor<4x16xf32>, %x: tensor<4x16xf32>, %g: tensor<16xf32>, %bo: tensor<16xf32>, %rows: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %r0 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h0, %n0 = mp.add_rms_norm %x, %r0, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %e0 = mp.exp %r0 : tensor<4x16xf32>
  %r1 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %b1 = mp.add %r1, %bo : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %h1, %n1 = mp.add_rms_norm %x, %b1, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %e1 = mp.exp %b1 : tensor<4x16xf32>
  %r2 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %b2 = mp.add %r2, %rows : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %h2, %n2 = mp.add_rms_norm %x, %b2, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %r3 = shard.all_reduce %p on @tp grid_axes = [0] reduction = max : tensor<4x16xf32> -> tensor<4x16xf32>
  %h3, %n3 = mp.add_rms_norm %x, %r3, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %r4 = shard.all_reduce %p on @tp grid_axes = [0, 1] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h4, %n4 = mp.add_rms_norm %x, %r4, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %r5 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %n5 = mp.rms_norm %r5, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r6 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h6, %n6 = mp.add_rms_norm %r6, %r6, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %r7 = shard.all_reduce %p on @tp grid_axes = [0] {mp.stage = 0 : i64} : tensor<4x16xf32> -> tensor<4x16xf32>
  %h7, %n7 = mp.add_rms_norm %x, %r7, %g {mp.stage = 1 : i64} : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  %big = mp.concat %x, %x {axis = 0 : i64} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %mine = shard.all_slice %big on @tp grid_axes = [0] slice_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  %r8 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h8, %n8 = mp.add_rms_norm %mine, %r8, %g : (tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return %e0, %e1, %n2, %n3, %n4, %n5, %n6, %n7, %h0, %h1, %n8 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that a train step (a module with backward ops) is left alone.
// CHECK-LABEL: func.func @train_step
// CHECK: shard.all_reduce
// CHECK: mp.add_rms_norm
shard.grid @tp(shape = 2)
func.func @train_step(%p: tensor<2x8xf32>, %x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %r = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x8xf32> -> tensor<2x8xf32>
  %h, %n = mp.add_rms_norm %x, %r, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %2 = mp.neg %n {mp.backward} : tensor<2x8xf32>
  return %2 : tensor<2x8xf32>
}

// -----

// Tests the memory plan of the fused op: where nothing reads them after
// it, the sum takes the residual's bytes and the norm the partial sums'
// (each rank writes another's only at the rows it read there), so the
// fusion needs no more arena. A plan made before the fusion is refused.
// CHECK-LABEL: func.func @in_place
// CHECK: mp.all_reduce_add_rms_norm %0, %1, %arg1
// PLAN-LABEL: memory plan of @in_place
// PLAN: %sum = mp.all_reduce_add_rms_norm: in place of %1
// PLAN-NEXT: %result = mp.all_reduce_add_rms_norm: in place of %0
// PLANNED: error: carries a memory plan: mp-fuse-reduced-norms runs before mp-plan-memory, not after
shard.grid @tp(shape = 2)
func.func @in_place(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %p = mp.neg %x : tensor<2x8xf32>
  %res = mp.exp %x : tensor<2x8xf32>
  %r = shard.all_reduce %p on @tp grid_axes = [0] : tensor<2x8xf32> -> tensor<2x8xf32>
  %h, %n = mp.add_rms_norm %res, %r, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %m = mp.gelu %n : tensor<2x8xf32>
  %h2 = mp.add %h, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %h2 : tensor<2x8xf32>
}

// -----

// Tests sequence parallelism's form: a reduce_scatter along the sequence,
// the bias, the add-and-norm of this rank's slice and the all_gather of the
// norm become one op whose sum is the slice and whose norm is gathered; the
// second site (no bias, an rms_norm) reads the first's sum as its residual.
// Residuals are rank-local here, as sequence parallelism's are: each rank
// computes its own rows, as the unfused ops do.
// CHECK-LABEL: func.func @sequence_parallel
// CHECK: %[[H:.*]], %[[N:.*]] = mp.reduce_scatter_add_layer_norm %arg0, %arg1, %arg3 bias %arg4 addend %arg2 {epsilon = 1.000000e-03 : f32, grid = @tp, grid_axis = 1 : i64, mp.layer = 0 : i64, scatter_axis = 1 : i64} :
// CHECK-SAME: -> (tensor<2x2x16xf32>, tensor<2x4x16xf32>)
// CHECK: %[[M:.*]] = mp.gelu %[[N]]
// CHECK: %[[H2:.*]], %[[R:.*]] = mp.reduce_scatter_add_rms_norm %[[M]], %[[H]], %arg3 {grid = @tp, grid_axis = 1 : i64, scatter_axis = 1 : i64} :
// CHECK-NOT: shard.
// CHECK-NOT: mp.add
// CHECK: return %[[H2]], %[[R]]
// TWICE-LABEL: func.func @sequence_parallel
// TWICE-COUNT-2: mp.reduce_scatter_add
// TP: error: 'mp.reduce_scatter_add_layer_norm' op is a fusion: mp-fuse-reduced-norms runs after mp-tensor-parallel, not before
shard.grid @tp(shape = 1x2)
func.func @sequence_parallel(%p: tensor<2x4x16xf32>, %x: tensor<2x2x16xf32>, %bo: tensor<16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> (tensor<2x2x16xf32>, tensor<2x4x16xf32>) {
  %r = shard.reduce_scatter %p on @tp grid_axes = [1] scatter_axis = 1 : tensor<2x4x16xf32> -> tensor<2x2x16xf32>
  %rb = mp.add %r, %bo : (tensor<2x2x16xf32>, tensor<16xf32>) -> tensor<2x2x16xf32>
  %h, %n = mp.add_layer_norm %x, %rb, %g, %b {epsilon = 1.0e-3 : f32, mp.layer = 0 : i64} : (tensor<2x2x16xf32>, tensor<2x2x16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x2x16xf32>, tensor<2x2x16xf32>)
  %gn = shard.all_gather %n on @tp grid_axes = [1] gather_axis = 1 : tensor<2x2x16xf32> -> tensor<2x4x16xf32>
  %m = mp.gelu %gn : tensor<2x4x16xf32>
  %r2 = shard.reduce_scatter %m on @tp grid_axes = [1] scatter_axis = 1 : tensor<2x4x16xf32> -> tensor<2x2x16xf32>
  %h2, %n2 = mp.add_rms_norm %r2, %h, %g : (tensor<2x2x16xf32>, tensor<2x2x16xf32>, tensor<16xf32>) -> (tensor<2x2x16xf32>, tensor<2x2x16xf32>)
  %gn2 = shard.all_gather %n2 on @tp grid_axes = [1] gather_axis = 1 : tensor<2x2x16xf32> -> tensor<2x4x16xf32>
  return %h2, %gn2 : tensor<2x2x16xf32>, tensor<2x4x16xf32>
}

// -----

// Tests a post-norm model's form: the norm is the next residual as well
// as the next layer's gathered input. The fused op gives the gathered norm;
// the residual reads this rank's slice of it (an all_slice: the same bits).
// CHECK-LABEL: func.func @post_norm
// CHECK: %[[H:.*]], %[[N:.*]] = mp.reduce_scatter_add_rms_norm %arg0, %arg1, %arg2 {grid = @tp, grid_axis = 0 : i64, scatter_axis = 0 : i64} :
// CHECK-NEXT: %[[MINE:.*]] = shard.all_slice %[[N]] on @tp grid_axes = [0] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[M:.*]] = mp.gelu %[[N]]
// CHECK-NEXT: %[[P:.*]] = mp.neg %[[M]]
// CHECK-NEXT: %{{.*}}, %[[N2:.*]] = mp.reduce_scatter_add_rms_norm %[[P]], %[[MINE]], %arg2
// CHECK-NEXT: return %[[N2]]
shard.grid @tp(shape = 2)
func.func @post_norm(%p: tensor<4x8xf32>, %x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %r0 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h0, %n0 = mp.add_rms_norm %x, %r0, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a0 = shard.all_gather %n0 on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %m = mp.gelu %a0 : tensor<4x8xf32>
  %p1 = mp.neg %m : tensor<4x8xf32>
  %r1 = shard.reduce_scatter %p1 on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h1, %n1 = mp.add_rms_norm %n0, %r1, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a1 = shard.all_gather %n1 on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  return %a1 : tensor<4x8xf32>
}

// -----

// Tests the sequence-parallel forms that do not fuse: a norm not gathered;
// gathered along another dim; gathered over another grid axis; scattered
// along the norm's own dim; a max, not a sum.
// CHECK-LABEL: func.func @scatter_not_fused
// CHECK-NOT: mp.reduce_scatter_add
// CHECK: return
shard.grid @tp(shape = 2x2)
func.func @scatter_not_fused(%p: tensor<4x8xf32>, %x: tensor<2x8xf32>, %xt: tensor<4x4xf32>, %g: tensor<8xf32>, %g4: tensor<4xf32>) -> (tensor<2x8xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %r1 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h1, %n1 = mp.add_rms_norm %x, %r1, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %r2 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h2, %n2 = mp.add_rms_norm %x, %r2, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a2 = shard.all_gather %n2 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x8xf32> -> tensor<2x16xf32>
  %r3 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h3, %n3 = mp.add_rms_norm %x, %r3, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a3 = shard.all_gather %n3 on @tp grid_axes = [1] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %r4 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
  %h4, %n4 = mp.add_rms_norm %xt, %r4, %g4 : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  %a4 = shard.all_gather %n4 on @tp grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
  %r5 = shard.reduce_scatter %p on @tp grid_axes = [0] reduction = max scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h5, %n5 = mp.add_rms_norm %x, %r5, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a5 = shard.all_gather %n5 on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  return %n1, %a2, %a3, %a4, %a5 : tensor<2x8xf32>, tensor<2x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests the memory plan of the sequence-parallel form: the slice's sum in
// the residual's bytes, the gathered norm in the partial sums'.
// CHECK-LABEL: func.func @scatter_in_place
// CHECK: mp.reduce_scatter_add_rms_norm %0, %all_slice, %arg1
// PLAN-LABEL: memory plan of @scatter_in_place
// PLAN: %sum = mp.reduce_scatter_add_rms_norm: in place of %all_slice
// PLAN-NEXT: %result = mp.reduce_scatter_add_rms_norm: in place of %0
shard.grid @tp(shape = 2)
func.func @scatter_in_place(%x: tensor<4x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %p = mp.neg %x : tensor<4x8xf32>
  %big = mp.exp %x : tensor<4x8xf32>
  %res = shard.all_slice %big on @tp grid_axes = [0] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %r = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h, %n = mp.add_rms_norm %res, %r, %s : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %a = shard.all_gather %n on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %m = mp.gelu %a : tensor<4x8xf32>
  %ms = shard.all_slice %m on @tp grid_axes = [0] slice_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h2 = mp.add %h, %ms : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %h2 : tensor<2x8xf32>
}

// -----

// Tests that an all-reduce whose residual is a reduce_scatter fusion's sum
// (this rank's slice, whatever the operands) stays unfused, in one run and
// in a second that finds the fused op already there.
// CHECK-LABEL: func.func @slice_as_residual
// CHECK: mp.reduce_scatter_add_rms_norm
// CHECK: shard.all_reduce
// TWICE-LABEL: func.func @slice_as_residual
// TWICE: mp.reduce_scatter_add_rms_norm
// TWICE: shard.all_reduce
shard.grid @tp(shape = 2)
func.func @slice_as_residual(%p: tensor<4x8xf32>, %x: tensor<2x8xf32>, %g: tensor<8xf32>, %q: tensor<2x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>) {
  %r = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
  %h, %n = mp.add_rms_norm %x, %r, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  %ng = shard.all_gather %n on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
  %r2 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<2x8xf32> -> tensor<2x8xf32>
  %h2, %n2 = mp.add_rms_norm %h, %r2, %g : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return %ng, %n2 : tensor<4x8xf32>, tensor<2x8xf32>
}
