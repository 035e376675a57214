// RUN: mp-opt %s --mp-raise --split-input-file | FileCheck %s

// Tests GPT-BigCode's multi-query attention: q [B, S, H*d] viewed
// [B, S*H, d] (positions and heads merged into the rows of a bmm) against
// the one key head transposed, [B, d, S], on a zero-filled baddbmm; the
// scores viewed [B, S, H, S] for the boolean mask [B, S, 1, S] and the
// softmax, then [B, S*H, S] times v [B, S, d] viewed back as [B, S, H*d].
// The matmuls are batched over the heads, the reshapes and transposes left
// around the scores undo each other, the zeros vanish, and attention is
// raised with q [B, H, S, d], one key/value head and the mask transposed
// to [B, 1, S, S].
// CHECK-LABEL: func.func @bigcode_mqa
// CHECK-NOT: mp.matmul
// CHECK-NOT: tensor<2x32x8xf32>
// CHECK: %[[Q4:.*]] = mp.reshape %arg0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[Q:.*]] = mp.transpose %[[Q4]] [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[K:.*]] = mp.reshape %arg1 : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
// CHECK: %[[ALLOWED:.*]] = mp.transpose %arg3 [0, 2, 1, 3] : tensor<2x8x1x8xi1> -> tensor<2x1x8x8xi1>
// CHECK: %[[V:.*]] = mp.reshape %arg2 : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
// CHECK: %[[MASK:.*]] = mp.where %[[ALLOWED]]
// CHECK: %[[A:.*]] = mp.attention %[[Q]], %[[K]], %[[V]], %[[MASK]] {scale = 0.353553385 : f32}
// CHECK: %[[BACK:.*]] = mp.transpose %[[A]] [0, 2, 1, 3] : tensor<2x4x8x8xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[OUT:.*]] = mp.reshape %[[BACK]] : tensor<2x8x4x8xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @bigcode_mqa(%q: tensor<2x8x32xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>, %allowed: tensor<2x8x1x8xi1>) -> tensor<2x8x32xf32> {
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %scale = mp.constant dense<0.353553385> : tensor<f32>
  %zeros = mp.constant dense<0.0> : tensor<2x32x8xf32>
  %kt = mp.transpose %k [0, 2, 1] : tensor<2x8x8xf32> -> tensor<2x8x8xf32>
  %q3 = mp.reshape %q : tensor<2x8x32xf32> -> tensor<2x32x8xf32>
  %s = mp.matmul %q3, %kt : (tensor<2x32x8xf32>, tensor<2x8x8xf32>) -> tensor<2x32x8xf32>
  %scaled = mp.mul %s, %scale : (tensor<2x32x8xf32>, tensor<f32>) -> tensor<2x32x8xf32>
  %b = mp.add %scaled, %zeros : (tensor<2x32x8xf32>, tensor<2x32x8xf32>) -> tensor<2x32x8xf32>
  %s4 = mp.reshape %b : tensor<2x32x8xf32> -> tensor<2x8x4x8xf32>
  %masked = mp.where %allowed, %s4, %min : (tensor<2x8x1x8xi1>, tensor<2x8x4x8xf32>, tensor<f32>) -> tensor<2x8x4x8xf32>
  %p = mp.softmax %masked {axis = 3 : i64} : tensor<2x8x4x8xf32>
  %p3 = mp.reshape %p : tensor<2x8x4x8xf32> -> tensor<2x32x8xf32>
  %o3 = mp.matmul %p3, %v : (tensor<2x32x8xf32>, tensor<2x8x8xf32>) -> tensor<2x32x8xf32>
  %o = mp.reshape %o3 : tensor<2x32x8xf32> -> tensor<2x8x32xf32>
  return %o : tensor<2x8x32xf32>
}

// -----

