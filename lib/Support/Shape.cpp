//===- Shape.cpp - the shape rules of the ops -----------------------------===//
#include "mp/Support/Shape.h"

#include <algorithm>

namespace mp {

std::string formatShape(const Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::optional<int64_t> checkedNumElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return false;
    result[i] = da == 1 ? db : da;
  }
  out = std::move(result);
  return true;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

namespace shape {
namespace {

bool fail(std::string &error, std::string message) {
  error = std::move(message);
  return false;
}

bool axisIn(int64_t axis, int64_t rank, int64_t &out, std::string &error,
            const char *what = "axis") {
  std::optional<int64_t> a = normalizeAxis(axis, rank);
  if (!a)
    return fail(error, std::string(what) + " " + std::to_string(axis) +
                           " is out of range for rank " + std::to_string(rank));
  out = *a;
  return true;
}

bool expectShape(const char *what, const Shape &found, const Shape &expected,
                 std::string &error) {
  if (found == expected)
    return true;
  return fail(error, std::string("expected ") + what + " shape " +
                         formatShape(expected) + " but found " +
                         formatShape(found));
}

} // namespace

bool broadcast(const std::vector<Shape> &operands, Shape &result,
               std::string &error) {
  Shape shape;
  for (const Shape &s : operands)
    if (!broadcastShapes(shape, s, shape))
      return fail(error, "operand shapes " + formatShape(shape) + " and " +
                             formatShape(s) + " are not broadcastable");
  result = std::move(shape);
  return true;
}

bool matmul(const Shape &lhs, const Shape &rhs, Shape &result,
            std::string &error) {
  if (lhs.empty() || rhs.empty())
    return fail(error, "operands must have rank >= 1");
  Shape a = lhs, b = rhs;
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t k = a.back(), kRhs = b[b.size() - 2];
  if (k != kRhs)
    return fail(error, "contracting dimensions differ: lhs has " +
                           std::to_string(k) + ", rhs has " +
                           std::to_string(kRhs));
  Shape batch;
  if (!broadcastShapes(Shape(a.begin(), a.end() - 2),
                       Shape(b.begin(), b.end() - 2), batch))
    return fail(error, "batch dimensions of " + formatShape(lhs) + " and " +
                           formatShape(rhs) + " are not broadcastable");
  if (!lhsVector)
    batch.push_back(a[a.size() - 2]);
  if (!rhsVector)
    batch.push_back(b.back());
  result = std::move(batch);
  return true;
}

bool linear(const Shape &input, const Shape &weight, const Shape *bias,
            bool transposeWeight, Shape &result, std::string &error) {
  if (input.empty())
    return fail(error, "input must have rank >= 1");
  if (weight.size() != 2)
    return fail(error, "weight must have rank 2 but has rank " +
                           std::to_string(weight.size()));
  int64_t k = transposeWeight ? weight[1] : weight[0];
  int64_t n = transposeWeight ? weight[0] : weight[1];
  if (input.back() != k)
    return fail(error, "input feature size " + std::to_string(input.back()) +
                           " does not match weight input size " +
                           std::to_string(k));
  if (bias && !expectShape("bias", *bias, {n}, error))
    return false;
  result.assign(input.begin(), input.end() - 1);
  result.push_back(n);
  return true;
}

bool layerNorm(const Shape &input, int64_t axis, const Shape &scale,
               const Shape *bias, Shape &result, std::string &error) {
  int64_t a;
  if (!axisIn(axis, static_cast<int64_t>(input.size()), a, error))
    return false;
  Shape normalized(input.begin() + a, input.end());
  if (!expectShape("scale", scale, normalized, error) ||
      (bias && !expectShape("bias", *bias, normalized, error)))
    return false;
  result = input;
  return true;
}

bool rmsNorm(const Shape &input, const Shape &scale, Shape &result,
             std::string &error) {
  if (input.empty())
    return fail(error, "input must have rank >= 1");
  if (!expectShape("scale", scale, {input.back()}, error))
    return false;
  result = input;
  return true;
}

bool rotary(const Shape &input, const Shape &table, int64_t rotaryDim,
            Shape &result, std::string &error) {
  if (input.empty())
    return fail(error, "input must have rank >= 1");
  if (rotaryDim <= 0 || rotaryDim % 2 != 0 || rotaryDim > input.back())
    return fail(error, "rotary_dim " + std::to_string(rotaryDim) +
                           " must be even, positive and at most the last "
                           "dim, " +
                           std::to_string(input.back()));
  if (table.empty() || table.size() > input.size() || table.back() != rotaryDim)
    return fail(error, "cos and sin " + formatShape(table) +
                           " must have rotary_dim channels and no more dims "
                           "than the input " +
                           formatShape(input));
  const size_t lead = input.size() - table.size();
  for (size_t i = 0; i + 1 < table.size(); ++i)
    if (table[i] != 1 && table[i] != input[lead + i])
      return fail(error, "cos and sin " + formatShape(table) +
                             " do not broadcast to the input " +
                             formatShape(input));
  result = input;
  return true;
}

bool softmax(const Shape &input, int64_t axis, Shape &result,
             std::string &error) {
  int64_t a;
  if (!axisIn(axis, static_cast<int64_t>(input.size()), a, error))
    return false;
  result = input;
  return true;
}

bool reduce(const Shape &input, const std::vector<int64_t> &axes, bool keepDims,
            Shape &result, std::string &error) {
  std::vector<bool> reduced(input.size(), false);
  for (int64_t axis : axes) {
    int64_t a;
    if (!axisIn(axis, static_cast<int64_t>(input.size()), a, error))
      return false;
    if (reduced[a])
      return fail(error, "axis " + std::to_string(axis) + " is repeated");
    reduced[a] = true;
  }
  result.clear();
  for (size_t i = 0; i < input.size(); ++i) {
    if (!reduced[i])
      result.push_back(input[i]);
    else if (keepDims)
      result.push_back(1);
  }
  return true;
}

bool attention(const Shape &q, const Shape &k, const Shape &v,
               const Shape *mask, Shape &result, std::string &error) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return fail(error, "query, key and value must be [B, H, S, D]");
  if (q[0] != k[0] || q[0] != v[0])
    return fail(error, "batch sizes differ: " + std::to_string(q[0]) + ", " +
                           std::to_string(k[0]) + ", " + std::to_string(v[0]));
  if (k[1] != v[1] || k[2] != v[2])
    return fail(error, "key " + formatShape(k) + " and value " +
                           formatShape(v) +
                           " must agree in heads and sequence");
  if (q[3] != k[3])
    return fail(error, "query head size " + std::to_string(q[3]) +
                           " differs from key head size " +
                           std::to_string(k[3]));
  if (k[1] == 0 || q[1] % k[1] != 0)
    return fail(error, "query heads (" + std::to_string(q[1]) +
                           ") must be a multiple of key/value heads (" +
                           std::to_string(k[1]) + ")");
  Shape scores = {q[0], q[1], q[2], k[2]}, out;
  if (mask && (!broadcastShapes(scores, *mask, out) || out != scores))
    return fail(error, "mask shape " + formatShape(*mask) +
                           " does not broadcast to the scores shape " +
                           formatShape(scores));
  result = {q[0], q[1], q[2], v[3]};
  return true;
}

bool embedding(const Shape &table, const Shape &indices, Shape &result,
               std::string &error) {
  if (table.size() != 2)
    return fail(error, "table must have rank 2 but has rank " +
                           std::to_string(table.size()));
  result = indices;
  result.push_back(table[1]);
  return true;
}

bool gather(const Shape &input, const Shape &indices, int64_t axis,
            Shape &result, std::string &error) {
  int64_t a;
  if (!axisIn(axis, static_cast<int64_t>(input.size()), a, error))
    return false;
  result.assign(input.begin(), input.begin() + a);
  result.insert(result.end(), indices.begin(), indices.end());
  result.insert(result.end(), input.begin() + a + 1, input.end());
  return true;
}

bool crossEntropy(const Shape &logits, const Shape &targets, Shape &result,
                  std::string &error) {
  if (logits.empty())
    return fail(error, "logits must have rank >= 1");
  if (!expectShape("targets", targets, Shape(logits.begin(), logits.end() - 1),
                   error))
    return false;
  result.clear();
  return true;
}

bool trilu(const Shape &input, Shape &result, std::string &error) {
  if (input.size() < 2)
    return fail(error, "input must have rank >= 2");
  result = input;
  return true;
}

bool transpose(const Shape &input, const std::vector<int64_t> &perm,
               Shape &result, std::string &error) {
  if (perm.size() != input.size())
    return fail(error, "permutation has " + std::to_string(perm.size()) +
                           " entries but the input has rank " +
                           std::to_string(input.size()));
  std::vector<bool> seen(input.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(input.size()) || seen[p])
      return fail(error, "invalid permutation entry " + std::to_string(p));
    seen[p] = true;
    out.push_back(input[p]);
  }
  result = std::move(out);
  return true;
}

