// A linear and an attention whose GEMMs are oneDNN's where it is the GEMM
// library (omp-settings.test runs it under OpenMP settings that shrink
// teams).
func.func @main(%x: tensor<256x2048xf32>, %w: tensor<2048x512xf32>, %q: tensor<1x2x64x64xf32>, %k: tensor<1x2x1024x64xf32>, %v: tensor<1x2x1024x64xf32>)
    -> (tensor<256x512xf32>, tensor<1x2x64x64xf32>) {
  %y = mp.linear %x, %w : (tensor<256x2048xf32>, tensor<2048x512xf32>) -> tensor<256x512xf32>
  %a = mp.attention %q, %k, %v {scale = 0.125 : f32, causal} : (tensor<1x2x64x64xf32>, tensor<1x2x1024x64xf32>, tensor<1x2x1024x64xf32>) -> tensor<1x2x64x64xf32>
  return %y, %a : tensor<256x512xf32>, tensor<1x2x64x64xf32>
}
