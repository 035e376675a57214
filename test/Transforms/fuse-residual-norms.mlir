// RUN: mp-opt %s --mp-fuse-residual-norms --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-fuse-residual-norms --mp-fuse-residual-norms --split-input-file | FileCheck %s --check-prefix=TWICE
// RUN: not mp-opt %s --split-input-file --mp-fuse-residual-norms --mp-tensor-parallel=tp=2 2>&1 | FileCheck %s --check-prefix=TP
// RUN: mp-opt %s --split-input-file --mp-fuse-residual-norms --mp-plan-memory=print=true -o /dev/null | FileCheck %s --check-prefix=PLAN
// RUN: not mp-opt %s --split-input-file --mp-plan-memory --mp-fuse-residual-norms -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLANNED

// Tests a pre-norm layer's two residual adds: each add and the norm that
// reads it become one op; the sum's other reader (the next residual add)
// reads its first result, the norm's readers its second. The norms' scale
// and bias, read next to the norm, move up to the add. The attributes
// (axis, epsilon) and the add's layer carry over.
// CHECK-LABEL: func.func @pre_norm_layer
// CHECK: %[[G:.*]] = mp.get_param @g
// CHECK: %[[B:.*]] = mp.get_param @b
// CHECK: %[[H:.*]], %[[N:.*]] = mp.add_layer_norm %arg0, %arg1, %[[G]], %[[B]] {epsilon = 1.000000e-03 : f32, mp.layer = 0 : i64} :
// CHECK-SAME: -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// CHECK: %[[M:.*]] = mp.gelu %[[N]]
// CHECK: %[[S:.*]] = mp.get_param @s
// CHECK: %[[H2:.*]], %[[R:.*]] = mp.add_rms_norm %[[H]], %[[M]], %[[S]] :
// CHECK-NOT: mp.add %
// CHECK-NOT: _norm %
// CHECK: return %[[H2]], %[[R]]
// TWICE-LABEL: func.func @pre_norm_layer
// TWICE-COUNT-2: _norm
// TP: error: 'mp.add_layer_norm' op is a fusion: mp-fuse-residual-norms runs after mp-tensor-parallel, not before
mp.param @g : tensor<8xf32> {file = "x.onnx"}
mp.param @b : tensor<8xf32> {file = "x.onnx"}
mp.param @s : tensor<8xf32> {file = "x.onnx"}
func.func @pre_norm_layer(%x: tensor<2x4x8xf32>, %y: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %h = mp.add %x, %y {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g = mp.get_param @g : tensor<8xf32>
  %b = mp.get_param @b : tensor<8xf32>
  %n = mp.layer_norm %h, %g, %b {epsilon = 1.0e-3 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %m = mp.gelu %n : tensor<2x4x8xf32>
  %h2 = mp.add %h, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = mp.get_param @s : tensor<8xf32>
  %r = mp.rms_norm %h2, %s : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %h2, %r : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Tests what does not fuse: an add that broadcasts (the kernel adds rows of
// equal operands), a norm that reads the add as its scale rather than its
// input, a norm whose scale is computed after the add from something else
// (it cannot move up), and an add and norm in different pipeline chunks.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: add_layer_norm
// CHECK-NOT: add_rms_norm
// CHECK: return
mp.param @s : tensor<8xf32> {file = "x.onnx"}
func.func @not_fused(%x: tensor<2x8xf32>, %row: tensor<8xf32>, %v: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = mp.add %x, %row : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = mp.rms_norm %0, %v : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %2 = mp.add %v, %v : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %3 = mp.rms_norm %x, %2 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %4 = mp.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %w = mp.neg %v : tensor<8xf32>
  %5 = mp.rms_norm %4, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %6 = mp.add %x, %x {mp.stage = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = mp.get_param @s : tensor<8xf32>
  %7 = mp.rms_norm %6, %s {mp.stage = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %1, %3, %5, %7 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// -----

// Tests that a train step (a module with backward ops) is left alone.
// CHECK-LABEL: func.func @train_step
// CHECK: mp.add %
// CHECK: mp.rms_norm
func.func @train_step(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %0 = mp.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = mp.rms_norm %0, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %2 = mp.neg %1 {mp.backward} : tensor<2x8xf32>
  return %2 : tensor<2x8xf32>
}

// -----

// Tests the memory plan of a fused op: where nothing reads the residual
// stream or the branch after the add, the sum takes the stream's bytes and
// the norm the branch's (InPlaceOpInterface), so the fusion needs no more
// arena than the add and norm did. Not in place: operands read later,
// arguments, one value as both operands, and a scale that is the left
// operand (the norm reads it after the sums are written). A plan made
// before the fusion is refused.
// CHECK-LABEL: func.func @in_place
// CHECK: mp.add_rms_norm %0, %1, %arg1
// PLAN-LABEL: memory plan of @in_place
// PLAN: %sum = mp.add_rms_norm: in place of %0
// PLAN-NEXT: %result = mp.add_rms_norm: in place of %1
// PLAN-LABEL: memory plan of @read_later
// PLAN-NOT: in place
// PLAN-LABEL: memory plan of @arguments
// PLAN-NOT: in place
// PLAN-LABEL: memory plan of @one_value_twice
// PLAN-NOT: in place
// PLAN-LABEL: memory plan of @scale_is_lhs
// PLAN-NOT: %sum = mp.add_rms_norm: in place
// PLAN: %result = mp.add_rms_norm: in place of %1
// PLANNED: error: carries a memory plan: mp-fuse-residual-norms runs before mp-plan-memory, not after
func.func @in_place(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %a = mp.neg %x : tensor<2x8xf32>
  %b = mp.exp %x : tensor<2x8xf32>
  %h = mp.add %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = mp.rms_norm %h, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %m = mp.gelu %n : tensor<2x8xf32>
  %h2 = mp.add %h, %m : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %h2 : tensor<2x8xf32>
}

// -----

func.func @read_later(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %a = mp.neg %x : tensor<2x8xf32>
  %b = mp.exp %x : tensor<2x8xf32>
  %h = mp.add %a, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = mp.rms_norm %h, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %v = mp.reshape %b : tensor<2x8xf32> -> tensor<16xf32>
  %w = mp.reshape %v : tensor<16xf32> -> tensor<2x8xf32>
  %0 = mp.add %a, %n : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = mp.add %0, %w : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// -----

func.func @arguments(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %h = mp.add %x, %y : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = mp.rms_norm %h, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

func.func @one_value_twice(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %a = mp.neg %x : tensor<2x8xf32>
  %h = mp.add %a, %a : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = mp.rms_norm %h, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// -----

func.func @scale_is_lhs(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = mp.neg %x : tensor<8xf32>
  %b = mp.exp %x : tensor<8xf32>
  %h = mp.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %n = mp.rms_norm %h, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %n : tensor<8xf32>
}

// -----

// Tests 16-bit layers (mp-convert-precision's): they fuse too, with norm
// parameters of the activations' type or f32; the kernels round each sum to
// the type before normalizing it, as the add and the norm apart do
// (cpu-bf16.test compares the two bitwise). An f32 sum whose norm reads
// 16-bit parameters is left apart (the f32 kernels take f32 ones).
// CHECK-LABEL: func.func @half_floats
// CHECK: mp.add_layer_norm %arg0, %arg1, %{{.*}}, %{{.*}} : {{.*}} -> (tensor<2x8xbf16>, tensor<2x8xbf16>)
// CHECK: mp.add_rms_norm %arg2, %arg3, %{{.*}} : {{.*}} -> (tensor<2x8xf16>, tensor<2x8xf16>)
// CHECK: %[[F:.*]] = mp.add %arg4, %arg4
// CHECK: mp.rms_norm %[[F]]
mp.param @g16 : tensor<8xbf16> {file = "x.onnx"}
mp.param @b16 : tensor<8xbf16> {file = "x.onnx"}
mp.param @s32 : tensor<8xf32> {file = "x.onnx"}
func.func @half_floats(%x: tensor<2x8xbf16>, %y: tensor<2x8xbf16>, %u: tensor<2x8xf16>, %v: tensor<2x8xf16>, %w: tensor<2x8xf32>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf32>) {
  %h = mp.add %x, %y : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16>
  %g = mp.get_param @g16 : tensor<8xbf16>
  %b = mp.get_param @b16 : tensor<8xbf16>
  %n = mp.layer_norm %h, %g, %b : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
  %k = mp.add %u, %v : (tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<2x8xf16>
  %s = mp.get_param @s32 : tensor<8xf32>
  %r = mp.rms_norm %k, %s : (tensor<2x8xf16>, tensor<8xf32>) -> tensor<2x8xf16>
  %f = mp.add %w, %w : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = mp.rms_norm %f, %g : (tensor<2x8xf32>, tensor<8xbf16>) -> tensor<2x8xf32>
  return %h, %n, %k, %r, %q : tensor<2x8xbf16>, tensor<2x8xbf16>, tensor<2x8xf16>, tensor<2x8xf16>, tensor<2x8xf32>
}
