// Input of errors.test: an output whose name would leave the output
// directory if used as a path.
func.func @main(%x: tensor<2xf32> {mp.name = "x"}) -> (tensor<2xf32> {mp.name = "../../x"}) {
  %0 = mp.exp %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}
