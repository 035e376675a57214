//===- Norm.cpp - normalization and reduction CPU kernels -----------------===//
//
// layerNorm, rmsNorm (alone, or after the residual add that feeds them),
// softmax, reduce, crossEntropy. Row statistics are accumulated in double;
// rows run in parallel when the tensor is large.
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Support/Float16.h"

#include "OpenMP.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace mp::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

/// Softmax of a contiguous row; a row whose max is -inf (fully masked)
/// becomes zeros.
template <class T> void softmaxRow(const T *x, T *y, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  if constexpr (std::is_same_v<T, float>) {
    m = detail::maxOf(x, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      m = x[i] > m ? x[i] : m;
  }
  if (m == -std::numeric_limits<T>::infinity()) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = T(0);
    return;
  }
  T sum;
  if constexpr (std::is_same_v<T, float>) {
    sum = detail::expSubSum(x, m, y, n);
  } else {
    sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::exp(x[i] - m);
      sum += y[i];
    }
  }
  const T inv = T(1) / sum;
  for (int64_t i = 0; i < n; ++i)
    y[i] *= inv;
}

/// Softmax over the middle dim of a [n, inner] block, vectorized over inner.
template <class T>
void softmaxStrided(const T *x, T *y, int64_t n, int64_t inner, T *mx, T *sum) {
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < inner; ++j) {
    mx[j] = ninf;
    sum[j] = 0;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T *row = x + k * inner;
    for (int64_t j = 0; j < inner; ++j)
      mx[j] = row[j] > mx[j] ? row[j] : mx[j];
  }
  for (int64_t k = 0; k < n; ++k) {
    const T *row = x + k * inner;
    T *out = y + k * inner;
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = 0; j < inner; ++j)
        out[j] = mx[j] == ninf ? ninf : row[j] - mx[j];
      detail::expInPlace(out, inner);
      for (int64_t j = 0; j < inner; ++j)
        sum[j] += out[j];
    } else {
      for (int64_t j = 0; j < inner; ++j) {
        T v = mx[j] == ninf ? T(0) : std::exp(row[j] - mx[j]);
        out[j] = v;
        sum[j] += v;
      }
    }
  }
  for (int64_t j = 0; j < inner; ++j)
    sum[j] = mx[j] == ninf ? T(0) : T(1) / sum[j]; // NaN stays NaN
  for (int64_t k = 0; k < n; ++k) {
    T *out = y + k * inner;
    for (int64_t j = 0; j < inner; ++j)
      out[j] *= sum[j];
  }
}

template <class T>
void softmaxTyped(const T *x, T *y, const std::vector<int64_t> &shape,
                  int64_t axis) {
  const int64_t outer = product(shape, 0, size_t(axis));
  const int64_t n = shape.empty() ? 1 : shape[size_t(axis)];
  const int64_t inner = product(shape, size_t(axis) + 1, shape.size());
  const bool parallel = shouldParallelize(outer * n * inner);
  if (inner == 1) {
    parallelRange(outer, parallel, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        softmaxRow(x + r * n, y + r * n, n);
    });
    return;
  }
  // Split the inner dim in column blocks so that small outer still spreads.
  constexpr int64_t kCols = 256;
  const int64_t colBlocks = (inner + kCols - 1) / kCols;
  parallelRange(outer * colBlocks, parallel, [&](int64_t b, int64_t e) {
    std::vector<T> mx(kCols), sum(kCols);
    std::vector<T> xs, ys;
    for (int64_t it = b; it < e; ++it) {
      int64_t o = it / colBlocks, c0 = (it % colBlocks) * kCols;
      int64_t w = std::min(kCols, inner - c0);
      const T *xb = x + o * n * inner + c0;
      T *yb = y + o * n * inner + c0;
      if (w == inner) {
        softmaxStrided(xb, yb, n, inner, mx.data(), sum.data());
        continue;
      }
      // Gather the column block into a dense [n, w] tile.
      xs.resize(size_t(n * w));
      ys.resize(size_t(n * w));
      for (int64_t k = 0; k < n; ++k)
        std::copy(xb + k * inner, xb + k * inner + w, xs.data() + k * w);
      softmaxStrided(xs.data(), ys.data(), n, w, mx.data(), sum.data());
      for (int64_t k = 0; k < n; ++k)
        std::copy(ys.data() + k * w, ys.data() + (k + 1) * w, yb + k * inner);
    }
  });
}

