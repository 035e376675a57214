//===- TrainBatch.h - the inputs of each train step -------------*- C++ -*-===//
//
// A train step's token ids and labels come from the token file (--data);
// its other inputs (an attention mask, token types, a decoder's ids) from
// --input files: one the step's own shape is given every step, one with a
// row per row of the token file follows the tokens.
//
// Which of the step's inputs are the ids and labels is found here too.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TOOLS_MP_RUN_TRAINBATCH_H
#define MP_TOOLS_MP_RUN_TRAINBATCH_H

#include "Train.h"

#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"

#include <vector>

namespace mprun {

/// Whether `ins` and `outs` are a train step's (token ids and labels in,
/// maybe others, the loss first out; else the error `notTraining`), and
/// which inputs are which: the labels are named so; the ids are
/// `input_ids`, else the one other integer input --input does not give
/// (`given`; several are an error naming them).
mp::rt::Status
findTrainStep(const std::vector<mp::rt::IOSpec> &ins,
              const std::vector<mp::rt::IOSpec> &outs,
              const std::vector<std::pair<std::string, std::string>> &given,
              const std::string &notTraining, size_t &idsInput,
              size_t &labelsInput);

class TrainBatches {
public:
  /// Reads the token file and the --input files of `t` against the step's
  /// inputs `specs` (token ids at `idsInput`, labels at `labelsInput`),
  /// with errors naming the input and what it expects.
  static mp::rt::Status open(const TrainOptions &t,
                             const std::vector<mp::rt::IOSpec> &specs,
                             size_t idsInput, size_t labelsInput,
                             int64_t replicas, TrainBatches &out);

  /// Sets batch() to replica `replica`'s rows of step `step` (from 1):
  /// rows (step-1)*G + replica*B ... + B-1 of the token file (wrapping;
  /// G = B x replicas), ids [:, :-1] and labels [:, 1:], and the same rows
  /// of every --input file that has one per token row.
  void fill(int64_t step, int64_t replica);

  /// The step's inputs, in the step's order.
  std::vector<mp::rt::HostBuffer> &batch() { return inputs; }

private:
  mp::rt::HostBuffer tokens;
  std::vector<mp::rt::HostBuffer> inputs;
  /// Per input: the --input file with a row per token row (else empty).
  std::vector<mp::rt::HostBuffer> perRow;
  size_t ids = 0, labels = 0;
  int64_t replicas = 1;
};

} // namespace mprun

#endif // MP_TOOLS_MP_RUN_TRAINBATCH_H
