//===- Optimizer.h - optimizer steps and learning-rate schedules ---*- C++
//-*-===//
//
// The update rules of a train step, on fp32 master weights and fp32 state,
// exactly as PyTorch's torch.optim.AdamW and SGD compute them, and
// Megatron's learning-rate schedule (linear warmup, then constant or cosine
// decay). Plain loops: the optimizer is memory-bound and runs once per step.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_OPTIMIZER_H
#define MP_RUNTIME_OPTIMIZER_H

#include <cstdint>
#include <string>

namespace mp::rt {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
};

/// One torch.optim.AdamW step (`step` counts from 1) of `n` weights:
/// decoupled weight decay p -= lr·wd·p, then the bias-corrected Adam
/// update with moments `m` and `v`.
void adamwStep(float *weights, float *m, float *v, const float *grad, int64_t n,
               int64_t step, double lr, double weightDecay,
               const AdamWOptions &options);

/// One torch.optim.SGD step (no momentum): p -= lr·(g + wd·p).
void sgdStep(float *weights, const float *grad, int64_t n, double lr,
             double weightDecay);

/// Σ g² over `n` values, in double.
double sumOfSquares(const float *grad, int64_t n);

/// Megatron's schedule: `warmupSteps` of linear warmup from 0 to `maxLr`,
/// then `maxLr` (constant) or a cosine decay to `minLr` at `totalSteps`.
struct LRSchedule {
  enum class Decay { Constant, Cosine };
  double maxLr = 1e-3, minLr = 0;
  int64_t warmupSteps = 0, totalSteps = 1;
  Decay decay = Decay::Constant;

  /// The learning rate of step `step` (counting from 1).
  double at(int64_t step) const;
};

} // namespace mp::rt

#endif // MP_RUNTIME_OPTIMIZER_H
