// RUN: mp-opt %s --mp-tensor-parallel=tp=4 --split-input-file --verify-diagnostics

// Tests that attention heads that do not divide by the tensor-parallel size
// are an error on the attention.
mp.param @qkv : tensor<8x24xf32> {file = "x.onnx"}
mp.param @o : tensor<8x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %wqkv = mp.get_param @qkv {mp.layer = 0 : i64} : tensor<8x24xf32>
  %wo = mp.get_param @o {mp.layer = 0 : i64} : tensor<8x8xf32>
  %qkv = mp.linear %x, %wqkv {mp.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x24xf32>) -> tensor<1x4x24xf32>
  %s:3 = mp.split %qkv {axis = 2 : i64, mp.layer = 0 : i64} : tensor<1x4x24xf32> -> tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>
  %q = mp.reshape %s#0 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %k = mp.reshape %s#1 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %v = mp.reshape %s#2 {mp.layer = 0 : i64} : tensor<1x4x8xf32> -> tensor<1x4x2x4xf32>
  %qt = mp.transpose %q [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %kt = mp.transpose %k [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  %vt = mp.transpose %v [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x2x4x4xf32>
  // expected-error @below {{attention heads (2) are not divisible by the tensor-parallel size 4}}
  %a = mp.attention %qt, %kt, %vt {causal, scale = 0.5 : f32, mp.layer = 0 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %ar = mp.reshape %at {mp.layer = 0 : i64} : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %y = mp.linear %ar, %wo {mp.layer = 0 : i64} : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Tests that a vocabulary that does not divide, whose table something other
// than the embedding and the LM head reads, cannot be padded: an error on
// that reader.
mp.param @wte : tensor<10x8xf32> {file = "x.onnx"}
func.func @main(%ids: tensor<2x4xi64>) -> (tensor<2x4x8xf32>, tensor<8xf32>) {
  %wte = mp.get_param @wte : tensor<10x8xf32>
  %x = mp.embedding %wte, %ids : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  // expected-error @below {{the vocabulary of parameter 'wte' (10) would be padded to 12 to divide by the tensor-parallel size, but this op reads the parameter too}}
  %s = mp.reduce sum, %wte {axes = array<i64: 0>, keepdims = false} : tensor<10x8xf32> -> tensor<8xf32>
  return %x, %s : tensor<2x4x8xf32>, tensor<8xf32>
}

// -----

// Tests that a head whose outputs do not divide (a classifier's 10
// classes) stays whole with a warning, unlike a word embedding.
mp.param @head : tensor<8x10xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x8xf32>) -> tensor<2x10xf32> {
  %w = mp.get_param @head : tensor<8x10xf32>
  // expected-warning @below {{this head stays whole (replicated on all 4 ranks): its 10 outputs are not divisible by the tensor-parallel size; pad them to a multiple of it to split it, as Megatron pads its vocabulary}}
  %y = mp.linear %x, %w : (tensor<2x8xf32>, tensor<8x10xf32>) -> tensor<2x10xf32>
  return %y : tensor<2x10xf32>
}

// -----

// Tests that a split linear output that does not divide is an error on the
// linear that produces it.
mp.param @up : tensor<8x6xf32> {file = "x.onnx"}
mp.param @down : tensor<6x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @up {mp.layer = 0 : i64} : tensor<8x6xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<6x8xf32>
  // expected-error @below {{dimension 2 (size 6) of this result is not divisible by the tensor-parallel size 4}}
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %y = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<2x4x6xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that a symbol already named like the grid to create is an error on
// it, naming the option that picks another name.
// expected-error @below {{symbol 'tp' exists and is not a 1-d shard.grid of 4 ranks; pass another grid name (grid=...)}}
mp.param @tp : tensor<8x16xf32> {file = "x.onnx"}
mp.param @down : tensor<16x8xf32> {file = "x.onnx"}
func.func @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %up = mp.get_param @tp {mp.layer = 0 : i64} : tensor<8x16xf32>
  %down = mp.get_param @down {mp.layer = 0 : i64} : tensor<16x8xf32>
  %h = mp.linear %x, %up {mp.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %y = mp.linear %h, %down {mp.layer = 0 : i64} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Tests that key/value heads that neither divide by the ranks nor divide
// them (6 for 12 query heads under tp=4; 2 would be repeated, one per
// rank) are an error on the attention.
mp.param @wq : tensor<48x48xf32> {file = "x.onnx"}
mp.param @wk : tensor<48x24xf32> {file = "x.onnx"}
mp.param @wv : tensor<48x24xf32> {file = "x.onnx"}
mp.param @wo : tensor<48x48xf32> {file = "x.onnx"}
func.func @main(%x: tensor<1x4x48xf32>) -> tensor<1x4x48xf32> {
  %wq = mp.get_param @wq {mp.layer = 0 : i64} : tensor<48x48xf32>
  %wo = mp.get_param @wo {mp.layer = 0 : i64} : tensor<48x48xf32>
  %wk = mp.get_param @wk {mp.layer = 0 : i64} : tensor<48x24xf32>
  %wv = mp.get_param @wv {mp.layer = 0 : i64} : tensor<48x24xf32>
  %q = mp.linear %x, %wq {mp.layer = 0 : i64} : (tensor<1x4x48xf32>, tensor<48x48xf32>) -> tensor<1x4x48xf32>
  %k = mp.linear %x, %wk {mp.layer = 0 : i64} : (tensor<1x4x48xf32>, tensor<48x24xf32>) -> tensor<1x4x24xf32>
  %v = mp.linear %x, %wv {mp.layer = 0 : i64} : (tensor<1x4x48xf32>, tensor<48x24xf32>) -> tensor<1x4x24xf32>
  %q4 = mp.reshape %q {mp.layer = 0 : i64} : tensor<1x4x48xf32> -> tensor<1x4x12x4xf32>
  %k4 = mp.reshape %k {mp.layer = 0 : i64} : tensor<1x4x24xf32> -> tensor<1x4x6x4xf32>
  %v4 = mp.reshape %v {mp.layer = 0 : i64} : tensor<1x4x24xf32> -> tensor<1x4x6x4xf32>
  %qt = mp.transpose %q4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x12x4xf32> -> tensor<1x12x4x4xf32>
  %kt = mp.transpose %k4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x6x4xf32> -> tensor<1x6x4x4xf32>
  %vt = mp.transpose %v4 [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x4x6x4xf32> -> tensor<1x6x4x4xf32>
  // expected-error @below {{key/value heads (6) are not divisible by the tensor-parallel size 4}}
  %a = mp.attention %qt, %kt, %vt {causal, mp.layer = 0 : i64, scale = 0.5 : f32} : (tensor<1x12x4x4xf32>, tensor<1x6x4x4xf32>, tensor<1x6x4x4xf32>) -> tensor<1x12x4x4xf32>
  %at = mp.transpose %a [0, 2, 1, 3] {mp.layer = 0 : i64} : tensor<1x12x4x4xf32> -> tensor<1x4x12x4xf32>
  %m = mp.reshape %at {mp.layer = 0 : i64} : tensor<1x4x12x4xf32> -> tensor<1x4x48xf32>
  %o = mp.linear %m, %wo {mp.layer = 0 : i64} : (tensor<1x4x48xf32>, tensor<48x48xf32>) -> tensor<1x4x48xf32>
  return %o : tensor<1x4x48xf32>
}
