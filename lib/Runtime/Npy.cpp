//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
#include "mp/Runtime/Npy.h"

#include "mp/Support/AtomicFile.h"
#include "mp/Support/Float16.h"
#include "mp/Support/Shape.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mp::rt {

static const struct {
  const char *descr;
  DType dtype;
} kDescrs[] = {{"<f4", DType::F32},  {"<f8", DType::F64}, {"<f2", DType::F16},
               {"<i8", DType::I64},  {"<i4", DType::I32}, {"|i1", DType::I8},
               {"|b1", DType::Bool}, {"|u1", DType::Bool}};

/// The value of `key` in a .npy header dict ("{'descr': '<f4', ...}"): the
/// text after its colon; empty when the key is absent.
static std::string_view headerValue(std::string_view text,
                                    std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t k = text.find(quoted);
  if (k == std::string_view::npos)
    return {};
  size_t colon = text.find(':', k + quoted.size());
  return colon == std::string_view::npos ? std::string_view()
                                         : text.substr(colon + 1);
}

static std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// A shape tuple "(2, 8)", "(8,)" or "()"; false for anything else (a list,
/// a negative or non-numeric dim, one past int64).
static bool parseShapeTuple(std::string_view text, std::vector<int64_t> &shape,
                            std::string &why) {
  text = trimmed(text);
  size_t close = text.find(')');
  if (text.empty() || text.front() != '(' || close == std::string_view::npos) {
    why = "has a shape that is not a tuple like (2, 8)";
    return false;
  }
  std::string_view inner = text.substr(1, close - 1);
  shape.clear();
  while (!trimmed(inner).empty()) {
    size_t comma = inner.find(',');
    std::string_view dim = trimmed(inner.substr(0, comma));
    int64_t value = -1;
    auto [end, ec] =
        std::from_chars(dim.data(), dim.data() + dim.size(), value);
    if (dim.empty() || ec != std::errc() || end != dim.data() + dim.size() ||
        value < 0) {
      why = "has a shape dimension '" + std::string(dim) +
            "' that is not a non-negative 64-bit integer";
      return false;
    }
    shape.push_back(value);
    if (comma == std::string_view::npos)
      break;
    inner.remove_prefix(comma + 1);
  }
  return true;
}

Status decodeNpy(std::string_view file, const std::string &name,
                 HostBuffer &out) {
  auto bad = [&](const std::string &why) {
    return Status::error("'" + name + "' " + why);
  };
  if (file.size() < 10 || file.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return bad("is not a .npy file");
  const unsigned char version = static_cast<unsigned char>(file[6]);
  if (version < 1 || version > 3)
    return bad("is .npy format version " + std::to_string(version) +
               " (1 to 3 are read)");
  size_t lengthBytes = version == 1 ? 2 : 4;
  if (file.size() < 8 + lengthBytes)
    return bad("has a truncated header");
  uint32_t headerLen = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLen |= uint32_t(static_cast<unsigned char>(file[8 + i])) << (8 * i);
  size_t dataOffset = 8 + lengthBytes;
  if (file.size() - dataOffset < headerLen)
    return bad("has a truncated header");
  std::string_view text = file.substr(dataOffset, headerLen);
  dataOffset += headerLen;

  std::string_view descrValue = trimmed(headerValue(text, "descr"));
  std::string descr;
  if (descrValue.size() >= 2 && descrValue.front() == '\'') {
    size_t q2 = descrValue.find('\'', 1);
    if (q2 != std::string_view::npos)
      descr = std::string(descrValue.substr(1, q2 - 1));
  }
  bool known = false;
  for (const auto &d : kDescrs)
    if (descr == d.descr) {
      out.dtype = d.dtype;
      known = true;
    }
  if (!known)
    return bad("has unsupported dtype '" + descr +
               "' (expected <f4, <f8, <f2, <i8, <i4, |i1 or |b1)");
  std::string_view order = trimmed(headerValue(text, "fortran_order"));
  if (order.substr(0, 4) == "True")
    return bad("is in Fortran order; save it with numpy.ascontiguousarray "
               "first");
  if (order.substr(0, 5) != "False")
    return bad("has no fortran_order: False in its header");
  std::string why;
  if (!parseShapeTuple(headerValue(text, "shape"), out.shape, why))
    return bad(why);
  int64_t bytes = 0;
  if (!tensorBytes(out.shape, out.dtype, bytes, why))
    return bad("has shape " + formatShape(out.shape) + ": " + why);
  const size_t available = file.size() - dataOffset;
  if (available != static_cast<size_t>(bytes))
    return bad("holds " + std::to_string(available) +
               " bytes of data but its shape " + formatShape(out.shape) +
               " needs " + std::to_string(bytes));
  const auto *data =
      reinterpret_cast<const uint8_t *>(file.data() + dataOffset);
  // uint8 is read as a boolean mask (what torch's uint8 masks are); other
  // byte values would be a uint8 tensor mp has no type for.
  if (descr == "|u1" &&
      std::any_of(data, data + bytes, [](uint8_t b) { return b > 1; }))
    return bad("holds uint8 values other than 0 and 1: mp reads uint8 only "
               "as a boolean mask (save it with .astype(numpy.int64), or "
               ".astype(bool) for a mask)");
  out.bytes.assign(data, data + bytes);
  return Status::success();
}

Status expectRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return Status::error("'" + path +
                         "' is not a regular file (a directory, device or "
                         "pipe?)");
  return Status::success();
}

Status readWholeFile(const std::string &path, std::string &bytes,
                     int64_t maxBytes) {
  // Non-blocking, so that opening a pipe returns at once (it is then
  // refused below; a regular file reads as usual).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error("'" + path +
                         "' is not a regular file (a directory, device or "
                         "pipe?)");
  }
  if (st.st_size > maxBytes) {
    ::close(fd);
    return Status::error("'" + path + "' is " + std::to_string(st.st_size) +
                         " bytes, more than the " + std::to_string(maxBytes) +
                         " read here");
  }
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ::close(fd);
      return Status::error(
          "cannot read '" + path + "': " +
          (n == 0 ? "it shrank while being read" : std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::success();
}

Status readNpy(const std::string &path, HostBuffer &out) {
  std::string file;
  if (Status s = readWholeFile(path, file); !s)
    return s;
  return decodeNpy(file, path, out);
}

Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces) {
  std::string error = mp::writeFileAtomically(path, pieces);
  return error.empty() ? Status::success() : Status::error(error);
}

Status writeFileAtomically(const std::string &path, const std::string &bytes) {
  return writeFileAtomically(path, std::vector<std::string_view>{bytes});
}

Status writeNpy(const std::string &path, const Tensor &tensor) {
  if (tensor.dtype == DType::BF16) {
    std::vector<float> wide(static_cast<size_t>(tensor.numel()));
    const auto *narrow = tensor.as<const uint16_t>();
    for (size_t i = 0; i < wide.size(); ++i)
      wide[i] = bf16ToFloat(narrow[i]);
    return writeNpy(path, Tensor{wide.data(), DType::F32, tensor.shape});
  }
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
