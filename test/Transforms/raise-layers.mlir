// RUN: mp-opt %s --mp-raise --split-input-file | FileCheck %s

// Tests that transformer blocks are found by structure, not names (these ops
// have none): each self-attention starts a block that runs from the
// residual stream value it reads to the last residual add before the next
// one; the final norm after the last block is outside.
// CHECK-LABEL: func.func @pre_ln_blocks
// CHECK: mp.layer_norm {{.*}}{mp.layer = 0 : i64}
// CHECK: mp.attention {{.*}}mp.layer = 0 : i64
// CHECK: mp.layer_norm {{.*}}{mp.layer = 0 : i64}
// CHECK: mp.gelu {{.*}}{mp.layer = 0 : i64}
// CHECK: %[[R2:.*]] = mp.add {{.*}}{mp.layer = 0 : i64}
// CHECK: mp.layer_norm %[[R2]]{{.*}}{mp.layer = 1 : i64}
// CHECK: mp.attention {{.*}}mp.layer = 1 : i64
// CHECK: mp.linear {{.*}}{mp.layer = 1 : i64}
// CHECK: mp.linear {{.*}}{mp.layer = 1 : i64}
// CHECK: %[[R4:.*]] = mp.add {{.*}}{mp.layer = 1 : i64}
// CHECK: %[[F:.*]] = mp.layer_norm %[[R4]], %arg1 : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
// CHECK: return %[[F]]
func.func @pre_ln_blocks(%x: tensor<1x4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %n1 = mp.layer_norm %x, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q1 = mp.reshape %n1 : tensor<1x4x8xf32> -> tensor<1x1x4x8xf32>
  %a1 = mp.attention %q1, %q1, %q1 {causal, scale = 0.5 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %o1 = mp.reshape %a1 : tensor<1x1x4x8xf32> -> tensor<1x4x8xf32>
  %p1 = mp.linear %o1, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r1 = mp.add %x, %p1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n2 = mp.layer_norm %r1, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u1 = mp.linear %n2, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %h1 = mp.gelu %u1 : tensor<1x4x8xf32>
  %d1 = mp.linear %h1, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r2 = mp.add %r1, %d1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n3 = mp.layer_norm %r2, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q2 = mp.reshape %n3 : tensor<1x4x8xf32> -> tensor<1x1x4x8xf32>
  %a2 = mp.attention %q2, %q2, %q2 {causal, scale = 0.5 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %o2 = mp.reshape %a2 : tensor<1x1x4x8xf32> -> tensor<1x4x8xf32>
  %p2 = mp.linear %o2, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r3 = mp.add %r2, %p2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n4 = mp.layer_norm %r3, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u2 = mp.linear %n4, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r4 = mp.add %r3, %u2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %f = mp.layer_norm %r4, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  return %f : tensor<1x4x8xf32>
}

// -----

// Tests a decoder block with cross-attention (keys and values from the
// encoder's output %enc): it does not start a block of its own, so the
// self-attention, the cross-attention and the MLP are one block, and the
// residual adds after each are in it.
// CHECK-LABEL: func.func @decoder_block
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}} {{.*}}mp.layer = 0 : i64
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}} {{.*}}mp.layer = 0 : i64
// CHECK: mp.add {{.*}}{mp.layer = 0 : i64}
// CHECK: mp.linear {{.*}}{mp.layer = 0 : i64}
// CHECK: %[[R3:.*]] = mp.add {{.*}}{mp.layer = 0 : i64}
// CHECK: return %[[R3]]
// CHECK-NOT: mp.layer = 1
func.func @decoder_block(%x: tensor<1x4x8xf32>, %enc: tensor<1x6x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<1x4x8xf32> {
  %n1 = mp.layer_norm %x, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q1 = mp.reshape %n1 : tensor<1x4x8xf32> -> tensor<1x1x4x8xf32>
  %a1 = mp.attention %q1, %q1, %q1 {causal, scale = 0.5 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  %o1 = mp.reshape %a1 : tensor<1x1x4x8xf32> -> tensor<1x4x8xf32>
  %r1 = mp.add %x, %o1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n2 = mp.layer_norm %r1, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q2 = mp.reshape %n2 : tensor<1x4x8xf32> -> tensor<1x1x4x8xf32>
  %kv = mp.reshape %enc : tensor<1x6x8xf32> -> tensor<1x1x6x8xf32>
  %a2 = mp.attention %q2, %kv, %kv {scale = 0.5 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x6x8xf32>, tensor<1x1x6x8xf32>) -> tensor<1x1x4x8xf32>
  %o2 = mp.reshape %a2 : tensor<1x1x4x8xf32> -> tensor<1x4x8xf32>
  %r2 = mp.add %r1, %o2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n3 = mp.layer_norm %r2, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %u = mp.linear %n3, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r3 = mp.add %r2, %u : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %r3 : tensor<1x4x8xf32>
}

// -----

// Tests blocks started by attention left decomposed (soft-capped scores:
// tanh(s / 5) * 5) in a model without layer names: two blocks, one per
// layer, though each layer computes its 2 heads one by one (a block's later
// heads start no block of their own), and the mask added before the scores
// (mask + s) does not hide them.
// CHECK-LABEL: func.func @decomposed_per_head
// CHECK: %[[R1:.*]] = mp.add %arg0, {{.*}}{mp.layer = 0 : i64}
// CHECK: mp.softmax {{.*}}mp.layer = 1 : i64
// CHECK: mp.add %[[R1]], {{.*}}{mp.layer = 1 : i64}
func.func @decomposed_per_head(%x: tensor<1x4x8xf32>, %g: tensor<8xf32>, %w: tensor<8x8xf32>, %mask: tensor<1x4x4xf32>) -> tensor<1x4x8xf32> {
  %cap = mp.constant dense<5.0> : tensor<f32>
  %n1 = mp.layer_norm %x, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %q1 = mp.slice %n1 {starts = array<i64: 0, 0, 0>, limits = array<i64: 1, 4, 4>, strides = array<i64: 1, 1, 1>} : tensor<1x4x8xf32> -> tensor<1x4x4xf32>
  %k1 = mp.transpose %q1 [0, 2, 1] : tensor<1x4x4xf32> -> tensor<1x4x4xf32>
  %s1 = mp.matmul %q1, %k1 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %c1 = mp.div %s1, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %t1 = mp.tanh %c1 : tensor<1x4x4xf32>
  %m1 = mp.mul %t1, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %mm1 = mp.add %mask, %m1 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %p1 = mp.softmax %mm1 {axis = 2 : i64} : tensor<1x4x4xf32>
  %h1 = mp.matmul %p1, %q1 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %q2 = mp.slice %n1 {starts = array<i64: 0, 0, 4>, limits = array<i64: 1, 4, 8>, strides = array<i64: 1, 1, 1>} : tensor<1x4x8xf32> -> tensor<1x4x4xf32>
  %k2 = mp.transpose %q2 [0, 2, 1] : tensor<1x4x4xf32> -> tensor<1x4x4xf32>
  %s2 = mp.matmul %q2, %k2 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %c2 = mp.div %s2, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %t2 = mp.tanh %c2 : tensor<1x4x4xf32>
  %m2 = mp.mul %t2, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %mm2 = mp.add %mask, %m2 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %p2 = mp.softmax %mm2 {axis = 2 : i64} : tensor<1x4x4xf32>
  %h2 = mp.matmul %p2, %q2 : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %o1 = mp.concat %h1, %h2 {axis = 2 : i64} : (tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x4x8xf32>
  %l1 = mp.linear %o1, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r1 = mp.add %x, %l1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n2 = mp.layer_norm %r1, %g : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %kt = mp.transpose %n2 [0, 2, 1] : tensor<1x4x8xf32> -> tensor<1x8x4xf32>
  %s3 = mp.matmul %n2, %kt : (tensor<1x4x8xf32>, tensor<1x8x4xf32>) -> tensor<1x4x4xf32>
  %c3 = mp.div %s3, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %t3 = mp.tanh %c3 : tensor<1x4x4xf32>
  %m3 = mp.mul %t3, %cap : (tensor<1x4x4xf32>, tensor<f32>) -> tensor<1x4x4xf32>
  %p3 = mp.softmax %m3 {axis = 2 : i64} : tensor<1x4x4xf32>
  %h3 = mp.matmul %p3, %n2 : (tensor<1x4x4xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %l2 = mp.linear %h3, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %r2 = mp.add %r1, %l2 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  return %r2 : tensor<1x4x8xf32>
}