//===----------------------------------------------------------------------===//
// reduce
//===----------------------------------------------------------------------===//

template <class T> struct AccOf { using type = T; };
template <> struct AccOf<float> { using type = double; };
template <> struct AccOf<int32_t> { using type = int64_t; };

template <class T, ReduceKind K> struct Reducer {
  using Acc = std::conditional_t<K == ReduceKind::Sum || K == ReduceKind::Mean,
                                 typename AccOf<T>::type, T>;
  static Acc init() {
    if constexpr (K == ReduceKind::Max)
      return std::numeric_limits<T>::has_infinity
                 ? -std::numeric_limits<T>::infinity()
                 : std::numeric_limits<T>::lowest();
    else if constexpr (K == ReduceKind::Min)
      return std::numeric_limits<T>::has_infinity
                 ? std::numeric_limits<T>::infinity()
                 : std::numeric_limits<T>::max();
    else
      return Acc(0);
  }
  static Acc combine(Acc a, T v) {
    if constexpr (K == ReduceKind::Max)
      return (v > a || v != v) ? Acc(v) : a;
    else if constexpr (K == ReduceKind::Min)
      return (v < a || v != v) ? Acc(v) : a;
    else if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) + uint64_t(int64_t(v)));
    else
      return a + Acc(v);
  }
  /// Reduces a contiguous run into a.
  static Acc run(Acc a, const T *x, int64_t n) {
    if constexpr (K == ReduceKind::Sum || K == ReduceKind::Mean) {
      // Integers add as unsigned: wrap-around, not signed overflow.
      using Sum = std::conditional_t<std::is_integral_v<Acc>, uint64_t, Acc>;
      Sum s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i)
        s += Sum(x[i]);
      return combine2(a, Acc(s));
    } else {
      for (int64_t i = 0; i < n; ++i)
        a = combine(a, x[i]);
      return a;
    }
  }
  static Acc combine2(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) + uint64_t(b));
    else
      return a + b;
  }
};

template <class T, ReduceKind K>
void reduceTyped(const T *x, T *out, const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &axes) {
  using R = Reducer<T, K>;
  using Acc = typename R::Acc;
  // Collapse: drop size-1 dims, merge neighbours of the same kind.
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  int64_t total = 1, count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool red = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    total *= shape[d];
    if (red)
      count *= shape[d];
    if (shape[d] == 1)
      continue;
    if (!sizes.empty() && reduced.back() == red) {
      sizes.back() *= shape[d];
      continue;
    }
    sizes.push_back(shape[d]);
    reduced.push_back(red);
  }
  int64_t outCount = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
      outCount *= shape[d];
  std::vector<Acc> acc(static_cast<size_t>(outCount), R::init());
  if (total > 0) {
    if (sizes.empty()) {
      sizes.push_back(1);
      reduced.push_back(false);
    }
    const size_t r = sizes.size();
    std::vector<int64_t> xs(r), os(r);
    int64_t st = 1, ost = 1;
    for (size_t d = r; d-- > 0;) {
      xs[d] = st;
      st *= sizes[d];
      os[d] = reduced[d] ? 0 : ost;
      if (!reduced[d])
        ost *= sizes[d];
    }
    // Split the outermost kept dim across threads: disjoint outputs.
    size_t split = r;
    for (size_t d = 0; d < r; ++d)
      if (!reduced[d]) {
        split = d;
        break;
      }
    const bool innerReduced = reduced[r - 1];
    Acc *a = acc.data();
    auto runRange = [&](int64_t lo, int64_t hi) {
      // Iterative odometer over all dims, dim `split` limited to [lo, hi).
      std::vector<int64_t> idx(r, 0), start(r, 0), end(sizes);
      if (split < r) {
        start[split] = lo;
        end[split] = hi;
      }
      int64_t xoff = 0, ooff = 0;
      for (size_t d = 0; d < r; ++d) {
        idx[d] = start[d];
        xoff += idx[d] * xs[d];
        ooff += idx[d] * os[d];
      }
      const int64_t n = end[r - 1] - start[r - 1];
      while (true) {
        if (innerReduced) {
          a[ooff] = R::run(a[ooff], x + xoff, n);
        } else {
          const T *px = x + xoff;
          Acc *pa = a + ooff;
          for (int64_t j = 0; j < n; ++j)
            pa[j] = R::combine(pa[j], px[j]);
        }
        // Advance the outer dims.
        size_t d = r - 1;
        bool done = true;
        while (d-- > 0) {
          ++idx[d];
          xoff += xs[d];
          ooff += os[d];
          if (idx[d] < end[d]) {
            done = false;
            break;
          }
          xoff -= (end[d] - start[d]) * xs[d];
          ooff -= (end[d] - start[d]) * os[d];
          idx[d] = start[d];
        }
        if (done)
          break;
      }
    };
    if (split < r && shouldParallelize(total) && sizes[split] > 1) {
      parallelRange(sizes[split], true, runRange);
    } else {
      runRange(0, split < r ? sizes[split] : 1);
    }
  }
  for (int64_t i = 0; i < outCount; ++i) {
    if constexpr (K == ReduceKind::Mean) {
      if constexpr (std::is_integral_v<T>)
        out[i] = count ? T(int64_t(acc[size_t(i)]) / count) : T(0);
      else
        out[i] = T(acc[size_t(i)] / Acc(count));
    } else {
      out[i] = T(acc[size_t(i)]);
    }
  }
}

