// RUN: mp-opt %s --mp-raise --split-input-file | FileCheck %s

// Tests that matmul + bias with parameter weights becomes one linear.
// CHECK-LABEL: func.func @linear
// CHECK-DAG: %[[W:.*]] = mp.get_param @w
// CHECK-DAG: %[[B:.*]] = mp.get_param @b
// CHECK: %[[Y:.*]] = mp.linear %arg0, %[[W]], %[[B]] : (tensor<2x8x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: return %[[Y]]
mp.param @w : tensor<32x64xf32>
mp.param @b : tensor<64xf32>
func.func @linear(%x: tensor<2x8x32xf32>) -> tensor<2x8x64xf32> {
  %w = mp.get_param @w : tensor<32x64xf32>
  %b = mp.get_param @b : tensor<64xf32>
  %0 = mp.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %1 = mp.add %b, %0 : (tensor<64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  return %1 : tensor<2x8x64xf32>
}

// -----

// Tests that an einsum with a parameter weight that contracts some of the
// input's dims with the weight's leading (or trailing) dims becomes a
// linear ("bsd,df->bsf"; "...d,fd->...f" with transpose_weight, a bias
// added after it folded in; a parameter read transposed, as a tied head's,
// read the other way round), with the transposes that give the einsum's
// dim order (an output in another order, a contracted dim that is not the
// input's last) and a 3-D weight viewed 2-D by a reshape of its
// mp.get_param; einsums that are not a linear stay: a weight that is no
// parameter, a contracted ellipsis dim of size 1 broadcast against the
// weight's.
// CHECK-LABEL: func.func @linear_einsum
// CHECK: %[[W:.*]] = mp.get_param @w
// CHECK: %[[Y:.*]] = mp.linear %arg0, %[[W]] : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
// CHECK: %[[Z:.*]] = mp.linear %[[Y]], %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x8x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[O:.*]] = mp.linear %arg0, %[[W]]
// CHECK: mp.transpose %[[O]] [0, 2, 1] : tensor<2x8x64xf32> -> tensor<2x64x8xf32>
// CHECK: %[[H:.*]] = mp.get_param @h : tensor<32x2x4xf32>
// CHECK: %[[HV:.*]] = mp.reshape %[[H]] : tensor<32x2x4xf32> -> tensor<32x8xf32>
// CHECK: %[[Q:.*]] = mp.linear %arg0, %[[HV]] : (tensor<2x8x32xf32>, tensor<32x8xf32>) -> tensor<2x8x8xf32>
// CHECK: mp.reshape %[[Q]] : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
// CHECK: mp.einsum "bsd,df->bsf" %arg0, %arg1
// CHECK: mp.linear %arg0, %{{.*}} {transpose_weight} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
// CHECK: %[[ST:.*]] = mp.transpose %arg2 [0, 2, 1] : tensor<2x32x8xf32> -> tensor<2x8x32xf32>
// CHECK: %[[C:.*]] = mp.linear %[[ST]], %[[W]]
// CHECK: mp.transpose %[[C]] [0, 2, 1] : tensor<2x8x64xf32> -> tensor<2x64x8xf32>
// CHECK: mp.einsum "b...,...f->bf"
mp.param @w : tensor<32x64xf32>
mp.param @v : tensor<32x64xf32>
mp.param @b : tensor<32xf32>
mp.param @h : tensor<32x2x4xf32>
mp.param @e : tensor<64x32xf32>
func.func @linear_einsum(%x: tensor<2x8x32xf32>, %a: tensor<32x64xf32>, %s: tensor<2x32x8xf32>, %one: tensor<2x1xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x64xf32>, tensor<2x64x8xf32>, tensor<2x8x2x4xf32>, tensor<2x8x64xf32>, tensor<2x64x8xf32>, tensor<2x64xf32>) {
  %w = mp.get_param @w : tensor<32x64xf32>
  %y = mp.einsum "bsd,df->bsf" %x, %w : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %v = mp.get_param @v : tensor<32x64xf32>
  %b = mp.get_param @b : tensor<32xf32>
  %z0 = mp.einsum "...f,df->...d" %y, %v : (tensor<2x8x64xf32>, tensor<32x64xf32>) -> tensor<2x8x32xf32>
  %z = mp.add %z0, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %o = mp.einsum "bsd,df->bfs" %x, %w : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x64x8xf32>
  %h = mp.get_param @h : tensor<32x2x4xf32>
  %q = mp.einsum "bsd,dhk->bshk" %x, %h : (tensor<2x8x32xf32>, tensor<32x2x4xf32>) -> tensor<2x8x2x4xf32>
  %n = mp.einsum "bsd,df->bsf" %x, %a : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %e = mp.get_param @e : tensor<64x32xf32>
  %et = mp.transpose %e [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %t = mp.einsum "bsd,dv->bsv" %x, %et : (tensor<2x8x32xf32>, tensor<32x64xf32>) -> tensor<2x8x64xf32>
  %c = mp.einsum "bds,df->bfs" %s, %w : (tensor<2x32x8xf32>, tensor<32x64xf32>) -> tensor<2x64x8xf32>
  %k = mp.einsum "b...,...f->bf" %one, %w : (tensor<2x1xf32>, tensor<32x64xf32>) -> tensor<2x64xf32>
  return %z, %t, %o, %q, %n, %c, %k : tensor<2x8x32xf32>, tensor<2x8x64xf32>, tensor<2x64x8xf32>, tensor<2x8x2x4xf32>, tensor<2x8x64xf32>, tensor<2x64x8xf32>, tensor<2x64xf32>
}

// -----

// Tests the projections of a model written with [d, heads, head_dim]
// weights: "bsd,dhk->bhsk" is a linear against the weight viewed
// [d, heads*head_dim], its result unmerged and transposed to the heads'
// order; "bhsk,hkd->bsd" transposes its input to [b, s, h, k] and merges
// the heads before a linear against [heads*head_dim, d]; "bsd,hdk->bshk"
// (the contracted dim between the weight's kept dims: no one linear, and
// no experts' second layer after it, see @stacked_experts) stays an
// einsum; a weight written first ("fd,bsd->bsf") is a linear too.
// CHECK-LABEL: func.func @head_projections
// CHECK: %[[WQ:.*]] = mp.reshape %{{.*}} : tensor<32x4x8xf32> -> tensor<32x32xf32>
// CHECK: %[[Q:.*]] = mp.linear %arg0, %[[WQ]] : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[QH:.*]] = mp.reshape %[[Q]] : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: mp.transpose %[[QH]] [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[AT:.*]] = mp.transpose %arg1 [0, 2, 1, 3] : tensor<2x4x8x8xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[AM:.*]] = mp.reshape %[[AT]] : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
// CHECK: %[[WO:.*]] = mp.reshape %{{.*}} : tensor<4x8x32xf32> -> tensor<32x32xf32>
// CHECK: mp.linear %[[AM]], %[[WO]] : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
// CHECK: mp.einsum "bsd,hdk->bshk"
// CHECK: mp.linear %arg0, %{{.*}} {transpose_weight} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
mp.param @wq : tensor<32x4x8xf32>
mp.param @wo : tensor<4x8x32xf32>
mp.param @wm : tensor<4x32x8xf32>
mp.param @wl : tensor<32x32xf32>
func.func @head_projections(%x: tensor<2x8x32xf32>, %a: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x8x32xf32>, tensor<2x8x4x8xf32>, tensor<2x8x32xf32>) {
  %wl = mp.get_param @wl : tensor<32x32xf32>
  %wq = mp.get_param @wq : tensor<32x4x8xf32>
  %q = mp.einsum "bsd,dhk->bhsk" %x, %wq : (tensor<2x8x32xf32>, tensor<32x4x8xf32>) -> tensor<2x4x8x8xf32>
  %wo = mp.get_param @wo : tensor<4x8x32xf32>
  %o = mp.einsum "bhsk,hkd->bsd" %a, %wo : (tensor<2x4x8x8xf32>, tensor<4x8x32xf32>) -> tensor<2x8x32xf32>
  %wm = mp.get_param @wm : tensor<4x32x8xf32>
  %m = mp.einsum "bsd,hdk->bshk" %x, %wm : (tensor<2x8x32xf32>, tensor<4x32x8xf32>) -> tensor<2x8x4x8xf32>
  %f = mp.einsum "fd,bsd->bsf" %wl, %x : (tensor<32x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %q, %o, %m, %f : tensor<2x4x8x8xf32>, tensor<2x8x32xf32>, tensor<2x8x4x8xf32>, tensor<2x8x32xf32>
}

// -----

// Tests experts' weights stacked in one parameter [experts, ...], applied
// to every token by einsum: "bsd,edf->bsef" (the contracted dim between
// the experts and the features: no linear) and "bsef,efd->bsed" (the
// experts a batch dim of both) become a linear per expert against its part
// of the parameter (the parameter itself gone: its parts hold its data),
// each on the input's block of that expert where the input has one, the
// results concatenated along the experts. A stacked parameter also read
// another way stays stacked (@shared, whose second layer is unstacked);
// "bsd,edf->bsef" where d leads ("bsd,def->bsef") is one linear already;
// an ellipsis is unstacked too (its dims relabelled); an einsum of the
// parameter with itself is no expert's.
// CHECK-LABEL: mp.param @"w1[0:1]" : tensor<1x8x16xf32> {part = array<i64: 0, 0, 2>, part_of = "w1"}
// CHECK-NEXT:  mp.param @"w1[1:2]" : tensor<1x8x16xf32> {part = array<i64: 0, 1, 2>, part_of = "w1"}
// CHECK-NOT:   mp.param @w1 :
// CHECK:       mp.param @"w2[1:2]" : tensor<1x16x8xf32> {part = array<i64: 0, 1, 2>, part_of = "w2"}
// CHECK:       mp.param @stacked : tensor<2x8x16xf32>
// CHECK-LABEL: func.func @stacked_experts
// CHECK:       %[[W0:.*]] = mp.get_param @"w1[0:1]"
// CHECK:       %[[V0:.*]] = mp.reshape %[[W0]] : tensor<1x8x16xf32> -> tensor<8x16xf32>
// CHECK:       mp.linear %arg0, %[[V0]] : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK:       %[[H:.*]] = mp.concat {{.*}} {axis = 2 : i64} : (tensor<2x4x1x16xf32>, tensor<2x4x1x16xf32>) -> tensor<2x4x2x16xf32>
// CHECK:       %[[H1:.*]] = mp.slice %[[H]] {limits = array<i64: 2, 4, 2, 16>, starts = array<i64: 0, 0, 1, 0>
// CHECK:       %[[R1:.*]] = mp.reshape %[[H1]] : tensor<2x4x1x16xf32> -> tensor<2x4x16xf32>
// CHECK:       mp.linear %[[R1]], %{{.*}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK:       mp.concat {{.*}} {axis = 2 : i64} : (tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>) -> tensor<2x4x2x8xf32>
// CHECK-LABEL: func.func @shared
// CHECK:       mp.einsum "bsd,edf->bsef"
// CHECK-NOT:   mp.einsum
// CHECK:       mp.get_param @"second[1:2]"
// CHECK-LABEL: func.func @ellipsis
// CHECK-COUNT-2: mp.linear %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-COUNT-2: mp.linear %{{.*}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-LABEL: func.func @itself
// CHECK:       mp.get_param @gram : tensor<2x8x16xf32>
// CHECK:       mp.matmul
// CHECK-LABEL: func.func @leading
// CHECK:       mp.linear %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
mp.param @w1 : tensor<2x8x16xf32>
mp.param @w2 : tensor<2x16x8xf32>
mp.param @stacked : tensor<2x8x16xf32>
mp.param @second : tensor<2x16x8xf32>
mp.param @lead : tensor<8x2x16xf32>
mp.param @e1 : tensor<2x8x16xf32>
mp.param @e2 : tensor<2x16x8xf32>
mp.param @gram : tensor<2x8x16xf32>
func.func @stacked_experts(%x: tensor<2x4x8xf32>) -> tensor<2x4x2x8xf32> {
  %w1 = mp.get_param @w1 : tensor<2x8x16xf32>
  %h = mp.einsum "bsd,edf->bsef" %x, %w1 : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x2x16xf32>
  %w2 = mp.get_param @w2 : tensor<2x16x8xf32>
  %y = mp.einsum "bsef,efd->bsed" %h, %w2 : (tensor<2x4x2x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x2x8xf32>
  return %y : tensor<2x4x2x8xf32>
}
func.func @shared(%x: tensor<2x4x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x8x16xf32>) {
  %w = mp.get_param @stacked : tensor<2x8x16xf32>
  %h = mp.einsum "bsd,edf->bsef" %x, %w : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x2x16xf32>
  %w2 = mp.get_param @second : tensor<2x16x8xf32>
  %y = mp.einsum "bsef,efd->bsed" %h, %w2 : (tensor<2x4x2x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x2x8xf32>
  return %y, %w : tensor<2x4x2x8xf32>, tensor<2x8x16xf32>
}
func.func @ellipsis(%x: tensor<2x4x8xf32>) -> tensor<2x4x2x8xf32> {
  %w1 = mp.get_param @e1 : tensor<2x8x16xf32>
  %h = mp.einsum "...d,edf->...ef" %x, %w1 : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x2x16xf32>
  %w2 = mp.get_param @e2 : tensor<2x16x8xf32>
  %y = mp.einsum "...ef,efd->...ed" %h, %w2 : (tensor<2x4x2x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x2x8xf32>
  return %y : tensor<2x4x2x8xf32>
}
func.func @itself() -> tensor<2x16x16xf32> {
  %w = mp.get_param @gram : tensor<2x8x16xf32>
  %g = mp.einsum "edf,edg->efg" %w, %w : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  return %g : tensor<2x16x16xf32>
}
func.func @leading(%x: tensor<2x4x8xf32>) -> tensor<2x4x2x16xf32> {
  %w = mp.get_param @lead : tensor<8x2x16xf32>
  %h = mp.einsum "bsd,def->bsef" %x, %w : (tensor<2x4x8xf32>, tensor<8x2x16xf32>) -> tensor<2x4x2x16xf32>
  return %h : tensor<2x4x2x16xf32>
}

// -----

// Tests that attention written as einsums becomes mp.attention: the scores
// "bhqk,bhtk->bhqt" a matmul with the keys transposed, the mixing
// "bhqt,bhtk->bhqk" a matmul, and so with the operands written the other
// way round ("bhtk,bhqk->bhqt", keys first); an einsum of two activations
// that is no matrix product (two contracted labels) stays.
// CHECK-LABEL: func.func @einsum_attention
// CHECK: mp.attention %arg0, %arg1, %arg2 {scale = 0.353553385 : f32}
// CHECK: mp.einsum "bhqk,bhqk->bh"
// CHECK: mp.attention %arg0, %arg1, %arg2 {scale = 0.353553385 : f32}
// CHECK-NOT: mp.matmul
func.func @einsum_attention(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4xf32>, tensor<2x4x8x8xf32>) {
  %scale = mp.constant dense<0.353553385> : tensor<f32>
  %s = mp.einsum "bhqk,bhtk->bhqt" %q, %k : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %scaled = mp.mul %s, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = mp.softmax %scaled {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = mp.einsum "bhqt,bhtk->bhqk" %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %d = mp.einsum "bhqk,bhqk->bh" %q, %k : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4xf32>
  %s2 = mp.einsum "bhtk,bhqk->bhqt" %k, %q : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %scaled2 = mp.mul %s2, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p2 = mp.softmax %scaled2 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o2 = mp.einsum "bhtk,bhqt->bhqk" %v, %p2 : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %o, %d, %o2 : tensor<2x4x8x8xf32>, tensor<2x4xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests a pointwise Conv1d as the importer writes it (a matmul against its
// [out, in, 1] weight viewed [out, in] and transposed): a linear with
// transpose_weight reading the view, its bias folded in.
// CHECK-LABEL: func.func @pointwise_conv
// CHECK: %[[V:.*]] = mp.reshape %{{.*}} : tensor<64x16x1xf32> -> tensor<64x16xf32>
// CHECK: mp.linear %arg0, %[[V]], %{{.*}} {transpose_weight} : (tensor<2x8x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK-NOT: mp.matmul
mp.param @conv.weight : tensor<64x16x1xf32>
mp.param @conv.bias : tensor<64xf32>
func.func @pointwise_conv(%x: tensor<2x8x16xf32>) -> tensor<2x8x64xf32> {
  %w = mp.get_param @conv.weight : tensor<64x16x1xf32>
  %v = mp.reshape %w : tensor<64x16x1xf32> -> tensor<64x16xf32>
  %t = mp.transpose %v [1, 0] : tensor<64x16xf32> -> tensor<16x64xf32>
  %y = mp.matmul %x, %t : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %b = mp.get_param @conv.bias : tensor<64xf32>
  %z = mp.add %y, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %z : tensor<2x8x64xf32>
}

// -----

// Tests that Gemm's transB form (matmul with a transposed parameter) becomes
// a linear with transpose_weight, and that a matmul of two activations stays.
// CHECK-LABEL: func.func @linear_transposed
// CHECK: mp.linear %arg0, %{{.*}} {transpose_weight} : (tensor<4x32xf32>, tensor<16x32xf32>) -> tensor<4x16xf32>
// CHECK-NOT: mp.transpose
// CHECK: mp.matmul %arg0, %arg1
mp.param @w : tensor<16x32xf32>
func.func @linear_transposed(%x: tensor<4x32xf32>, %y: tensor<32x4xf32>) -> (tensor<4x16xf32>, tensor<4x4xf32>) {
  %w = mp.get_param @w : tensor<16x32xf32>
  %t = mp.transpose %w [1, 0] : tensor<16x32xf32> -> tensor<32x16xf32>
  %0 = mp.matmul %x, %t : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  %1 = mp.matmul %x, %y : (tensor<4x32xf32>, tensor<32x4xf32>) -> tensor<4x4xf32>
  return %0, %1 : tensor<4x16xf32>, tensor<4x4xf32>
}

// -----

// Tests that gather on a [V, H] parameter becomes an embedding.
// CHECK-LABEL: func.func @embedding
// CHECK: mp.embedding %{{.*}}, %arg0 : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
mp.param @wte : tensor<64x32xf32>
func.func @embedding(%ids: tensor<2x8xi64>) -> tensor<2x8x32xf32> {
  %w = mp.get_param @wte : tensor<64x32xf32>
  %0 = mp.gather %w, %ids : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// -----

// Tests the decomposed layer norm (mean/sub/pow/mean/add/sqrt/div) with its
// scale and bias parameters.
// CHECK-LABEL: func.func @layer_norm
// CHECK-DAG: %[[G:.*]] = mp.get_param @g
// CHECK-DAG: %[[B:.*]] = mp.get_param @b
// CHECK: %[[Y:.*]] = mp.layer_norm %arg0, %[[G]], %[[B]] : (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
mp.param @g : tensor<32xf32>
mp.param @b : tensor<32xf32>
func.func @layer_norm(%x: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %g = mp.get_param @g : tensor<32xf32>
  %b = mp.get_param @b : tensor<32xf32>
  %m = mp.reduce mean, %x {axes = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %d = mp.sub %x, %m : (tensor<2x8x32xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %two = mp.constant dense<2.0> : tensor<f32>
  %sq = mp.pow %d, %two : (tensor<2x8x32xf32>, tensor<f32>) -> tensor<2x8x32xf32>
  %v = mp.reduce mean, %sq {axes = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %eps = mp.constant dense<1.0e-5> : tensor<f32>
  %ve = mp.add %v, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = mp.sqrt %ve : tensor<2x8x1xf32>
  %n = mp.div %d, %s : (tensor<2x8x32xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %y = mp.mul %n, %g : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %z = mp.add %y, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %z : tensor<2x8x32xf32>
}

// -----

// Tests that a mean over a non-last axis is not taken for a layer norm.
// CHECK-LABEL: func.func @not_layer_norm
// CHECK-NOT: mp.layer_norm
func.func @not_layer_norm(%x: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %m = mp.reduce mean, %x {axes = array<i64: 1>} : tensor<2x8x32xf32> -> tensor<2x1x32xf32>
  %d = mp.sub %x, %m : (tensor<2x8x32xf32>, tensor<2x1x32xf32>) -> tensor<2x8x32xf32>
  %two = mp.constant dense<2.0> : tensor<f32>
  %sq = mp.pow %d, %two : (tensor<2x8x32xf32>, tensor<f32>) -> tensor<2x8x32xf32>
  %v = mp.reduce mean, %sq {axes = array<i64: 1>} : tensor<2x8x32xf32> -> tensor<2x1x32xf32>
  %eps = mp.constant dense<1.0e-5> : tensor<f32>
  %ve = mp.add %v, %eps : (tensor<2x1x32xf32>, tensor<f32>) -> tensor<2x1x32xf32>
  %s = mp.sqrt %ve : tensor<2x1x32xf32>
  %n = mp.div %d, %s : (tensor<2x8x32xf32>, tensor<2x1x32xf32>) -> tensor<2x8x32xf32>
  return %n : tensor<2x8x32xf32>
}

// -----

// Tests the Llama RMS norm: x * (1 / sqrt(mean(x^2) + eps)) * w.
// CHECK-LABEL: func.func @rms_norm
// CHECK: %[[W:.*]] = mp.get_param @w
// CHECK: %[[Y:.*]] = mp.rms_norm %arg0, %[[W]] {epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[Y]]
mp.param @w : tensor<32xf32>
func.func @rms_norm(%x: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %w = mp.get_param @w : tensor<32xf32>
  %two = mp.constant dense<2.0> : tensor<f32>
  %sq = mp.pow %x, %two : (tensor<2x8x32xf32>, tensor<f32>) -> tensor<2x8x32xf32>
  %v = mp.reduce mean, %sq {axes = array<i64: 2>} : tensor<2x8x32xf32> -> tensor<2x8x1xf32>
  %eps = mp.constant dense<1.0e-5> : tensor<f32>
  %ve = mp.add %v, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = mp.sqrt %ve : tensor<2x8x1xf32>
  %one = mp.constant dense<1.0> : tensor<f32>
  %r = mp.div %one, %s : (tensor<f32>, tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %n = mp.mul %x, %r : (tensor<2x8x32xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %y = mp.mul %w, %n : (tensor<32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Tests the rsqrt, reciprocal and division spellings of the RMS norm.
// CHECK-LABEL: func.func @rms_norm_forms
// CHECK-COUNT-3: mp.rms_norm %arg0, %{{.*}} {epsilon = 9.99999974E-6 : f32}
// CHECK-NOT: mp.sqrt
func.func @rms_norm_forms(%x: tensor<4x32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %sq = mp.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %v = mp.reduce mean, %sq {axes = array<i64: 1>} : tensor<4x32xf32> -> tensor<4x1xf32>
  %eps = mp.constant dense<1.0e-5> : tensor<f32>
  %ve = mp.add %eps, %v : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %rs = mp.rsqrt %ve : tensor<4x1xf32>
  %a = mp.mul %rs, %x : (tensor<4x1xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %s = mp.sqrt %ve : tensor<4x1xf32>
  %r = mp.reciprocal %s : tensor<4x1xf32>
  %b = mp.mul %x, %r : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  %c = mp.div %x, %s : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
  return %a, %b, %c : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// Tests both associations of the exact (erf) GELU that exporters emit.
// CHECK-LABEL: func.func @gelu_erf
// CHECK: %[[A:.*]] = mp.gelu %arg0 : tensor<2x128xf32>
// CHECK: %[[B:.*]] = mp.gelu %arg0 : tensor<2x128xf32>
// CHECK: return %[[A]], %[[B]]
func.func @gelu_erf(%x: tensor<2x128xf32>) -> (tensor<2x128xf32>, tensor<2x128xf32>) {
  %half = mp.constant dense<0.5> : tensor<f32>
  %sqrt2 = mp.constant dense<1.41421354> : tensor<f32>
  %one = mp.constant dense<1.0> : tensor<f32>
  %0 = mp.mul %x, %half : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %1 = mp.div %x, %sqrt2 : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %2 = mp.erf %1 : tensor<2x128xf32>
  %3 = mp.add %2, %one : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %4 = mp.mul %0, %3 : (tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %inv = mp.constant dense<0.707106769> : tensor<f32>
  %5 = mp.mul %x, %inv : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %6 = mp.erf %5 : tensor<2x128xf32>
  %7 = mp.add %one, %6 : (tensor<f32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %8 = mp.mul %7, %half : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %9 = mp.mul %x, %8 : (tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  return %4, %9 : tensor<2x128xf32>, tensor<2x128xf32>
}

// -----

// Tests the tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: %[[Y:.*]] = mp.gelu %arg0 approximate = tanh : tensor<2x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x128xf32>) -> tensor<2x128xf32> {
  %half = mp.constant dense<0.5> : tensor<f32>
  %three = mp.constant dense<3.0> : tensor<f32>
  %c = mp.constant dense<0.044715> : tensor<f32>
  %k = mp.constant dense<0.797884583> : tensor<f32>
  %one = mp.constant dense<1.0> : tensor<f32>
  %0 = mp.mul %half, %x : (tensor<f32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %1 = mp.pow %x, %three : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %2 = mp.mul %c, %1 : (tensor<f32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %3 = mp.add %x, %2 : (tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %4 = mp.mul %k, %3 : (tensor<f32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %5 = mp.tanh %4 : tensor<2x128xf32>
  %6 = mp.add %one, %5 : (tensor<f32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  %7 = mp.mul %0, %6 : (tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  return %7 : tensor<2x128xf32>
}

// -----

// Tests that a wrong constant (0.6 instead of 0.5) is not taken for a GELU.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: mp.gelu
func.func @not_gelu(%x: tensor<2x128xf32>) -> tensor<2x128xf32> {
  %half = mp.constant dense<0.6> : tensor<f32>
  %sqrt2 = mp.constant dense<1.41421354> : tensor<f32>
  %one = mp.constant dense<1.0> : tensor<f32>
  %0 = mp.mul %x, %half : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %1 = mp.div %x, %sqrt2 : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %2 = mp.erf %1 : tensor<2x128xf32>
  %3 = mp.add %2, %one : (tensor<2x128xf32>, tensor<f32>) -> tensor<2x128xf32>
  %4 = mp.mul %0, %3 : (tensor<2x128xf32>, tensor<2x128xf32>) -> tensor<2x128xf32>
  return %4 : tensor<2x128xf32>
}

// -----

// Tests x * sigmoid(x) -> silu(x).
// CHECK-LABEL: func.func @silu
// CHECK: %[[Y:.*]] = mp.silu %arg0 : tensor<2x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %0 = mp.sigmoid %x : tensor<2x64xf32>
  %1 = mp.mul %0, %x : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  return %1 : tensor<2x64xf32>
}

// -----

// Tests causal attention in the GPT-2 form: q·kᵀ / sqrt(d), where(tril, ·,
// -1e9), softmax, ·v, with kᵀ taken straight from [B, S, H, D].
// CHECK-LABEL: func.func @attention_causal_where
// CHECK: %[[K:.*]] = mp.transpose %arg1 [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
// CHECK: mp.attention %arg0, %[[K]], %arg2 {causal, scale = 0.353553385 : f32} : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
// CHECK-NOT: mp.softmax
func.func @attention_causal_where(%q: tensor<2x3x4x8xf32>, %k: tensor<2x4x3x8xf32>, %v: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  %kt = mp.transpose %k [0, 2, 3, 1] : tensor<2x4x3x8xf32> -> tensor<2x3x8x4xf32>
  %s = mp.matmul %q, %kt : (tensor<2x3x4x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x4x4xf32>
  %c = mp.constant dense<2.82842708> : tensor<f32>
  %d = mp.div %s, %c : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %m = mp.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %n = mp.constant dense<-1.0e9> : tensor<f32>
  %w = mp.where %m, %d, %n : (tensor<4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %p = mp.softmax %w {axis = 3 : i64} : tensor<2x3x4x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %o : tensor<2x3x4x8xf32>
}

// -----

// Tests HF's GPT-2 with a padding mask after a cache: the causal positions
// (queries after 2 cached keys) filled by `where`, then the padding mask,
// computed from the attention_mask input by a multiply, added, first as
// scores + mask and then as mask + scores. Both raise: the mask is told
// from the scores by the matmul the scores come from, not by the op that
// made it.
// CHECK-LABEL: func.func @attention_where_then_padding
// CHECK: %[[MASK:.*]] = mp.mul
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[MASK]] {causal, scale = 0.353553385 : f32}
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[MASK]] {causal, scale = 0.353553385 : f32}
// CHECK-NOT: mp.softmax
func.func @attention_where_then_padding(%q: tensor<2x3x2x8xf32>, %kt: tensor<2x3x8x4xf32>, %v: tensor<2x3x4x8xf32>, %am: tensor<2x1x1x4xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) {
  %one = mp.constant dense<1.0> : tensor<f32>
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %hidden = mp.sub %one, %am : (tensor<f32>, tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
  %mask = mp.mul %hidden, %min : (tensor<2x1x1x4xf32>, tensor<f32>) -> tensor<2x1x1x4xf32>
  %s = mp.matmul %q, %kt : (tensor<2x3x2x8xf32>, tensor<2x3x8x4xf32>) -> tensor<2x3x2x4xf32>
  %c = mp.constant dense<2.82842708> : tensor<f32>
  %d = mp.div %s, %c : (tensor<2x3x2x4xf32>, tensor<f32>) -> tensor<2x3x2x4xf32>
  %m = mp.constant dense<[[[[true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x2x4xi1>
  %w = mp.where %m, %d, %min : (tensor<1x1x2x4xi1>, tensor<2x3x2x4xf32>, tensor<f32>) -> tensor<2x3x2x4xf32>
  %a = mp.add %w, %mask : (tensor<2x3x2x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x3x2x4xf32>
  %p = mp.softmax %a {axis = 3 : i64} : tensor<2x3x2x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x3x2x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x2x8xf32>
  %a2 = mp.add %mask, %w : (tensor<2x1x1x4xf32>, tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32>
  %p2 = mp.softmax %a2 {axis = 3 : i64} : tensor<2x3x2x4xf32>
  %o2 = mp.matmul %p2, %v : (tensor<2x3x2x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x2x8xf32>
  return %o, %o2 : tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>
}

// -----

// Tests the Llama form: an additive causal mask (0 / -inf) and the
// grouped-query head repeat (reshape, expand, reshape) folded away.
// CHECK-LABEL: func.func @attention_gqa_additive
// CHECK: mp.attention %arg0, %arg1, %arg2 {causal, scale = 0.353553385 : f32} : (tensor<1x4x2x8xf32>, tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>) -> tensor<1x4x2x8xf32>
func.func @attention_gqa_additive(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x2x8xf32>, %v: tensor<1x2x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %k1 = mp.reshape %k : tensor<1x2x2x8xf32> -> tensor<1x2x1x2x8xf32>
  %k2 = mp.expand %k1 : tensor<1x2x1x2x8xf32> -> tensor<1x2x2x2x8xf32>
  %k3 = mp.reshape %k2 : tensor<1x2x2x2x8xf32> -> tensor<1x4x2x8xf32>
  %v1 = mp.reshape %v : tensor<1x2x2x8xf32> -> tensor<1x2x1x2x8xf32>
  %v2 = mp.expand %v1 : tensor<1x2x1x2x8xf32> -> tensor<1x2x2x2x8xf32>
  %v3 = mp.reshape %v2 : tensor<1x2x2x2x8xf32> -> tensor<1x4x2x8xf32>
  %kt = mp.transpose %k3 [0, 1, 3, 2] : tensor<1x4x2x8xf32> -> tensor<1x4x8x2xf32>
  %s = mp.matmul %q, %kt : (tensor<1x4x2x8xf32>, tensor<1x4x8x2xf32>) -> tensor<1x4x2x2xf32>
  %c = mp.constant dense<0.353553385> : tensor<f32>
  %d = mp.mul %s, %c : (tensor<1x4x2x2xf32>, tensor<f32>) -> tensor<1x4x2x2xf32>
  %m = mp.constant dense<[[0.0, 0xFF800000], [0.0, 0.0]]> : tensor<2x2xf32>
  %a = mp.add %d, %m : (tensor<1x4x2x2xf32>, tensor<2x2xf32>) -> tensor<1x4x2x2xf32>
  %p = mp.softmax %a {axis = 3 : i64} : tensor<1x4x2x2xf32>
  %o = mp.matmul %p, %v3 : (tensor<1x4x2x2xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return %o : tensor<1x4x2x8xf32>
}

// -----

// Tests bidirectional attention with an additive padding mask kept as an
// operand, and no scaling.
// CHECK-LABEL: func.func @attention_masked
// CHECK: %[[K:.*]] = mp.transpose %{{.*}} [0, 1, 3, 2]
// CHECK: mp.attention %arg0, %[[K]], %arg2, %arg3 {scale = 1.000000e+00 : f32}
func.func @attention_masked(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x1x1x4xf32>) -> tensor<2x2x4x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %a = mp.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p = mp.softmax %a {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests ALiBi as BLOOM exports it: a per-head bias added to the scaled
// scores, then a causal masked_fill. The causal pattern becomes the
// attribute and the bias the mask operand, unscaled (added after the scale).
// CHECK-LABEL: func.func @alibi_causal
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %arg3 {causal, scale = 5.000000e-01 : f32} : (tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x2x4xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x2x4xf32>
func.func @alibi_causal(%q: tensor<1x2x2x4xf32>, %kt: tensor<1x2x4x2xf32>, %v: tensor<1x2x2x4xf32>, %alibi: tensor<1x2x1x2xf32>) -> tensor<1x2x2x4xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x2x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x2x2xf32>
  %c = mp.constant dense<2.0> : tensor<f32>
  %d = mp.div %s, %c : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %b = mp.add %d, %alibi : (tensor<1x2x2x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x2x2xf32>
  %m = mp.constant dense<[[false, true], [false, false]]> : tensor<2x2xi1>
  %n = mp.constant dense<-3.4e38> : tensor<f32>
  %w = mp.where %m, %n, %b : (tensor<2x2xi1>, tensor<f32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %p = mp.softmax %w {axis = 3 : i64} : tensor<1x2x2x2xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  return %o : tensor<1x2x2x4xf32>
}

// -----

// Tests that a mask computed from a parameter (T5's learned relative
// position bias, a table lookup) leaves the attention decomposed: mp.attention has no
// derivative for its mask, the decomposed ops have.
// CHECK-LABEL: func.func @learned_bias
// CHECK-NOT: mp.attention
// CHECK: mp.softmax
mp.param @rel : tensor<1x2x2x2xf32> {file = "x.onnx"}
func.func @learned_bias(%q: tensor<1x2x2x4xf32>, %kt: tensor<1x2x4x2xf32>, %v: tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32> {
  %table = mp.get_param @rel : tensor<1x2x2x2xf32>
  %two = mp.constant dense<2.0> : tensor<f32>
  %bias = mp.mul %table, %two : (tensor<1x2x2x2xf32>, tensor<f32>) -> tensor<1x2x2x2xf32>
  %s = mp.matmul %q, %kt : (tensor<1x2x2x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x2x2xf32>
  %b = mp.add %s, %bias : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %p = mp.softmax %b {axis = 3 : i64} : tensor<1x2x2x2xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  return %o : tensor<1x2x2x4xf32>
}

// -----

// Tests that a stored mask (an initializer read as it is, through shape ops:
// a buffer the exporter kept) is raised as attention's mask operand.
// CHECK-LABEL: func.func @stored_mask
// CHECK: mp.attention
mp.param @stored : tensor<2x2xf32> {file = "x.onnx"}
func.func @stored_mask(%q: tensor<1x2x2x4xf32>, %kt: tensor<1x2x4x2xf32>, %v: tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32> {
  %m = mp.get_param @stored : tensor<2x2xf32>
  %r = mp.reshape %m : tensor<2x2xf32> -> tensor<1x1x2x2xf32>
  %s = mp.matmul %q, %kt : (tensor<1x2x2x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x2x2xf32>
  %b = mp.add %s, %r : (tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
  %p = mp.softmax %b {axis = 3 : i64} : tensor<1x2x2x2xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  return %o : tensor<1x2x2x4xf32>
}

// -----

// Tests that a where-mask that is not causal (keys after the query allowed
// here) is not taken for causality: attention gets it as a mask operand.
// CHECK-LABEL: func.func @not_causal_where
// CHECK-NOT: causal
// CHECK: %[[ADD:.*]] = mp.where %{{.*}} : (tensor<2x2xi1>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[ADD]] {scale = 1.000000e+00 : f32}
func.func @not_causal_where(%q: tensor<1x1x2x8xf32>, %kt: tensor<1x1x8x2xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x1x2x8xf32>, tensor<1x1x8x2xf32>) -> tensor<1x1x2x2xf32>
  %m = mp.constant dense<[[true, true], [false, true]]> : tensor<2x2xi1>
  %n = mp.constant dense<-1.0e9> : tensor<f32>
  %w = mp.where %m, %s, %n : (tensor<2x2xi1>, tensor<1x1x2x2xf32>, tensor<f32>) -> tensor<1x1x2x2xf32>
  %p = mp.softmax %w {axis = 3 : i64} : tensor<1x1x2x2xf32>
  %o = mp.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// Tests that layer indices come from ONNX node names and parameter names,
// and that ops outside the blocks get none.
// CHECK-LABEL: func.func @layers
// CHECK: mp.linear {{.*}}mp.layer = 0 : i64
// CHECK: mp.relu {{.*}}mp.layer = 3 : i64
// CHECK: mp.relu {{.*}}mp.layer = 12 : i64
// CHECK: mp.relu %{{[0-9]+}} : tensor<2x32xf32>
mp.param @model.layers.0.mlp.up_proj.weight : tensor<32x32xf32>
func.func @layers(%x: tensor<2x32xf32>) -> tensor<2x32xf32> {
  %w = mp.get_param @model.layers.0.mlp.up_proj.weight : tensor<32x32xf32>
  %0 = mp.matmul %x, %w : (tensor<2x32xf32>, tensor<32x32xf32>) -> tensor<2x32xf32> loc("MatMul_7")
  %1 = mp.relu %0 : tensor<2x32xf32> loc("/h.3/mlp/Relu")
  %2 = mp.relu %1 : tensor<2x32xf32> loc("/encoder/layer.12/output/Relu")
  %3 = mp.relu %2 : tensor<2x32xf32> loc("/ln_f/Relu")
  return %3 : tensor<2x32xf32>
}

// -----

// Tests that a decomposed attention whose matmuls broadcast queries shared
// across the batch (q [1, H, L, D] against k, v [B, H, S, D]) stays
// decomposed: mp.attention does not broadcast batches.
// CHECK-LABEL: func.func @shared_queries
// CHECK-NOT: mp.attention
// CHECK: mp.softmax
func.func @shared_queries(%q: tensor<1x2x4x8xf32>, %kt: tensor<3x2x8x6xf32>, %v: tensor<3x2x6x8xf32>) -> tensor<3x2x4x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<3x2x8x6xf32>) -> tensor<3x2x4x6xf32>
  %p = mp.softmax %s {axis = -1 : i64} : tensor<3x2x4x6xf32>
  %o = mp.matmul %p, %v : (tensor<3x2x4x6xf32>, tensor<3x2x6x8xf32>) -> tensor<3x2x4x8xf32>
  return %o : tensor<3x2x4x8xf32>
}

// -----

// Tests the tanh GELU in other spellings: x^3 as x*x*x with the scale
// distributed (HF's gelu_new after the exporter), and GPT-NeoX's
// sqrt(2/pi) * x * (1 + 0.044715 * x * x); and the erf GELU with x / sqrt 2
// written as x * (1/sqrt 2).
// CHECK-LABEL: func.func @gelu_spellings
// CHECK: %[[A:.*]] = mp.gelu %arg0 approximate = tanh : tensor<4xf32>
// CHECK: %[[B:.*]] = mp.gelu %arg0 approximate = tanh : tensor<4xf32>
// CHECK: %[[C:.*]] = mp.gelu %arg0 : tensor<4xf32>
// CHECK: return %[[A]], %[[B]], %[[C]]
func.func @gelu_spellings(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %half = mp.constant dense<0.5> : tensor<f32>
  %one = mp.constant dense<1.0> : tensor<f32>
  %c = mp.constant dense<0.044715> : tensor<f32>
  %k = mp.constant dense<0.797884583> : tensor<f32>
  %kc = mp.constant dense<0.0356774069> : tensor<f32>
  %r2 = mp.constant dense<0.707106769> : tensor<f32>
  // 0.5 * x * (1 + tanh(k * x + (k * 0.044715) * (x * x * x)))
  %x2 = mp.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %x3 = mp.mul %x2, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t1 = mp.mul %x, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %t3 = mp.mul %x3, %kc : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %arg = mp.add %t1, %t3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %th = mp.tanh %arg : tensor<4xf32>
  %g = mp.add %one, %th : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %hx = mp.mul %half, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %a = mp.mul %hx, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // 0.5 * x * (1 + tanh(k * x * (1 + 0.044715 * x * x)))
  %y2 = mp.mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %cy2 = mp.mul %c, %y2 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %inner = mp.add %one, %cy2 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %kx = mp.mul %k, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %arg2 = mp.mul %kx, %inner : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %th2 = mp.tanh %arg2 : tensor<4xf32>
  %g2 = mp.add %th2, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %xg = mp.mul %x, %g2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = mp.mul %xg, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  // x * 0.5 * (1 + erf(x * (1 / sqrt 2)))
  %e = mp.mul %x, %r2 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %erf = mp.erf %e : tensor<4xf32>
  %g3 = mp.add %erf, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %xh = mp.mul %x, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %cc = mp.mul %xh, %g3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a, %b, %cc : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests GPT-NeoX's masking: scores scaled first, then masked_fill(mask,
// -inf) (where with the masked positions as its condition and the fill as
// its first value).
// CHECK-LABEL: func.func @attention_masked_fill
// CHECK: mp.attention %arg0, %{{.*}}, %arg2 {causal, scale = 0.353553385 : f32}
// CHECK-NOT: mp.softmax
func.func @attention_masked_fill(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x3xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %c = mp.constant dense<0.353553385> : tensor<f32>
  %d = mp.mul %s, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %m = mp.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %n = mp.constant dense<0xFF800000> : tensor<f32>
  %w = mp.where %m, %n, %d : (tensor<3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = mp.softmax %w {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Tests an additive (padding) mask added before the scaling: attention adds
// its mask after scaling, so the mask is scaled with the scores.
// CHECK-LABEL: func.func @attention_mask_before_scale
// CHECK: %[[S:.*]] = mp.constant dense<1.250000e-01> : tensor<f32>
// CHECK: %[[M:.*]] = mp.mul %arg3, %[[S]]
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[M]] {scale = 1.250000e-01 : f32}
func.func @attention_mask_before_scale(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x3xf32>, %v: tensor<1x2x3x8xf32>, %mask: tensor<1x1x1x3xf32>) -> tensor<1x2x3x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %a = mp.add %s, %mask : (tensor<1x2x3x3xf32>, tensor<1x1x1x3xf32>) -> tensor<1x2x3x3xf32>
  %c = mp.constant dense<8.0> : tensor<f32>
  %d = mp.div %a, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %p = mp.softmax %d {axis = 3 : i64} : tensor<1x2x3x3xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Tests a boolean mask that is not causal (a sliding window of 2 here) by
// masked_fill: attention takes it as an additive mask operand, where(m,
// -inf, 0); and a runtime boolean mask applied by where(allowed, s, -inf).
// CHECK-LABEL: func.func @attention_window_mask
// CHECK-DAG: %[[M:.*]] = mp.constant dense<{{\[\[}}false, true, true], [false, false, true], [true, false, false]]> : tensor<3x3xi1>
// CHECK-DAG: %[[INF:.*]] = mp.constant dense<0xFF800000> : tensor<f32>
// CHECK-DAG: %[[ZERO:.*]] = mp.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[ADD:.*]] = mp.where %[[M]], %[[INF]], %[[ZERO]] : (tensor<3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[ADD]] {scale = 0.353553385 : f32}
// CHECK-NOT: mp.softmax
func.func @attention_window_mask(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x3xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %c = mp.constant dense<0.353553385> : tensor<f32>
  %d = mp.mul %s, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %m = mp.constant dense<[[false, true, true], [false, false, true], [true, false, false]]> : tensor<3x3xi1>
  %n = mp.constant dense<0xFF800000> : tensor<f32>
  %w = mp.where %m, %n, %d : (tensor<3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  %p = mp.softmax %w {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// CHECK-LABEL: func.func @attention_runtime_bool_mask
// CHECK: %[[ADD:.*]] = mp.where %arg3, %{{.*}}, %{{.*}} : (tensor<1x1x1x3xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1x3xf32>
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[ADD]] {scale = 1.250000e-01 : f32}
func.func @attention_runtime_bool_mask(%q: tensor<1x2x3x8xf32>, %kt: tensor<1x2x8x3xf32>, %v: tensor<1x2x3x8xf32>, %allowed: tensor<1x1x1x3xi1>) -> tensor<1x2x3x8xf32> {
  %s = mp.matmul %q, %kt : (tensor<1x2x3x8xf32>, tensor<1x2x8x3xf32>) -> tensor<1x2x3x3xf32>
  %c = mp.constant dense<8.0> : tensor<f32>
  %d = mp.div %s, %c : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %n = mp.constant dense<-1.0e9> : tensor<f32>
  %w = mp.where %allowed, %d, %n : (tensor<1x1x1x3xi1>, tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32>
  %p = mp.softmax %w {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %o = mp.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x8xf32>) -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}

// -----

// Tests list indexing by a constant gather: consecutive indices (negative
// ones counted from the end) are a slice, a scalar index a slice and a
// reshape that drops the axis; indices that skip stay a gather.
// CHECK-LABEL: func.func @slice_from_gather
// CHECK: %[[A:.*]] = mp.slice %arg0 {limits = array<i64: 2, 5, 8>, starts = array<i64: 0, 4, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x6x8xf32> -> tensor<2x1x8xf32>
// CHECK: %[[B:.*]] = mp.slice %arg0 {limits = array<i64: 2, 3, 8>, starts = array<i64: 0, 1, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x6x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[C0:.*]] = mp.slice %arg0 {limits = array<i64: 2, 6, 8>, starts = array<i64: 0, 5, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x6x8xf32> -> tensor<2x1x8xf32>
// CHECK: %[[C:.*]] = mp.reshape %[[C0]] : tensor<2x1x8xf32> -> tensor<2x8xf32>
// CHECK: %[[D:.*]] = mp.gather %arg0, %{{.*}} {axis = 1 : i64} : (tensor<2x6x8xf32>, tensor<2xi64>) -> tensor<2x2x8xf32>
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @slice_from_gather(%x: tensor<2x6x8xf32>) -> (tensor<2x1x8xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>, tensor<2x2x8xf32>) {
  %i = mp.constant dense<[-2]> : tensor<1xi64>
  %j = mp.constant dense<[1, 2]> : tensor<2xi64>
  %k = mp.constant dense<-1> : tensor<i64>
  %l = mp.constant dense<[1, 3]> : tensor<2xi64>
  %a = mp.gather %x, %i {axis = 1 : i64} : (tensor<2x6x8xf32>, tensor<1xi64>) -> tensor<2x1x8xf32>
  %b = mp.gather %x, %j {axis = -2 : i64} : (tensor<2x6x8xf32>, tensor<2xi64>) -> tensor<2x2x8xf32>
  %c = mp.gather %x, %k {axis = 1 : i64} : (tensor<2x6x8xf32>, tensor<i64>) -> tensor<2x8xf32>
  %d = mp.gather %x, %l {axis = 1 : i64} : (tensor<2x6x8xf32>, tensor<2xi64>) -> tensor<2x2x8xf32>
  return %a, %b, %c, %d : tensor<2x1x8xf32>, tensor<2x2x8xf32>, tensor<2x8xf32>, tensor<2x2x8xf32>
}

// -----

// Tests experts applied by batched matmuls against stacked weights (HF's
// GPT-OSS: the tokens repeated once per expert, torch.bmm with
// [experts, d, f] and [experts, f, d]): a linear per expert on its block of
// the input, as for the einsums above; a batched matmul against a stacked
// parameter that is also read another way stays a matmul.
// CHECK-LABEL: mp.param @"gate_up[0:1]" : tensor<1x8x16xf32> {part = array<i64: 0, 0, 2>, part_of = "gate_up"}
// CHECK-NOT:   mp.param @gate_up :
// CHECK:       mp.param @"down[1:2]" : tensor<1x16x8xf32> {part = array<i64: 0, 1, 2>, part_of = "down"}
// CHECK:       mp.param @kept : tensor<2x8x16xf32>
// CHECK-LABEL: func.func @bmm_experts
// CHECK:       %[[X1:.*]] = mp.slice %arg0 {limits = array<i64: 2, 4, 8>, starts = array<i64: 1, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT:  mp.linear %[[X1]], %{{.*}} : (tensor<1x4x8xf32>, tensor<8x16xf32>) -> tensor<1x4x16xf32>
// CHECK:       %[[H:.*]] = mp.concat {{.*}} {axis = 0 : i64} : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<2x4x16xf32>
// CHECK-COUNT-2: mp.linear {{.*}} : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
// CHECK:       mp.concat {{.*}} {axis = 0 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-LABEL: func.func @bmm_kept
// CHECK:       mp.matmul %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
mp.param @gate_up : tensor<2x8x16xf32>
mp.param @down : tensor<2x16x8xf32>
mp.param @kept : tensor<2x8x16xf32>
func.func @bmm_experts(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = mp.get_param @gate_up : tensor<2x8x16xf32>
  %h = mp.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %w2 = mp.get_param @down : tensor<2x16x8xf32>
  %y = mp.matmul %h, %w2 : (tensor<2x4x16xf32>, tensor<2x16x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @bmm_kept(%x: tensor<2x4x8xf32>) -> (tensor<2x4x16xf32>, tensor<2x8x16xf32>) {
  %w = mp.get_param @kept : tensor<2x8x16xf32>
  %h = mp.matmul %x, %w : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  return %h, %w : tensor<2x4x16xf32>, tensor<2x8x16xf32>
}

// -----

// Tests a norm per part of a split, each with its own scale (and bias), the
// parts concatenated back along the split axis (StableLM 2's per-head
// query and key LayerNorms: torch.split(x, 1, dim=1), an nn.LayerNorm per
// head, torch.cat): one norm of the whole with unit scale, times the
// scales stacked along that axis, plus the biases stacked; parts of
// several rows have their scale expanded over them. Parts concatenated in
// another order stay as they are.
// CHECK-LABEL: func.func @per_head_norms
// CHECK: %[[ONE:.*]] = mp.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK: %[[N:.*]] = mp.layer_norm %arg0, %[[ONE]] : (tensor<2x2x4x8xf32>, tensor<8xf32>) -> tensor<2x2x4x8xf32>
// CHECK: %[[W:.*]] = mp.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1x1x1x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x1x8xf32>
// CHECK: %[[S:.*]] = mp.mul %[[N]], %[[W]]
// CHECK: %[[B:.*]] = mp.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1x1x1x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x1x8xf32>
// CHECK: %[[Y:.*]] = mp.add %[[S]], %[[B]]
// CHECK: return %[[Y]]
// CHECK-LABEL: func.func @per_pair_rms
// CHECK: %[[N:.*]] = mp.rms_norm %arg0, %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: mp.expand %{{.*}} : tensor<1x1x8xf32> -> tensor<1x2x8xf32>
// CHECK: %[[W:.*]] = mp.concat {{.*}} -> tensor<1x4x8xf32>
// CHECK: mp.mul %[[N]], %[[W]]
// CHECK-LABEL: func.func @other_order
// CHECK: mp.split
// CHECK-COUNT-2: mp.rms_norm
// CHECK: mp.concat
mp.param @w0 : tensor<8xf32>
mp.param @w1 : tensor<8xf32>
mp.param @b0 : tensor<8xf32>
mp.param @b1 : tensor<8xf32>
func.func @per_head_norms(%x: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %p:2 = mp.split %x {axis = 1 : i64} : tensor<2x2x4x8xf32> -> tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>
  %w0 = mp.get_param @w0 : tensor<8xf32>
  %w1 = mp.get_param @w1 : tensor<8xf32>
  %b0 = mp.get_param @b0 : tensor<8xf32>
  %b1 = mp.get_param @b1 : tensor<8xf32>
  %n0 = mp.layer_norm %p#0, %w0, %b0 : (tensor<2x1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x1x4x8xf32>
  %n1 = mp.layer_norm %p#1, %w1, %b1 : (tensor<2x1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x1x4x8xf32>
  %y = mp.concat %n0, %n1 {axis = 1 : i64} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}
func.func @per_pair_rms(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %p:2 = mp.split %x {axis = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>, tensor<2x2x8xf32>
  %w0 = mp.get_param @w0 : tensor<8xf32>
  %w1 = mp.get_param @w1 : tensor<8xf32>
  %n0 = mp.rms_norm %p#0, %w0 : (tensor<2x2x8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
  %n1 = mp.rms_norm %p#1, %w1 : (tensor<2x2x8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
  %y = mp.concat %n0, %n1 {axis = 1 : i64} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
func.func @other_order(%x: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %p:2 = mp.split %x {axis = 1 : i64} : tensor<2x2x4x8xf32> -> tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>
  %w0 = mp.get_param @w0 : tensor<8xf32>
  %w1 = mp.get_param @w1 : tensor<8xf32>
  %n0 = mp.rms_norm %p#0, %w0 : (tensor<2x1x4x8xf32>, tensor<8xf32>) -> tensor<2x1x4x8xf32>
  %n1 = mp.rms_norm %p#1, %w1 : (tensor<2x1x4x8xf32>, tensor<8xf32>) -> tensor<2x1x4x8xf32>
  %y = mp.concat %n1, %n0 {axis = 1 : i64} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}
