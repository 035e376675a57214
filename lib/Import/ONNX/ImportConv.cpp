//===- ImportConv.cpp - ONNX Conv -> patches and a matmul -----------------===//
//
// Transformers meet convolutions at their inputs: ViT's patch embedding (a
// Conv2d whose kernel equals its stride), Whisper's and wav2vec's audio
// front ends (Conv1d with padding). mp imports a Conv as what it computes,
// with ops it already runs, partitions and differentiates: the input's
// patches gathered into rows (im2col), one matmul with the weight viewed as
// [out channels, in channels · kernel], the bias added, and the result put
// back channel-first. A kernel that tiles the input (stride = kernel, no
// dilation) needs only a reshape and a transpose; any other kernel takes
// one strided slice per kernel offset. A grouped convolution (wav2vec 2's
// positional Conv1d, a depthwise one) is one matmul batched over the
// groups.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "mp/Support/Shape.h"

using namespace mlir;

namespace mp::onnx_import {

namespace {

/// A convolution's geometry along its spatial dims.
struct ConvGeometry {
  Shape kernel, strides, dilations, padBegin, padEnd, out;
};

/// The largest kernel size, stride, dilation or pad taken: products of two
/// stay far inside int64.
constexpr int64_t kMaxGeometry = int64_t(1) << 31;

/// `name`'s ints, each in [minimum, kMaxGeometry], or `rank` copies of
/// `fallback` when absent.
FailureOr<Shape> spatialAttr(NodeEmitter &e, const char *name, size_t rank,
                             int64_t fallback, int64_t minimum) {
  const auto *a = findAttr(e.node, name);
  if (!a)
    return Shape(rank, fallback);
  Shape v(a->ints().begin(), a->ints().end());
  if (v.size() != rank) {
    e.error() << name << " has " << v.size() << " entries, not " << rank
              << " (the input has " << e.shape(0).size() - 2
              << " spatial dims)";
    return failure();
  }
  for (int64_t x : v)
    if (x < minimum || x > kMaxGeometry) {
      e.error() << name << " entry " << x << " is outside [" << minimum
                << ", 2^31]";
      return failure();
    }
  return v;
}

/// Reads kernel, strides, dilations and pads (explicit or auto_pad) for an
/// input of spatial size `in`, and the output size they give.
FailureOr<ConvGeometry> geometry(NodeEmitter &e, const Shape &in,
                                 const Shape &weightKernel) {
  const size_t n = in.size();
  ConvGeometry g;
  FailureOr<Shape> kernel = spatialAttr(e, "kernel_shape", n, 0, 1);
  FailureOr<Shape> strides = spatialAttr(e, "strides", n, 1, 1);
  FailureOr<Shape> dilations = spatialAttr(e, "dilations", n, 1, 1);
  FailureOr<Shape> pads = spatialAttr(e, "pads", 2 * n, 0, 0);
  if (failed(kernel) || failed(strides) || failed(dilations) || failed(pads))
    return failure();
  g.kernel = findAttr(e.node, "kernel_shape") ? *kernel : weightKernel;
  for (int64_t k : weightKernel)
    if (k < 1 || k > kMaxGeometry) {
      e.error() << "the weight's kernel " << formatShape(weightKernel)
                << " has a size outside [1, 2^31]";
      return failure();
    }
  if (g.kernel != weightKernel) {
    e.error() << "kernel_shape " << formatShape(g.kernel)
              << " differs from the weight's " << formatShape(weightKernel);
    return failure();
  }
  g.strides = *strides;
  g.dilations = *dilations;
  g.padBegin.assign(pads->begin(), pads->begin() + n);
  g.padEnd.assign(pads->begin() + n, pads->end());
  const auto *autoPad = findAttr(e.node, "auto_pad");
  std::string mode = autoPad ? autoPad->s() : "NOTSET";
  if (mode != "NOTSET" && findAttr(e.node, "pads")) {
    e.error() << "pads are given with auto_pad " << mode;
    return failure();
  }
  for (size_t i = 0; i < n; ++i) {
    int64_t span = g.dilations[i] * (g.kernel[i] - 1) + 1;
    if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      int64_t out = (in[i] + g.strides[i] - 1) / g.strides[i];
      int64_t total =
          std::max<int64_t>(0, (out - 1) * g.strides[i] + span - in[i]);
      g.padBegin[i] = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.padEnd[i] = total - g.padBegin[i];
    } else if (mode == "VALID") {
      g.padBegin[i] = g.padEnd[i] = 0;
    } else if (mode != "NOTSET") {
      e.error() << "unknown auto_pad '" << mode << "'";
      return failure();
    }
    int64_t padded = in[i] + g.padBegin[i] + g.padEnd[i];
    if (padded < span) {
      e.error() << "spatial dim " << i << " (" << in[i] << ", padded " << padded
                << ") is smaller than the kernel's span " << span;
      return failure();
    }
    g.out.push_back((padded - span) / g.strides[i] + 1);
  }
  return g;
}

/// `x` with zeros added before and after each spatial dim.
Value pad(NodeEmitter &e, Value x, const ConvGeometry &g) {
  for (size_t i = 0; i < g.kernel.size(); ++i)
    x = padAxis(e, x, 2 + i, g.padBegin[i], g.padEnd[i], 0);
  return x;
}

/// The padded input [N, C, D...] as patches [N, C, O..., K]: element k of
/// the last dim is kernel offset k (row-major over the kernel's dims).
Value patches(NodeEmitter &e, Value x, const ConvGeometry &g) {
  Shape in(cast<RankedTensorType>(x.getType()).getShape());
  const size_t n = g.kernel.size();
  int64_t offsets = numElements(g.kernel);
  SmallVector<Value> taps;
  for (int64_t k = 0; k < offsets; ++k) {
    SmallVector<int64_t> starts(in.size(), 0), limits(in.begin(), in.end()),
        strides(in.size(), 1);
    for (int64_t i = n - 1, rest = k; i >= 0; --i) {
      int64_t j = rest % g.kernel[i];
      rest /= g.kernel[i];
      starts[2 + i] = j * g.dilations[i];
      limits[2 + i] = starts[2 + i] + (g.out[i] - 1) * g.strides[i] + 1;
      strides[2 + i] = g.strides[i];
    }
    Value tap =
        SliceOp::create(e.b(), e.loc, x, e.b().getDenseI64ArrayAttr(starts),
                        e.b().getDenseI64ArrayAttr(limits),
                        e.b().getDenseI64ArrayAttr(strides));
    Shape tapShape = {in[0], in[1]};
    tapShape.insert(tapShape.end(), g.out.begin(), g.out.end());
    tapShape.push_back(1);
    taps.push_back(reshapeValue(e, tap, tapShape));
  }
  if (taps.size() == 1)
    return taps.front();
  return ConcatOp::create(e.b(), e.loc, taps,
                          e.b().getI64IntegerAttr(in.size()));
}

/// Rows [N, P, C·K] of the padded input, P = the output's positions, each
/// row one receptive field in the weight's (channel, kernel...) order.
Value im2col(NodeEmitter &e, Value x, const ConvGeometry &g) {
  Shape in(cast<RankedTensorType>(x.getType()).getShape());
  const int64_t n = g.kernel.size();
  int64_t positions = numElements(g.out), field = in[1] * numElements(g.kernel);
  bool tiles = true;
  for (int64_t i = 0; i < n; ++i)
    tiles &= g.strides[i] == g.kernel[i] && g.dilations[i] == 1;
  SmallVector<int64_t> perm = {0};
  if (tiles) {
    // Non-overlapping patches: [N, C, O1, k1, ...] -> [N, O..., C, k...].
    Shape used = in, split = {in[0], in[1]};
    for (int64_t i = 0; i < n; ++i) {
      used[2 + i] = g.out[i] * g.kernel[i];
      split.push_back(g.out[i]);
      split.push_back(g.kernel[i]);
    }
    if (used != in) {
      SmallVector<int64_t> zeros(in.size(), 0), ones(in.size(), 1);
      x = SliceOp::create(e.b(), e.loc, x, e.b().getDenseI64ArrayAttr(zeros),
                          e.b().getDenseI64ArrayAttr(used),
                          e.b().getDenseI64ArrayAttr(ones));
    }
    x = reshapeValue(e, x, split);
    for (int64_t i = 0; i < n; ++i)
      perm.push_back(2 + 2 * i);
    perm.push_back(1);
    for (int64_t i = 0; i < n; ++i)
      perm.push_back(3 + 2 * i);
  } else {
    x = patches(e, x, g); // [N, C, O..., K]
    for (int64_t i = 0; i < n; ++i)
      perm.push_back(2 + i);
    perm.push_back(1);
    perm.push_back(2 + n);
  }
  x = TransposeOp::create(e.b(), e.loc, x, e.b().getDenseI64ArrayAttr(perm));
  return reshapeValue(e, x, {in[0], positions, field});
}

} // namespace

