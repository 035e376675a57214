//===- NoNCCL.cpp - a runtime built without CUDA/NCCL ---------------------===//
#include "mp/Runtime/Comm.h"

namespace mp::rt {
Status makeDeviceCommunicator(Communicator &, std::unique_ptr<Communicator> &) {
  return Status::error("this mp-run was built without CUDA and NCCL");
}
} // namespace mp::rt
