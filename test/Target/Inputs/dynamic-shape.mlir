// Input of plan-errors.test: an argument of dynamic shape.
func.func @main(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = mp.exp %x : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}