LogicalResult emitConv(NodeEmitter &e) {
  Value x = e.value(0), w = e.value(1);
  if (!x || !w)
    return failure();
  Shape in = e.shape(0), weight = e.shape(1);
  if (!isa<FloatType>(e.type(0).getElementType()))
    return e.error() << "input must be floating point, not " << e.type(0);
  if (in.size() < 3 || weight.size() != in.size())
    return e.error() << "input " << formatShape(in) << " and weight "
                     << formatShape(weight)
                     << " must both be [N, C, spatial...] of one rank";
  const int64_t groups = intAttr(e.node, "group", 1);
  if (groups < 1 || in[1] % groups || weight[0] % groups)
    return e.error() << "group " << groups << " does not divide the " << in[1]
                     << " input and " << weight[0] << " output channels";
  if (weight[1] * groups != in[1])
    return e.error() << "weight " << formatShape(weight) << " expects "
                     << weight[1] * groups << " input channels (" << weight[1]
                     << " per group of " << groups << "), the input has "
                     << in[1];
  Shape spatial(in.begin() + 2, in.end());
  FailureOr<ConvGeometry> g =
      geometry(e, spatial, Shape(weight.begin() + 2, weight.end()));
  if (failed(g))
    return failure();
  const int64_t channels = weight[0];
  int64_t field = weight[1] * numElements(g->kernel);
  Value rows = im2col(e, pad(e, x, *g), *g);
  Value y;
  if (groups == 1) {
    // The weight [M, C, k...] viewed as [M, C·K], transposed for x · Wᵀ.
    Value w2 =
        TransposeOp::create(e.b(), e.loc, reshapeValue(e, w, {channels, field}),
                            e.b().getDenseI64ArrayAttr({1, 0}));
    y = MatmulOp::create(e.b(), e.loc, rows, w2); // [N, P, M]
  } else {
    // Group j's input channels are a block of each row (channel-major):
    // rows [N, g, P, C/g·K] times the weight as [g, C/g·K, M/g], batched
    // over the groups, then the groups' outputs side by side.
    int64_t positions = numElements(g->out), perGroup = channels / groups;
    Value grouped = reshapeValue(e, rows, {in[0], positions, groups, field});
    grouped = TransposeOp::create(e.b(), e.loc, grouped,
                                  e.b().getDenseI64ArrayAttr({0, 2, 1, 3}));
    Value w3 = TransposeOp::create(
        e.b(), e.loc, reshapeValue(e, w, {groups, perGroup, field}),
        e.b().getDenseI64ArrayAttr({0, 2, 1}));
    y = MatmulOp::create(e.b(), e.loc, grouped, w3); // [N, g, P, M/g]
    y = TransposeOp::create(e.b(), e.loc, y,
                            e.b().getDenseI64ArrayAttr({0, 2, 1, 3}));
    y = reshapeValue(e, y, {in[0], positions, channels});
  }
  if (e.hasInput(2)) {
    Value bias = e.value(2);
    if (!bias)
      return failure();
    if (e.shape(2) != Shape{channels} ||
        e.type(2).getElementType() != e.type(0).getElementType())
      return e.error() << "bias " << e.type(2) << " must be [" << channels
                       << "] of the input's element type";
    y = AddOp::create(e.b(), e.loc, y, bias);
  }
  y = TransposeOp::create(e.b(), e.loc, y,
                          e.b().getDenseI64ArrayAttr({0, 2, 1}));
  Shape outShape = {in[0], channels};
  outShape.insert(outShape.end(), g->out.begin(), g->out.end());
  e.setOutput(0, reshapeValue(e, y, outShape));
  return success();
}

} // namespace mp::onnx_import
