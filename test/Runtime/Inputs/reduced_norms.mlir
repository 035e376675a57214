// The three operand layouts of the all-reduces fused with their norms, on a
// grid of 2 (mp-fuse-reduced-norms makes them; reduced-norms.test runs them).
shard.grid @tp(shape = 2)
func.func @main(%p: tensor<3x4xf32>, %x: tensor<3x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %bo: tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  // A layer_norm without its bias, the linear's bias added.
  %r0 = shard.all_reduce %p on @tp grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
  %rb0 = mp.add %r0, %bo : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %h0, %n0 = mp.add_layer_norm %x, %rb0, %g : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
  // A layer_norm with its bias, no linear bias.
  %r1 = shard.all_reduce %h0 on @tp grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
  %h1, %n1 = mp.add_layer_norm %r1, %n0, %g, %b : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
  // An rms_norm, the linear's bias added.
  %r2 = shard.all_reduce %n1 on @tp grid_axes = [0] : tensor<3x4xf32> -> tensor<3x4xf32>
  %rb2 = mp.add %bo, %r2 : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %h2, %n2 = mp.add_rms_norm %h1, %rb2, %g : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
  return %h0, %n0, %h1, %n1, %h2, %n2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}