template <class T>
void reduceDispatch(ReduceKind kind, const T *x, T *out,
                    const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &axes) {
  switch (kind) {
  case ReduceKind::Sum:
    return reduceTyped<T, ReduceKind::Sum>(x, out, shape, axes);
  case ReduceKind::Mean:
    return reduceTyped<T, ReduceKind::Mean>(x, out, shape, axes);
  case ReduceKind::Max:
    return reduceTyped<T, ReduceKind::Max>(x, out, shape, axes);
  case ReduceKind::Min:
    return reduceTyped<T, ReduceKind::Min>(x, out, shape, axes);
  }
}

//===----------------------------------------------------------------------===//
// layer and RMS norm rows
//===----------------------------------------------------------------------===//

/// Runs `row(r)` for every row of `inner` values of `numel`, in parallel
/// when the tensor is large.
template <class Row> void forEachRow(int64_t numel, int64_t inner, Row row) {
  const int64_t outer = inner ? numel / inner : 0;
  parallelRange(outer, shouldParallelize(outer * inner),
                [&](int64_t b, int64_t e) {
                  for (int64_t r = b; r < e; ++r)
                    row(r);
                });
}

/// A row's statistics in one pass, in double: Σd and Σd² of d = x − pivot.
/// Layer norm takes the pivot x[0]: about a value of the row itself,
/// E[d²] − E[d]² loses only about ε_double·((mean − x[0])/std)² to
/// cancellation, which the row's own spread keeps small (Σx² − n·mean²
/// would lose ε_double·(mean/std)², which a large offset makes unbounded).
/// RMS norm needs Σx² only: pivot 0.
struct RowStats {
  double pivot = 0, sum = 0, squares = 0;

  /// The mean less the pivot.
  double meanAboutPivot(int64_t n) const { return n ? sum / double(n) : 0.0; }
  double variance(int64_t n) const {
    if (!n)
      return 0.0;
    const double m = sum / double(n);
    return std::max(squares / double(n) - m * m, 0.0);
  }

  template <bool Centred> static RowStats of(const float *x, int64_t n) {
    const double k = Centred && n ? double(x[0]) : 0.0;
    double s = 0, q = 0;
#pragma omp simd reduction(+ : s, q)
    for (int64_t i = 0; i < n; ++i) {
      const double d = double(x[i]) - k;
      s += d;
      q += d * d;
    }
    return {k, s, q};
  }

  /// Writes out = a + b and returns the statistics of out (the same loop as
  /// `of`, so the fused kernels give bitwise what the add and norm give).
  template <bool Centred>
  static RowStats ofSum(const float *a, const float *b, float *out, int64_t n) {
    const double k = Centred && n ? double(a[0] + b[0]) : 0.0;
    double s = 0, q = 0;
#pragma omp simd reduction(+ : s, q)
    for (int64_t i = 0; i < n; ++i) {
      out[i] = a[i] + b[i];
      const double d = double(out[i]) - k;
      s += d;
      q += d * d;
    }
    return {k, s, q};
  }
};

/// (x - mean) / sqrt(var + epsilon) * scale (+ bias) of one row.
struct LayerNormRow {
  static constexpr bool kCentred = true;
  const float *scale, *bias;
  int64_t inner;
  float epsilon;

