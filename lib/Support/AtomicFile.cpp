//===- AtomicFile.cpp - files written whole or not at all -----------------===//
#include "mp/Support/AtomicFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace mp {

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

/// Flushes the directory holding `path`, so that a rename into it survives
/// a crash.
static void syncDirectoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  syncDirectory(slash == std::string::npos ? "." : path.substr(0, slash));
}

namespace {

/// Writes every piece to `fd`; false (errno set) at the first failure.
bool writePieces(int fd, const std::vector<std::string_view> &pieces) {
  for (std::string_view piece : pieces) {
    const char *p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t(1) << 30));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  return true;
}

} // namespace

std::string writeFileAtomically(const std::string &path,
                                const std::vector<std::string_view> &pieces) {
  // A device or pipe (/dev/null, a FIFO a reader waits on) is written in
  // place: a rename would replace it with a regular file.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode))
      return "cannot write '" + path + "': it is a directory";
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
      return "cannot write '" + path + "': " + std::strerror(errno);
    bool written = writePieces(fd, pieces);
    std::string why = std::strerror(errno);
    written = ::close(fd) == 0 && written;
    return written ? std::string() : "failed writing '" + path + "': " + why;
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot write '" + path + "': " + std::strerror(errno);
  bool written = writePieces(fd, pieces);
  // On disk before it gets its name: a crash leaves the old file or the
  // whole new one, never half of it.
  written = written && ::fsync(fd) == 0;
  written = ::close(fd) == 0 && written;
  if (!written) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return "failed writing '" + path + "': " + why;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return "cannot write '" + path + "': " + why;
  }
  syncDirectoryOf(path);
  return std::string();
}

bool liesWithin(const std::string &path, const std::string &dir) {
  std::error_code ec;
  const std::filesystem::path file =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path), ec);
  if (ec)
    return false;
  std::filesystem::path root =
      std::filesystem::weakly_canonical(std::filesystem::absolute(dir), ec);
  if (ec)
    return false;
  if (root.filename().empty()) // "dir/"
    root = root.parent_path();
  auto [rootEnd, fileAt] =
      std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  return rootEnd == root.end();
}

} // namespace mp
