// RUN: mp-opt %s --split-input-file --verify-diagnostics

// Tests that a parameter must have a static shape.
// expected-error @below {{parameter shape must be static}}
mp.param @p : tensor<?xf32>

// -----

// expected-error @below {{'offset' and 'length' must be given together}}
mp.param @p : tensor<2xf32> {file = "w.bin", offset = 0 : i64}

// -----

// expected-error @below {{'offset' needs a 'file'}}
mp.param @p : tensor<2xf32> {offset = 0 : i64, length = 8 : i64}

// -----

// expected-error @below {{offset -4 is negative}}
mp.param @p : tensor<2xf32> {file = "w.bin", offset = -4 : i64, length = 8 : i64}

// -----

// expected-error @below {{data length 7 does not match the 8 bytes of 'tensor<2xf32>'}}
mp.param @p : tensor<2xf32> {file = "w.bin", offset = 0 : i64, length = 7 : i64}

// -----

// expected-error @below {{preview element type 'f16' differs from the parameter's 'f32'}}
mp.param @p : tensor<2xf32> {preview = dense<1.0> : tensor<1xf16>}

// -----

// expected-error @below {{preview has more values than the parameter}}
mp.param @p : tensor<2xf32> {preview = dense<1.0> : tensor<3xf32>}

// -----

func.func @f() {
  // expected-error @below {{'@missing' does not reference an mp.param}}
  %0 = mp.get_param @missing : tensor<2xf32>
  return
}

// -----

