//===- Run.h - what mp-run's modes share ----------------------------*- C++
//-*-===//
#ifndef MP_TOOLS_MP_RUN_RUN_H
#define MP_TOOLS_MP_RUN_RUN_H

#include "mp/Runtime/Comm.h"

#include <memory>
#include <string>

namespace mp::rt {
class Executable;
} // namespace mp::rt

namespace mprun {

using mp::rt::Communicator;
using mp::rt::Executable;
using mp::rt::Status;

/// This process's rank in the job, and the job's size.
extern int rankId, rankCount;

/// The end of a phase that may fail on some ranks only: every rank learns
/// every rank's error; if any failed, rank 0 prints each distinct error
/// once, naming the ranks it came from, and every rank exits. Called by
/// every rank at the same point.
void stopIfAnyRankFailed(Communicator &world, const Status &local);

/// The two axes of mp-run's ranks, laid out [replica][grid position].
enum class GridAxis { DataParallel, TensorParallel };

/// The host (MPI) communicator over `axis` of this rank: `world` when the
/// axis spans every rank, else split off into `owned`. For host buffers on a
/// GPU run, whose program communicators are NCCL's (device memory).
/// Collective over `world`.
Communicator &hostCommOf(const Executable &exe, Communicator &world,
                         GridAxis axis, std::unique_ptr<Communicator> &owned);

/// An error during a run, which other ranks may not share: stop them all.
[[noreturn]] void abortRun(const std::string &message);

/// Seconds on a monotonic clock.
double seconds();

} // namespace mprun

#endif // MP_TOOLS_MP_RUN_RUN_H
