//===- FoldedParams.cpp - parameters PyTorch's constant folding made ------===//
//
// PyTorch's exporter, folding constants, writes some parameters as new
// initializers under exporter-made names (onnx::MatMul_N): the transpose of
// each nn.Linear weight, and a tied LM head, x · Eᵀ, as a second copy of
// the embedding, transposed. Read as they come, the head and the embedding
// would be two weights (twice the memory, partitioned apart and, once
// training lands, updated apart), and warnings and summaries would name
// weights the user never wrote. So a transposed copy of a parameter is read
// as that parameter's transpose (its mp.param dropped, recorded in
// `mp.tied_copies` for --mp-summary), and a weight read by one node is
// named after that node's module (/layers.0/q_proj/MatMul ->
// layers.0.q_proj.weight), reading the initializer it came as.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
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

/// The weight name of the module that node `/a/b/Op` belongs to
/// ("a.b.weight"); empty for a node outside any module.
static std::string moduleWeightName(Location loc) {
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return "";
  StringRef node = name.getName().getValue();
  size_t last = node.rfind('/');
  if (!node.starts_with("/") || last == 0 || last == StringRef::npos)
    return "";
  std::string module = node.substr(1, last - 1).str();
  std::replace(module.begin(), module.end(), '/', '.');
  return module + ".weight";
}

void Importer::nameFoldedWeights() {
  for (ParamOp param : llvm::make_early_inc_range(module.getOps<ParamOp>())) {
    if (!isExporterMade(param.getSymName().str()) || param.getInitializer())
      continue;
    SmallVector<GetParamOp> reads;
    module.walk([&](GetParamOp get) {
      if (get.getNameAttr().getAttr() == param.getSymNameAttr())
        reads.push_back(get);
    });
    if (reads.size() != 1 || !reads[0]->hasOneUse())
      continue;
    std::string name = moduleWeightName((*reads[0]->user_begin())->getLoc());
    if (name.empty() || module.lookupSymbol(name))
      continue;
    StringAttr old = param.getSymNameAttr();
    param.setSymName(name);
    if (!param.getOffset())
      param.setInitializer(old);
    reads[0].setNameAttr(FlatSymbolRefAttr::get(module.getContext(), name));
    reads[0]->setLoc(NameLoc::get(StringAttr::get(module.getContext(), name)));
  }
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
