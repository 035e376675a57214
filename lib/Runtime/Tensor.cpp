//===- Tensor.cpp - runtime tensors ---------------------------------------===//
#include "mp/Runtime/Tensor.h"

namespace mp::rt {

int64_t Tensor::numel() const { return numElements(shape); }

} // namespace mp::rt
