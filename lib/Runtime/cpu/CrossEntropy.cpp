//===- CrossEntropy.cpp - vocab-parallel cross-entropy CPU kernels --------===//
//
// Megatron's vocab-parallel loss in three kernels: each rank's statistics
// of its vocabulary slice, the loss from every rank's statistics (gathered
// between the two by the runtime), and the gradient from the saved
// log-sum-exp. Statistics are combined in double.
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "mp/Runtime/Kernels.h"

#include <cmath>
#include <limits>

namespace mp::rt::cpu {
namespace {

int64_t targetAt(const Tensor &t, int64_t i) {
  return t.dtype == DType::I64 ? t.as<const int64_t>()[i]
                               : t.as<const int32_t>()[i];
}

Status checkTypes(const char *kernel, const Tensor &logits,
                  const Tensor &targets) {
  if (logits.dtype != DType::F32)
    return typeError(kernel, logits.dtype);
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return typeError(kernel, targets.dtype);
  return Status::success();
}

} // namespace

Status vocabParallelStats(const Tensor &logits, const Tensor &targets,
                          int64_t offset, Tensor &stats) {
  if (Status s = checkTypes("vocabParallelStats", logits, targets); !s)
    return s;
  const int64_t v = logits.shape.back(), positions = targets.numel();
  const float *x = logits.as<const float>();
  float *out = stats.as<float>();
  parallelRange(positions, shouldParallelize(positions * v),
                [&](int64_t b, int64_t e) {
                  for (int64_t p = b; p < e; ++p) {
                    const float *row = x + p * v;
                    const float m = detail::maxOf(row, v);
                    const int64_t local = targetAt(targets, p) - offset;
                    out[3 * p] = m;
                    out[3 * p + 1] = detail::expSubSumNoStore(row, m, v);
                    out[3 * p + 2] = local >= 0 && local < v ? row[local] : 0;
                  }
                });
  return Status::success();
}

Status vocabParallelLoss(const Tensor &stats, const Tensor &targets,
                         Tensor &loss, Tensor &logsumexp) {
  const int64_t ranks = stats.shape[0], positions = targets.numel();
  const float *s = stats.as<const float>();
  float *lse = logsumexp.as<float>();
  double sum = 0;
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p) {
    double m = -std::numeric_limits<double>::infinity(), target = 0, total = 0;
    for (int64_t r = 0; r < ranks; ++r)
      m = std::max(m, double(s[(r * positions + p) * 3]));
    for (int64_t r = 0; r < ranks; ++r) {
      const float *rs = s + (r * positions + p) * 3;
      total += double(rs[1]) * std::exp(double(rs[0]) - m);
      target += rs[2];
    }
    const double l = m + std::log(total);
    lse[p] = static_cast<float>(l);
    if (targetAt(targets, p) == kIgnoreIndex)
      continue;
    sum += l - target;
    ++counted;
  }
  loss.as<float>()[0] = counted ? static_cast<float>(sum / double(counted))
                                : std::numeric_limits<float>::quiet_NaN();
  return Status::success();
}

Status vocabParallelCrossEntropyGrad(const Tensor &logits,
                                     const Tensor &targets,
                                     const Tensor &logsumexp,
                                     const Tensor &dloss, int64_t offset,
                                     Tensor &dlogits) {
  if (Status s = checkTypes("vocabParallelCrossEntropyGrad", logits, targets);
      !s)
    return s;
  const int64_t v = logits.shape.back(), positions = targets.numel();
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p)
    counted += targetAt(targets, p) != kIgnoreIndex;
  const float weight =
      counted ? dloss.as<const float>()[0] / static_cast<float>(counted) : 0;
  const float *x = logits.as<const float>();
  const float *lse = logsumexp.as<const float>();
  float *g = dlogits.as<float>();
  parallelRange(positions, shouldParallelize(positions * v),
                [&](int64_t b, int64_t e) {
                  for (int64_t p = b; p < e; ++p) {
                    float *row = g + p * v;
                    const int64_t t = targetAt(targets, p);
                    if (t == kIgnoreIndex) {
                      std::fill(row, row + v, 0.0f);
                      continue;
                    }
                    detail::expSubSum(x + p * v, lse[p], row, v);
                    for (int64_t j = 0; j < v; ++j)
                      row[j] *= weight;
                    const int64_t local = t - offset;
                    if (local >= 0 && local < v)
                      row[local] -= weight;
                  }
                });
  return Status::success();
}

} // namespace mp::rt::cpu