bool slice(const Shape &input, const std::vector<int64_t> &starts,
           const std::vector<int64_t> &limits,
           const std::vector<int64_t> &strides, Shape &result,
           std::string &error) {
  size_t rank = input.size();
  if (starts.size() != rank || limits.size() != rank || strides.size() != rank)
    return fail(error, "starts, limits and strides must have " +
                           std::to_string(rank) + " entries each");
  Shape out;
  for (size_t i = 0; i < rank; ++i) {
    int64_t start = starts[i], limit = limits[i], stride = strides[i];
    int64_t dim = input[i];
    if (stride == 0)
      return fail(error,
                  "stride of dimension " + std::to_string(i) + " is zero");
    bool ok = stride > 0 ? (start >= 0 && start <= limit && limit <= dim)
                         : (start < dim && limit >= -1 && limit <= start);
    if (!ok)
      return fail(error, "slice [" + std::to_string(start) + ", " +
                             std::to_string(limit) + ") step " +
                             std::to_string(stride) +
                             " is out of bounds for dimension " +
                             std::to_string(i) + " of size " +
                             std::to_string(dim));
    // Counted without adding the step, which may be near INT64_MAX, in
    // unsigned arithmetic, where INT64_MIN's magnitude exists.
    int64_t span = stride > 0 ? limit - start : start - limit;
    uint64_t step = stride > 0 ? static_cast<uint64_t>(stride)
                               : uint64_t{0} - static_cast<uint64_t>(stride);
    out.push_back(
        span > 0
            ? static_cast<int64_t>(static_cast<uint64_t>(span - 1) / step) + 1
            : 0);
  }
  result = std::move(out);
  return true;
}

