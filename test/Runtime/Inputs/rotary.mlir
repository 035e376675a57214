// mp.rotary on each operand layout (rotary.test runs it): rotate_half and
// interleaved pairs, on every channel and on the first 32 of 64, cos and
// sin [S, 64] shared by the batch and [B, 1, S, 32] per batch row, and one
// in the bytes of its input (a sum nothing reads after it). x is large
// enough for the kernel to split its rows over 2 threads, the second
// thread's first row in the middle of a sequence (its table offset found
// without walking from row 0).
func.func @main(%x: tensor<3x5x37x64xf32>, %cos: tensor<37x64xf32>, %sin: tensor<37x64xf32>, %cp: tensor<3x1x37x32xf32>, %sp: tensor<3x1x37x32xf32>)
    -> (tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>) {
  %a = mp.rotary %x, %cos, %sin {rotary_dim = 64 : i64} : (tensor<3x5x37x64xf32>, tensor<37x64xf32>, tensor<37x64xf32>) -> tensor<3x5x37x64xf32>
  %b = mp.rotary %x, %cos, %sin {rotary_dim = 64 : i64, interleaved} : (tensor<3x5x37x64xf32>, tensor<37x64xf32>, tensor<37x64xf32>) -> tensor<3x5x37x64xf32>
  %c = mp.rotary %x, %cp, %sp {rotary_dim = 32 : i64} : (tensor<3x5x37x64xf32>, tensor<3x1x37x32xf32>, tensor<3x1x37x32xf32>) -> tensor<3x5x37x64xf32>
  %d = mp.rotary %x, %cp, %sp {rotary_dim = 32 : i64, interleaved} : (tensor<3x5x37x64xf32>, tensor<3x1x37x32xf32>, tensor<3x1x37x32xf32>) -> tensor<3x5x37x64xf32>
  %e = mp.add %x, %x : (tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>) -> tensor<3x5x37x64xf32>
  %f = mp.rotary %e, %cp, %sp {rotary_dim = 32 : i64} : (tensor<3x5x37x64xf32>, tensor<3x1x37x32xf32>, tensor<3x1x37x32xf32>) -> tensor<3x5x37x64xf32>
  return %a, %b, %c, %d, %f : tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>, tensor<3x5x37x64xf32>
}
