// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --verify-diagnostics -o /dev/null
// RUN: mp-opt %s --mp-tensor-parallel=tp=2 --mp-summary -o /dev/null 2>/dev/null | FileCheck %s

// Tests that a block linear tensor parallelism leaves whole is never silent:
// a warning on it names the op where its split stopped and why (an op that
// cannot run on the split; a whole operand spanning the split), and the
// summary lists it.
// CHECK: replicated  2 block linears left whole by tensor parallelism:
// CHECK-NEXT: @w1: its output reaches 'mp.softmax' split along dim 2, which cannot run on that split
// CHECK-NEXT: @w2: its output reaches 'mp.add' split along dim 2, where a whole activation spans the split (tensor parallelism cuts only values computed from constants and parameters, and the function's inputs)
mp.param @w1 : tensor<8x8xf32> {file = "x.onnx"}
mp.param @w2 : tensor<8x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w1 = mp.get_param @w1 {mp.layer = 0 : i64} : tensor<8x8xf32>
  %w2 = mp.get_param @w2 {mp.layer = 0 : i64} : tensor<8x8xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.softmax' split along dim 2, which cannot run on that split}}
  %h = mp.linear %x, %w1 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-note @below {{the split stops here}}
  %n = mp.softmax %h {axis = 2 : i64, mp.layer = 0 : i64} : tensor<2x4x8xf32>
  // expected-warning @below {{this linear stays whole (replicated on all 2 ranks): its output reaches 'mp.add' split along dim 2, where a whole activation spans the split}}
  %k = mp.linear %n, %w2 {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-note @below {{the split stops here}}
  %r = mp.add %k, %n {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}