  void operator()(const float *xr, float *yr, const RowStats &stats) const {
    const float rstd =
        float(1.0 / std::sqrt(stats.variance(inner) + double(epsilon)));
    // x − mean as (x − pivot) − (mean − pivot): the first difference is
    // exact for values near the pivot, so a row far from zero does not lose
    // the mean's f32 rounding (a 10^-2 std error at mean = 10^6 std).
    const float k = float(stats.pivot);
    const float m = float(stats.meanAboutPivot(inner));
    if (bias) {
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i)
        yr[i] = ((xr[i] - k) - m) * rstd * scale[i] + bias[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i)
        yr[i] = ((xr[i] - k) - m) * rstd * scale[i];
    }
  }
};

/// x / sqrt(mean(x^2) + epsilon) * scale of one row.
struct RMSNormRow {
  static constexpr bool kCentred = false;
  const float *scale;
  int64_t inner;
  float epsilon;

  void operator()(const float *xr, float *yr, const RowStats &stats) const {
    const float rs =
        float(1.0 / std::sqrt(stats.squares / double(inner) + double(epsilon)));
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i)
      yr[i] = xr[i] * rs * scale[i];
  }
};

/// sum = a + b and out = row(sum), a block of rows at a time: the block's
/// sums are written in one sweep (long sequential streams, which the
/// hardware prefetches; row by row, the four short interleaved streams ran
/// at half the speed on operands out of cache) and normalized while they
/// are still in cache.
template <class Row>
void addThenNormalize(const Tensor &a, const Tensor &b, Tensor &sum,
                      Tensor &out, int64_t inner, const Row &row) {
  const int64_t outer = inner ? a.numel() / inner : 0;
  // Rows per block: about 32 KiB of sums.
  const int64_t block =
      std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1));
  const int64_t blocks = (outer + block - 1) / block;
  const float *pa = a.as<const float>(), *pb = b.as<const float>();
  float *ps = sum.as<float>(), *po = out.as<float>();
  parallelRange(
      blocks, shouldParallelize(outer * inner), [&](int64_t b0, int64_t b1) {
        std::vector<RowStats> stats(static_cast<size_t>(block));
        for (int64_t k = b0; k < b1; ++k) {
          const int64_t r0 = k * block;
          const int64_t r1 = std::min(outer, r0 + block);
          for (int64_t r = r0; r < r1; ++r)
            stats[size_t(r - r0)] = RowStats::ofSum<Row::kCentred>(
                pa + r * inner, pb + r * inner, ps + r * inner, inner);
          for (int64_t r = r0; r < r1; ++r)
            row(ps + r * inner, po + r * inner, stats[size_t(r - r0)]);
        }
      });
}

/// A 16-bit float type's conversions, those of the cast kernel (rounding
/// to nearest even).
struct BF16Values {
  static float widen(uint16_t h) { return bf16ToFloat(h); }
  static uint16_t narrow(float f) { return floatToBf16(f); }
};
struct F16Values {
  static float widen(uint16_t h) { return halfToFloat(h); }
  static uint16_t narrow(float f) { return floatToHalf(f); }
};

/// addThenNormalize on bf16 or f16 values: each sum is computed in f32 and
/// rounded to the type, and the norm reads the rounded row, in f32, its
/// results rounded once. That is what an mp.add and the norm give one after
/// the other, each on f32 copies of its operands (Widen.cpp), so the fused
/// results are theirs bit for bit. (The memory plan may put `sum` in a's
/// bytes and `out` in b's: each element is read before it is written.)
template <class Values, class Row>
void addThenNormalizeHalf(const Tensor &a, const Tensor &b, Tensor &sum,
                          Tensor &out, int64_t inner, const Row &row) {
  const int64_t outer = inner ? a.numel() / inner : 0;
  const uint16_t *pa = a.as<const uint16_t>(), *pb = b.as<const uint16_t>();
  uint16_t *ps = sum.as<uint16_t>(), *po = out.as<uint16_t>();
  parallelRange(outer, shouldParallelize(outer * inner),
                [&](int64_t r0, int64_t r1) {
                  std::vector<float> rounded(static_cast<size_t>(inner)),
                      normalized(static_cast<size_t>(inner));
                  for (int64_t r = r0; r < r1; ++r) {
                    const int64_t at = r * inner;
                    for (int64_t i = 0; i < inner; ++i) {
                      ps[at + i] = Values::narrow(Values::widen(pa[at + i]) +
                                                  Values::widen(pb[at + i]));
                      rounded[size_t(i)] = Values::widen(ps[at + i]);
                    }
                    row(rounded.data(), normalized.data(),
                        RowStats::of<Row::kCentred>(rounded.data(), inner));
                    for (int64_t i = 0; i < inner; ++i)
                      po[at + i] = Values::narrow(normalized[size_t(i)]);
                  }
                });
}

