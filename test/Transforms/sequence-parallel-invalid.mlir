// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --mp-sequence-parallel --split-input-file --verify-diagnostics

// Tests that a sequence that does not divide by the tensor-parallel size is
// an error on the row-parallel linear whose all-reduce would scatter it,
// when no other dim of the activations (the batch, 2) divides either.
mp.param @up : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x6x8xf32>) -> tensor<2x6x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x6x8xf32>, tensor<8x16xf32>) -> tensor<2x6x16xf32>
  // expected-error @below {{sequence length (6) is not divisible by the tensor-parallel size 4, which sequence parallelism splits it by (it splits dimension 1 of the activations 'tensor<2x6x8xf32>', the one before the hidden size, or else another that divides: none does)}}
  %y = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<2x6x16xf32>, tensor<16x8xf32>) -> tensor<2x6x8xf32>
  return %y : tensor<2x6x8xf32>
}