mp.param @p : tensor<2xf32>
func.func @f() {
  // expected-error @below {{result type 'tensor<3xf32>' differs from the type 'tensor<2xf32>' of parameter '@p'}}
  %0 = mp.get_param @p : tensor<3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @below {{operands don't have broadcast-compatible shapes}}
  %0 = mp.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @below {{result type '2x4' not broadcast compatible with broadcasted operands's shapes '2x3'}}
  %0 = mp.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @below {{result type '3' not broadcast compatible with broadcasted operands's shapes '2x3'}}
  %0 = mp.compare eq, %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xi1>
  return
}

// -----

func.func @f(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @below {{operands don't have broadcast-compatible shapes}}
  %0 = mp.where %c, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<f32>, %b: tensor<3xf32>) {
  // expected-error @below {{operands must have rank >= 1}}
  %0 = mp.matmul %a, %b : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @below {{contracting dimensions differ: lhs has 3, rhs has 4}}
  %0 = mp.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @f(%a: tensor<2x2x3xf32>, %b: tensor<3x3x5xf32>) {
  // expected-error @below {{batch dimensions of 2x2x3 and 3x3x5 are not broadcastable}}
  %0 = mp.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x3x5xf32>) -> tensor<2x2x5xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @below {{expected result shape 2x5 but found 2x6}}
  %0 = mp.matmul %a, %b : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%x: tensor<f32>, %w: tensor<3x5xf32>) {
  // expected-error @below {{input must have rank >= 1}}
  %0 = mp.linear %x, %w : (tensor<f32>, tensor<3x5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %w: tensor<3xf32>) {
  // expected-error @below {{weight must have rank 2 but has rank 1}}
  %0 = mp.linear %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x5xf32>) {
  // expected-error @below {{input feature size 3 does not match weight input size 5}}
  %0 = mp.linear %x, %w {transpose_weight} : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x5xf32>, %b: tensor<3xf32>) {
  // expected-error @below {{expected bias shape 5 but found 3}}
  %0 = mp.linear %x, %w, %b : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x5xf32>) {
  // expected-error @below {{expected result shape 2x5 but found 2x4}}
  %0 = mp.linear %x, %w : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{axis 2 is out of range for rank 2}}
  %0 = mp.layer_norm %x, %s {axis = 2 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{epsilon must be positive}}
  %0 = mp.layer_norm %x, %s {epsilon = 0.0 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @below {{expected scale shape 3 but found 2}}
  %0 = mp.layer_norm %x, %s : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

// Tests the fused residual norms: the norm's rule, a positive epsilon, and
// operands and results of one type.
func.func @f(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @below {{expected scale shape 3 but found 2}}
  %0:2 = mp.add_layer_norm %x, %x, %s : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{epsilon must be positive}}
  %0:2 = mp.add_rms_norm %x, %x, %s {epsilon = -1.0 : f32} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

// (A 16-bit sum's norm takes f32 or 16-bit parameters; an f32 sum's f32.)
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xbf16>, %h: tensor<2x3xbf16>) {
  %0:2 = mp.add_rms_norm %h, %h, %s : (tensor<2x3xbf16>, tensor<2x3xbf16>, tensor<3xbf16>) -> (tensor<2x3xbf16>, tensor<2x3xbf16>)
  // expected-error @below {{an f32 sum's norm takes f32 parameters, not 'tensor<3xbf16>'}}
  %1:2 = mp.add_rms_norm %x, %x, %s : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xbf16>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

// Tests the all-reduces fused with their norms: a grid that exists, an axis
// of it, an addend of one value per feature, and the norm's rule.
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{grid @tp is not a shard.grid}}
  %0:2 = mp.all_reduce_add_rms_norm %x, %x, %s {grid = @tp, grid_axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{grid_axis 1 is not an axis of @tp}}
  %0:2 = mp.all_reduce_add_rms_norm %x, %x, %s {grid = @tp, grid_axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %a: tensor<2x3xf32>) {
  // expected-error @below {{expected addend shape 3 (one value per feature) but found 2x3}}
  %0:2 = mp.all_reduce_add_layer_norm %x, %x, %s addend %a {grid = @tp, grid_axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @below {{expected scale shape 3 but found 2}}
  %0:2 = mp.all_reduce_add_layer_norm %x, %x, %s {grid = @tp, grid_axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

// The sequence-parallel form: the sum is this rank's slice along
// scatter_axis, a dim before the norm's; the grid is checked as above.
shard.grid @tp(shape = 2)
func.func @f(%x: tensor<4x3xf32>, %h: tensor<4x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{expected sum shape 2x3 (a slice of 4x3 along dim 0 over 2 ranks) but found 4x3}}
  %0:2 = mp.reduce_scatter_add_rms_norm %x, %h, %s {grid = @tp, grid_axis = 0 : i64, scatter_axis = 0 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<4x4xf32>, %h: tensor<4x2xf32>, %s: tensor<2xf32>) {
  // expected-error @below {{scatter_axis 1 must be a dim before the norm's axis 1}}
  %0:2 = mp.reduce_scatter_add_layer_norm %x, %h, %s {grid = @tp, grid_axis = 0 : i64, scatter_axis = 1 : i64} : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<4x3xf32>, %h: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{grid_axis 1 is not an axis of @tp}}
  %0:2 = mp.reduce_scatter_add_rms_norm %x, %h, %s {grid = @tp, grid_axis = 1 : i64, scatter_axis = 0 : i64} : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<4x3xf32>)
  return
}

// -----

shard.grid @tp(shape = 2)
func.func @f(%x: tensor<3x3xf32>, %h: tensor<1x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{dim 0 of 3x3 does not divide over 2 ranks}}
  %0:2 = mp.reduce_scatter_add_rms_norm %x, %h, %s {grid = @tp, grid_axis = 0 : i64, scatter_axis = 0 : i64} : (tensor<3x3xf32>, tensor<1x3xf32>, tensor<3xf32>) -> (tensor<1x3xf32>, tensor<3x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %y: tensor<1x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{all of {lhs, rhs, sum, result} have same type}}
  %0:2 = mp.add_rms_norm %x, %y, %s : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<2xf32>) {
  // expected-error @below {{expected bias shape 3 but found 2}}
  %0 = mp.layer_norm %x, %s, %b : (tensor<2x3xf32>, tensor<3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{result element type 'f16' differs from the expected 'f32'}}
  %0 = mp.layer_norm %x, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @f(%x: tensor<f32>, %s: tensor<1xf32>) {
  // expected-error @below {{input must have rank >= 1}}
  %0 = mp.rms_norm %x, %s : (tensor<f32>, tensor<1xf32>) -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{epsilon must be positive}}
  %0 = mp.rms_norm %x, %s {epsilon = -1.0 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<2xf32>) {
  // expected-error @below {{expected scale shape 3 but found 2}}
  %0 = mp.rms_norm %x, %s : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %s: tensor<3xf32>) {
  // expected-error @below {{expected result shape 2x3 but found 3x2}}
  %0 = mp.rms_norm %x, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @below {{axis -3 is out of range for rank 2}}
  %0 = mp.softmax %x {axis = -3 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @below {{axis 5 is out of range for rank 2}}
  %0 = mp.reduce sum, %x {axes = array<i64: 5>} : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @below {{axis -1 is repeated}}
  %0 = mp.reduce sum, %x {axes = array<i64: 1, -1>} : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @below {{expected result shape 2 but found 2x1}}
  %0 = mp.reduce max, %x {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8xf32>) {
  // expected-error @below {{query, key and value must be [B, H, S, D]}}
  %0 = mp.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>, %k: tensor<3x4x8x8xf32>) {
  // expected-error @below {{batch sizes differ: 2, 3, 3}}
  %0 = mp.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<3x4x8x8xf32>, tensor<3x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>, %v: tensor<2x4x6x8xf32>) {
  // expected-error @below {{key 2x4x8x8 and value 2x4x6x8 must agree in heads and sequence}}
  %0 = mp.attention %q, %q, %v {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x4xf32>) {
  // expected-error @below {{query head size 8 differs from key head size 4}}
  %0 = mp.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> tensor<2x4x8x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>, %k: tensor<2x3x8x8xf32>) {
  // expected-error @below {{query heads (4) must be a multiple of key/value heads (3)}}
  %0 = mp.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>) {
  // expected-error @below {{scale must be positive}}
  %0 = mp.attention %q, %q, %q {scale = 0.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>, %m: tensor<7x8xf32>) {
  // expected-error @below {{mask shape 7x8 does not broadcast to the scores shape 2x4x8x8}}
  %0 = mp.attention %q, %q, %q, %m {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<7x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @f(%q: tensor<2x4x8x8xf32>) {
  // expected-error @below {{expected result shape 2x4x8x8 but found 2x8x4x8}}
  %0 = mp.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
  return
}

// -----

func.func @f(%t: tensor<64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @below {{table must have rank 2 but has rank 1}}
  %0 = mp.embedding %t, %ids : (tensor<64xf32>, tensor<2x8xi64>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%t: tensor<64x32xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @below {{expected result shape 2x8x32 but found 2x32}}
  %0 = mp.embedding %t, %ids : (tensor<64x32xf32>, tensor<2x8xi64>) -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%t: tensor<64x32xf32>, %ids: tensor<2xi64>) {
  // expected-error @below {{axis 2 is out of range for rank 2}}
  %0 = mp.gather %t, %ids {axis = 2 : i64} : (tensor<64x32xf32>, tensor<2xi64>) -> tensor<64x2xf32>
  return
}

// -----

func.func @f(%t: tensor<64x32xf32>, %ids: tensor<2xi64>) {
  // expected-error @below {{expected result shape 64x2 but found 2x32}}
  %0 = mp.gather %t, %ids {axis = 1 : i64} : (tensor<64x32xf32>, tensor<2xi64>) -> tensor<2x32xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error @below {{ratio 1.000000e+00 is not in [0, 1)}}
  %0 = mp.dropout %x {ratio = 1.0 : f32} : tensor<2xf32>
  return
}

// -----

func.func @f(%l: tensor<f32>, %t: tensor<i64>) {
  // expected-error @below {{logits must have rank >= 1}}
  %0 = mp.cross_entropy %l, %t : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x8x64xf32>, %t: tensor<2x7xi64>) {
  // expected-error @below {{expected targets shape 2x8 but found 2x7}}
  %0 = mp.cross_entropy %l, %t : (tensor<2x8x64xf32>, tensor<2x7xi64>) -> tensor<f32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @below {{equation 'i,j->ij' has 2 input terms but 1 operands were given}}
  %0 = mp.einsum "i,j->ij" %a : (tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @below {{label 'j' has size 3 and 4}}
  %0 = mp.einsum "ij,jk->ik" %a, %b : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @below {{expected result shape 4x5 but found 5x4}}
  %0 = mp.einsum "i,j->ij" %a, %b : (tensor<4xf32>, tensor<5xf32>) -> tensor<5x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @below {{input must have rank >= 2}}
  %0 = mp.trilu %a : tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{cannot reshape 2x8 (16 elements) to 3x5 (15 elements)}}
  %0 = mp.reshape %x : tensor<2x8xf32> -> tensor<3x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{permutation has 3 entries but the input has rank 2}}
  %0 = mp.transpose %x [0, 1, 2] : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{invalid permutation entry 0}}
  %0 = mp.transpose %x [0, 0] : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{expected result shape 8x2 but found 2x8}}
  %0 = mp.transpose %x [1, 0] : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{starts, limits and strides must have 2 entries each}}
  %0 = mp.slice %x {starts = array<i64: 0>, limits = array<i64: 2>, strides = array<i64: 1>} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{stride of dimension 1 is zero}}
  %0 = mp.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 8>, strides = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{slice [0, 9) step 1 is out of bounds for dimension 1 of size 8}}
  %0 = mp.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 9>, strides = array<i64: 1, 1>} : tensor<2x8xf32> -> tensor<2x9xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>) {
  // expected-error @below {{expected result shape 2x4 but found 2x3}}
  %0 = mp.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 8>, strides = array<i64: 1, 2>} : tensor<2x8xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @f() {
  // expected-error @below {{needs at least one input}}
  %0 = mp.concat {axis = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @below {{inputs must share element type and rank}}
  %0 = mp.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @below {{input shapes 2x3 and 2x4 differ outside axis 0}}
  %0 = mp.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{result element type 'f16' differs from the expected 'f32'}}
  %0 = mp.concat %a, %a {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf16>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{expected result shape 4x3 but found 4x6}}
  %0 = mp.concat %a, %a {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{needs at least one result}}
  "mp.split"(%a) {axis = 0 : i64} : (tensor<2x3xf32>) -> ()
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{results must match the input's element type and rank}}
  %0:2 = mp.split %a {axis = 0 : i64} : tensor<2x3xf32> -> tensor<1x3xf16>, tensor<1x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{result shape 1x2 differs from the input outside axis 0}}
  %0:2 = mp.split %a {axis = 0 : i64} : tensor<2x3xf32> -> tensor<1x2xf32>, tensor<1x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{split sizes add up to 3 but the input dimension 0 is 2}}
  %0:2 = mp.split %a {axis = 0 : i64} : tensor<2x3xf32> -> tensor<1x3xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x3xf32>) {
  // expected-error @below {{cannot broadcast 2x3 to 4x3}}
  %0 = mp.expand %a : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

// Tests the sharding of parameters (checked where they are read).
// expected-error @below {{grid 'missing' is not a shard.grid}}
mp.param @p : tensor<6x4xf32> {grid = @missing, shard_axis = 0 : i64}
func.func @f() {
  %0 = mp.get_param @p : tensor<3x4xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
// expected-error @below {{dimension 0 (6) is not divisible by 1 group(s) x 4 ranks}}
mp.param @p : tensor<6x4xf32> {grid = @tp, shard_axis = 0 : i64}
func.func @f() {
  %0 = mp.get_param @p : tensor<1x4xf32>
  return
}

// -----

shard.grid @tp(shape = 2)
// expected-error @below {{invalid shard_axis 2 or shard_groups 1}}
mp.param @p : tensor<6x4xf32> {grid = @tp, shard_axis = 2 : i64}
func.func @f() {
  %0 = mp.get_param @p : tensor<3x4xf32>
  return
}

// -----

shard.grid @tp(shape = 2)
mp.param @p : tensor<12x4xf32> {grid = @tp, shard_axis = 0 : i64, shard_groups = 3 : i64}
func.func @f() {
  // expected-error @+1 {{result type 'tensor<12x4xf32>' differs from the type 'tensor<6x4xf32>' of parameter '@p' (local shard)}}
  %0 = mp.get_param @p : tensor<12x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x32xf32>, %dy: tensor<2x7x96xf32>) {
  // expected-error @+1 {{expected result gradient's leading dims shape 2x8 but found 2x7}}
  %0 = mp.linear_weight_grad %x, %dy : (tensor<2x8x32xf32>, tensor<2x7x96xf32>) -> tensor<32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8x32xf32>, %dy: tensor<2x8x96xf32>) {
  // expected-error @+1 {{expected result shape 96x32 but found 32x96}}
  %0 = mp.linear_weight_grad %x, %dy {transpose_weight} : (tensor<2x8x32xf32>, tensor<2x8x96xf32>) -> tensor<32x96xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{expected result gradient shape 2x8 but found 2x4}}
  %0:2 = mp.rms_norm_grad %x, %s, %dy {epsilon = 1.0e-6 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x4xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>) {
  // expected-error @+1 {{expected result gradient shape 2x8x32 but found 2x8x16}}
  %0 = mp.embedding_grad %ids, %dy : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @f(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{expected result gradient shape 2x3 but found 2x4}}
  %0 = mp.slice_grad %dy {starts = array<i64: 0, 1>, limits = array<i64: 2, 4>, strides = array<i64: 1, 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%logits: tensor<2x8x64xf32>, %t: tensor<2x8xi64>, %g: tensor<2xf32>) {
  // expected-error @+1 {{'mp.cross_entropy_grad' op operand #2 must be 0D tensor of floating-point values}}
  %0 = mp.cross_entropy_grad %logits, %t, %g : (tensor<2x8x64xf32>, tensor<2x8xi64>, tensor<2xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x4xf32>, %c: tensor<4x6xf32>) {
  // expected-error @+1 {{rotary_dim 6 must be even, positive and at most the last dim, 4}}
  %0 = mp.rotary %x, %c, %c {rotary_dim = 6 : i64} : (tensor<2x4x4xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %c: tensor<4x4xf32>) {
  // expected-error @+1 {{rotary_dim 3 must be even}}
  %0 = mp.rotary %x, %c, %c {rotary_dim = 3 : i64} : (tensor<2x4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %c: tensor<4x8xf32>) {
  // expected-error @+1 {{cos and sin 4x8 must have rotary_dim channels}}
  %0 = mp.rotary %x, %c, %c {rotary_dim = 4 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x4x8xf32>, %c: tensor<3x8xf32>) {
  // expected-error @+1 {{cos and sin 3x8 do not broadcast to the input 2x4x8}}
  %0 = mp.rotary %x, %c, %c {rotary_dim = 8 : i64} : (tensor<2x4x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x4x8xf32>
  return
}