/// An f32 copy of a norm's scale or bias (f32, bf16 or f16).
std::vector<float> widenedCopy(const Tensor &t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = t.dtype == DType::F32 ? t.as<const float>()[i]
                : t.dtype == DType::BF16
                    ? bf16ToFloat(t.as<const uint16_t>()[i])
                    : halfToFloat(t.as<const uint16_t>()[i]);
  return values;
}

/// The 16-bit form's types: a, b, sum and out of one 16-bit type, the
/// norm's scale and bias f32 or 16-bit.
Status expectHalfAddNorm(const char *kernel, const Tensor &a, const Tensor &b,
                         const Tensor &sum, const Tensor &out,
                         std::initializer_list<const Tensor *> normParams) {
  for (const Tensor *t : {&b, &sum, &out})
    if (t->dtype != a.dtype)
      return mismatch(kernel, a.dtype, t->dtype);
  for (const Tensor *t : normParams)
    if (t && t->dtype != DType::F32 && !isHalfFloat(t->dtype))
      return typeError(kernel, t->dtype);
  return Status::success();
}

/// Runs addThenNormalizeHalf for a's type (bf16 or f16).
template <class Row>
void addThenNormalizeHalf(const Tensor &a, const Tensor &b, Tensor &sum,
                          Tensor &out, int64_t inner, const Row &row) {
  if (a.dtype == DType::BF16)
    addThenNormalizeHalf<BF16Values>(a, b, sum, out, inner, row);
  else
    addThenNormalizeHalf<F16Values>(a, b, sum, out, inner, row);
}

} // namespace

//===----------------------------------------------------------------------===//
// Public kernels
//===----------------------------------------------------------------------===//

Status layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, float epsilon, Tensor &out) {
  if (Status s = expectF32("layerNorm", {&x, &scale, bias, &out}); !s)
    return s;
  const int64_t inner = product(x.shape, size_t(axis), x.shape.size());
  const LayerNormRow row{scale.as<const float>(),
                         bias ? bias->as<const float>() : nullptr, inner,
                         epsilon};
  forEachRow(x.numel(), inner, [&](int64_t r) {
    const float *xr = x.as<const float>() + r * inner;
    row(xr, out.as<float>() + r * inner,
        RowStats::of<LayerNormRow::kCentred>(xr, inner));
  });
  return Status::success();
}

Status rmsNorm(const Tensor &x, const Tensor &scale, float epsilon,
               Tensor &out) {
  if (Status s = expectF32("rmsNorm", {&x, &scale, &out}); !s)
    return s;
  const int64_t inner = x.shape.empty() ? 1 : x.shape.back();
  const RMSNormRow row{scale.as<const float>(), inner, epsilon};
  forEachRow(x.numel(), inner, [&](int64_t r) {
    const float *xr = x.as<const float>() + r * inner;
    row(xr, out.as<float>() + r * inner,
        RowStats::of<RMSNormRow::kCentred>(xr, inner));
  });
  return Status::success();
}

Status addLayerNorm(const Tensor &a, const Tensor &b, const Tensor &scale,
                    const Tensor *bias, int64_t axis, float epsilon,
                    Tensor &sum, Tensor &out) {
  const int64_t inner = product(a.shape, size_t(axis), a.shape.size());
  if (isHalfFloat(a.dtype)) {
    if (Status s =
            expectHalfAddNorm("addLayerNorm", a, b, sum, out, {&scale, bias});
        !s)
      return s;
    const std::vector<float> wideScale = widenedCopy(scale),
                             wideBias = bias ? widenedCopy(*bias)
                                             : std::vector<float>();
    addThenNormalizeHalf(a, b, sum, out, inner,
                         LayerNormRow{wideScale.data(),
                                      bias ? wideBias.data() : nullptr, inner,
                                      epsilon});
    return Status::success();
  }
  if (Status s = expectF32("addLayerNorm", {&a, &b, &scale, bias, &sum, &out});
      !s)
    return s;
  const LayerNormRow row{scale.as<const float>(),
                         bias ? bias->as<const float>() : nullptr, inner,
                         epsilon};
  addThenNormalize(a, b, sum, out, inner, row);
  return Status::success();
}

