//===- ImportShape.cpp - shape and data-movement ONNX ops -> mp -----------===//
//
// The emit functions of the ops that rearrange data without computing on it:
// Reshape, Unsqueeze, Squeeze, Transpose, Split, Concat, Slice, Gather,
// Expand and Identity. Their shape operands (target shapes, axes, starts and
// ends) must be known at import, so the IR stays static. Each node is checked
// against the op's shape rule (mp/Support/Shape.h) before an mp op is built;
// reshape, expand and split results are given, the others inferred.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "mp/Support/Shape.h"

#include <optional>

using namespace mlir;

namespace mp::onnx_import {

/// Input 0 as `shape` (the result type is the node's choice: not inferred).
static LogicalResult reshapeTo(NodeEmitter &e, const Shape &shape) {
  Value x = e.value(0);
  if (!x)
    return failure();
  std::string error;
  if (!shape::reshape(e.shape(0), shape, error))
    return e.error() << error;
  e.setOutput(0, ReshapeOp::create(e.b(), e.loc, e.like(0, shape), x));
  return success();
}

LogicalResult emitReshape(NodeEmitter &e) {
  FailureOr<std::vector<int64_t>> spec = e.constInts(1, "shape");
  if (failed(spec))
    return failure();
  Shape in = e.shape(0), shape;
  bool allowZero = intAttr(e.node, "allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < spec->size(); ++i) {
    int64_t d = (*spec)[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return e.error() << "shape entry " << i << " is 0 but the input has "
                         << "rank " << in.size();
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return e.error() << "shape has more than one -1";
      infer = static_cast<int64_t>(i);
    } else if (d < 0) {
      return e.error() << "invalid shape entry " << d;
    } else if (__builtin_mul_overflow(known, d, &known)) {
      return e.error() << "shape entries multiply past 2^63 elements";
    }
    shape.push_back(d);
  }
  if (infer >= 0) {
    if (known == 0 || e.type(0).getNumElements() % known)
      return e.error() << "cannot infer the -1 entry reshaping "
                       << formatShape(in) << " to " << formatShape(shape);
    shape[infer] = e.type(0).getNumElements() / known;
  }
  return reshapeTo(e, shape);
}

LogicalResult emitUnsqueeze(NodeEmitter &e) {
  std::vector<int64_t> axes;
  if (const auto *a = findAttr(e.node, "axes"))
    axes.assign(a->ints().begin(), a->ints().end());
  else {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  int64_t rank = e.type(0).getRank() + axes.size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : axes) {
    FailureOr<int64_t> n = e.axis(a, rank);
    if (failed(n))
      return failure();
    if (isNew[*n])
      return e.error() << "axis " << a << " is repeated";
    isNew[*n] = true;
  }
  Shape shape, in = e.shape(0);
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(isNew[i] ? 1 : in[j++]);
  return reshapeTo(e, shape);
}

LogicalResult emitSqueeze(NodeEmitter &e) {
  Shape in = e.shape(0), shape;
  int64_t rank = in.size();
  std::vector<bool> drop(rank, false);
  std::optional<std::vector<int64_t>> axes;
  if (const auto *a = findAttr(e.node, "axes"))
    axes = std::vector<int64_t>(a->ints().begin(), a->ints().end());
  else if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  if (axes) {
    for (int64_t a : *axes) {
      FailureOr<int64_t> n = e.axis(a, rank);
      if (failed(n))
        return failure();
      if (in[*n] != 1)
        return e.error() << "cannot squeeze dimension " << *n << " of size "
                         << in[*n];
      drop[*n] = true;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      drop[i] = in[i] == 1;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i])
      shape.push_back(in[i]);
  return reshapeTo(e, shape);
}

LogicalResult emitFlatten(NodeEmitter &e) {
  Shape shape;
  std::string error;
  if (!shape::flatten(e.shape(0), intAttr(e.node, "axis", 1), shape, error))
    return e.error() << error;
  return reshapeTo(e, shape);
}

LogicalResult emitTranspose(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  int64_t rank = e.type(0).getRank();
  std::vector<int64_t> perm;
  if (const auto *a = findAttr(e.node, "perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  Shape shape;
  std::string error;
  if (!shape::transpose(e.shape(0), perm, shape, error))
    return e.error() << error;
  e.setOutput(0, TransposeOp::create(e.b(), e.loc, x,
                                     e.b().getDenseI64ArrayAttr(perm)));
  return success();
}

LogicalResult emitSplit(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  int64_t rank = e.type(0).getRank();
  FailureOr<int64_t> axis = e.axis(intAttr(e.node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  int64_t dim = e.shape(0)[*axis], parts = e.node.output_size();
  std::vector<int64_t> sizes;
  if (e.hasInput(1)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(1, "split");
    if (failed(v))
      return failure();
    sizes = *v;
  } else if (const auto *a = findAttr(e.node, "split")) {
    sizes.assign(a->ints().begin(), a->ints().end());
  } else {
    if (dim % parts)
      return e.error() << "dimension " << *axis << " of size " << dim
                       << " does not split evenly into " << parts << " parts";
    sizes.assign(parts, dim / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return e.error() << "split gives " << sizes.size() << " sizes for " << parts
                     << " outputs";
  // The sizes are the node's choice: the result types are given.
  std::vector<Shape> shapes;
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    Shape shape = e.shape(0);
    shape[*axis] = s;
    shapes.push_back(shape);
    types.push_back(e.like(0, shape));
  }
  std::string error;
  if (!shape::split(e.shape(0), *axis, shapes, error))
    return e.error() << error;
  auto op =
      SplitOp::create(e.b(), e.loc, types, x, e.b().getI64IntegerAttr(*axis));
  for (int64_t i = 0; i < parts; ++i)
    if (!e.node.output(i).empty())
      e.setOutput(i, op.getResult(i));
  return success();
}

LogicalResult emitConcat(NodeEmitter &e) {
  SmallVector<Value> inputs;
  std::vector<Shape> shapes;
  for (int i = 0; i < e.node.input_size(); ++i) {
    Value v = e.value(i);
    if (!v)
      return failure();
    inputs.push_back(v);
    shapes.push_back(e.shape(i));
  }
  int64_t axis = intAttr(e.node, "axis", 0);
  Shape shape;
  std::string error;
  if (!shape::concat(shapes, axis, shape, error))
    return e.error() << error;
  axis = *normalizeAxis(axis, e.type(0).getRank());
  e.setOutput(
      0, ConcatOp::create(e.b(), e.loc, inputs, e.b().getI64IntegerAttr(axis)));
  return success();
}

LogicalResult emitSlice(NodeEmitter &e) {
  Value x = e.value(0);
  if (!x)
    return failure();
  Shape in = e.shape(0);
  int64_t rank = in.size();
  FailureOr<std::vector<int64_t>> starts = e.constInts(1, "starts");
  if (failed(starts))
    return failure();
  FailureOr<std::vector<int64_t>> ends = e.constInts(2, "ends");
  if (failed(ends))
    return failure();
  std::vector<int64_t> axes, steps(starts->size(), 1);
  if (e.hasInput(3)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(3, "axes");
    if (failed(v))
      return failure();
    axes = *v;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (e.hasInput(4)) {
    FailureOr<std::vector<int64_t>> v = e.constInts(4, "steps");
    if (failed(v))
      return failure();
    steps = *v;
  }
  if (ends->size() != starts->size() || axes.size() != starts->size() ||
      steps.size() != starts->size())
    return e.error() << "starts, ends, axes and steps differ in length";
  std::vector<int64_t> start(rank, 0), limit(in.begin(), in.end()),
      stride(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    FailureOr<int64_t> a = e.axis(axes[i], rank);
    if (failed(a))
      return failure();
    int64_t st = steps[i];
    if (st == 0)
      return e.error() << "step of axis " << *a << " is zero";
    SliceRange range = normalizeSlice(in[*a], (*starts)[i], (*ends)[i], st);
    start[*a] = range.start;
    limit[*a] = range.limit;
    stride[*a] = st;
  }
  Shape shape;
  std::string error;
  if (!shape::slice(in, start, limit, stride, shape, error))
    return e.error() << error;
  e.setOutput(0, SliceOp::create(e.b(), e.loc, x,
                                 e.b().getDenseI64ArrayAttr(start),
                                 e.b().getDenseI64ArrayAttr(limit),
                                 e.b().getDenseI64ArrayAttr(stride)));
  return success();
}

/// The `axis` attribute of a gather node, checked against its data.
static FailureOr<int64_t> dataAxis(NodeEmitter &e) {
  return e.axis(intAttr(e.node, "axis", 0), e.shape(0).size());
}

LogicalResult integerIndices(NodeEmitter &e, int i) {
  Type elem = e.type(i).getElementType();
  if (elem.isInteger(32) || elem.isInteger(64))
    return success();
  std::string name;
  llvm::raw_string_ostream(name) << elem;
  return e.error() << "indices (input " << i << ", '" << e.node.input(i)
                   << "') must be int32 or int64, not " << name;
}

LogicalResult emitGather(NodeEmitter &e) {
  Shape data = e.shape(0);
  FailureOr<int64_t> axis = dataAxis(e);
  if (failed(axis) || failed(integerIndices(e, 1)))
    return failure();
  Entry *ie = e.entry(1);
  Value indices;
  if (ie->constant) {
    // Normalize negative indices while they are still known.
    HostTensor t = *ie->constant;
    int64_t dim = data[*axis];
    for (int64_t k = 0; k < t.numElements(); ++k) {
      int64_t j = t.getInt(k);
      if (j < -dim || j >= dim)
        return e.error() << "index " << j << " is out of range for axis "
                         << *axis << " of size " << dim;
      t.ints[k] = j < 0 ? j + dim : j;
    }
    indices = ConstantOp::create(e.b(), e.loc, e.imp.toAttr(t, ie->type));
  } else {
    indices = e.value(1);
  }
  Value x = e.value(0);
  if (!x || !indices)
    return failure();
  // The axis is in range: shape::gather holds.
  e.setOutput(0, GatherOp::create(e.b(), e.loc, x, indices,
                                  e.b().getI64IntegerAttr(*axis)));
  return success();
}

/// GatherElements (torch.gather: DeBERTa's relative-position terms) with
/// indices known at import: out[j] = data[j with its `axis` coordinate
/// replaced by indices[j]]. The indices are the same along the leading
/// dims (expanded over batch and heads), so the trailing dims from the
/// first that varies are flattened, both in the data and the output, and
/// one Gather along that flat dim picks each output element's source:
/// splits of the leading dims (heads) pass through it.
LogicalResult emitGatherElements(NodeEmitter &e) {
  Shape data = e.shape(0);
  const int64_t rank = data.size();
  FailureOr<int64_t> axis = dataAxis(e);
  if (failed(axis) || failed(integerIndices(e, 1)))
    return failure();
  Entry *ie = e.entry(1);
  if (!ie->constant)
    return emitGatherElementsAtRunTime(e);
  const HostTensor &idx = *ie->constant;
  if (static_cast<int64_t>(idx.shape.size()) != rank)
    return e.error() << "indices of rank " << idx.shape.size()
                     << " for data of rank " << rank;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && idx.shape[d] > data[d])
      return e.error() << "indices are " << idx.shape[d] << " along dim " << d
                       << ", beyond the data's " << data[d];
  // Leading dims along which the indices do not vary: [0, lead).
  auto strideOf = [](const Shape &shape, int64_t from) {
    int64_t n = 1;
    for (size_t d = from; d < shape.size(); ++d)
      n *= shape[d];
    return n;
  };
  int64_t lead = 0;
  while (lead < std::min<int64_t>(*axis, rank - 1)) {
    int64_t inner = strideOf(idx.shape, lead + 1);
    bool uniform = idx.shape[lead] == data[lead];
    for (int64_t k = inner; uniform && k < idx.numElements(); ++k)
      uniform = idx.getInt(k) == idx.getInt(k % inner);
    if (!uniform)
      break;
    ++lead;
  }
  for (int64_t d = 0; d < lead; ++d)
    if (idx.shape[d] != data[d])
      return e.error() << "indices are " << idx.shape[d] << " along dim " << d
                       << ", less than the data's " << data[d];
  // The flat source of each output element within the trailing dims.
  Shape outTail(idx.shape.begin() + lead, idx.shape.end());
  Shape dataTail(data.begin() + lead, data.end());
  HostTensor flat;
  flat.dtype = DType::Int64;
  flat.shape = {strideOf(outTail, 0)};
  std::string error;
  if (!flat.allocate(error))
    return e.error() << error;
  const int64_t tailAxis = *axis - lead;
  for (int64_t k = 0; k < flat.shape[0]; ++k) {
    int64_t rest = k, source = 0, scale = 1;
    for (int64_t d = outTail.size() - 1; d >= 0; --d) {
      int64_t coord = rest % outTail[d];
      rest /= outTail[d];
      if (d == tailAxis) {
        coord = idx.getInt(k); // (uniform along the leading dims)
        if (coord < -dataTail[d] || coord >= dataTail[d])
          return e.error() << "index " << coord << " is out of range for "
                           << "axis " << *axis << " of size " << dataTail[d];
        coord = coord < 0 ? coord + dataTail[d] : coord;
      }
      source += coord * scale;
      scale *= dataTail[d];
    }
    flat.ints[k] = source;
  }
  Value x = e.value(0);
  if (!x)
    return failure();
  Shape flatData(data.begin(), data.begin() + lead);
  flatData.push_back(strideOf(dataTail, 0));
  Value sources = ConstantOp::create(
      e.b(), e.loc,
      e.imp.toAttr(
          flat, RankedTensorType::get(flat.shape, e.b().getIntegerType(64))));
  Value gathered = GatherOp::create(e.b(), e.loc, reshapeValue(e, x, flatData),
                                    sources, e.b().getI64IntegerAttr(lead));
  e.setOutput(0, reshapeValue(e, gathered, idx.shape));
  return success();
}

LogicalResult emitExpand(NodeEmitter &e) {
  FailureOr<std::vector<int64_t>> target = e.constInts(1, "shape");
  if (failed(target))
    return failure();
  // ONNX Expand broadcasts both ways: the result is their common shape.
  Shape shape;
  std::string error;
  if (!shape::broadcast({e.shape(0), *target}, shape, error))
    return e.error() << error;
  Value x = e.value(0);
  if (!x)
    return failure();
  if (shape == e.shape(0)) {
    e.setOutput(0, x);
    return success();
  }
  e.setOutput(0, ExpandOp::create(e.b(), e.loc, e.like(0, shape), x));
  return success();
}

/// Identity of a parameter: PyTorch's exporter keeps one initializer for
/// parameters that are equal (freshly initialized norm weights and biases,
/// say) and writes each other one as an Identity node named after it. Each
/// becomes the parameter it was, reading the same bytes, so that
/// partitioning and training treat them apart (training moves them apart).
LogicalResult emitIdentity(NodeEmitter &e) {
  Entry *in = e.entry(0);
  if (!in)
    return failure();
  const std::string &out = e.node.output(0);
  if (!in->param.empty() && !e.imp.module.lookupSymbol(out))
    if (auto source = e.imp.module.lookupSymbol<ParamOp>(in->param)) {
      OpBuilder b(source);
      b.setInsertionPointAfter(source);
      auto copy = cast<ParamOp>(b.clone(*source));
      copy.setSymName(out);
      copy->setLoc(NameLoc::get(b.getStringAttr(out)));
      if (!copy.getOffset())
        copy.setInitializer(source.getInitializer().value_or(in->param));
      e.imp.values[out] = Entry{Value(), in->constant, out, in->type};
      return success();
    }
  e.imp.values[out] = *in;
  return success();
}

/// Dropout (opset 12+): `ratio` and `training_mode` must be known at
/// import. mp.dropout keeps the ratio; it is the identity in inference and
/// drops in a train step (mp-autodiff makes it active). A node exported in
/// inference mode (training_mode false or absent) or with ratio 0 is the
/// identity. The optional mask output is not supported.
LogicalResult emitDropout(NodeEmitter &e) {
  // (PyTorch's training-mode export always names the mask; it may go unused.)
  if (e.node.output_size() > 1 && !e.node.output(1).empty()) {
    const onnx::GraphProto &graph = e.imp.model.model.graph();
    const std::string &mask = e.node.output(1);
    bool used = llvm::any_of(graph.output(),
                             [&](const auto &o) { return o.name() == mask; });
    for (const onnx::NodeProto &n : graph.node())
      used |= llvm::is_contained(n.input(), mask);
    if (used)
      return e.error() << "the mask output is not supported";
  }
  double ratio = 0.5;
  if (e.hasInput(1)) {
    Entry *r = e.entry(1);
    if (!r || !r->constant || r->constant->numElements() != 1)
      return e.error() << "input 1 ('ratio') must be a scalar known at import";
    ratio = r->constant->getDouble(0);
  }
  bool training = false;
  if (e.hasInput(2)) {
    Entry *t = e.entry(2);
    if (!t || !t->constant || t->constant->numElements() != 1)
      return e.error()
             << "input 2 ('training_mode') must be a scalar known at import";
    training = t->constant->getDouble(0) != 0;
  }
  if (!(ratio >= 0 && ratio < 1))
    return e.error() << "ratio " << ratio << " is not in [0, 1)";
  Value x = e.value(0);
  if (!x)
    return failure();
  if (!training || ratio == 0) {
    e.setOutput(0, x);
    return success();
  }
  e.setOutput(0, DropoutOp::create(e.b(), e.loc, x.getType(), x,
                                   e.b().getF32FloatAttr(ratio), IntegerAttr(),
                                   UnitAttr()));
  return success();
}

} // namespace mp::onnx_import
