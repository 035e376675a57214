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
