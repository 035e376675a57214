//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
#include "mp/Runtime/Npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace mp::rt {

static const struct {
  const char *descr;
  DType dtype;
} kDescrs[] = {{"<f4", DType::F32},  {"<f8", DType::F64}, {"<f2", DType::F16},
               {"<i8", DType::I64},  {"<i4", DType::I32}, {"|i1", DType::I8},
               {"|b1", DType::Bool}, {"|u1", DType::Bool}};

static std::string header(const std::string &text, const std::string &key) {
  size_t k = text.find("'" + key + "'");
  if (k == std::string::npos)
    return "";
  size_t colon = text.find(':', k);
  return colon == std::string::npos ? "" : text.substr(colon + 1);
}

Status readNpy(const std::string &path, HostBuffer &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return Status::error("'" + path + "' is not a .npy file");
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    uint16_t len;
    in.read(reinterpret_cast<char *>(&len), 2);
    headerLen = len;
  } else {
    in.read(reinterpret_cast<char *>(&headerLen), 4);
  }
  std::string text(headerLen, '\0');
  if (!in.read(text.data(), headerLen))
    return Status::error("'" + path + "' has a truncated header");

  std::string descr = header(text, "descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  descr = q1 == std::string::npos ? "" : descr.substr(q1 + 1, q2 - q1 - 1);
  bool known = false;
  for (const auto &d : kDescrs)
    if (descr == d.descr) {
      out.dtype = d.dtype;
      known = true;
    }
  if (!known)
    return Status::error("'" + path + "' has unsupported dtype '" + descr +
                         "' (expected <f4, <f8, <f2, <i8, <i4, |i1 or |b1)");
  if (header(text, "fortran_order").find("True") <
      header(text, "fortran_order").find(','))
    return Status::error("'" + path +
                         "' is in Fortran order; save it with "
                         "numpy.ascontiguousarray first");
  std::string shapeText = header(text, "shape");
  size_t open = shapeText.find('('), close = shapeText.find(')');
  out.shape.clear();
  std::stringstream dims(shapeText.substr(open + 1, close - open - 1));
  std::string dim;
  while (std::getline(dims, dim, ','))
    if (dim.find_first_of("0123456789") != std::string::npos)
      out.shape.push_back(std::stoll(dim));
  size_t bytes =
      static_cast<size_t>(Tensor{nullptr, out.dtype, out.shape}.numel()) *
      dtypeSize(out.dtype);
  out.bytes.resize(bytes);
  if (!in.read(reinterpret_cast<char *>(out.bytes.data()), bytes))
    return Status::error("'" + path + "' holds fewer than the " +
                         std::to_string(bytes) + " bytes its shape needs");
  return Status::success();
}

/// Flushes the directory holding `path`, so that a rename into it survives
/// a crash.
static void syncDirectoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  int fd = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::error("cannot write '" + tmp + "': " + std::strerror(errno));
  bool written = true;
  for (std::string_view piece : pieces) {
    const char *p = piece.data();
    size_t left = piece.size();
    while (written && left > 0) {
      ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t(1) << 30));
      if (n < 0 && errno == EINTR)
        continue;
      written = n > 0;
      if (written) {
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
  }
  // On disk before it gets its name: a crash leaves the old file or the
  // whole new one, never half of it.
  written = written && ::fsync(fd) == 0;
  written = ::close(fd) == 0 && written;
  if (!written) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status::error("failed writing '" + tmp + "': " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot rename '" + tmp + "' to '" + path + "'");
  }
  syncDirectoryOf(path);
  return Status::success();
}

Status writeFileAtomically(const std::string &path, const std::string &bytes) {
  return writeFileAtomically(path, std::vector<std::string_view>{bytes});
}

Status writeNpy(const std::string &path, const Tensor &tensor) {
  const char *descr = nullptr;
  for (const auto &d : kDescrs)
    if (d.dtype == tensor.dtype && !descr)
      descr = d.descr;
  if (!descr)
    return Status::error(std::string("cannot write ") +
                         dtypeName(tensor.dtype) + " to .npy");
  std::string shape = "(";
  for (int64_t d : tensor.shape)
    shape += std::to_string(d) + ",";
  if (tensor.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  std::string text = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + text.size() + 1;
  text.append((64 - total % 64) % 64, ' ');
  text += '\n';
  std::string file = "\x93NUMPY";
  file += '\x01';
  file += '\x00';
  uint16_t len = static_cast<uint16_t>(text.size());
  file.append(reinterpret_cast<char *>(&len), 2);
  file += text;
  file.append(static_cast<const char *>(tensor.data), tensor.bytes());
  return writeFileAtomically(path, file);
}

} // namespace mp::rt
