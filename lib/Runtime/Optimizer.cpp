//===- Optimizer.cpp - optimizer steps and learning-rate schedules --------===//
#include "mp/Runtime/Optimizer.h"

#include <algorithm>
#include <cmath>

namespace mp::rt {

void adamwStep(float *weights, float *m, float *v, const float *grad, int64_t n,
               int64_t step, double lr, double weightDecay,
               const AdamWOptions &o) {
  // As torch.optim.AdamW (single-tensor, fp32): decay first, then
  // p -= (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps).
  const float decay = static_cast<float>(1.0 - lr * weightDecay);
  const float b1 = static_cast<float>(o.beta1),
              b2 = static_cast<float>(o.beta2);
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  const float stepSize = static_cast<float>(lr / bc1);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float eps = static_cast<float>(o.eps);
  // Elementwise: the result does not depend on the thread count.
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    weights[i] *= decay;
    m[i] += (g - m[i]) * (1.0f - b1);
    v[i] = v[i] * b2 + (1.0f - b2) * g * g;
    const float denom = std::sqrt(v[i]) / bc2Sqrt + eps;
    weights[i] -= stepSize * m[i] / denom;
  }
}

void sgdStep(float *weights, const float *grad, int64_t n, double lr,
             double weightDecay) {
  const float rate = static_cast<float>(lr);
  const float wd = static_cast<float>(weightDecay);
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t i = 0; i < n; ++i)
    weights[i] -= rate * (grad[i] + wd * weights[i]);
}

double sumOfSquares(const float *grad, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += static_cast<double>(grad[i]) * grad[i];
  return s;
}

double LRSchedule::at(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return maxLr * static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (decay == Decay::Constant)
    return maxLr;
  const int64_t decaySteps = std::max<int64_t>(totalSteps - warmupSteps, 1);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmupSteps) /
                        static_cast<double>(decaySteps));
  return minLr + (maxLr - minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

} // namespace mp::rt
