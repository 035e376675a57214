//===- NoCUDA.cpp - a runtime built without CUDA --------------------------===//
#include "mp/Runtime/Device.h"

namespace mp::rt {
const KernelTable *cudaKernelTable() { return nullptr; }
} // namespace mp::rt
