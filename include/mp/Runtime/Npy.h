//===- Npy.h - NumPy .npy files and whole-file I/O -------------*- C++ -*-===//
#ifndef MP_RUNTIME_NPY_H
#define MP_RUNTIME_NPY_H

#include "mp/Runtime/Tensor.h"
#include "mp/Support/AtomicFile.h"

#include <string>
#include <string_view>
#include <vector>

namespace mp::rt {

/// An owned host tensor.
struct HostBuffer {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Tensor view() { return Tensor{bytes.data(), dtype, shape}; }

  /// A buffer of zeros of `dtype` and `shape`.
  static HostBuffer zeros(DType dtype, std::vector<int64_t> shape) {
    HostBuffer b;
    b.dtype = dtype;
    b.shape = std::move(shape);
    b.bytes.assign(b.view().bytes(), 0);
    return b;
  }
};

/// Reads a C-order .npy file (versions 1-3) of a supported dtype.
Status readNpy(const std::string &path, HostBuffer &out);
/// The same for the bytes of a whole .npy file; `name` is for messages.
/// Every header field is checked (a tuple of non-negative int64 dims, a size
/// within kMaxTensorBytes that the data matches exactly) before anything is
/// allocated.
Status decodeNpy(std::string_view file, const std::string &name,
                 HostBuffer &out);
/// Reads the regular file `path` whole (not a device or pipe, at most
/// `maxBytes`).
/// An error when `path` exists but is not a regular file (a directory, a
/// device, a pipe that would block a read); success otherwise, also when it
/// does not exist (opening it then says so).
Status expectRegularFile(const std::string &path);
Status readWholeFile(const std::string &path, std::string &bytes,
                     int64_t maxBytes = kMaxTensorBytes);
/// Writes a .npy file (via a temporary file renamed into place). bf16,
/// which numpy lacks, is written as float32 (exactly: every bf16 value is
/// one).
Status writeNpy(const std::string &path, const Tensor &tensor);

/// Writes `bytes` to `path` through a temporary file in the same directory
/// that is renamed into place, so a reader never sees half a file.
Status writeFileAtomically(const std::string &path, const std::string &bytes);
using mp::syncDirectory;
/// The same for a file made of `pieces` in order (nothing is concatenated
/// in memory: parameter files can be gigabytes).
Status writeFileAtomically(const std::string &path,
                           const std::vector<std::string_view> &pieces);

} // namespace mp::rt

#endif // MP_RUNTIME_NPY_H
