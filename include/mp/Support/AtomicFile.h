//===- AtomicFile.h - files written whole or not at all ---------*- C++ -*-===//
//
// What the compiler (artifacts, planned timelines) and the runtime (outputs,
// checkpoints) write goes through a temporary file that is flushed to disk
// and renamed into place: a reader or a crash sees the old file or the whole
// new one. Plain C++17 and POSIX.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_ATOMICFILE_H
#define MP_SUPPORT_ATOMICFILE_H

#include <string>
#include <string_view>
#include <vector>

namespace mp {

/// Writes `pieces`, in order, to `path` through a temporary file in the
/// same directory renamed into place (nothing is concatenated in memory:
/// parameter files can be gigabytes). A device or pipe is written in place.
/// Returns why it failed, or "" when written.
std::string writeFileAtomically(const std::string &path,
                                const std::vector<std::string_view> &pieces);

/// Whether `path` (which may not exist yet) is `dir` or lies below it, links
/// resolved: a file written there is replaced with the directory or would
/// replace one of its files.
bool liesWithin(const std::string &path, const std::string &dir);

/// Flushes a directory's entries (files created or renamed in it), so that
/// they survive a crash.
void syncDirectory(const std::string &dir);

} // namespace mp

#endif // MP_SUPPORT_ATOMICFILE_H
