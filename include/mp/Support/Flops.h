//===- Flops.h - floating-point work of the heavy ops -----------*- C++ -*-===//
//
// The multiply-add work of the ops that dominate a transformer, counted as
// 2 FLOPs per multiply-add: what the runtime reports as throughput and the
// compiler's cost model (pipeline balancing, the report) uses. One formula
// per op, shared.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_FLOPS_H
#define MP_SUPPORT_FLOPS_H

#include "mp/Support/Shape.h"

namespace mp::flops {

/// A product of [..., K] by [K, N]: 2 · (elements of the [..., N] result)
/// · K (matmul, linear, linear's input gradient).
double contraction(const Shape &result, int64_t k);

/// The weight gradient of a linear: xᵀ·dy over every leading row, 2 ·
/// (elements of x) · N.
double linearWeightGrad(const Shape &input, int64_t n);

/// Attention over q [B, H, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv]:
/// QKᵀ and P·V, 2·B·H·Sq·Sk·(D + Dv) (causal masking not discounted, as
/// Megatron's model-FLOPs count does not).
double attention(const Shape &q, const Shape &k, const Shape &v);

/// Its backward: the scores again (recomputed from the saved statistics),
/// then dV, dP, dQ and dK: 2·B·H·Sq·Sk·(3D + 2Dv).
double attentionGrad(const Shape &q, const Shape &k, const Shape &v);

/// An einsum: one multiply per extra operand and one add for every point
/// of the space all its labels span (0 for an equation that does not
/// parse, which the verifier rejects).
double einsum(const std::string &equation, const std::vector<Shape> &inputs);

} // namespace mp::flops

#endif // MP_SUPPORT_FLOPS_H
