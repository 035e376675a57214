// mp.rotary on each operand layout (rotary.test runs it): rotate_half and
// interleaved pairs, on every channel and on the first 4 of 8, cos and sin
// [S, 8] shared by the batch and [B, 1, S, 4] per batch row, and one in the
// bytes of its input (a sum nothing reads after it).
func.func @main(%x: tensor<2x3x4x8xf32>, %cos: tensor<4x8xf32>, %sin: tensor<4x8xf32>, %cp: tensor<2x1x4x4xf32>, %sp: tensor<2x1x4x4xf32>)
    -> (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) {
  %a = mp.rotary %x, %cos, %sin {rotary_dim = 8 : i64} : (tensor<2x3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4x8xf32>
  %b = mp.rotary %x, %cos, %sin {rotary_dim = 8 : i64, interleaved} : (tensor<2x3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4x8xf32>
  %c = mp.rotary %x, %cp, %sp {rotary_dim = 4 : i64} : (tensor<2x3x4x8xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x8xf32>
  %d = mp.rotary %x, %cp, %sp {rotary_dim = 4 : i64, interleaved} : (tensor<2x3x4x8xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x8xf32>
  %e = mp.add %x, %x : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %f = mp.rotary %e, %cp, %sp {rotary_dim = 4 : i64} : (tensor<2x3x4x8xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x3x4x8xf32>
  return %a, %b, %c, %d, %f : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>
}