// Tests one batched matmul with merged rows and nothing to meet: it is
// batched over the rows' inner factor between a transpose and a reshape
// that give the old result (the key stays a transpose of its source).
// CHECK-LABEL: func.func @rows_alone
// CHECK: %[[X4:.*]] = mp.reshape %arg0 : tensor<2x8x32xf32> -> tensor<2x8x4x8xf32>
// CHECK: %[[X:.*]] = mp.transpose %[[X4]] [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[Y4:.*]] = mp.reshape %arg1 : tensor<2x6x8xf32> -> tensor<2x1x6x8xf32>
// CHECK: %[[Y:.*]] = mp.transpose %[[Y4]] [0, 1, 3, 2] : tensor<2x1x6x8xf32> -> tensor<2x1x8x6xf32>
// CHECK: %[[P:.*]] = mp.matmul %[[X]], %[[Y]] : (tensor<2x4x8x8xf32>, tensor<2x1x8x6xf32>) -> tensor<2x4x8x6xf32>
// CHECK: %[[T:.*]] = mp.transpose %[[P]] [0, 2, 1, 3] : tensor<2x4x8x6xf32> -> tensor<2x8x4x6xf32>
// CHECK: %[[R:.*]] = mp.reshape %[[T]] : tensor<2x8x4x6xf32> -> tensor<2x32x6xf32>
// CHECK-NEXT: return %[[R]]
func.func @rows_alone(%x: tensor<2x8x32xf32>, %y: tensor<2x6x8xf32>) -> tensor<2x32x6xf32> {
  %yt = mp.transpose %y [0, 2, 1] : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %x3 = mp.reshape %x : tensor<2x8x32xf32> -> tensor<2x32x8xf32>
  %s = mp.matmul %x3, %yt : (tensor<2x32x8xf32>, tensor<2x8x6xf32>) -> tensor<2x32x6xf32>
  return %s : tensor<2x32x6xf32>
}

// -----

// Tests what stays: a matrix of rank 2 as the rhs (a linear's weight), and
// rows merged from a dimension that does not divide them.
// CHECK-LABEL: func.func @not_heads_in_rows
// CHECK-NOT: mp.transpose
// CHECK: mp.matmul %{{.*}}, %arg1 : (tensor<2x32x8xf32>, tensor<8x6xf32>)
// CHECK: mp.matmul %{{.*}}, %arg2 : (tensor<2x12x4xf32>, tensor<2x4x5xf32>)
func.func @not_heads_in_rows(%x: tensor<2x8x32xf32>, %w: tensor<8x6xf32>, %y: tensor<2x4x5xf32>, %z: tensor<2x8x6xf32>) -> (tensor<2x32x6xf32>, tensor<2x12x5xf32>) {
  %x3 = mp.reshape %x : tensor<2x8x32xf32> -> tensor<2x32x8xf32>
  %a = mp.matmul %x3, %w : (tensor<2x32x8xf32>, tensor<8x6xf32>) -> tensor<2x32x6xf32>
  %z3 = mp.reshape %z : tensor<2x8x6xf32> -> tensor<2x12x4xf32>
  %b = mp.matmul %z3, %y : (tensor<2x12x4xf32>, tensor<2x4x5xf32>) -> tensor<2x12x5xf32>
  return %a, %b : tensor<2x32x6xf32>, tensor<2x12x5xf32>
}

// -----

// Tests a transpose moving up to the one it undoes through an add of a
// lower-rank operand (given leading unit dims, then transposed) and a
// softmax whose axis moves with it.
// CHECK-LABEL: func.func @transpose_meets_inverse
// CHECK: %[[B4:.*]] = mp.reshape %arg1 : tensor<4x1xf32> -> tensor<1x1x4x1xf32>
// CHECK: %[[B:.*]] = mp.transpose %[[B4]] [0, 2, 1, 3] : tensor<1x1x4x1xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[A:.*]] = mp.add %arg0, %[[B]] : (tensor<2x4x8x6xf32>, tensor<1x4x1x1xf32>) -> tensor<2x4x8x6xf32>
// CHECK: %[[S:.*]] = mp.softmax %[[A]] {axis = 2 : i64} : tensor<2x4x8x6xf32>
// CHECK-NEXT: return %[[S]]
func.func @transpose_meets_inverse(%x: tensor<2x4x8x6xf32>, %bias: tensor<4x1xf32>) -> tensor<2x4x8x6xf32> {
  %t = mp.transpose %x [0, 2, 1, 3] : tensor<2x4x8x6xf32> -> tensor<2x8x4x6xf32>
  %a = mp.add %t, %bias : (tensor<2x8x4x6xf32>, tensor<4x1xf32>) -> tensor<2x8x4x6xf32>
  %s = mp.softmax %a {axis = 1 : i64} : tensor<2x8x4x6xf32>
  %back = mp.transpose %s [0, 2, 1, 3] : tensor<2x8x4x6xf32> -> tensor<2x4x8x6xf32>
  return %back : tensor<2x4x8x6xf32>
}

