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
// `mp.tied_copies` for --mp-summary), and a weight read by one matmul is
// named after that node's module (/layers.0/q_proj/MatMul ->
// layers.0.q_proj.weight.T: the transpose of PyTorch's weight), reading the
// initializer it came as.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cstring>

using namespace mlir;

namespace mp::onnx_import {

namespace {

/// An initializer's `size` bytes, inline or external; false when they
/// cannot be read, which only means no tie is found.
bool dataOf(const onnx::TensorProto &init, const std::string &directory,
            int64_t size, std::string &bytes) {
  std::string error;
  if (!isExternal(init))
    return initializerBytes(init, bytes, error);
  ExternalLocation where;
  if (!getExternalLocation(init, directory, where, error))
    return false;
  if (where.length < 0) // no length: the tensor's, not the rest of the file
    where.length = size;
  return readFileSlice(where, bytes, error);
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
bool isExporterMade(StringRef name) { return name.starts_with("onnx::"); }

/// The mp.get_param ops reading each parameter, in one walk.
using ParamReads = llvm::DenseMap<StringAttr, SmallVector<GetParamOp>>;
ParamReads readsByParam(ModuleOp module) {
  ParamReads reads;
  module.walk([&](GetParamOp get) {
    reads[get.getNameAttr().getAttr()].push_back(get);
  });
  return reads;
}

/// Notes on `source`, under `attr`, that `copy` (being dropped) held its
/// data.
void noteCopy(ParamOp source, ParamOp copy, StringRef attr) {
  SmallVector<Attribute> copies;
  if (auto old = source->getAttrOfType<ArrayAttr>(attr))
    copies.append(old.begin(), old.end());
  copies.push_back(copy.getSymNameAttr());
  source->setAttr(attr, ArrayAttr::get(source.getContext(), copies));
}

/// Replaces the reads of `copy` by the transpose of `source` and drops
/// `copy`, noting it on `source`.
void readTransposed(ParamOp copy, ParamOp source, ArrayRef<GetParamOp> reads) {
  for (GetParamOp get : reads) {
    OpBuilder b(get);
    Value whole = GetParamOp::create(b, get.getLoc(), source.getTensorType(),
                                     source.getSymName());
    Value transposed = TransposeOp::create(b, get.getLoc(), whole,
                                           b.getDenseI64ArrayAttr({1, 0}));
    get.getResult().replaceAllUsesWith(transposed);
    get.erase();
  }
  noteCopy(source, copy, mp::MPDialect::getTiedCopiesAttrName());
  // The copy's own equal copies are transposed copies of `source` too.
  if (auto equal = copy->getAttrOfType<ArrayAttr>(
          mp::MPDialect::getEqualCopiesAttrName()))
    for (Attribute other : equal) {
      SmallVector<Attribute> copies(
          source
              ->getAttrOfType<ArrayAttr>(mp::MPDialect::getTiedCopiesAttrName())
              .getValue());
      copies.push_back(other);
      source->setAttr(mp::MPDialect::getTiedCopiesAttrName(),
                      ArrayAttr::get(source.getContext(), copies));
    }
  copy.erase();
}

/// The bytes of one element of `p`.
size_t bytesPerElement(ParamOp p) {
  return (p.getTensorType().getElementTypeBitWidth() + 7) / 8;
}

/// `segment` without a call suffix (fc_2 -> fc; the exporter numbers a
/// module's later calls so, after any digits its name ends in: fc_1_1 is
/// fc_1's second call).
StringRef withoutCallSuffix(StringRef segment) {
  auto [head, call] = segment.rsplit('_');
  return !head.empty() && !call.empty() && llvm::all_of(call, llvm::isDigit)
             ? head
             : segment;
}

/// The scope segments of the node at `loc` (/a/b.0/MatMul: a, b.0); empty
/// outside any module.
SmallVector<StringRef> scopeSegments(Location loc) {
  SmallVector<StringRef> segments;
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return segments;
  StringRef node = name.getName().getValue();
  size_t last = node.rfind('/');
  if (node.starts_with("/") && last != 0 && last != StringRef::npos)
    node.substr(1, last - 1).split(segments, '/');
  return segments;
}

/// The name of the transposed weight of the module that node `/a/b/Op`
/// belongs to ("a.b.weight.T": folding stored nn.Linear's weight, [out,
/// in], transposed); empty for a node outside any module. PyTorch scopes
/// a called container's child by the container's attribute and the index
/// ("/blocks/blocks.0/ffwd/ffwd.0/MatMul" in nn.Sequential), which names
/// the parameter "blocks.0.ffwd.0.weight": a segment that is the one before
/// plus indices replaces it ("/layers.0/layers.0.0", a Sequential's child
/// in a ModuleList: "layers.0.0"; "/ffn/ffn.0/ffn.0.0", Sequentials nested:
/// "ffn.0.0"; but "/layers.0/layers.0", a block's own ModuleList `layers`:
/// "layers.0.layers.0"), a call suffix kept ("/ffn/ffn.0_1", the
/// container's second call: "ffn.0_1").
std::string moduleWeightName(Location loc) {
  SmallVector<StringRef> segments = scopeSegments(loc);
  if (segments.empty())
    return "";
  std::string module;
  StringRef previous;
  // Whether `segment` is `previous` followed by one or more ".N".
  auto indexes = [](StringRef segment, StringRef previous) {
    if (previous.empty() || !segment.consume_front(previous) || segment.empty())
      return false;
    while (segment.consume_front(".")) {
      size_t digits = segment.find_if_not(llvm::isDigit);
      digits = digits == StringRef::npos ? segment.size() : digits;
      if (digits == 0)
        return false;
      segment = segment.drop_front(digits);
    }
    return segment.empty();
  };
  for (StringRef segment : segments) {
    if (indexes(withoutCallSuffix(segment), previous))
      module.resize(module.size() - previous.size());
    else if (!module.empty())
      module += '.';
    module += segment.str();
    previous = segment;
  }
  return module + ".weight.T";
}

/// Whether weight names `a` and `b` are of one module's calls: segment by
/// segment equal, or one the other plus a call suffix (a.b_1.weight.T and
/// a.b.weight.T; fc_1_1 and fc_1), or, unless `strict`, both with call
/// suffixes (fc_2 and fc_3; strict, those are taken for distinct modules
/// adapter_1 and adapter_2).
bool sameModule(StringRef a, StringRef b, bool strict = false) {
  SmallVector<StringRef> as, bs;
  a.split(as, '.');
  b.split(bs, '.');
  if (as.size() != bs.size())
    return false;
  for (auto [x, y] : llvm::zip(as, bs)) {
    StringRef x0 = withoutCallSuffix(x), y0 = withoutCallSuffix(y);
    if (x != y && x0 != y && x != y0 && (strict || x0 != y0))
      return false;
  }
  return true;
}

/// The weight that matmuls read as `reads`, each as its right operand:
/// the module's (moduleWeightName), one module's calls counting as one
/// (`key_proj` and `key_proj_1`); empty when they are of several modules
/// or not all matmul weights.
std::string sharedWeightName(ArrayRef<GetParamOp> reads) {
  SmallVector<std::string> names;
  for (GetParamOp read : reads) {
    auto matmul = read->hasOneUse() ? dyn_cast<MatmulOp>(*read->user_begin())
                                    : MatmulOp();
    if (!matmul || matmul.getRhs() != read.getResult())
      return "";
    names.push_back(moduleWeightName(matmul->getLoc()));
  }
  if (names.empty())
    return "";
  std::string first =
      *llvm::min_element(names, [](const std::string &a, const std::string &b) {
        return a.size() < b.size();
      });
  for (const std::string &n : names)
    if (n.empty() || !sameModule(n, first))
      return "";
  return first;
}

/// The parameter that the matmul of every read in `reads` (each checked by
/// sharedWeightName) is added to, as a linear's bias: one named (not
/// exporter-made) parameter for all of them, or empty.
std::string sharedBias(ArrayRef<GetParamOp> reads) {
  std::string bias;
  for (GetParamOp read : reads) {
    Operation *matmul = *read->user_begin();
    auto add =
        matmul->hasOneUse() ? dyn_cast<AddOp>(*matmul->user_begin()) : AddOp();
    if (!add)
      return "";
    Value other =
        add.getLhs() == matmul->getResult(0) ? add.getRhs() : add.getLhs();
    auto get = other.getDefiningOp<GetParamOp>();
    if (!get || isExporterMade(get.getName()) ||
        (!bias.empty() && bias != get.getName()))
      return "";
    bias = get.getName().str();
  }
  return bias;
}

/// The name PyTorch gives the weight of the module whose bias the matmuls
/// of `reads` (each checked by sharedWeightName) add: a.b.bias is
/// nn.Linear a.b's, whose weight folding stored transposed (a.b.weight.T),
/// and a.b.in_proj_bias nn.MultiheadAttention a.b's packed projection's
/// (a.b.in_proj_weight.T). The bias keeps the name the user wrote where a
/// node's scope may not (a shared module reached through a container it
/// was not called by: scope /layer/linear1, bias enc.layer.linear1.bias; a
/// container's child in another container). Empty for a bias of another
/// name (proj.qkv_bias), for none, and for a bias that is not the matmul's
/// own module's: its module must end in the nodes' last scope segment
/// (HF's BERT head adds predictions.bias to predictions.decoder's matmul).
std::string weightNameOfBias(ArrayRef<GetParamOp> reads) {
  std::string bias = sharedBias(reads);
  StringRef module = bias;
  const char *weight = ".weight.T";
  if (module.consume_back(".in_proj_bias"))
    weight = ".in_proj_weight.T";
  else if (!module.consume_back(".bias"))
    return "";
  auto endsIn = [&](StringRef segment) {
    return module == segment || module.ends_with(("." + segment).str());
  };
  for (GetParamOp read : reads) {
    SmallVector<StringRef> scope =
        scopeSegments((*read->user_begin())->getLoc());
    if (scope.empty() ||
        (!endsIn(scope.back()) && !endsIn(withoutCallSuffix(scope.back()))))
      return "";
  }
  return (module + weight).str();
}

} // namespace

bool Importer::paramBytes(ParamOp p, std::string &bytes) {
  std::string source = p.getInitializer().value_or(p.getSymName()).str();
  for (const auto &init : model.model.graph().initializer())
    if (init.name() == source)
      return dataOf(init, model.directory,
                    p.getTensorType().getNumElements() *
                        static_cast<int64_t>(bytesPerElement(p)),
                    bytes);
  return false;
}

/// An exporter-made vector (a bias folded in slices) holding a block of a
/// named vector the program also reads: one module read whole in one call
/// and in slices in another (nn.MultiheadAttention used for self- and
/// then cross-attention slices its packed projection). mp cannot tie a
/// slice yet, so the block would train apart from the whole, unlike in
/// PyTorch: a warning says so. (Vectors of one repeated value, zeros say,
/// are blocks of anything and are not taken for copies.)
void Importer::warnSlicedCopies() {
  auto isVector = [](ParamOp p) {
    return p.getTensorType().getRank() == 1 &&
           isa<FloatType>(p.getTensorType().getElementType());
  };
  ParamReads reads = readsByParam(module);
  SmallVector<std::pair<ParamOp, std::string>> named;
  for (ParamOp p : module.getOps<ParamOp>()) {
    std::string data;
    if (!isExporterMade(p.getSymName()) && isVector(p) &&
        reads.count(p.getSymNameAttr()) && paramBytes(p, data))
      named.push_back({p, std::move(data)});
  }
  for (ParamOp p : module.getOps<ParamOp>()) {
    std::string bytes;
    if (!isExporterMade(p.getSymName()) || !isVector(p) ||
        !paramBytes(p, bytes))
      continue;
    size_t elem = bytesPerElement(p);
    bool repeated = true;
    for (size_t i = elem; i < bytes.size() && repeated; i += elem)
      repeated = bytes.compare(i, elem, bytes, 0, elem) == 0;
    if (repeated)
      continue;
    for (auto &[whole, data] : named) {
      if (whole.getTensorType().getElementType() !=
              p.getTensorType().getElementType() ||
          data.size() <= bytes.size())
        continue;
      size_t at = data.find(bytes);
      while (at != std::string::npos && at % elem)
        at = data.find(bytes, at + 1);
      if (at == std::string::npos)
        continue;
      int64_t start = static_cast<int64_t>(at / elem);
      emitWarning(NameLoc::get(p.getSymNameAttr()))
          << "'" << p.getSymName() << "' holds elements [" << start << ", "
          << start + p.getTensorType().getNumElements() << ") of '"
          << whole.getSymName()
          << "', which the program also reads whole: a module read whole in "
             "one call and in slices in another (one nn.MultiheadAttention "
             "for self- and cross-attention?) trains each slice apart from "
             "the whole here, unlike in PyTorch (mp does not tie a slice "
             "of a parameter yet)";
      break;
    }
  }
}

/// Folded copies of one module's weight, read by its calls (a module called
/// twice: DeBERTa's query and key projections, applied to the hidden states
/// and to the relative position embeddings; ALBERT's one layer applied N
/// times; folding transposed the weight once per call, and the exporter
/// may store the second as an Identity of the first) holding the same data
/// are one parameter: the later copies read the first, recorded in
/// `mp.equal_copies`. Otherwise each call would train its own copy. A call
/// is known as the module's by its scope, the same but for call suffixes,
/// and by the module's own bias where it has one; copies of different
/// modules stay apart, equal or not (zero-initialized adapters are distinct
/// parameters). Without a bias the scopes must be equal or one the other
/// plus a call suffix (adapter_1 and adapter_2 stay apart); still, a module
/// `fc_1` whose weight equals its sibling `fc`'s looks like fc's second
/// call and would be tied (the summary says so), which is rarer than a
/// bias-free module called twice (recurrent-depth or ALBERT-style models
/// without biases).
void Importer::tieEqualCopies(SymbolTable &symbols) {
  ParamReads reads = readsByParam(module);
  auto sameData = [&](ParamOp x, ParamOp y) {
    if (x.getTensorType() != y.getTensorType())
      return false;
    if (x.getInitializer().value_or(x.getSymName()) ==
        y.getInitializer().value_or(y.getSymName()))
      return true;
    std::string a, b;
    return paramBytes(x, a) && paramBytes(y, b) && a == b;
  };
  // Candidates by the module, known by the bias all their calls add (equal
  // weights and names alone do not tell a second call of `fc` from a
  // module named `fc_1`: adapters initialized to zeros are equal; its own
  // bias does) or by none, and by their scopes, the same but for call
  // suffixes.
  std::map<std::string, SmallVector<std::pair<ParamOp, std::string>>> byModule;
  for (ParamOp p : llvm::make_early_inc_range(module.getOps<ParamOp>())) {
    if (!isExporterMade(p.getSymName()))
      continue;
    SmallVector<GetParamOp> mine = reads.lookup(p.getSymNameAttr());
    std::string scope = sharedWeightName(mine);
    if (scope.empty())
      continue;
    // (Keyed by a bias that names no weight too: none, or another's.)
    std::string weight = weightNameOfBias(mine);
    auto &candidates =
        byModule[weight.empty() ? "bias " + sharedBias(mine) : weight];
    auto found = llvm::find_if(candidates, [&](const auto &c) {
      return sameModule(c.second, scope, /*strict=*/weight.empty()) &&
             sameData(c.first, p);
    });
    if (found == candidates.end()) {
      candidates.push_back({p, scope});
      continue;
    }
    ParamOp kept = found->first;
    for (GetParamOp get : mine)
      get.setNameAttr(FlatSymbolRefAttr::get(kept.getSymNameAttr()));
    auto &keptReads = reads[kept.getSymNameAttr()];
    keptReads.append(mine.begin(), mine.end());
    noteCopy(kept, p, mp::MPDialect::getEqualCopiesAttrName());
    symbols.erase(p);
  }
}

LogicalResult Importer::tieTransposedCopies() {
  if (options.shapeOnly)
    return success();
  const auto &graph = model.model.graph();
  SymbolTable symbols(module);
  tieEqualCopies(symbols);
  // Candidate sources by (rows, cols, type): the named 2-D float
  // parameters, each read at most once.
  std::map<std::tuple<int64_t, int64_t, int32_t>,
           std::vector<const onnx::TensorProto *>>
      sources;
  std::map<const onnx::TensorProto *, std::optional<std::string>> sourceData;
  for (const auto &init : graph.initializer())
    if (init.dims_size() == 2 && !isExporterMade(init.name()) &&
        symbols.lookup<ParamOp>(init.name()))
      sources[{init.dims(0), init.dims(1), init.data_type()}].push_back(&init);
  ParamReads reads;
  for (const auto &init : graph.initializer()) {
    if (init.dims_size() != 2 || !isExporterMade(init.name()))
      continue;
    auto copyParam = symbols.lookup<ParamOp>(init.name());
    auto it = sources.find({init.dims(1), init.dims(0), init.data_type()});
    if (!copyParam || it == sources.end())
      continue;
    size_t size = bytesPerElement(copyParam);
    int64_t bytes = init.dims(0) * init.dims(1) * static_cast<int64_t>(size);
    std::string copy;
    if (!dataOf(init, model.directory, bytes, copy))
      continue;
    for (const onnx::TensorProto *source : it->second) {
      std::optional<std::string> &data = sourceData[source];
      if (!data && !dataOf(*source, model.directory, bytes, data.emplace()))
        data = std::string(); // unreadable: matches no copy
      if (!isTransposedCopy(copy, *data, init.dims(0), init.dims(1), size))
        continue;
      if (reads.empty())
        reads = readsByParam(module);
      readTransposed(copyParam, symbols.lookup<ParamOp>(source->name()),
                     reads[copyParam.getSymNameAttr()]);
      break;
    }
  }
  return success();
}

void Importer::nameFoldedWeights() {
  ParamReads reads = readsByParam(module);
  SymbolTable symbols(module);
  for (ParamOp param : llvm::make_early_inc_range(module.getOps<ParamOp>())) {
    if (!isExporterMade(param.getSymName()) || param.getInitializer())
      continue;
    // Only a matmul's weight: other folded values (a norm's 1 + w, say)
    // are not any parameter the user wrote. A module called more than
    // once (tieEqualCopies) is named by its first call's node.
    SmallVector<GetParamOp> mine = reads.lookup(param.getSymNameAttr());
    std::string scope = sharedWeightName(mine);
    if (scope.empty())
      continue;
    std::string name = weightNameOfBias(mine);
    if (name.empty())
      name = scope;
    if (symbols.lookup(name))
      continue;
    StringAttr old = param.getSymNameAttr();
    symbols.remove(param);
    param.setSymName(name);
    symbols.insert(param);
    if (!param.getOffset())
      param.setInitializer(old);
    for (GetParamOp read : mine) {
      read.setNameAttr(FlatSymbolRefAttr::get(module.getContext(), name));
      read->setLoc(NameLoc::get(StringAttr::get(module.getContext(), name)));
    }
  }
}

} // namespace mp::onnx_import
