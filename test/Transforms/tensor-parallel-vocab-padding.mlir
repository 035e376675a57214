// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --split-input-file | FileCheck %s
// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --mp-loss --split-input-file | FileCheck %s --check-prefix=LOSS

// Tests that a vocabulary of 10 is padded with zero rows to 12 under tp=4,
// as Megatron pads it: the tied embedding/LM head and the head's bias read
// parts [0, 12) of the user's parameters (zeros past their 10), the
// embedding keeps ids to the 10 (`vocab`: negative ones count from its
// end), and the gathered logits are sliced back to 10. With the loss, the padding columns are pushed to -1e30
// on each rank's block (the logits are never gathered) and labels are kept
// to the 10.
mp.param @wte : tensor<10x8xf32> {file = "x.onnx"}
mp.param @head_bias : tensor<10xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>) -> tensor<2x4x10xf32> {
  %wte = mp.get_param @wte : tensor<10x8xf32>
  %b = mp.get_param @head_bias : tensor<10xf32>
  %x = mp.embedding %wte, %ids : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = mp.linear %x, %wte, %b {transpose_weight} : (tensor<2x4x8xf32>, tensor<10x8xf32>, tensor<10xf32>) -> tensor<2x4x10xf32>
  return %y : tensor<2x4x10xf32>
}
// CHECK:     mp.param @"wte[0:12]" : tensor<12x8xf32> {{{.*}}grid = @tp, initializer = "wte", part = array<i64: 0, 0, 10>, part_of = "wte", shard_axis = 0 : i64}
// CHECK:     mp.param @"head_bias[0:12]" : tensor<12xf32> {{{.*}}part = array<i64: 0, 0, 10>, part_of = "head_bias", shard_axis = 0 : i64}
// CHECK-NOT: mp.param @wte
// CHECK:     %[[W:.*]] = mp.get_param @"wte[0:12]" : tensor<3x8xf32>
// CHECK:     mp.embedding %[[W]], %arg0 {grid = @tp, vocab = 10 : i64} : (tensor<3x8xf32>, tensor<2x4xi64>)
// CHECK:     %[[LOCAL:.*]] = mp.linear {{.*}} -> tensor<2x4x3xf32>
// CHECK:     %[[ALL:.*]] = shard.all_gather %[[LOCAL]] {{.*}} -> tensor<2x4x12xf32>
// CHECK:     %[[OUT:.*]] = mp.slice %[[ALL]] {limits = array<i64: 2, 4, 10>, starts = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>} : tensor<2x4x12xf32> -> tensor<2x4x10xf32>
// CHECK:     return %[[OUT]]

// LOSS:      %[[LOCAL:.*]] = mp.linear {{.*}} -> tensor<2x4x3xf32>
// LOSS:      %[[MASK:.*]] = mp.constant dense<[{{(0.000000e\+00, )+}}-1.000000e+30, -1.000000e+30]> : tensor<12xf32>
// LOSS:      %[[MINE:.*]] = shard.all_slice %[[MASK]] on @tp grid_axes = [0] slice_axis = 0 : tensor<12xf32> -> tensor<3xf32>
// LOSS:      %[[MASKED:.*]] = mp.add %[[LOCAL]], %[[MINE]]
// LOSS:      mp.vocab_parallel_cross_entropy %[[MASKED]], %arg1 {grid = @tp, vocab = 10 : i64}
// LOSS-NOT:  shard.all_gather

// -----

// Tests an untied head ([hidden, vocab], not transposed) of the padded
// embedding's vocabulary: padded along its dim 1, apart from the table.
mp.param @wte : tensor<10x8xf32> {file = "x.onnx"}
mp.param @head : tensor<8x10xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>) -> tensor<2x4x10xf32> {
  %wte = mp.get_param @wte : tensor<10x8xf32>
  %w = mp.get_param @head : tensor<8x10xf32>
  %x = mp.embedding %wte, %ids : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = mp.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x10xf32>) -> tensor<2x4x10xf32>
  return %y : tensor<2x4x10xf32>
}
// CHECK:       mp.param @"wte[0:12]" : tensor<12x8xf32>
// CHECK-NEXT:  mp.param @"head[:, 0:12]" : tensor<8x12xf32> {{{.*}}part = array<i64: 1, 0, 10>, part_of = "head", shard_axis = 1 : i64}
// CHECK:       mp.linear {{.*}} : (tensor<2x4x8xf32>, tensor<8x3xf32>) -> tensor<2x4x3xf32>
// CHECK:       mp.slice {{.*}} : tensor<2x4x12xf32> -> tensor<2x4x10xf32>

// -----

// Tests two embeddings of one table (T5's encoder and decoder): both keep
// their ids to the user's vocabulary, though the table is padded once.
mp.param @shared : tensor<10x8xf32> {file = "x.onnx"}
func.func @main(%a: tensor<2x4xi64>, %b: tensor<2x4xi64>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %t = mp.get_param @shared : tensor<10x8xf32>
  %x = mp.embedding %t, %a : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = mp.embedding %t, %b : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  return %x, %y : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
// CHECK:     mp.param @"shared[0:12]" : tensor<12x8xf32>
// CHECK:     mp.embedding {{.*}}, %arg0 {grid = @tp, vocab = 10 : i64}
// CHECK:     mp.embedding {{.*}}, %arg1 {grid = @tp, vocab = 10 : i64}
