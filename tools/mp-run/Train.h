//===- Train.h - mp-run --train: the training loop ------------------*- C++
//-*-===//
#ifndef MP_TOOLS_MP_RUN_TRAIN_H
#define MP_TOOLS_MP_RUN_TRAIN_H

#include "Run.h"

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Optimizer.h"

#include <string>
#include <vector>

namespace mprun {

struct TrainOptions {
  bool enabled = false;
  std::string data, log, save, resume;
  /// The train step's inputs other than token ids and labels (an attention
  /// mask, token types, a decoder's ids): --input NAME=FILE.npy.
  std::vector<std::pair<std::string, std::string>> inputs;
  int64_t saveEvery = 0; // also save every this many steps (0: at the end)
  int64_t seed = 1234;   // dropout streams (a resumed run takes the saved)
  bool sgd = false;      // else AdamW
  int64_t steps = 0;
  mp::rt::AdamWOptions adam;
  mp::rt::LRSchedule schedule;
  double weightDecay = 0.1, clipGrad = 1.0;
  /// The training options given, in order (all but --train).
  std::vector<std::string> given;

  /// The options every rank must share (they decide the collectives run).
  std::string shared() const;
};

/// The training options' help text.
extern const char *kTrainUsage;

/// Whether `flag` is a training option that takes a value.
bool isTrainValueOption(const std::string &flag);
/// Parses training option `flag` (with `value` when it takes one).
Status parseTrainOption(const std::string &flag, const std::string &value,
                        TrainOptions &options);
/// Checks the options together (--train needs --data and --steps, ...).
Status checkTrainOptions(const TrainOptions &options);

/// Runs `options.steps` train steps of the training artifact `exe` over the
/// token file; every rank calls it. Returns the process's exit code.
int train(const TrainOptions &options, bool quiet, mp::rt::Executable &exe,
          Communicator &world);

} // namespace mprun

#endif // MP_TOOLS_MP_RUN_TRAIN_H
