// RUN: mp-opt %s --mp-fuse-rotary --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-fuse-rotary --mp-fuse-rotary --split-input-file | FileCheck %s
// RUN: not mp-opt %s --split-input-file --mp-fuse-rotary --mp-tensor-parallel=tp=2 2>&1 | FileCheck %s --check-prefix=TP
// TP: error: 'mp.rotary' op is a fusion: mp-fuse-rotary runs after mp-tensor-parallel, not before

// Tests Llama's rotate_half on whole heads, the products and the add in
// either operand order: one mp.rotary each, nothing else left.
// CHECK-LABEL: func.func @llama
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x8xf32>, %[[K:.*]]: tensor<2x4x8x8xf32>, %[[COS:.*]]: tensor<8x8xf32>, %[[SIN:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[RQ:.*]] = mp.rotary %[[Q]], %[[COS]], %[[SIN]] {mp.layer = 2 : i64, rotary_dim = 8 : i64} : (tensor<2x4x8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[RK:.*]] = mp.rotary %[[K]], %[[COS]], %[[SIN]] {rotary_dim = 8 : i64}
// CHECK-NEXT: return %[[RQ]], %[[RK]]
func.func @llama(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %cos: tensor<8x8xf32>, %sin: tensor<8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %qa = mp.mul %q, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %qhi = mp.slice %q {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %qn = mp.neg %qhi : tensor<2x4x8x4xf32>
  %qlo = mp.slice %q {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %qr = mp.concat %qn, %qlo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %qb = mp.mul %qr, %sin : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %yq = mp.add %qa, %qb {mp.layer = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ka = mp.mul %k, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %khi = mp.slice %k {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %kn = mp.neg %khi : tensor<2x4x8x4xf32>
  %klo = mp.slice %k {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %kr = mp.concat %kn, %klo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %kb = mp.mul %sin, %kr : (tensor<8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %yk = mp.add %kb, %ka : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %yq, %yk : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests GPT-NeoX's partial rotary (the first 2 of 8 channels, cos and sin
// [1, 1, 8, 2]), concatenated with the channels it leaves: one mp.rotary of
// the whole head. A slice read elsewhere too stays for its other reader.
// CHECK-LABEL: func.func @neox
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8x8xf32>, %[[COS:.*]]: tensor<1x1x8x2xf32>, %[[SIN:.*]]: tensor<1x1x8x2xf32>)
// CHECK-NEXT: %[[R:.*]] = mp.slice %[[X]]
// CHECK-NEXT: %[[Y:.*]] = mp.rotary %[[X]], %[[COS]], %[[SIN]] {rotary_dim = 2 : i64}
// CHECK-NEXT: return %[[Y]], %[[R]]
func.func @neox(%x: tensor<2x4x8x8xf32>, %cos: tensor<1x1x8x2xf32>, %sin: tensor<1x1x8x2xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) {
  %xr = mp.slice %x {limits = array<i64: 2, 4, 8, 2>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x2xf32>
  %xp = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 2>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x6xf32>
  %ra = mp.mul %xr, %cos : (tensor<2x4x8x2xf32>, tensor<1x1x8x2xf32>) -> tensor<2x4x8x2xf32>
  %rhi = mp.slice %xr {limits = array<i64: 2, 4, 8, 2>, starts = array<i64: 0, 0, 0, 1>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x2xf32> -> tensor<2x4x8x1xf32>
  %rn = mp.neg %rhi : tensor<2x4x8x1xf32>
  %rlo = mp.slice %xr {limits = array<i64: 2, 4, 8, 1>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x2xf32> -> tensor<2x4x8x1xf32>
  %rr = mp.concat %rn, %rlo {axis = 3 : i64} : (tensor<2x4x8x1xf32>, tensor<2x4x8x1xf32>) -> tensor<2x4x8x2xf32>
  %rb = mp.mul %rr, %sin : (tensor<2x4x8x2xf32>, tensor<1x1x8x2xf32>) -> tensor<2x4x8x2xf32>
  %rot = mp.add %ra, %rb : (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
  %y = mp.concat %rot, %xp {axis = 3 : i64} : (tensor<2x4x8x2xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x8x8xf32>
  return %y, %xr : tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>
}

// -----

// Tests GPT-J's rotate_every_two on the first 4 of 8 channels: strided
// slices, reshapes to pairs, a concat and a reshape back.
// CHECK-LABEL: func.func @gptj
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8x8xf32>, %[[COS:.*]]: tensor<1x1x8x4xf32>, %[[SIN:.*]]: tensor<1x1x8x4xf32>)
// CHECK-NEXT: %[[Y:.*]] = mp.rotary %[[X]], %[[COS]], %[[SIN]] {interleaved, rotary_dim = 4 : i64}
// CHECK-NEXT: return %[[Y]]
func.func @gptj(%x: tensor<2x4x8x8xf32>, %cos: tensor<1x1x8x4xf32>, %sin: tensor<1x1x8x4xf32>) -> tensor<2x4x8x8xf32> {
  %xr = mp.slice %x {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %xp = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %a = mp.mul %xr, %cos : (tensor<2x4x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x4x8x4xf32>
  %even = mp.slice %xr {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 2>} : tensor<2x4x8x4xf32> -> tensor<2x4x8x2xf32>
  %odd = mp.slice %xr {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 1>, strides = array<i64: 1, 1, 1, 2>} : tensor<2x4x8x4xf32> -> tensor<2x4x8x2xf32>
  %n = mp.neg %odd : tensor<2x4x8x2xf32>
  %n1 = mp.reshape %n : tensor<2x4x8x2xf32> -> tensor<2x4x8x2x1xf32>
  %e1 = mp.reshape %even : tensor<2x4x8x2xf32> -> tensor<2x4x8x2x1xf32>
  %st = mp.concat %n1, %e1 {axis = 4 : i64} : (tensor<2x4x8x2x1xf32>, tensor<2x4x8x2x1xf32>) -> tensor<2x4x8x2x2xf32>
  %r = mp.reshape %st : tensor<2x4x8x2x2xf32> -> tensor<2x4x8x4xf32>
  %b = mp.mul %r, %sin : (tensor<2x4x8x4xf32>, tensor<1x1x8x4xf32>) -> tensor<2x4x8x4xf32>
  %rot = mp.add %a, %b : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>
  %y = mp.concat %rot, %xp {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Tests a rotation of a rotation: the second mp.rotary reads the first.
// CHECK-LABEL: func.func @twice
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x8xf32>, %[[COS:.*]]: tensor<2x8xf32>, %[[SIN:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = mp.rotary %[[X]], %[[COS]], %[[SIN]] {rotary_dim = 8 : i64}
// CHECK-NEXT: %[[Y2:.*]] = mp.rotary %[[Y]], %[[COS]], %[[SIN]] {rotary_dim = 8 : i64}
// CHECK-NEXT: return %[[Y2]]
func.func @twice(%x: tensor<1x2x8xf32>, %cos: tensor<2x8xf32>, %sin: tensor<2x8xf32>) -> tensor<1x2x8xf32> {
  %a = mp.mul %x, %cos : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x8xf32>
  %hi = mp.slice %x {limits = array<i64: 1, 2, 8>, starts = array<i64: 0, 0, 4>, strides = array<i64: 1, 1, 1>} : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
  %n = mp.neg %hi : tensor<1x2x4xf32>
  %lo = mp.slice %x {limits = array<i64: 1, 2, 4>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
  %r = mp.concat %n, %lo {axis = 2 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x8xf32>
  %b = mp.mul %r, %sin : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x8xf32>
  %y = mp.add %a, %b : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  %a2 = mp.mul %y, %cos : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x8xf32>
  %hi2 = mp.slice %y {limits = array<i64: 1, 2, 8>, starts = array<i64: 0, 0, 4>, strides = array<i64: 1, 1, 1>} : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
  %n2 = mp.neg %hi2 : tensor<1x2x4xf32>
  %lo2 = mp.slice %y {limits = array<i64: 1, 2, 4>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
  %r2 = mp.concat %n2, %lo2 {axis = 2 : i64} : (tensor<1x2x4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x8xf32>
  %b2 = mp.mul %r2, %sin : (tensor<1x2x8xf32>, tensor<2x8xf32>) -> tensor<1x2x8xf32>
  %y2 = mp.add %a2, %b2 : (tensor<1x2x8xf32>, tensor<1x2x8xf32>) -> tensor<1x2x8xf32>
  return %y2 : tensor<1x2x8xf32>
}

// -----

// Tests what is not fused: the neg on the lower half (the rotation the
// other way), slices of another tensor than the product's, cos and sin
// broadcast along the channels, and sin of another type than cos.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: mp.rotary
// CHECK: return
func.func @not_fused(%x: tensor<2x4x8x8xf32>, %z: tensor<2x4x8x8xf32>, %cos: tensor<8x8xf32>, %sin: tensor<8x8xf32>, %c1: tensor<8x1xf32>, %s1: tensor<8x1xf32>, %s2: tensor<1x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %wa = mp.mul %x, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %whi = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %wlo = mp.slice %x {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %wn = mp.neg %wlo : tensor<2x4x8x4xf32>
  %wr = mp.concat %whi, %wn {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %wb = mp.mul %wr, %sin : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %y1 = mp.add %wa, %wb : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %oa = mp.mul %x, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %ohi = mp.slice %z {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %on = mp.neg %ohi : tensor<2x4x8x4xf32>
  %olo = mp.slice %z {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %or = mp.concat %on, %olo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %ob = mp.mul %or, %sin : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %y2 = mp.add %oa, %ob : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ca = mp.mul %x, %c1 : (tensor<2x4x8x8xf32>, tensor<8x1xf32>) -> tensor<2x4x8x8xf32>
  %chi = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %cn = mp.neg %chi : tensor<2x4x8x4xf32>
  %clo = mp.slice %x {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %cr = mp.concat %cn, %clo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %cb = mp.mul %cr, %s1 : (tensor<2x4x8x8xf32>, tensor<8x1xf32>) -> tensor<2x4x8x8xf32>
  %y3 = mp.add %ca, %cb : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %sa = mp.mul %x, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %shi = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %sn = mp.neg %shi : tensor<2x4x8x4xf32>
  %slo = mp.slice %x {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %sr = mp.concat %sn, %slo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %sb = mp.mul %sr, %s2 : (tensor<2x4x8x8xf32>, tensor<1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %y4 = mp.add %sa, %sb : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %y1, %y2, %y3, %y4 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests that a train step (a module with backward ops) is left alone.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: mp.rotary
func.func @train_step(%x: tensor<2x4x8x8xf32>, %cos: tensor<8x8xf32>, %sin: tensor<8x8xf32>) -> tensor<2x4x8x8xf32> {
  %ta = mp.mul %x, %cos : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %thi = mp.slice %x {limits = array<i64: 2, 4, 8, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %tn = mp.neg %thi : tensor<2x4x8x4xf32>
  %tlo = mp.slice %x {limits = array<i64: 2, 4, 8, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x4xf32>
  %tr = mp.concat %tn, %tlo {axis = 3 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x8xf32>
  %tb = mp.mul %tr, %sin : (tensor<2x4x8x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8x8xf32>
  %y = mp.add %ta, %tb : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %g = mp.neg %y {mp.backward} : tensor<2x4x8x8xf32>
  return %g : tensor<2x4x8x8xf32>
}
