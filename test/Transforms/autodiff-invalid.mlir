// RUN: mp-opt %s --split-input-file --mp-autodiff --verify-diagnostics

// An op without a derivative rule between a parameter and the loss (a
// gradient op in a forward program).
module {
  mp.param @p : tensor<2x3xf32>
  func.func @main(%x: tensor<3x4xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<2x3xf32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule, but lies between a parameter and the loss}}
    %y = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The function must return the loss alone.
module {
  mp.param @p : tensor<4xf32>
  // expected-error @below {{mp-autodiff differentiates a function with one scalar float result (the loss); @main returns 'tensor<4xf32>': append a loss first (mp-loss, or --mp-train)}}
  func.func @main() -> tensor<4xf32> {
    %p = mp.get_param @p : tensor<4xf32>
    return %p : tensor<4xf32>
  }
}

// -----

// An einsum that does not depend on a parameter needs no rule.
module {
  mp.param @p : tensor<2x4xf32>
  func.func @main(%x: tensor<2x3xf32>, %y: tensor<3x4xf32>) -> tensor<f32> {
    %e = mp.einsum "ij,jk->ik" %x, %y : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %p = mp.get_param @p : tensor<2x4xf32>
    %m = mp.mul %e, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = mp.reduce sum, %m {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A mask that depends on a parameter has no rule.
module {
  mp.param @m : tensor<1x1x4x4xf32>
  func.func @main(%q: tensor<1x1x4x8xf32>) -> tensor<f32> {
    %m = mp.get_param @m : tensor<1x1x4x4xf32>
    // expected-error @below {{'mp.attention' op has no derivative rule for a mask that depends on parameters}}
    %o = mp.attention %q, %q, %q, %m {scale = 0.35 : f32} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x8xf32>
    %l = mp.reduce sum, %o {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x1x4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A linear with a fused activation (mp-fuse-epilogues runs after training
// passes, not before).
module {
  mp.param @w : tensor<4x4xf32>
  func.func @main(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = mp.get_param @w : tensor<4x4xf32>
    // expected-error @below {{'mp.linear' op has a fused activation (mp-fuse-epilogues runs after mp-autodiff, not before)}}
    %y = mp.linear %x, %w activation = gelu : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Every op without a rule is reported, up to 8; the rest are counted. (The
// backward walks the program from the loss: the first gradient op is the
// one not shown.)
module {
  mp.param @p : tensor<2x3xf32>
  // expected-remark @below {{1 more errors like those above are not shown}}
  func.func @main(%x: tensor<3x4xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<2x3xf32>
    %y0 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l0 = mp.reduce sum, %y0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y1 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l1 = mp.reduce sum, %y1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y2 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l2 = mp.reduce sum, %y2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y3 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l3 = mp.reduce sum, %y3 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y4 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l4 = mp.reduce sum, %y4 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y5 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l5 = mp.reduce sum, %y5 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y6 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l6 = mp.reduce sum, %y6 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y7 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l7 = mp.reduce sum, %y7 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @below {{'mp.gelu_grad' op has no derivative rule}}
    %y8 = mp.gelu_grad %p, %p : tensor<2x3xf32>
    %l8 = mp.reduce sum, %y8 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %s1 = mp.add %l0, %l1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s2 = mp.add %s1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s3 = mp.add %s2, %l3 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s4 = mp.add %s3, %l4 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s5 = mp.add %s4, %l5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s6 = mp.add %s5, %l6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s7 = mp.add %s6, %l7 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %s8 = mp.add %s7, %l8 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %s8 : tensor<f32>
  }
}

// -----

// An einsum whose operand's gradient is no einsum of the others: a label
// repeated in it (a diagonal), one only it holds and sums over, and an
// ellipsis dim broadcast against another operand's, or between two other
// operands.
module {
  mp.param @p : tensor<3x3xf32>
  func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<3x3xf32>
    // expected-error @below {{'mp.einsum' op has no derivative rule for 'ii,i->i': a label repeats in operand 0 (a diagonal)}}
    %y = mp.einsum "ii,i->i" %p, %x : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  mp.param @p : tensor<3x3xf32>
  func.func @main(%x: tensor<3xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<3x3xf32>
    // expected-error @below {{'mp.einsum' op has no derivative rule for 'ij,i->i': operand 0 has a dim that only it holds, summed over}}
    %y = mp.einsum "ij,i->i" %p, %x : (tensor<3x3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  mp.param @p : tensor<1x3xf32>
  func.func @main(%x: tensor<2x3xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<1x3xf32>
    // expected-error @below {{'mp.einsum' op has no derivative rule for '...i,...i->...i': an ellipsis dim is broadcast (size 1 against another)}}
    %y = mp.einsum "...i,...i->...i" %p, %x : (tensor<1x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %l = mp.reduce sum, %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  mp.param @p : tensor<4xf32>
  func.func @main(%x: tensor<2x1x4xf32>, %y: tensor<1x3x4xf32>) -> tensor<f32> {
    %p = mp.get_param @p : tensor<4xf32>
    // expected-error @below {{'mp.einsum' op has no derivative rule for '...d,...d,d->...d': an ellipsis dim is broadcast (size 1 against another)}}
    %e = mp.einsum "...d,...d,d->...d" %x, %y, %p : (tensor<2x1x4xf32>, tensor<1x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    %l = mp.reduce sum, %e {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
