//===- Shape.h - tensor shapes and the shape rules of the ops ---*- C++ -*-===//
//
// The one definition of each op's shape rule, in plain C++ so that the
// dialect (verifiers, result-type inference), the importer's constant folder
// and the runtime's loader all apply the same rule. A rule returns false and
// says why in `error` (in the dialect's diagnostic style: lowercase, what
// was expected and what was found) when its operands do not fit.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_SHAPE_H
#define MP_SUPPORT_SHAPE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mp {

using Shape = std::vector<int64_t>;

/// "2x3x4" ("scalar" for rank 0), for messages.
std::string formatShape(const Shape &shape);
/// The product of the dims (1 for a scalar).
int64_t numElements(const Shape &shape);
/// The product of the dims; nullopt when a dim is negative or the product
/// overflows int64 (shapes read from files, before anything is allocated).
std::optional<int64_t> checkedNumElements(const Shape &shape);
/// The numpy broadcast of two shapes; false when they do not broadcast.
/// (`out` may alias `a` or `b`.)
bool broadcastShapes(const Shape &a, const Shape &b, Shape &out);
/// `axis` in [-rank, rank) made non-negative; nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

namespace shape {

/// The numpy broadcast of every operand (elementwise ops).
bool broadcast(const std::vector<Shape> &operands, Shape &result,
               std::string &error);
/// numpy.matmul: rank-1 operands promoted, batch dims broadcast.
bool matmul(const Shape &lhs, const Shape &rhs, Shape &result,
            std::string &error);
/// x · W (+ b): x [..., K], W [K, N] ([N, K] when `transposeWeight`),
/// bias [N].
bool linear(const Shape &input, const Shape &weight, const Shape *bias,
            bool transposeWeight, Shape &result, std::string &error);
/// Layer norm over the dims from `axis`; scale and bias have their shape.
bool layerNorm(const Shape &input, int64_t axis, const Shape &scale,
               const Shape *bias, Shape &result, std::string &error);
/// RMS norm over the last dim; scale has its size.
bool rmsNorm(const Shape &input, const Shape &scale, Shape &result,
             std::string &error);
/// Rotary embedding of the first `rotaryDim` channels of the last dim
/// (even, at most the dim); cos and sin (`table`) have `rotaryDim` channels
/// and broadcast along the input's other dims. The input's shape.
bool rotary(const Shape &input, const Shape &table, int64_t rotaryDim,
            Shape &result, std::string &error);
/// Softmax along `axis`: the input's shape.
bool softmax(const Shape &input, int64_t axis, Shape &result,
             std::string &error);
/// Reduction over `axes` (distinct, each in [-rank, rank)).
bool reduce(const Shape &input, const std::vector<int64_t> &axes, bool keepDims,
            Shape &result, std::string &error);
/// Attention: q [B, H, Sq, D], k and v [B, Hkv, Sk, D(v)], H % Hkv == 0, an
/// optional mask broadcasting to [B, H, Sq, Sk]; result [B, H, Sq, Dv].
bool attention(const Shape &query, const Shape &key, const Shape &value,
               const Shape *mask, Shape &result, std::string &error);
/// Rows of a [V, H] table: indices' shape + [H].
bool embedding(const Shape &table, const Shape &indices, Shape &result,
               std::string &error);
/// ONNX Gather along `axis`.
bool gather(const Shape &input, const Shape &indices, int64_t axis,
            Shape &result, std::string &error);
/// Logits [..., V] against targets [...]: a scalar.
bool crossEntropy(const Shape &logits, const Shape &targets, Shape &result,
                  std::string &error);
/// The upper or lower triangle of the last two dims: the input's shape.
bool trilu(const Shape &input, Shape &result, std::string &error);
/// Result dim i = input dim perm[i].
bool transpose(const Shape &input, const std::vector<int64_t> &perm,
               Shape &result, std::string &error);
/// Strided slice with one start, limit and stride per dim (a negative
/// stride walks backwards; its limit may then be -1).
bool slice(const Shape &input, const std::vector<int64_t> &starts,
           const std::vector<int64_t> &limits,
           const std::vector<int64_t> &strides, Shape &result,
           std::string &error);
/// Concatenation along `axis` (of the first input's rank).
bool concat(const std::vector<Shape> &inputs, int64_t axis, Shape &result,
            std::string &error);
/// A split of `input` along `axis` into `results` (their sizes on `axis`
/// add up; other dims equal the input's).
bool split(const Shape &input, int64_t axis, const std::vector<Shape> &results,
           std::string &error);
/// numpy broadcast of `input` to `result`.
bool expand(const Shape &input, const Shape &result, std::string &error);
/// Same number of elements.
bool reshape(const Shape &input, const Shape &result, std::string &error);
/// ONNX Flatten: the dims before `axis` (in [-rank, rank]) as one, the rest
/// as the other.
bool flatten(const Shape &input, int64_t axis, Shape &result,
             std::string &error);

// Gradient ops: the forward op's rule holds and the result gradient has
// the forward result's shape.

/// Weight gradient of a linear: input [..., K], resultGrad [..., N] (same
/// leading dims); result [K, N] ([N, K] when `transposeWeight`).
bool linearWeightGrad(const Shape &input, const Shape &resultGrad,
                      bool transposeWeight, Shape &result, std::string &error);
bool layerNormGrad(const Shape &input, int64_t axis, const Shape &scale,
                   const Shape &resultGrad, std::string &error);
bool rmsNormGrad(const Shape &input, const Shape &scale,
                 const Shape &resultGrad, std::string &error);
/// `result` is the forward result, which the backward reads.
bool attentionGrad(const Shape &query, const Shape &key, const Shape &value,
                   const Shape &result, const Shape &resultGrad,
                   const Shape *mask, std::string &error);
bool embeddingGrad(const Shape &table, const Shape &indices,
                   const Shape &resultGrad, std::string &error);
/// `lossGrad` is a scalar.
bool crossEntropyGrad(const Shape &logits, const Shape &targets,
                      const Shape &lossGrad, std::string &error);
/// `input` is the sliced tensor's shape (the gradient's).
bool sliceGrad(const Shape &input, const std::vector<int64_t> &starts,
               const std::vector<int64_t> &limits,
               const std::vector<int64_t> &strides, const Shape &resultGrad,
               std::string &error);

} // namespace shape
} // namespace mp

#endif // MP_SUPPORT_SHAPE_H
