//===- NoMPI.cpp - communication setup without MPI ------------------------===//
#include "mp/Runtime/Comm.h"

#include <cstdlib>

namespace mp::rt {

bool haveMPI() { return false; }

Status initCommunication(int *, char ***, std::unique_ptr<Communicator> &out) {
  out = makeSingleProcessCommunicator();
  return Status::success();
}

void finalizeCommunication() {}

void abortCommunication(int code) { std::exit(code); }

bool anyRankFailed(Communicator &, bool failed) { return failed; }

std::vector<std::string> allGatherStrings(Communicator &,
                                          const std::string &local) {
  return {local};
}

Status broadcastBytes(Communicator &, void *, size_t, int) {
  return Status::success();
}

void setMPIMessageLimit(int64_t) {}

} // namespace mp::rt
