//===- NoCUDA.cpp - a runtime built without CUDA --------------------------===//
#include "mp/Runtime/Device.h"

namespace mp::rt {
const KernelTable *cudaKernelTable(std::string *why) {
  if (why)
    *why = "this mp-run was built without CUDA (configure with the CUDA "
           "toolkit installed)";
  return nullptr;
}
} // namespace mp::rt