bool concat(const std::vector<Shape> &inputs, int64_t axis, Shape &result,
            std::string &error) {
  if (inputs.empty())
    return fail(error, "needs at least one input");
  const Shape &first = inputs.front();
  int64_t a;
  if (!axisIn(axis, static_cast<int64_t>(first.size()), a, error))
    return false;
  Shape out = first;
  out[a] = 0;
  for (const Shape &s : inputs) {
    if (s.size() != first.size())
      return fail(error, "inputs must share element type and rank");
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != a && s[d] != first[d])
        return fail(error, "input shapes " + formatShape(first) + " and " +
                               formatShape(s) + " differ outside axis " +
                               std::to_string(a));
    out[a] += s[a];
  }
  result = std::move(out);
  return true;
}

bool split(const Shape &input, int64_t axis, const std::vector<Shape> &results,
           std::string &error) {
  if (results.empty())
    return fail(error, "needs at least one result");
  int64_t a;
  if (!axisIn(axis, static_cast<int64_t>(input.size()), a, error))
    return false;
  int64_t total = 0;
  for (const Shape &s : results) {
    if (s.size() != input.size())
      return fail(error,
                  "results must match the input's element type and rank");
    if (s[a] < 0)
      return fail(error, "split size " + std::to_string(s[a]) + " is negative");
    for (size_t d = 0; d < s.size(); ++d)
      if (static_cast<int64_t>(d) != a && s[d] != input[d])
        return fail(error, "result shape " + formatShape(s) +
                               " differs from the input outside axis " +
                               std::to_string(a));
    if (__builtin_add_overflow(total, s[a], &total))
      return fail(error, "split sizes add up to more than int64 holds");
  }
  if (total != input[a])
    return fail(error, "split sizes add up to " + std::to_string(total) +
                           " but the input dimension " + std::to_string(a) +
                           " is " + std::to_string(input[a]));
  return true;
}

