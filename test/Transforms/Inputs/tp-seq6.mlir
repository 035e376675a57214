// Input of tensor-parallel-errors.test: a sequence of 6 (not divisible by 4).
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x6x8xf32>) -> tensor<2x6x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x6x8xf32>, tensor<8x16xf32>) -> tensor<2x6x16xf32>
  %a = mp.gelu %h {mp.layer = 0 : i64} : tensor<2x6x16xf32>
  %y = mp.linear %a, %down {mp.layer = 0 : i64} : (tensor<2x6x16xf32>, tensor<16x8xf32>) -> tensor<2x6x8xf32>
  return %y : tensor<2x6x8xf32>
}
