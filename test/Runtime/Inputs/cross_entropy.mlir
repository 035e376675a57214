module {
  func.func @main(%logits: tensor<2x4xf32>, %ids: tensor<2xi64>) -> tensor<f32> {
    %l = mp.cross_entropy %logits, %ids : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
