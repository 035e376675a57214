// RUN: mp-opt %s --split-input-file --mp-autodiff | FileCheck %s

// The backward IR of each derivative rule (AutodiffOpInterface, on the
// ops): every case's loss is the function's one scalar result, and the
// function then also returns one gradient per parameter, named grads/NAME.

// Linear: dx reads W the other way round, dW is one linear_weight_grad, the
// bias gradient sums over the leading dims.
module {
  mp.param @w : tensor<4x6xf32>
  mp.param @b : tensor<6xf32>
  mp.param @w2 : tensor<4x6xf32>
  func.func @main(%x: tensor<2x3x4xf32>) -> tensor<f32> {
    %w = mp.get_param @w : tensor<4x6xf32>
    %b = mp.get_param @b : tensor<6xf32>
    %h = mp.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<4x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
    %w2 = mp.get_param @w2 : tensor<4x6xf32>
    %y = mp.linear %h, %w2 {transpose_weight} : (tensor<2x3x6xf32>, tensor<4x6xf32>) -> tensor<2x3x4xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main(%arg0: tensor<2x3x4xf32>) -> (tensor<f32>, tensor<4x6xf32> {mp.name = "grads/w"}, tensor<6xf32> {mp.name = "grads/b"}, tensor<4x6xf32> {mp.name = "grads/w2"})
// CHECK:   %[[W:.*]] = mp.get_param @w :
// CHECK:   %[[H:.*]] = mp.linear %arg0, %[[W]], %{{.*}} :
// CHECK:   %[[W2:.*]] = mp.get_param @w2 :
// CHECK:   %[[LOSS:.*]] = mp.reduce sum
// CHECK:   %[[ONE:.*]] = mp.constant dense<1.000000e+00> : tensor<f32>
// CHECK:   %[[DY:.*]] = mp.expand {{.*}} -> tensor<2x3x4xf32>
// CHECK:   %[[DH:.*]] = mp.linear %[[DY]], %[[W2]] {mp.backward} : (tensor<2x3x4xf32>, tensor<4x6xf32>) -> tensor<2x3x6xf32>
// CHECK:   %[[DW2:.*]] = mp.linear_weight_grad %[[H]], %[[DY]] {mp.backward, transpose_weight} : (tensor<2x3x6xf32>, tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK:   %[[DW:.*]] = mp.linear_weight_grad %arg0, %[[DH]] {mp.backward} : (tensor<2x3x4xf32>, tensor<2x3x6xf32>) -> tensor<4x6xf32>
// CHECK:   %[[DB:.*]] = mp.reduce sum, %[[DH]] {axes = array<i64: 0, 1>, mp.backward} : tensor<2x3x6xf32> -> tensor<1x1x6xf32>
// CHECK:   %[[DB1:.*]] = mp.reshape %[[DB]] {mp.backward} : tensor<1x1x6xf32> -> tensor<6xf32>
// CHECK:   return %[[LOSS]], %[[DW]], %[[DB1]], %[[DW2]]

// -----

// Norms and activations build their gradient ops; the layer norm's bias
// gradient is a reduction.
module {
  mp.param @g : tensor<8xf32>
  mp.param @beta : tensor<8xf32>
  mp.param @r : tensor<8xf32>
  func.func @main(%x: tensor<2x8xf32>) -> tensor<f32> {
    %g = mp.get_param @g : tensor<8xf32>
    %beta = mp.get_param @beta : tensor<8xf32>
    %n = mp.layer_norm %x, %g, %beta : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %a = mp.gelu %n approximate = tanh : tensor<2x8xf32>
    %r = mp.get_param @r : tensor<8xf32>
    %m = mp.rms_norm %a, %r : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %s = mp.silu %m : tensor<2x8xf32>
    %l = mp.reduce mean, %s {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main
// CHECK:   %[[N:.*]] = mp.layer_norm %arg0
// CHECK:   %[[A:.*]] = mp.gelu %[[N]] approximate = tanh
// CHECK:   %[[M:.*]] = mp.rms_norm %[[A]], %[[R:.*]] :
// CHECK:   %[[S:.*]] = mp.sigmoid %[[M]]
// CHECK:   %[[DA:.*]], %[[DR:.*]] = mp.rms_norm_grad %[[A]], %[[R]], %{{.*}} {epsilon = {{.*}}}
// CHECK:   %[[DN:.*]] = mp.gelu_grad %[[N]], %[[DA]] approximate = tanh
// CHECK:   %{{.*}}, %[[DG:.*]] = mp.layer_norm_grad %arg0, %{{.*}}, %[[DN]] {axis = 1 : i64, epsilon = {{.*}}}
// CHECK:   %[[DBETA:.*]] = mp.reduce sum, %[[DN]] {axes = array<i64: 0>, mp.backward}
// CHECK:   %[[DBETA1:.*]] = mp.reshape %[[DBETA]] {mp.backward} : tensor<1x8xf32> -> tensor<8xf32>
// CHECK:   return %{{.*}}, %[[DG]], %[[DBETA1]], %[[DR]]

// -----

// Attention builds one attention_grad reading the saved result; the mask
// (not a parameter) gets no gradient. The query's transpose is undone.
module {
  mp.param @q : tensor<1x2x4x8xf32>
  func.func @main(%k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>, %mask: tensor<1x1x4x4xf32>) -> tensor<f32> {
    %q = mp.get_param @q : tensor<1x2x4x8xf32>
    %t = mp.transpose %q [0, 1, 3, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
    %t2 = mp.transpose %t [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
    %o = mp.attention %t2, %k, %v, %mask {causal, scale = 0.35 : f32} : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x8xf32>
    %l = mp.reduce sum, %o {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x2x4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main
// CHECK:   %[[Q:.*]] = mp.transpose %{{.*}} [0, 1, 3, 2] : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
// CHECK:   %[[O:.*]] = mp.attention %[[Q]], %arg0, %arg1, %arg2 {causal
// CHECK:   %[[DO:.*]] = mp.expand
// CHECK:   %[[DQ:.*]], %{{.*}}, %{{.*}} = mp.attention_grad %[[Q]], %arg0, %arg1, %[[O]], %[[DO]], %arg2 {causal, mp.backward, scale = 3.500000e-01 : f32}
// CHECK:   %[[T:.*]] = mp.transpose %[[DQ]] [0, 1, 3, 2]
// CHECK:   %[[T2:.*]] = mp.transpose %[[T]] [0, 1, 3, 2]
// CHECK:   return %{{.*}}, %[[T2]]

// -----

// Embedding: a scatter-add into the table; cross-entropy: one gradient op
// seeded with the loss's adjoint 1.
module {
  mp.param @table : tensor<16x4xf32>
  func.func @main(%ids: tensor<2x3xi64>, %labels: tensor<2x3xi64>) -> tensor<f32> {
    %t = mp.get_param @table : tensor<16x4xf32>
    %e = mp.embedding %t, %ids : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %logits = mp.linear %e, %t {transpose_weight} : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
    %l = mp.cross_entropy %logits, %labels : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main
// CHECK:   %[[T:.*]] = mp.get_param @table
// CHECK:   %[[E:.*]] = mp.embedding %[[T]], %arg0
// CHECK:   %[[LOGITS:.*]] = mp.linear %[[E]], %[[T]] {transpose_weight}
// CHECK:   %[[ONE:.*]] = mp.constant dense<1.000000e+00> : tensor<f32>
// CHECK:   %[[DL:.*]] = mp.cross_entropy_grad %[[LOGITS]], %arg1, %[[ONE]] {mp.backward} : (tensor<2x3x16xf32>, tensor<2x3xi64>, tensor<f32>) -> tensor<2x3x16xf32>
// CHECK:   %[[DE:.*]] = mp.linear %[[DL]], %[[T]] {mp.backward} :
// CHECK:   %[[DHEAD:.*]] = mp.linear_weight_grad %[[E]], %[[DL]] {mp.backward, transpose_weight}
// CHECK:   %[[DEMB:.*]] = mp.embedding_grad %arg0, %[[DE]] {mp.backward} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<16x4xf32>
// CHECK:   %[[SUM:.*]] = mp.add %[[DHEAD]], %[[DEMB]]
// CHECK:   return %{{.*}}, %[[SUM]]

// -----

// Broadcasting elementwise ops sum their adjoints back to each operand's
// shape; a constant operand gets none.
module {
  mp.param @p : tensor<4xf32>
  mp.param @s : tensor<2x1xf32>
  func.func @main(%x: tensor<2x4xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<4xf32>
    %s = mp.get_param @s : tensor<2x1xf32>
    %c = mp.constant dense<2.0> : tensor<f32>
    %a = mp.mul %x, %p : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %d = mp.div %a, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %e = mp.mul %d, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %l = mp.reduce sum, %e {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main
// CHECK:   %[[C:.*]] = mp.constant dense<2.000000e+00> : tensor<f32>
// CHECK:   mp.constant dense<1.000000e+00> : tensor<f32>
// CHECK:   %[[DE:.*]] = mp.mul %{{.*}}, %[[C]] {mp.backward} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK:   %[[DA:.*]] = mp.div %[[DE]], %[[S:.*]] :
// CHECK:   %[[DS:.*]] = mp.neg
// CHECK:   %[[DS1:.*]] = mp.reduce sum, %[[DS]] {axes = array<i64: 1>, mp.backward} : tensor<2x4xf32> -> tensor<2x1xf32>
// CHECK:   %[[DP:.*]] = mp.mul %[[DA]], %arg0
// CHECK:   %[[DP1:.*]] = mp.reduce sum, %[[DP]] {axes = array<i64: 0>, mp.backward} : tensor<2x4xf32> -> tensor<1x4xf32>
// CHECK:   %[[DP2:.*]] = mp.reshape %[[DP1]] {mp.backward} : tensor<1x4xf32> -> tensor<4xf32>
// CHECK:   return %{{.*}}, %[[DP2]], %[[DS1]]

// -----

// Shape ops: a slice's gradient is placed back (slice_grad), a concat's is
// sliced, a split's is concatenated, a reshape's reshaped back.
module {
  mp.param @p : tensor<2x8xf32>
  func.func @main() -> tensor<f32> {
    %p = mp.get_param @p : tensor<2x8xf32>
    %a, %b = mp.split %p {axis = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
    %s = mp.slice %a {starts = array<i64: 0, 1>, limits = array<i64: 2, 4>, strides = array<i64: 1, 2>} : tensor<2x4xf32> -> tensor<2x2xf32>
    %c = mp.concat %s, %b {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x6xf32>
    %r = mp.reshape %c : tensor<2x6xf32> -> tensor<12xf32>
    %l = mp.reduce max, %r {axes = array<i64: 0>, keepdims = false} : tensor<12xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main
// CHECK:   %[[R:.*]] = mp.reshape %{{.*}} : tensor<2x6xf32> -> tensor<12xf32>
// CHECK:   %[[MAX:.*]] = mp.reduce max, %[[R]]
// CHECK:   %[[HIT:.*]] = mp.compare eq, %[[R]], %{{.*}} : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xi1>
// CHECK:   %[[DR:.*]] = mp.where %[[HIT]]
// CHECK:   %[[DC:.*]] = mp.reshape %[[DR]] {mp.backward} : tensor<12xf32> -> tensor<2x6xf32>
// CHECK:   %[[D0:.*]] = mp.slice %[[DC]] {limits = array<i64: 2, 2>, mp.backward, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>}
// CHECK:   %[[D1:.*]] = mp.slice %[[DC]] {limits = array<i64: 2, 6>, mp.backward, starts = array<i64: 0, 2>, strides = array<i64: 1, 1>}
// CHECK:   %[[DA:.*]] = mp.slice_grad %[[D0]] {limits = array<i64: 2, 4>, mp.backward, starts = array<i64: 0, 1>, strides = array<i64: 1, 2>} : tensor<2x2xf32> -> tensor<2x4xf32>
// CHECK:   %[[DP:.*]] = mp.concat %[[DA]], %[[D1]] {axis = 1 : i64, mp.backward}
// CHECK:   return %[[MAX]], %[[DP]]

// -----

// A parameter the loss does not read gets a zero gradient.
module {
  mp.param @used : tensor<4xf32>
  mp.param @unused : tensor<3xf32>
  func.func @main() -> tensor<f32> {
    %p = mp.get_param @used : tensor<4xf32>
    %e = mp.exp %p : tensor<4xf32>
    %l = mp.reduce sum, %e {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main() -> (tensor<f32>, tensor<4xf32> {mp.name = "grads/used"}, tensor<3xf32> {mp.name = "grads/unused"})
// CHECK:   %[[Z:.*]] = mp.constant {mp.backward} dense<0.000000e+00> : tensor<3xf32>
// CHECK:   return %{{.*}}, %{{.*}}, %[[Z]]

// -----

// Gather along a middle axis (DeBERTa's relative-position gather, imported
// from GatherElements): its adjoint views the data as a table whose rows are
// the gathered axis, scatter-adds the result's rows by index into it
// (embedding_grad), and views it back.
module {
  mp.param @p : tensor<2x5x3xf32>
  func.func @main(%i: tensor<4xi64>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<2x5x3xf32>
    %g = mp.gather %p, %i {axis = 1 : i64} : (tensor<2x5x3xf32>, tensor<4xi64>) -> tensor<2x4x3xf32>
    %l = mp.reduce sum, %g {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main(%arg0: tensor<4xi64>) -> (tensor<f32>, tensor<2x5x3xf32> {mp.name = "grads/p"})
// CHECK:   %[[DG:.*]] = mp.expand {{.*}} -> tensor<2x4x3xf32>
// CHECK:   %[[ROWS:.*]] = mp.transpose %[[DG]] [1, 0, 2] {{.*}}: tensor<2x4x3xf32> -> tensor<4x2x3xf32>
// CHECK:   %[[FLAT:.*]] = mp.reshape %[[ROWS]] {{.*}}: tensor<4x2x3xf32> -> tensor<4x6xf32>
// CHECK:   %[[TABLE:.*]] = mp.embedding_grad %arg0, %[[FLAT]] {{.*}}: (tensor<4xi64>, tensor<4x6xf32>) -> tensor<5x6xf32>
// CHECK:   %[[VIEW:.*]] = mp.reshape %[[TABLE]] {{.*}}: tensor<5x6xf32> -> tensor<5x2x3xf32>
// CHECK:   %[[DP:.*]] = mp.transpose %[[VIEW]] [1, 0, 2] {{.*}}: tensor<5x2x3xf32> -> tensor<2x5x3xf32>
// CHECK:   return %{{.*}}, %[[DP]]

// -----

// Einsum: each operand's gradient is the einsum of the result's gradient
// with the other operands, onto the operand's labels; ellipsis dims get
// letters the equation does not use.
module {
  mp.param @w : tensor<4x2x3xf32>
  mp.param @v : tensor<3x5xf32>
  func.func @main(%x: tensor<6x4xf32>) -> tensor<f32> {
    %w = mp.get_param @w : tensor<4x2x3xf32>
    %h = mp.einsum "sd,dhk->hsk" %x, %w : (tensor<6x4xf32>, tensor<4x2x3xf32>) -> tensor<2x6x3xf32>
    %v = mp.get_param @v : tensor<3x5xf32>
    %y = mp.einsum "...k,kf->...f" %h, %v : (tensor<2x6x3xf32>, tensor<3x5xf32>) -> tensor<2x6x5xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x6x5xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @main(%arg0: tensor<6x4xf32>) -> (tensor<f32>, tensor<4x2x3xf32> {mp.name = "grads/w"}, tensor<3x5xf32> {mp.name = "grads/v"})
// CHECK:   %[[H:.*]] = mp.einsum "sd,dhk->hsk" %arg0, %{{.*}} :
// CHECK:   %[[V:.*]] = mp.get_param @v :
// CHECK:   %[[DY:.*]] = mp.expand {{.*}} -> tensor<2x6x5xf32>
// CHECK:   %[[DH:.*]] = mp.einsum "abf,kf->abk" %[[DY]], %[[V]] {mp.backward} : (tensor<2x6x5xf32>, tensor<3x5xf32>) -> tensor<2x6x3xf32>
// CHECK:   %[[DV:.*]] = mp.einsum "abf,abk->kf" %[[DY]], %[[H]] {mp.backward} : (tensor<2x6x5xf32>, tensor<2x6x3xf32>) -> tensor<3x5xf32>
// CHECK:   %[[DW:.*]] = mp.einsum "hsk,sd->dhk" %[[DH]], %arg0 {mp.backward} : (tensor<2x6x3xf32>, tensor<6x4xf32>) -> tensor<4x2x3xf32>
// CHECK:   return %{{.*}}, %[[DW]], %[[DV]]
