// RUN: mp-opt %s --mp-convert-precision=dtype=bf16 --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-convert-precision=dtype=f16 --split-input-file | FileCheck %s --check-prefix=F16

// Tests that parameters, constants and activations become bf16 while the
// function's fp32 inputs and outputs keep fp32 through boundary casts.
// CHECK-LABEL: mp.param @w : tensor<8x4xbf16> {file = "x.onnx", length = 128 : i64, offset = 0 : i64, source_type = f32}
// CHECK: func.func @main(%[[X:.*]]: tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[XB:.*]] = mp.cast %[[X]] : tensor<2x8xf32> to tensor<2x8xbf16>
// CHECK: %[[W:.*]] = mp.get_param @w : tensor<8x4xbf16>
// CHECK: %[[C:.*]] = mp.constant dense<5.000000e-01> : tensor<bf16>
// CHECK: %[[Y:.*]] = mp.linear %[[XB]], %[[W]] : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[Z:.*]] = mp.mul %[[Y]], %[[C]] : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
// CHECK: %[[O:.*]] = mp.cast %[[Z]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: return %[[O]] : tensor<2x4xf32>
// F16: mp.param @w : tensor<8x4xf16>
// F16: mp.linear {{.*}} -> tensor<2x4xf16>
mp.param @w : tensor<8x4xf32> {file = "x.onnx", offset = 0 : i64, length = 128 : i64}
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = mp.get_param @w : tensor<8x4xf32>
  %c = mp.constant dense<0.5> : tensor<f32>
  %y = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %z = mp.mul %y, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %z : tensor<2x4xf32>
}

// -----

// Tests that integer values and a cross-entropy loss keep their types.
// CHECK-LABEL: mp.param @t : tensor<4x4xbf16>
// CHECK: mp.embedding {{.*}} -> tensor<2x3x4xbf16>
// CHECK: mp.cross_entropy {{.*}} : (tensor<2x3x4xbf16>, tensor<2x3xi64>) -> tensor<f32>
mp.param @t : tensor<4x4xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x3xi64>) -> tensor<f32> {
  %t = mp.get_param @t : tensor<4x4xf32>
  %e = mp.embedding %t, %ids : (tensor<4x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %l = mp.cross_entropy %e, %ids : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that ops marked mp.exact_f32 (the triangle product an integer
// CumSum is imported as: position ids past 256 would round in bf16) keep
// fp32, constant included.
// CHECK-LABEL: func.func @exact
// CHECK: %[[T:.*]] = mp.constant {mp.exact_f32} dense<1.000000e+00> : tensor<4x4xf32>
// CHECK: mp.matmul %{{.*}}, %[[T]] {mp.exact_f32} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
func.func @exact(%ids: tensor<2x4xi64>) -> tensor<2x4xi64> {
  %f = mp.cast %ids {mp.exact_f32} : tensor<2x4xi64> to tensor<2x4xf32>
  %t = mp.constant {mp.exact_f32} dense<1.0> : tensor<4x4xf32>
  %s = mp.matmul %f, %t {mp.exact_f32} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %i = mp.cast %s : tensor<2x4xf32> to tensor<2x4xi64>
  return %i : tensor<2x4xi64>
}

// -----

// Tests that a constant past the target's range saturates to its largest
// finite value rather than becoming infinite (HF's finfo(float32).min
// padding fill: (1 - mask) * min would be 0 * -inf = NaN where a key is
// kept), while infinities stay infinite.
// CHECK-LABEL: func.func @saturate
// CHECK: mp.constant dense<-3.389530e+38> : tensor<bf16>
// CHECK: mp.constant dense<0xFF80> : tensor<bf16>
// F16-LABEL: func.func @saturate
// F16: mp.constant dense<-6.550400e+04> : tensor<f16>
// F16: mp.constant dense<0xFC00> : tensor<f16>
func.func @saturate(%m: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %inf = mp.constant dense<0xFF800000> : tensor<f32>
  %a = mp.mul %m, %min : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %b = mp.mul %m, %inf : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %a, %b : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Tests that a mixture-of-experts router's choice stays fp32, as Megatron
// computes it (bf16 scores a few ulps apart would pick other experts): the
// router linear (its bf16 input and weight widened), the softmax and the
// top-1 selection; the gates are narrowed where they meet the experts'
// bf16 outputs.
// CHECK-LABEL: func.func @router
// CHECK: %[[XW:.*]] = mp.cast %{{.*}} : tensor<2x8xbf16> to tensor<2x8xf32>
// CHECK: %[[W:.*]] = mp.get_param @wg : tensor<8x4xbf16>
// CHECK: %[[WW:.*]] = mp.cast %[[W]] : tensor<8x4xbf16> to tensor<8x4xf32>
// CHECK: %[[S:.*]] = mp.linear %[[XW]], %[[WW]] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK: %[[P:.*]] = mp.softmax %[[S]] {axis = 1 : i64} : tensor<2x4xf32>
// CHECK: mp.reduce max, %[[P]] {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x1xf32>
// CHECK: %[[G:.*]] = mp.where {{.*}} -> tensor<2x4xf32>
// CHECK: %[[GN:.*]] = mp.cast %[[G]] : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK: mp.mul %{{.*}}, %[[GN]] : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
mp.param @wg : tensor<8x4xf32> {file = "x.onnx", offset = 0 : i64, length = 128 : i64}
func.func @router(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = mp.get_param @wg : tensor<8x4xf32>
  %s = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %p = mp.softmax %s {axis = 1 : i64} : tensor<2x4xf32>
  %m = mp.reduce max, %p {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x1xf32>
  %h = mp.compare eq, %p, %m : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
  %c = mp.constant dense<0.0> : tensor<f32>
  %g = mp.where %h, %p, %c : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %o = mp.mul %y, %g : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %o : tensor<2x4xf32>
}

// -----

// Tests that a converted value that routers of two layers read (a constant
// the importer shares) is widened once, right after its definition, where
// every router's ops can read the copy (it was put before whichever router
// op came first, which need not precede the other layer's).
// CHECK-LABEL: func.func @shared_constant
// CHECK: %[[C:.*]] = mp.constant {{.*}} : tensor<bf16>
// CHECK-NEXT: %[[CW:.*]] = mp.cast %[[C]] : tensor<bf16> to tensor<f32>
// CHECK: mp.where %{{.*}}, %{{.*}}, %[[CW]] : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK: mp.where %{{.*}}, %{{.*}}, %[[CW]] : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
mp.param @w1 : tensor<8x4xf32> {file = "x.onnx", offset = 0 : i64, length = 128 : i64}
mp.param @w2 : tensor<8x4xf32> {file = "x.onnx", offset = 128 : i64, length = 128 : i64}
func.func @shared_constant(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c = mp.constant dense<0.0> : tensor<f32>
  %y0 = mp.add %y, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %w1 = mp.get_param @w1 : tensor<8x4xf32>
  %s1 = mp.linear %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %m1 = mp.reduce max, %s1 {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x1xf32>
  %h1 = mp.compare eq, %s1, %m1 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
  %g1 = mp.where %h1, %s1, %c : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %o1 = mp.mul %y0, %g1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %w2 = mp.get_param @w2 : tensor<8x4xf32>
  %s2 = mp.linear %x, %w2 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %m2 = mp.reduce max, %s2 {axes = array<i64: 1>} : tensor<2x4xf32> -> tensor<2x1xf32>
  %h2 = mp.compare eq, %s2, %m2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xi1>
  %g2 = mp.where %h2, %s2, %c : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %o2 = mp.mul %o1, %g2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %o2 : tensor<2x4xf32>
}
