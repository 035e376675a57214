//===- Flops.cpp - floating-point work of the heavy ops -------------------===//
#include "mp/Support/Flops.h"
#include "mp/Support/Einsum.h"

namespace mp::flops {

namespace {
double elements(const Shape &s) {
  double n = 1;
  for (int64_t d : s)
    n *= static_cast<double>(d);
  return n;
}

/// B·H·Sq·Sk of an attention.
double scorePairs(const Shape &q, const Shape &k) {
  return static_cast<double>(q[0]) * static_cast<double>(q[1]) *
         static_cast<double>(q[2]) * static_cast<double>(k[2]);
}
} // namespace

double contraction(const Shape &result, int64_t k) {
  return 2.0 * elements(result) * static_cast<double>(k);
}

double linearWeightGrad(const Shape &input, int64_t n) {
  return 2.0 * elements(input) * static_cast<double>(n);
}

double attention(const Shape &q, const Shape &k, const Shape &v) {
  return 2.0 * scorePairs(q, k) * static_cast<double>(q[3] + v[3]);
}

double attentionGrad(const Shape &q, const Shape &k, const Shape &v) {
  return 2.0 * scorePairs(q, k) * static_cast<double>(3 * q[3] + 2 * v[3]);
}

double einsum(const std::string &equation, const std::vector<Shape> &inputs) {
  std::vector<int64_t> ranks;
  for (const Shape &s : inputs)
    ranks.push_back(static_cast<int64_t>(s.size()));
  EinsumSpec spec;
  Shape result;
  std::map<char, int64_t> sizes;
  std::string error;
  if (inputs.empty() || !parseEinsum(equation, ranks, spec, error) ||
      !inferEinsumShape(spec, inputs, result, error, &sizes))
    return 0;
  double points = 1;
  for (const auto &entry : sizes)
    points *= static_cast<double>(entry.second);
  return points * static_cast<double>(inputs.size()); // (n-1 mul, 1 add)
}

} // namespace mp::flops