// -----

// Tests splats taken along by a hoisted transpose: an integer splat keeps
// its value, and one whose broadcast widens the result keeps its shape
// (permuted), so the result type stays.
// CHECK-LABEL: func.func @hoisted_splats
// CHECK-DAG: %[[SEVEN:.*]] = mp.constant dense<7> : tensor<2x4x8x6xi64>
// CHECK-DAG: %[[HALF:.*]] = mp.constant dense<5.000000e-01> : tensor<2x1x1x1xf32>
// CHECK: mp.add %arg0, %[[SEVEN]] : (tensor<2x4x8x6xi64>, tensor<2x4x8x6xi64>)
// CHECK: mp.add %arg1, %[[HALF]] : (tensor<1x4x8x8xf32>, tensor<2x1x1x1xf32>) -> tensor<2x4x8x8xf32>
func.func @hoisted_splats(%x: tensor<2x4x8x6xi64>, %y: tensor<1x4x8x8xf32>) -> (tensor<2x4x8x6xi64>, tensor<2x4x8x8xf32>) {
  %t1 = mp.transpose %x [0, 2, 1, 3] : tensor<2x4x8x6xi64> -> tensor<2x8x4x6xi64>
  %c = mp.constant dense<7> : tensor<2x8x4x6xi64>
  %a = mp.add %t1, %c : (tensor<2x8x4x6xi64>, tensor<2x8x4x6xi64>) -> tensor<2x8x4x6xi64>
  %back = mp.transpose %a [0, 2, 1, 3] : tensor<2x8x4x6xi64> -> tensor<2x4x8x6xi64>
  %u = mp.transpose %y [0, 2, 1, 3] : tensor<1x4x8x8xf32> -> tensor<1x8x4x8xf32>
  %z = mp.constant dense<0.5> : tensor<2x1x1x1xf32>
  %b = mp.add %u, %z : (tensor<1x8x4x8xf32>, tensor<2x1x1x1xf32>) -> tensor<2x8x4x8xf32>
  %e = mp.exp %b : tensor<2x8x4x8xf32>
  %ub = mp.transpose %e [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  return %back, %ub : tensor<2x4x8x6xi64>, tensor<2x4x8x8xf32>
}

// -----

// Tests that a merge of leading dims is not hoisted back above what
// SinkLeadingMerge sank it below (the two cycled): batch and heads merged,
// added to a merged-shape value, then reduced, which the merge cannot
// pass; and a transpose whose broadcast operand is a transpose of another
// rank.
// CHECK-LABEL: func.func @no_cycle
// CHECK: %[[Y:.*]] = mp.reshape %arg1 : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[A:.*]] = mp.add %arg0, %[[Y]] : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>)
// CHECK: %[[M:.*]] = mp.reshape %[[A]] : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
// CHECK: mp.reduce sum, %[[M]]
// CHECK: mp.add %arg0, %{{.*}} : (tensor<2x4x8x8xf32>, tensor<1x4x8x8xf32>)
func.func @no_cycle(%x: tensor<2x4x8x8xf32>, %y: tensor<8x8x8xf32>, %b: tensor<8x8x4xf32>) -> (tensor<8x8x1xf32>, tensor<2x4x8x8xf32>) {
  %m = mp.reshape %x : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %a = mp.add %m, %y : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %r = mp.reduce sum, %a {axes = array<i64: 2>} : tensor<8x8x8xf32> -> tensor<8x8x1xf32>
  %t1 = mp.transpose %x [0, 2, 1, 3] : tensor<2x4x8x8xf32> -> tensor<2x8x4x8xf32>
  %bt = mp.transpose %b [0, 2, 1] : tensor<8x8x4xf32> -> tensor<8x4x8xf32>
  %c = mp.add %t1, %bt : (tensor<2x8x4x8xf32>, tensor<8x4x8xf32>) -> tensor<2x8x4x8xf32>
  %back = mp.transpose %c [0, 2, 1, 3] : tensor<2x8x4x8xf32> -> tensor<2x4x8x8xf32>
  return %r, %back : tensor<8x8x1xf32>, tensor<2x4x8x8xf32>
}

// -----

// Tests GPT-BigCode's decode step: one query position, q [B, 1, H*d]
// viewed [B, H, d] (the rows are the heads alone), against the cached key
// and value heads: attention over one query row per head.
// CHECK-LABEL: func.func @bigcode_decode
// CHECK-NOT: mp.matmul
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f32} : (tensor<2x4x1x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x6x8xf32>) -> tensor<2x4x1x8xf32>
func.func @bigcode_decode(%q: tensor<2x1x32xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x8xf32>) -> tensor<2x1x32xf32> {
  %kt = mp.transpose %k [0, 2, 1] : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %q3 = mp.reshape %q : tensor<2x1x32xf32> -> tensor<2x4x8xf32>
  %s = mp.matmul %q3, %kt : (tensor<2x4x8xf32>, tensor<2x8x6xf32>) -> tensor<2x4x6xf32>
  %s4 = mp.reshape %s : tensor<2x4x6xf32> -> tensor<2x1x4x6xf32>
  %p = mp.softmax %s4 {axis = 3 : i64} : tensor<2x1x4x6xf32>
  %p3 = mp.reshape %p : tensor<2x1x4x6xf32> -> tensor<2x4x6xf32>
  %o3 = mp.matmul %p3, %v : (tensor<2x4x6xf32>, tensor<2x6x8xf32>) -> tensor<2x4x8xf32>
  %o = mp.reshape %o3 : tensor<2x4x8xf32> -> tensor<2x1x32xf32>
  return %o : tensor<2x1x32xf32>
}

