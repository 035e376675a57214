// Sequence parallelism's reduce_scatters fused with their bias, residual
// add, norm and the norm's all_gather, on a grid of 2, in the operand
// layouts the artifact writes (mp-fuse-reduced-norms makes them;
// reduced-norms.test runs them). Scattered along dim 1 of 2x6x4 (2 blocks
// of 2 slices of 3 rows) and along dim 0 of 6x4; each residual is the
// rank's slice of an input, and the sums are gathered to be returned.
shard.grid @tp(shape = 2)
func.func @main(%p: tensor<2x6x4xf32>, %x: tensor<2x6x4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>, %bo: tensor<4xf32>, %q: tensor<6x4xf32>, %y: tensor<6x4xf32>) -> (tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %xs = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<2x6x4xf32> -> tensor<2x3x4xf32>
  // A layer_norm without its bias, the linear's bias added.
  %r0 = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x6x4xf32> -> tensor<2x3x4xf32>
  %rb0 = mp.add %r0, %bo : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %h0, %n0 = mp.add_layer_norm %xs, %rb0, %g : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  %n0g = shard.all_gather %n0 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  // A layer_norm with its bias, no linear bias.
  %r1 = shard.reduce_scatter %n0g on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x6x4xf32> -> tensor<2x3x4xf32>
  %h1, %n1 = mp.add_layer_norm %r1, %h0, %g, %b : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  %n1g = shard.all_gather %n1 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  // An rms_norm, the linear's bias added.
  %r2 = shard.reduce_scatter %n1g on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x6x4xf32> -> tensor<2x3x4xf32>
  %rb2 = mp.add %bo, %r2 : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %h2, %n2 = mp.add_rms_norm %h1, %rb2, %g : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>)
  %n2g = shard.all_gather %n2 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  // Scattered along the outermost dim (one block).
  %ys = shard.all_slice %y on @tp grid_axes = [0] slice_axis = 0 : tensor<6x4xf32> -> tensor<3x4xf32>
  %r3 = shard.reduce_scatter %q on @tp grid_axes = [0] scatter_axis = 0 : tensor<6x4xf32> -> tensor<3x4xf32>
  %h3, %n3 = mp.add_rms_norm %ys, %r3, %g : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
  %n3g = shard.all_gather %n3 on @tp grid_axes = [0] gather_axis = 0 : tensor<3x4xf32> -> tensor<6x4xf32>
  // The sums, gathered.
  %h0g = shard.all_gather %h0 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  %h1g = shard.all_gather %h1 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  %h2g = shard.all_gather %h2 on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3x4xf32> -> tensor<2x6x4xf32>
  %h3g = shard.all_gather %h3 on @tp grid_axes = [0] gather_axis = 0 : tensor<3x4xf32> -> tensor<6x4xf32>
  return %h0g, %n0g, %h1g, %n1g, %h2g, %n2g, %h3g, %n3g : tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<2x6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>
}
