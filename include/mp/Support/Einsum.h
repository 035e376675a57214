//===- Einsum.h - einsum equation parsing -----------------------*- C++ -*-===//
//
// Plain C++ (no MLIR types) so the verifier, the importer's constant folder
// and kernels share one reading of an equation.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_EINSUM_H
#define MP_SUPPORT_EINSUM_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mp {

/// An einsum equation with every ellipsis expanded into one label per
/// dimension (labels '0'..'9' stand for ellipsis dimensions, right-aligned).
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};

/// Parses `equation` for inputs of the given ranks. Returns false and sets
/// `error` when the equation is malformed or does not fit the ranks.
bool parseEinsum(const std::string &equation, const std::vector<int64_t> &ranks,
                 EinsumSpec &spec, std::string &error);

/// Computes the size of every label (into `labelSizes` when given) and the
/// output shape. Ellipsis labels broadcast (size 1 against n); letter
/// labels must agree exactly.
bool inferEinsumShape(const EinsumSpec &spec,
                      const std::vector<std::vector<int64_t>> &shapes,
                      std::vector<int64_t> &outputShape, std::string &error,
                      std::map<char, int64_t> *labelSizes = nullptr);

} // namespace mp

#endif // MP_SUPPORT_EINSUM_H