// -----

// Tests single-head attention on [B, S, d], as a model written with a
// module per head computes it (Karpathy's "Let's build GPT": q·kᵀ scaled,
// masked_fill by a tril buffer, softmax, times v): computed with a unit
// head dim, it raises to attention [B, 1, S, d], causal.
// CHECK-LABEL: func.func @head_module
// CHECK-NOT: mp.matmul
// CHECK-NOT: mp.softmax
// CHECK-DAG: %[[Q:.*]] = mp.reshape %arg0 : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK-DAG: %[[K:.*]] = mp.reshape %arg1 : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK-DAG: %[[V:.*]] = mp.reshape %arg2 : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK: %[[A:.*]] = mp.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553385 : f32} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>) -> tensor<2x1x4x8xf32>
// CHECK: %[[OUT:.*]] = mp.reshape %[[A]] : tensor<2x1x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[OUT]]
func.func @head_module(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %future = mp.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %ninf = mp.constant dense<0xFF800000> : tensor<f32>
  %scale = mp.constant dense<0.353553385> : tensor<f32>
  %kt = mp.transpose %k [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s = mp.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %scaled = mp.mul %s, %scale : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %masked = mp.where %future, %ninf, %scaled : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = mp.softmax %masked {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests a single head with a padding mask per sequence ([B, 1, S], rank 3,
// added after the scale): the mask takes the unit head dim too, [B, 1, 1, S].
// CHECK-LABEL: func.func @head_module_padding
// CHECK-NOT: mp.softmax
// CHECK: %[[M:.*]] = mp.reshape %arg3 : tensor<2x1x4xf32> -> tensor<2x1x1x4xf32>
// CHECK: mp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {scale = 0.353553385 : f32} : (tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x1x4xf32>) -> tensor<2x1x4x8xf32>
func.func @head_module_padding(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %pad: tensor<2x1x4xf32>) -> tensor<2x4x8xf32> {
  %scale = mp.constant dense<0.353553385> : tensor<f32>
  %kt = mp.transpose %k [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s = mp.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %scaled = mp.mul %s, %scale : (tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  %masked = mp.add %scaled, %pad : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %p = mp.softmax %masked {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Tests that a softmax over products that are not attention's (the
// probabilities read twice) is left as it is.
// CHECK-LABEL: func.func @probabilities_read_twice
// CHECK: mp.softmax
// CHECK: mp.matmul {{.*}} -> tensor<2x4x8xf32>
func.func @probabilities_read_twice(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %kt = mp.transpose %k [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s = mp.matmul %q, %kt : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %p = mp.softmax %s {axis = 2 : i64} : tensor<2x4x4xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %o, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}
