// RUN: mp-opt %s --mp-raise --split-input-file | FileCheck %s

// Tests HF's BART/OPT attention, batch and heads merged for bmm
// ([2, 4, 8, 8] -> [8, 8, 8]) and viewed back around the mask: the merges
// sink below the matmuls and the softmax until they meet the reshapes that
// undo them, and the attention is raised in [B, H, S, d] form. OPT's clamp
// at float min (where(s < min, min, s)) moves onto the mask, which stays a
// mask (no causal attribute), so a row whose every key is masked weighs
// all keys alike as the clamp makes it, without reading the scores.
// CHECK-LABEL: func.func @bart_bmm
// CHECK-NOT: tensor<8x8x8xf32>
// CHECK-NOT: mp.matmul
// CHECK-DAG: %[[CAUSAL:.*]] = mp.constant dense<{{.*}}> : tensor<1x1x8x8xf32>
// CHECK-DAG: %[[MIN:.*]] = mp.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK: %[[BELOW:.*]] = mp.compare lt, %[[CAUSAL]], %[[MIN]]
// CHECK: %[[MASK:.*]] = mp.where %[[BELOW]], %[[MIN]], %[[CAUSAL]]
// CHECK: %[[A:.*]] = mp.attention %arg0, %arg1, %arg2, %[[MASK]] {scale = 1.000000e+00 : f32}
// CHECK-NEXT: return %[[A]]
func.func @bart_bmm(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = mp.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, 0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.40282347E+38, -3.40282347E+38],
      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -3.40282347E+38],
      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x8x8xf32>
  %q3 = mp.reshape %q : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %k3 = mp.reshape %k : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %v3 = mp.reshape %v : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %kt = mp.transpose %k3 [0, 2, 1] : tensor<8x8x8xf32> -> tensor<8x8x8xf32>
  %s = mp.matmul %q3, %kt : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %s4 = mp.reshape %s : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  %masked = mp.add %s4, %causal : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %below = mp.compare lt, %masked, %min : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xi1>
  %clamped = mp.where %below, %min, %masked : (tensor<2x4x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %m3 = mp.reshape %clamped : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %p = mp.softmax %m3 {axis = 2 : i64} : tensor<8x8x8xf32>
  %o3 = mp.matmul %p, %v3 : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %o = mp.reshape %o3 : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests BLOOM's form: k merged already transposed ([B*H, d, S]), the
// scores scaled and an ALiBi bias [B*H, 1, S] added in the merged form
// (baddbmm), read as [B, H, 1, S] by the raised attention, the boolean
// mask applied in [B, H, S, S].
// CHECK-LABEL: func.func @bloom_baddbmm
// CHECK-NOT: tensor<8x8x8xf32>
// CHECK: %[[ALIBI:.*]] = mp.reshape %arg3 : tensor<8x1x8xf32> -> tensor<2x4x1x8xf32>
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %{{.*}} {scale = 0.353553385 : f32}
func.func @bloom_baddbmm(%q: tensor<2x4x8x8xf32>, %kt: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>, %alibi: tensor<8x1x8xf32>, %hidden: tensor<2x1x8x8xi1>) -> tensor<2x4x8x8xf32> {
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %scale = mp.constant dense<0.353553385> : tensor<f32>
  %q3 = mp.reshape %q : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %k3 = mp.reshape %kt : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %v3 = mp.reshape %v : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %s = mp.matmul %q3, %k3 : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %scaled = mp.mul %s, %scale : (tensor<8x8x8xf32>, tensor<f32>) -> tensor<8x8x8xf32>
  %biased = mp.add %scaled, %alibi : (tensor<8x8x8xf32>, tensor<8x1x8xf32>) -> tensor<8x8x8xf32>
  %s4 = mp.reshape %biased : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  %masked = mp.where %hidden, %min, %s4 : (tensor<2x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = mp.softmax %masked {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %p3 = mp.reshape %p : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %o3 = mp.matmul %p3, %v3 : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %o = mp.reshape %o3 : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests where the sinking stops: at a softmax over the merged dimension
// and at a transpose that moves it, the merge stays (after the ops it
// sank through, now batched over [2, 4]).
// CHECK-LABEL: func.func @stops
// CHECK: %[[E:.*]] = mp.exp %arg0 : tensor<2x4x8xf32>
// CHECK-NEXT: %[[M:.*]] = mp.reshape %[[E]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: mp.softmax %[[M]] {axis = 0 : i64} : tensor<8x8xf32>
// CHECK: %[[N:.*]] = mp.neg %arg0 : tensor<2x4x8xf32>
// CHECK-NEXT: %[[R:.*]] = mp.reshape %[[N]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: mp.transpose %[[R]] [1, 0]
func.func @stops(%x: tensor<2x4x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %m = mp.reshape %x : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %e = mp.exp %m : tensor<8x8xf32>
  %s = mp.softmax %e {axis = 0 : i64} : tensor<8x8xf32>
  %n = mp.neg %m : tensor<8x8xf32>
  %t = mp.transpose %n [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
  return %s, %t : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Tests a merge of batch and sequence before a linear (an exporter that
// flattens to [B*S, K] for Gemm): the rows are unmerged, the linear is
// raised on [B, S, K], and the reshape that restored [B, S, N] folds away.
// CHECK-LABEL: func.func @flattened_rows
// CHECK: %[[Y:.*]] = mp.linear %arg0, %{{.*}}, %{{.*}} : (tensor<2x4x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Y]]
mp.param @w : tensor<32x16xf32>
mp.param @b : tensor<16xf32>
func.func @flattened_rows(%x: tensor<2x4x32xf32>) -> tensor<2x4x16xf32> {
  %w = mp.get_param @w : tensor<32x16xf32>
  %b = mp.get_param @b : tensor<16xf32>
  %m = mp.reshape %x : tensor<2x4x32xf32> -> tensor<8x32xf32>
  %y = mp.matmul %m, %w : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %z = mp.add %y, %b : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %r = mp.reshape %z : tensor<8x16xf32> -> tensor<2x4x16xf32>
  return %r : tensor<2x4x16xf32>
}

// -----

// Tests that a where at float min whose condition compares another value
// is a boolean mask, not a clamp: it stays a mask operand.
// CHECK-LABEL: func.func @not_a_clamp
// CHECK: %[[C:.*]] = mp.compare lt, %arg3, %{{.*}}
// CHECK: %[[MASK:.*]] = mp.where %[[C]]
// CHECK: mp.attention %arg0, %{{.*}}, %arg2, %[[MASK]]
func.func @not_a_clamp(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>, %other: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %min = mp.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = mp.transpose %k [0, 1, 3, 2] : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %s = mp.matmul %q, %kt : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %below = mp.compare lt, %other, %min : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xi1>
  %w = mp.where %below, %min, %s : (tensor<2x4x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = mp.softmax %w {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests that a clamp far above the lowest float is not peeled (moving it
// onto the mask would not be exact): the attention stays decomposed.
// CHECK-LABEL: func.func @high_floor
// CHECK-NOT: mp.attention
// CHECK: mp.softmax
func.func @high_floor(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %floor = mp.constant dense<-1.0e+04> : tensor<f32>
  %kt = mp.transpose %k [0, 1, 3, 2] : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %s = mp.matmul %q, %kt : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %below = mp.compare lt, %s, %floor : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xi1>
  %w = mp.where %below, %floor, %s : (tensor<2x4x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = mp.softmax %w {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests that the sunk transposes keep their attributes (mp.exact_f32 marks
// an integer CumSum's f32 path, which bf16 conversion leaves in f32).
// CHECK-LABEL: func.func @keeps_attributes
// CHECK: mp.transpose %{{.*}} [0, 1, 3, 2] {mp.exact_f32}
func.func @keeps_attributes(%x: tensor<2x4x3x5xf32>) -> tensor<8x5x3xf32> {
  %m = mp.reshape %x : tensor<2x4x3x5xf32> -> tensor<8x3x5xf32>
  %t = mp.transpose %m [0, 2, 1] {mp.exact_f32} : tensor<8x3x5xf32> -> tensor<8x5x3xf32>
  return %t : tensor<8x5x3xf32>
}

// -----

// Tests grouped-query attention merged for bmm: keys and values come merged
// from [B, kv heads, repeats] = [2, 2, 2], the queries and scores from
// [B, heads] = [2, 4]; both unfold to [2, 4] (the first dim, then the
// rest), so the keys' and values' repeat is the reshape attention folds in
// and the attention reads the 2 key/value heads.
// CHECK-LABEL: func.func @gqa
// CHECK: %[[A:.*]] = mp.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f32} : (tensor<2x4x5x6xf32>, tensor<2x2x5x6xf32>, tensor<2x2x5x6xf32>) -> tensor<2x4x5x6xf32>
// CHECK-NEXT: return %[[A]]
func.func @gqa(%q: tensor<2x4x5x6xf32>, %k: tensor<2x2x5x6xf32>, %v: tensor<2x2x5x6xf32>) -> tensor<2x4x5x6xf32> {
  %k1 = mp.reshape %k : tensor<2x2x5x6xf32> -> tensor<2x2x1x5x6xf32>
  %ke = mp.expand %k1 : tensor<2x2x1x5x6xf32> -> tensor<2x2x2x5x6xf32>
  %v1 = mp.reshape %v : tensor<2x2x5x6xf32> -> tensor<2x2x1x5x6xf32>
  %ve = mp.expand %v1 : tensor<2x2x1x5x6xf32> -> tensor<2x2x2x5x6xf32>
  %q3 = mp.reshape %q : tensor<2x4x5x6xf32> -> tensor<8x5x6xf32>
  %k3 = mp.reshape %ke : tensor<2x2x2x5x6xf32> -> tensor<8x5x6xf32>
  %v3 = mp.reshape %ve : tensor<2x2x2x5x6xf32> -> tensor<8x5x6xf32>
  %kt = mp.transpose %k3 [0, 2, 1] : tensor<8x5x6xf32> -> tensor<8x6x5xf32>
  %s = mp.matmul %q3, %kt : (tensor<8x5x6xf32>, tensor<8x6x5xf32>) -> tensor<8x5x5xf32>
  %p = mp.softmax %s {axis = 2 : i64} : tensor<8x5x5xf32>
  %o3 = mp.matmul %p, %v3 : (tensor<8x5x5xf32>, tensor<8x5x6xf32>) -> tensor<8x5x6xf32>
  %o = mp.reshape %o3 : tensor<8x5x6xf32> -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}

// -----

// Tests multi-query attention merged the same way: the one key/value head
// repeated 4 times comes merged from [2, 1, 4]; dropping its unit dim
// ([2, 1, 4] -> [2, 4]) is no merge to sink, so the attention still forms.
// CHECK-LABEL: func.func @mqa
// CHECK: mp.attention %arg0, %arg1, %arg2 {{.*}} (tensor<2x4x5x6xf32>, tensor<2x1x5x6xf32>, tensor<2x1x5x6xf32>) -> tensor<2x4x5x6xf32>
func.func @mqa(%q: tensor<2x4x5x6xf32>, %k: tensor<2x1x5x6xf32>, %v: tensor<2x1x5x6xf32>) -> tensor<2x4x5x6xf32> {
  %k1 = mp.reshape %k : tensor<2x1x5x6xf32> -> tensor<2x1x1x5x6xf32>
  %ke = mp.expand %k1 : tensor<2x1x1x5x6xf32> -> tensor<2x1x4x5x6xf32>
  %v1 = mp.reshape %v : tensor<2x1x5x6xf32> -> tensor<2x1x1x5x6xf32>
  %ve = mp.expand %v1 : tensor<2x1x1x5x6xf32> -> tensor<2x1x4x5x6xf32>
  %q3 = mp.reshape %q : tensor<2x4x5x6xf32> -> tensor<8x5x6xf32>
  %k3 = mp.reshape %ke : tensor<2x1x4x5x6xf32> -> tensor<8x5x6xf32>
  %v3 = mp.reshape %ve : tensor<2x1x4x5x6xf32> -> tensor<8x5x6xf32>
  %kt = mp.transpose %k3 [0, 2, 1] : tensor<8x5x6xf32> -> tensor<8x6x5xf32>
  %s = mp.matmul %q3, %kt : (tensor<8x5x6xf32>, tensor<8x6x5xf32>) -> tensor<8x5x5xf32>
  %p = mp.softmax %s {axis = 2 : i64} : tensor<8x5x5xf32>
  %o3 = mp.matmul %p, %v3 : (tensor<8x5x5xf32>, tensor<8x5x6xf32>) -> tensor<8x5x6xf32>
  %o = mp.reshape %o3 : tensor<8x5x6xf32> -> tensor<2x4x5x6xf32>
  return %o : tensor<2x4x5x6xf32>
}

// -----

// Tests PyTorch's decomposition of scaled_dot_product_attention (its
// dynamo exporter): q and kᵀ each scaled by sqrt(scale) before their
// product; both factors join the attention's scale, and the mask added
// after the product is not scaled.
// CHECK-LABEL: func.func @sdpa_split_scale
// CHECK-NOT: mp.mul
// CHECK: mp.attention %arg0, %arg1, %arg2, %arg3 {scale = 2.500000e-01 : f32}
func.func @sdpa_split_scale(%q: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x8xf32>, %v: tensor<2x4x8x8xf32>, %mask: tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %root = mp.constant dense<0.5> : tensor<f32>
  %qs = mp.mul %q, %root : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %kt = mp.transpose %k [0, 1, 3, 2] : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %kts = mp.mul %kt, %root : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %s = mp.matmul %qs, %kts : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %m = mp.add %s, %mask : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = mp.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = mp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %o : tensor<2x4x8x8xf32>
}

// -----

// Tests ChatGLM's sequence-first form: q [S, B, H, d] viewed [S, B*H, d]
// and transposed to [B*H, S, d] for bmm (the merge moves below the
// transpose, where it joins leading dims), 2 key/value groups repeated
// sequence first (the expand moves below the transposes too, so the
// repeat is stripped, from kᵀ for the key), and the scores scaled twice
// (1/(sqrt(d) * layer), then the layer): grouped-query attention with the
// two scales' product.
// CHECK-LABEL: func.func @chatglm_seq_first
// CHECK-NOT: mp.matmul
// CHECK-NOT: mp.expand
// CHECK: %[[Q:.*]] = mp.transpose %arg0 [1, 2, 0, 3] : tensor<6x2x4x8xf32> -> tensor<2x4x6x8xf32>
// CHECK: %[[A:.*]] = mp.attention %[[Q]], %{{.*}}, %{{.*}} {scale = 0.353553385 : f32} : (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
// CHECK: %[[T:.*]] = mp.transpose %[[A]] [2, 0, 1, 3] : tensor<2x4x6x8xf32> -> tensor<6x2x4x8xf32>
// CHECK: %[[O:.*]] = mp.reshape %[[T]] : tensor<6x2x4x8xf32> -> tensor<6x2x32xf32>
// CHECK-NEXT: return %[[O]]
func.func @chatglm_seq_first(%q: tensor<6x2x4x8xf32>, %k: tensor<6x2x2x8xf32>, %v: tensor<6x2x2x8xf32>) -> tensor<6x2x32xf32> {
  %scale = mp.constant dense<0.176776695> : tensor<f32>
  %layer = mp.constant dense<2.0> : tensor<f32>
  %k5 = mp.reshape %k : tensor<6x2x2x8xf32> -> tensor<6x2x2x1x8xf32>
  %ke = mp.expand %k5 : tensor<6x2x2x1x8xf32> -> tensor<6x2x2x2x8xf32>
  %k3 = mp.reshape %ke : tensor<6x2x2x2x8xf32> -> tensor<6x8x8xf32>
  %v5 = mp.reshape %v : tensor<6x2x2x8xf32> -> tensor<6x2x2x1x8xf32>
  %ve = mp.expand %v5 : tensor<6x2x2x1x8xf32> -> tensor<6x2x2x2x8xf32>
  %v3 = mp.reshape %ve : tensor<6x2x2x2x8xf32> -> tensor<6x8x8xf32>
  %q3 = mp.reshape %q : tensor<6x2x4x8xf32> -> tensor<6x8x8xf32>
  %qt = mp.transpose %q3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %kb = mp.transpose %k3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %kt = mp.transpose %kb [0, 2, 1] : tensor<8x6x8xf32> -> tensor<8x8x6xf32>
  %s = mp.matmul %qt, %kt : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %s1 = mp.mul %s, %scale : (tensor<8x6x6xf32>, tensor<f32>) -> tensor<8x6x6xf32>
  %s4 = mp.reshape %s1 : tensor<8x6x6xf32> -> tensor<2x4x6x6xf32>
  %s2 = mp.mul %s4, %layer : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %p = mp.softmax %s2 {axis = 3 : i64} : tensor<2x4x6x6xf32>
  %p3 = mp.reshape %p : tensor<2x4x6x6xf32> -> tensor<8x6x6xf32>
  %vt = mp.transpose %v3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %o3 = mp.matmul %p3, %vt : (tensor<8x6x6xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>
  %o4 = mp.reshape %o3 : tensor<8x6x8xf32> -> tensor<2x4x6x8xf32>
  %ot = mp.transpose %o4 [2, 0, 1, 3] : tensor<2x4x6x8xf32> -> tensor<6x2x4x8xf32>
  %o = mp.reshape %ot : tensor<6x2x4x8xf32> -> tensor<6x2x32xf32>
  return %o : tensor<6x2x32xf32>
}

// -----

// Tests HF DeBERTa-v2's relative-position terms in the merged form: the
// relative keys [1, H, 2k, d] repeated over the batch as PyTorch exports
// `repeat` (Tile: every dim unsqueezed, the leading one expanded, then
// merged), and the c2p scores gathered along the flattened [B*H, S*2k] (a
// merge of leading dims that regroups the rest too). The merges sink
// through the transpose, the matmul and the gather to meet the view back
// to [B, H, S, S]: nothing stays merged.
// CHECK-LABEL: func.func @deberta_c2p
// CHECK-NOT: tensor<8x
// CHECK: %[[E:.*]] = mp.expand %{{.*}} : tensor<1x4x1x6x1x8xf32> -> tensor<2x4x1x6x1x8xf32>
// CHECK: %[[K:.*]] = mp.reshape %[[E]] : tensor<2x4x1x6x1x8xf32> -> tensor<2x4x6x8xf32>
// CHECK: %[[KT:.*]] = mp.transpose %[[K]] [0, 1, 3, 2] : tensor<2x4x6x8xf32> -> tensor<2x4x8x6xf32>
// CHECK: %[[S:.*]] = mp.matmul %arg0, %[[KT]] : (tensor<2x4x5x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x5x6xf32>
// CHECK: %[[F:.*]] = mp.reshape %[[S]] : tensor<2x4x5x6xf32> -> tensor<2x4x30xf32>
// CHECK: %[[G:.*]] = mp.gather %[[F]], %arg2 {axis = 2 : i64} : (tensor<2x4x30xf32>, tensor<25xi64>) -> tensor<2x4x25xf32>
// CHECK: %[[R:.*]] = mp.reshape %[[G]] : tensor<2x4x25xf32> -> tensor<2x4x5x5xf32>
// CHECK-NEXT: return %[[R]]
func.func @deberta_c2p(%q: tensor<2x4x5x8xf32>, %pk: tensor<1x4x6x8xf32>, %at: tensor<25xi64>) -> tensor<2x4x5x5xf32> {
  %q3 = mp.reshape %q : tensor<2x4x5x8xf32> -> tensor<8x5x8xf32>
  %u = mp.reshape %pk : tensor<1x4x6x8xf32> -> tensor<1x4x1x6x1x8xf32>
  %e = mp.expand %u : tensor<1x4x1x6x1x8xf32> -> tensor<2x4x1x6x1x8xf32>
  %k3 = mp.reshape %e : tensor<2x4x1x6x1x8xf32> -> tensor<8x6x8xf32>
  %kt = mp.transpose %k3 [0, 2, 1] : tensor<8x6x8xf32> -> tensor<8x8x6xf32>
  %s = mp.matmul %q3, %kt : (tensor<8x5x8xf32>, tensor<8x8x6xf32>) -> tensor<8x5x6xf32>
  %f = mp.reshape %s : tensor<8x5x6xf32> -> tensor<8x30xf32>
  %g = mp.gather %f, %at {axis = 1 : i64} : (tensor<8x30xf32>, tensor<25xi64>) -> tensor<8x25xf32>
  %g3 = mp.reshape %g : tensor<8x25xf32> -> tensor<8x5x5xf32>
  %r = mp.reshape %g3 : tensor<8x5x5xf32> -> tensor<2x4x5x5xf32>
  return %r : tensor<2x4x5x5xf32>
}

// -----

// Tests a sequence-first query viewed [S, B, H*d] -> [S, B*H, d] in one
// reshape (it splits H*d and merges B and H: the merge is read on the
// shapes' common refinement [S, B, H, d]), keys and values of one head
// expanded to every head (Falcon's multi-query form, stripped to the one
// head), and a padding mask of -1e4 applied between two scales, the later
// of 1e-4: it masks nothing once scaled, so it stays an additive mask of
// its scaled value instead of becoming a mask of hidden keys.
// CHECK-LABEL: func.func @seq_first_mqa
// CHECK-NOT: mp.matmul
// CHECK: %[[Q4:.*]] = mp.reshape %arg0 : tensor<6x2x32xf32> -> tensor<6x2x4x8xf32>
// CHECK: %[[Q:.*]] = mp.transpose %[[Q4]] [1, 2, 0, 3] : tensor<6x2x4x8xf32> -> tensor<2x4x6x8xf32>
// CHECK: %[[M:.*]] = mp.mul %arg3, %{{.*}} : (tensor<2x1x1x6xf32>, tensor<f32>)
// CHECK: mp.attention %[[Q]], %{{.*}}, %{{.*}}, %[[M]] {{{.*}}} : (tensor<2x4x6x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x1x6xf32>)
func.func @seq_first_mqa(%q: tensor<6x2x32xf32>, %k: tensor<6x2x1x8xf32>, %v: tensor<6x2x1x8xf32>, %pad: tensor<2x1x1x6xf32>) -> tensor<2x4x6x8xf32> {
  %a = mp.constant dense<0.25> : tensor<f32>
  %b = mp.constant dense<1.0e-04> : tensor<f32>
  %ke = mp.expand %k : tensor<6x2x1x8xf32> -> tensor<6x2x4x8xf32>
  %ve = mp.expand %v : tensor<6x2x1x8xf32> -> tensor<6x2x4x8xf32>
  %q3 = mp.reshape %q : tensor<6x2x32xf32> -> tensor<6x8x8xf32>
  %k3 = mp.reshape %ke : tensor<6x2x4x8xf32> -> tensor<6x8x8xf32>
  %v3 = mp.reshape %ve : tensor<6x2x4x8xf32> -> tensor<6x8x8xf32>
  %qt = mp.transpose %q3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %kb = mp.transpose %k3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %kt = mp.transpose %kb [0, 2, 1] : tensor<8x6x8xf32> -> tensor<8x8x6xf32>
  %vt = mp.transpose %v3 [1, 0, 2] : tensor<6x8x8xf32> -> tensor<8x6x8xf32>
  %s = mp.matmul %qt, %kt : (tensor<8x6x8xf32>, tensor<8x8x6xf32>) -> tensor<8x6x6xf32>
  %s4 = mp.reshape %s : tensor<8x6x6xf32> -> tensor<2x4x6x6xf32>
  %s1 = mp.mul %s4, %a : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %sm = mp.add %s1, %pad : (tensor<2x4x6x6xf32>, tensor<2x1x1x6xf32>) -> tensor<2x4x6x6xf32>
  %s2 = mp.mul %sm, %b : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %p = mp.softmax %s2 {axis = 3 : i64} : tensor<2x4x6x6xf32>
  %p3 = mp.reshape %p : tensor<2x4x6x6xf32> -> tensor<8x6x6xf32>
  %o3 = mp.matmul %p3, %vt : (tensor<8x6x6xf32>, tensor<8x6x8xf32>) -> tensor<8x6x8xf32>
  %o = mp.reshape %o3 : tensor<8x6x8xf32> -> tensor<2x4x6x8xf32>
  return %o : tensor<2x4x6x8xf32>
}

// -----

// Tests a sequence-first batch of 1 ([S, 1, H*d] viewed [S, H, d] and
// transposed to [H, S, d]: the transpose brings the batch of 1 to the
// front, so the view is unmerged all the same), and a boolean mask filled
// with -1e4 then divided by 8: -1250 once scaled still hides its keys, so
// attention is raised with the fill scaled.
// CHECK-LABEL: func.func @batch1_fill_then_scale
// CHECK-NOT: mp.matmul
// CHECK-DAG: %[[FILL:.*]] = mp.constant dense<-1.250000e+03> : tensor<f32>
// CHECK-DAG: %[[Q:.*]] = mp.transpose %{{.*}} [1, 2, 0, 3] : tensor<6x1x4x8xf32> -> tensor<1x4x6x8xf32>
// CHECK: %[[M:.*]] = mp.where %arg3, %[[FILL]], %{{.*}}
// CHECK: mp.attention %[[Q]], %{{.*}}, %{{.*}}, %[[M]] {scale = 1.250000e-01 : f32}
func.func @batch1_fill_then_scale(%q: tensor<6x1x32xf32>, %k: tensor<6x1x32xf32>, %v: tensor<6x1x32xf32>, %pad: tensor<1x1x1x6xi1>) -> tensor<1x4x6x8xf32> {
  %fill = mp.constant dense<-1.0e+04> : tensor<f32>
  %eight = mp.constant dense<8.0> : tensor<f32>
  %q3 = mp.reshape %q : tensor<6x1x32xf32> -> tensor<6x4x8xf32>
  %k3 = mp.reshape %k : tensor<6x1x32xf32> -> tensor<6x4x8xf32>
  %v3 = mp.reshape %v : tensor<6x1x32xf32> -> tensor<6x4x8xf32>
  %qt = mp.transpose %q3 [1, 0, 2] : tensor<6x4x8xf32> -> tensor<4x6x8xf32>
  %kt = mp.transpose %k3 [1, 2, 0] : tensor<6x4x8xf32> -> tensor<4x8x6xf32>
  %vt = mp.transpose %v3 [1, 0, 2] : tensor<6x4x8xf32> -> tensor<4x6x8xf32>
  %s = mp.matmul %qt, %kt : (tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<4x6x6xf32>
  %s4 = mp.reshape %s : tensor<4x6x6xf32> -> tensor<1x4x6x6xf32>
  %f = mp.where %pad, %fill, %s4 : (tensor<1x1x1x6xi1>, tensor<f32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %d = mp.div %f, %eight : (tensor<1x4x6x6xf32>, tensor<f32>) -> tensor<1x4x6x6xf32>
  %p = mp.softmax %d {axis = 3 : i64} : tensor<1x4x6x6xf32>
  %p3 = mp.reshape %p : tensor<1x4x6x6xf32> -> tensor<4x6x6xf32>
  %o3 = mp.matmul %p3, %vt : (tensor<4x6x6xf32>, tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  %o = mp.reshape %o3 : tensor<4x6x8xf32> -> tensor<1x4x6x8xf32>
  return %o : tensor<1x4x6x8xf32>
}

// -----

// Tests a slice that keeps the merged dimension whole (`x[:, 3]` on merged
// [B*H, S, S] scores): the merge sinks through it.
// CHECK-LABEL: func.func @slice_of_merged
// CHECK-NOT: tensor<8x
// CHECK: %[[S:.*]] = mp.slice %arg0 {limits = array<i64: 2, 4, 4, 6>, starts = array<i64: 0, 0, 3, 0>, strides = array<i64: 1, 1, 1, 1>} : tensor<2x4x6x6xf32> -> tensor<2x4x1x6xf32>
// CHECK: mp.exp %[[S]] : tensor<2x4x1x6xf32>
func.func @slice_of_merged(%x: tensor<2x4x6x6xf32>) -> tensor<2x4x6xf32> {
  %m = mp.reshape %x : tensor<2x4x6x6xf32> -> tensor<8x6x6xf32>
  %s = mp.slice %m {starts = array<i64: 0, 3, 0>, limits = array<i64: 8, 4, 6>, strides = array<i64: 1, 1, 1>} : tensor<8x6x6xf32> -> tensor<8x1x6xf32>
  %e = mp.exp %s : tensor<8x1x6xf32>
  %r = mp.reshape %e : tensor<8x1x6xf32> -> tensor<2x4x6xf32>
  return %r : tensor<2x4x6xf32>
}

// -----

// Tests PyTorch's multi_head_attention_forward's view of its result:
// [B*H, S, d] (heads merged with the batch) transposed to [S, B*H, d] and
// viewed [S*B, H*d] for the output projection. The merge moves below the
// transpose and folds into the view: [B, H, S, d] transposed to
// [S, B, H, d], then viewed [S*B, H*d], where the heads stay a dim of
// their own.
// CHECK-LABEL: func.func @mha_output_view
// CHECK: %[[T:.*]] = mp.transpose %arg0 [2, 0, 1, 3] : tensor<2x4x6x8xf32> -> tensor<6x2x4x8xf32>
// CHECK-NEXT: %[[O:.*]] = mp.reshape %[[T]] : tensor<6x2x4x8xf32> -> tensor<12x32xf32>
// CHECK-NEXT: return %[[O]]
func.func @mha_output_view(%o: tensor<2x4x6x8xf32>) -> tensor<12x32xf32> {
  %merged = mp.reshape %o : tensor<2x4x6x8xf32> -> tensor<8x6x8xf32>
  %t = mp.transpose %merged [1, 0, 2] : tensor<8x6x8xf32> -> tensor<6x8x8xf32>
  %rows = mp.reshape %t : tensor<6x8x8xf32> -> tensor<12x32xf32>
  return %rows : tensor<12x32xf32>
}