Status addRmsNorm(const Tensor &a, const Tensor &b, const Tensor &scale,
                  float epsilon, Tensor &sum, Tensor &out) {
  const int64_t inner = a.shape.empty() ? 1 : a.shape.back();
  if (isHalfFloat(a.dtype)) {
    if (Status s = expectHalfAddNorm("addRmsNorm", a, b, sum, out, {&scale});
        !s)
      return s;
    const std::vector<float> wideScale = widenedCopy(scale);
    addThenNormalizeHalf(a, b, sum, out, inner,
                         RMSNormRow{wideScale.data(), inner, epsilon});
    return Status::success();
  }
  if (Status s = expectF32("addRmsNorm", {&a, &b, &scale, &sum, &out}); !s)
    return s;
  const RMSNormRow row{scale.as<const float>(), inner, epsilon};
  addThenNormalize(a, b, sum, out, inner, row);
  return Status::success();
}

Status softmax(const Tensor &x, int64_t axis, Tensor &out) {
  if (out.dtype != x.dtype)
    return typeError("softmax (result)", out.dtype);
  switch (x.dtype) {
  case DType::F32:
    softmaxTyped(x.as<const float>(), out.as<float>(), x.shape, axis);
    return Status::success();
  case DType::F64:
    softmaxTyped(x.as<const double>(), out.as<double>(), x.shape, axis);
    return Status::success();
  default: return typeError("softmax", x.dtype);
  }
}

Status reduce(ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &out) {
  if (out.dtype != x.dtype)
    return typeError("reduce (result)", out.dtype);
  switch (x.dtype) {
  case DType::F32:
    reduceDispatch(kind, x.as<const float>(), out.as<float>(), x.shape, axes);
    return Status::success();
  case DType::F64:
    reduceDispatch(kind, x.as<const double>(), out.as<double>(), x.shape, axes);
    return Status::success();
  case DType::I64:
    reduceDispatch(kind, x.as<const int64_t>(), out.as<int64_t>(), x.shape,
                   axes);
    return Status::success();
  case DType::I32:
    reduceDispatch(kind, x.as<const int32_t>(), out.as<int32_t>(), x.shape,
                   axes);
    return Status::success();
  default: return typeError("reduce", x.dtype);
  }
}

Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out) {
  if (logits.dtype != DType::F32)
    return typeError("crossEntropy", logits.dtype);
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return typeError("crossEntropy (targets)", targets.dtype);
  if (out.dtype != DType::F32)
    return typeError("crossEntropy (result)", out.dtype);
  const int64_t v = logits.shape.empty() ? 1 : logits.shape.back();
  const int64_t positions = targets.numel();
  std::vector<int64_t> t(static_cast<size_t>(positions));
  for (int64_t i = 0; i < positions; ++i) {
    t[size_t(i)] = targets.dtype == DType::I64 ? targets.as<const int64_t>()[i]
                                               : targets.as<const int32_t>()[i];
    if (t[size_t(i)] == kIgnoreIndex)
      continue;
    if (t[size_t(i)] < 0 || t[size_t(i)] >= v)
      return Status::error("crossEntropy: target " +
                           std::to_string(t[size_t(i)]) + " at position " +
                           std::to_string(i) + " is out of range [0, " +
                           std::to_string(v) + ")");
  }
  const float *x = logits.as<const float>();
  std::vector<double> loss(static_cast<size_t>(positions));
  parallelRange(
      positions, shouldParallelize(positions * v), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          if (t[size_t(p)] == kIgnoreIndex)
            continue;
          const float *row = x + p * v;
          const float m = detail::maxOf(row, v);
          double lse =
              double(m) + std::log(double(detail::expSubSumNoStore(row, m, v)));
          loss[size_t(p)] = lse - double(row[t[size_t(p)]]);
        }
      });
  double sum = 0;
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p)
    if (t[size_t(p)] != kIgnoreIndex) {
      sum += loss[size_t(p)];
      ++counted;
    }
  out.as<float>()[0] = counted ? float(sum / double(counted))
                               : std::numeric_limits<float>::quiet_NaN();
  return Status::success();
}

} // namespace mp::rt::cpu
