//===- Run.h - what mp-run's modes share ----------------------------*- C++
//-*-===//
#ifndef MP_TOOLS_MP_RUN_RUN_H
#define MP_TOOLS_MP_RUN_RUN_H

#include "mp/Runtime/Comm.h"

#include <string>

namespace mprun {

using mp::rt::Communicator;
using mp::rt::Status;

/// This process's rank in the job, and the job's size.
extern int rankId, rankCount;

/// The end of a phase that may fail on some ranks only: every rank learns
/// every rank's error; if any failed, rank 0 prints each distinct error
/// once, naming the ranks it came from, and every rank exits. Called by
/// every rank at the same point.
void stopIfAnyRankFailed(Communicator &world, const Status &local);

/// An error during a run, which other ranks may not share: stop them all.
[[noreturn]] void abortRun(const std::string &message);

/// Seconds on a monotonic clock.
double seconds();

} // namespace mprun

#endif // MP_TOOLS_MP_RUN_RUN_H
