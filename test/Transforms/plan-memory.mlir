// RUN: mp-opt %s --mp-plan-memory=print=true --split-input-file -o /dev/null | FileCheck %s
// RUN: mp-opt %s --mp-plan-memory --split-input-file | FileCheck %s --check-prefix=IR

// Tests a chain: each value is live from its op to its last use, so %1 reuses
// the bytes of %arg0 once %0 has read it, and %2 those of %0; the returned
// value stays live to the end. 512 bytes each (2x64 f32).
// CHECK-LABEL: memory plan of @chain: arena 1024 bytes (2048 without reuse)
// CHECK-NEXT: %arg0 = argument: offset 0, size 512, live start..0
// CHECK-NEXT: %0 = mp.exp: offset 512, size 512, live 0..1
// CHECK-NEXT: %1 = mp.tanh: offset 0, size 512, live 1..2
// CHECK-NEXT: %2 = mp.neg: offset 512, size 512, live 2..end
// IR-LABEL: func.func @chain
// IR-SAME: {mp.arena_offset = 0 : i64}
// IR-SAME: attributes {mp.arena_bytes = 1024 : i64}
// IR: mp.exp %arg0 {mp.arena_offsets = array<i64: 512>}
func.func @chain(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %0 = mp.exp %x : tensor<2x64xf32>
  %1 = mp.tanh %0 : tensor<2x64xf32>
  %2 = mp.neg %1 : tensor<2x64xf32>
  return %2 : tensor<2x64xf32>
}

// -----

// Tests that a reshape of a parameter (an einsum's or a pointwise
// convolution's weight viewed 2-D by its linear) is the parameter's bytes:
// no arena slot, no offset of its own; the artifact reads the parameter
// through a buffer of the view's shape, with no reshape instruction.
// CHECK-LABEL: memory plan of @parameter_view: arena 512 bytes (512 without reuse)
// CHECK-NEXT: %arg0 = argument: offset 0, size 256, live start..2
// CHECK-NEXT: %2 = mp.linear: offset 256, size 256, live 2..end
// CHECK-NOT: mp.reshape
// IR-LABEL: func.func @parameter_view
// IR: mp.reshape %{{.*}} : tensor<16x2x8xf32> -> tensor<16x16xf32>
// IR-NEXT: mp.linear %arg0, %{{.*}} {mp.arena_offsets = array<i64: 256>}
mp.param @w : tensor<16x2x8xf32> {file = "x.onnx"}
func.func @parameter_view(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %w = mp.get_param @w : tensor<16x2x8xf32>
  %v = mp.reshape %w : tensor<16x2x8xf32> -> tensor<16x16xf32>
  %y = mp.linear %x, %v : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that a reshape of an arena value is a view sharing its bytes, whose
// uses keep those bytes live (%arg0 until the mul reads its view %3), and
// that parameters are not in the arena.
// CHECK-LABEL: memory plan of @views: arena 1536 bytes (1536 without reuse)
// CHECK-NEXT: %arg0 = argument: offset 0, size 512, live start..4
// CHECK-NEXT: %1 = mp.add: offset 512, size 512, live 1..4
// CHECK-NEXT: %4 = mp.mul: offset 1024, size 512, live 4..end
// CHECK-NEXT: %2 = mp.reshape: view of %arg0
// CHECK-NEXT: %3 = mp.reshape: view of %2
// CHECK-NOT: mp.get_param
mp.param @w : tensor<64xf32> {file = "x.onnx"}
func.func @views(%x: tensor<2x64xf32>) -> tensor<2x64xf32> {
  %w = mp.get_param @w : tensor<64xf32>
  %0 = mp.add %x, %w : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  %r = mp.reshape %x : tensor<2x64xf32> -> tensor<128xf32>
  %b = mp.reshape %r : tensor<128xf32> -> tensor<2x64xf32>
  %1 = mp.mul %0, %b : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  return %1 : tensor<2x64xf32>
}
