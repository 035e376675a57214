//===- Waiting.h - waiting for other ranks, with a timeout ----------------===//
//
// Private to the MPI backend: how a rank waits for the others (an MPI
// request, or a flag in shared memory) without hanging forever when one
// never arrives.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_MPI_WAITING_H
#define MP_LIB_RUNTIME_MPI_WAITING_H

#include "mp/Runtime/Tensor.h"

#include <mpi.h>

#include <string>

namespace mp::rt::mpi {

/// Answers the roll calls that reached this rank (it is waiting too).
void answerRollCalls();

/// The error of a wait for `what` that lasted past the collective timeout,
/// naming the ranks that do not answer a roll call.
Status timedOut(const char *what);

/// Waits for `request`, answering roll calls meanwhile; past the collective
/// timeout, timedOut's error.
Status waitFor(MPI_Request &request, const char *what,
               MPI_Status *status = MPI_STATUS_IGNORE);

/// An MPI return code as a Status naming `what`.
Status check(int rc, const char *what);

} // namespace mp::rt::mpi

#endif // MP_LIB_RUNTIME_MPI_WAITING_H
