//===- TiedCopies.cpp - keep a tied LM head tied through folding ----------===//
//
// PyTorch's constant folding writes a tied LM head, x · Eᵀ, as a second
// initializer holding Eᵀ under an exporter-made name (onnx::MatMul_N). Read
// as a parameter of its own, the head and the embedding would be two
// weights: twice the memory, partitioned apart, and, once training lands,
// updated apart. Each such copy is read instead as the transpose of the
// parameter it copies, and the copy's mp.param is dropped; the parameter
// records the copies it replaced (`mp.tied_copies`) for --mp-summary.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "llvm/ADT/StringMap.h"

#include <cstring>

using namespace mlir;

namespace mp::onnx_import {

namespace {

/// An initializer's bytes, inline or external; empty (and false) when they
/// cannot be read, which only means no tie is found.
bool dataOf(const onnx::TensorProto &init, const std::string &directory,
            std::string &bytes) {
  std::string error;
  if (!isExternal(init))
    return initializerBytes(init, bytes, error);
  ExternalLocation where;
  return getExternalLocation(init, directory, where, error) &&
         readFileSlice(where, bytes, error);
}

/// True when `copy` ([rows, cols]) holds `source` ([cols, rows]) transposed,
/// element by element (`size` bytes each).
bool isTransposedCopy(const std::string &copy, const std::string &source,
                      int64_t rows, int64_t cols, size_t size) {
  if (copy.size() != source.size() ||
      copy.size() != static_cast<size_t>(rows * cols) * size)
    return false;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (std::memcmp(copy.data() + (i * cols + j) * size,
                      source.data() + (j * rows + i) * size, size) != 0)
        return false;
  return true;
}

/// Exporter-made names: what folding calls the tensors it creates.
bool isExporterMade(const std::string &name) {
  return name.rfind("onnx::", 0) == 0;
}

} // namespace

LogicalResult Importer::tieTransposedCopies() {
  if (options.shapeOnly)
    return success();
  const auto &graph = model.model.graph();
  // Candidate sources by (rows, cols, type): the named 2-D float parameters.
  std::map<std::tuple<int64_t, int64_t, int32_t>,
           std::vector<const onnx::TensorProto *>>
      sources;
  for (const auto &init : graph.initializer())
    if (init.dims_size() == 2 && !isExporterMade(init.name()) &&
        module.lookupSymbol<ParamOp>(init.name()))
      sources[{init.dims(0), init.dims(1), init.data_type()}].push_back(&init);
  for (const auto &init : graph.initializer()) {
    if (init.dims_size() != 2 || !isExporterMade(init.name()))
      continue;
    auto copyParam = module.lookupSymbol<ParamOp>(init.name());
    auto it = sources.find({init.dims(1), init.dims(0), init.data_type()});
    if (!copyParam || it == sources.end())
      continue;
    std::string copy;
    if (!dataOf(init, model.directory, copy))
      continue;
    size_t size = (copyParam.getTensorType().getElementTypeBitWidth() + 7) / 8;
    for (const onnx::TensorProto *source : it->second) {
      std::string data;
      if (!dataOf(*source, model.directory, data) ||
          !isTransposedCopy(copy, data, init.dims(0), init.dims(1), size))
        continue;
      auto sourceParam = module.lookupSymbol<ParamOp>(source->name());
      readTransposed(copyParam, sourceParam);
      break;
    }
  }
  return success();
}

/// Replaces every read of `copy` by the transpose of `source` and drops
/// `copy`, noting it on `source`.
void Importer::readTransposed(ParamOp copy, ParamOp source) {
  StringAttr copyName = copy.getSymNameAttr();
  SmallVector<GetParamOp> reads;
  module.walk([&](GetParamOp get) {
    if (get.getNameAttr().getAttr() == copyName)
      reads.push_back(get);
  });
  for (GetParamOp get : reads) {
    OpBuilder b(get);
    Value whole = GetParamOp::create(b, get.getLoc(), source.getTensorType(),
                                     source.getSymName());
    Value transposed = TransposeOp::create(b, get.getLoc(), whole,
                                           b.getDenseI64ArrayAttr({1, 0}));
    get.getResult().replaceAllUsesWith(transposed);
    get.erase();
  }
  SmallVector<Attribute> copies;
  if (auto old = source->getAttrOfType<ArrayAttr>("mp.tied_copies"))
    copies.append(old.begin(), old.end());
  copies.push_back(copyName);
  source->setAttr("mp.tied_copies",
                  ArrayAttr::get(module.getContext(), copies));
  copy.erase();
}

} // namespace mp::onnx_import
