//===- VocabPadding.h - a vocabulary padded for the ranks -------*- C++ -*-===//
//
// A vocabulary that does not divide by the tensor-parallel size (GPT-2's
// 50257, RoBERTa's 50265) is padded with zero rows, as Megatron pads it
// (`--make-vocab-size-divisible-by`): the word embedding, and the LM head
// that shares its vocabulary, read a parameter that is the user's one with
// zeros past its end (`mp.param`'s `part` running past the end). The
// embedding's `vocab` keeps ids to the user's vocabulary (negative ones
// counting from its end); the head's logits are sliced back to it once
// gathered, and the loss pushes the padding columns below any real logit.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_VOCABPADDING_H
#define MP_TRANSFORMS_VOCABPADDING_H

#include "mp/Dialect/MP/IR/MPOps.h"

namespace mp {

/// Pads `param` with zeros along `axis` to `size`: every mp.get_param of it
/// reads the padded part instead, with its type (the readers' own result
/// types are the caller's to fix). Fails, changing nothing and naming the
/// reader, unless `mayRead` accepts every op that reads the parameter.
mlir::FailureOr<ParamOp>
padParameter(ParamOp param, int64_t axis, int64_t size,
             llvm::function_ref<bool(mlir::Operation *)> mayRead);

/// The logits `gathered`, padded along the last dimension, sliced back to
/// its first `size` columns (inserted after it).
mlir::Value unpadLogits(mlir::OpBuilder &b, mlir::Value gathered, int64_t size);

/// True when `slice` keeps a prefix of its input's last dimension and all
/// of the others (the padded logits cut back to the user's vocabulary, as
/// unpadLogits cuts them).
bool isVocabularyPrefix(SliceOp slice);

} // namespace mp

#endif // MP_TRANSFORMS_VOCABPADDING_H