bool expand(const Shape &input, const Shape &result, std::string &error) {
  Shape shape;
  if (!broadcastShapes(input, result, shape) || shape != result)
    return fail(error, "cannot broadcast " + formatShape(input) + " to " +
                           formatShape(result));
  return true;
}

bool reshape(const Shape &input, const Shape &result, std::string &error) {
  // Shapes come from models and artifacts: a product past int64 is an
  // error, not a wrapped count that might match the other side's.
  std::optional<int64_t> inCount = checkedNumElements(input),
                         outCount = checkedNumElements(result);
  if (!inCount || !outCount)
    return fail(error, "cannot reshape " + formatShape(input) + " to " +
                           formatShape(result) +
                           ": a shape has negative dims or more elements "
                           "than int64 holds");
  const int64_t in = *inCount, out = *outCount;
  if (in != out)
    return fail(error, "cannot reshape " + formatShape(input) + " (" +
                           std::to_string(in) + " elements) to " +
                           formatShape(result) + " (" + std::to_string(out) +
                           " elements)");
  return true;
}

bool flatten(const Shape &input, int64_t axis, Shape &result,
             std::string &error) {
  const int64_t rank = input.size();
  if (axis < -rank || axis > rank)
    return fail(error, "axis " + std::to_string(axis) +
                           " is out of range for rank " + std::to_string(rank));
  if (axis < 0)
    axis += rank;
  std::optional<int64_t> outer = checkedNumElements(
                             Shape(input.begin(), input.begin() + axis)),
                         inner = checkedNumElements(
                             Shape(input.begin() + axis, input.end()));
  if (!outer || !inner)
    return fail(error, "cannot flatten " + formatShape(input) +
                           ": it has negative dims or more elements than "
                           "int64 holds");
  result = {*outer, *inner};
  return true;
}

// Gradient ops: the forward op's rule, with the gradient of its result in
// the result's shape.

bool linearWeightGrad(const Shape &input, const Shape &resultGrad,
                      bool transposeWeight, Shape &result, std::string &error) {
  if (input.empty() || resultGrad.empty())
    return fail(error, "input and result gradient must have rank >= 1");
  if (!expectShape("result gradient's leading dims",
                   Shape(resultGrad.begin(), resultGrad.end() - 1),
                   Shape(input.begin(), input.end() - 1), error))
    return false;
  int64_t k = input.back(), n = resultGrad.back();
  result = transposeWeight ? Shape{n, k} : Shape{k, n};
  return true;
}

bool layerNormGrad(const Shape &input, int64_t axis, const Shape &scale,
                   const Shape &resultGrad, std::string &error) {
  Shape result;
  return layerNorm(input, axis, scale, nullptr, result, error) &&
         expectShape("result gradient", resultGrad, result, error);
}

bool rmsNormGrad(const Shape &input, const Shape &scale,
                 const Shape &resultGrad, std::string &error) {
  Shape result;
  return rmsNorm(input, scale, result, error) &&
         expectShape("result gradient", resultGrad, result, error);
}

bool attentionGrad(const Shape &query, const Shape &key, const Shape &value,
                   const Shape &result, const Shape &resultGrad,
                   const Shape *mask, std::string &error) {
  Shape expected;
  return attention(query, key, value, mask, expected, error) &&
         expectShape("result", result, expected, error) &&
         expectShape("result gradient", resultGrad, expected, error);
}

bool embeddingGrad(const Shape &table, const Shape &indices,
                   const Shape &resultGrad, std::string &error) {
  Shape expected;
  return embedding(table, indices, expected, error) &&
         expectShape("result gradient", resultGrad, expected, error);
}

bool crossEntropyGrad(const Shape &logits, const Shape &targets,
                      const Shape &lossGrad, std::string &error) {
  Shape expected;
  return crossEntropy(logits, targets, expected, error) &&
         expectShape("loss gradient", lossGrad, expected, error);
}

bool sliceGrad(const Shape &input, const std::vector<int64_t> &starts,
               const std::vector<int64_t> &limits,
               const std::vector<int64_t> &strides, const Shape &resultGrad,
               std::string &error) {
  Shape expected;
  return slice(input, starts, limits, strides, expected, error) &&
         expectShape("result gradient", resultGrad, expected, error);
}

} // namespace shape
} // namespace mp
