//===- Shape.cpp - data movement CPU kernels ------------------------------===//
//
// gather, trilu, transpose, slice, concat, split. These move bytes, so they
// handle every element type (dispatching on the element size only).
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "mp/Runtime/Kernels.h"

#include "OpenMP.h"

#include <algorithm>
#include <cstring>

namespace mp::rt::cpu {
namespace {

/// Iterates the linear indices [begin, end) of `sizes` (row-major), calling
/// f(xOffset, yOffset) with offsets from the two stride vectors.
template <class F>
void iterate(const std::vector<int64_t> &sizes, const std::vector<int64_t> &xs,
             const std::vector<int64_t> &ys, int64_t begin, int64_t end,
             F &&f) {
  const size_t r = sizes.size();
  std::vector<int64_t> idx(r, 0);
  int64_t xo = 0, yo = 0;
  for (size_t d = r, rem = size_t(begin); d-- > 0;) {
    idx[d] = int64_t(rem) % sizes[d];
    rem /= size_t(sizes[d]);
    xo += idx[d] * xs[d];
    yo += idx[d] * ys[d];
  }
  for (int64_t it = begin; it < end; ++it) {
    f(xo, yo);
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      xo += xs[d];
      yo += ys[d];
      if (idx[d] < sizes[d])
        break;
      xo -= xs[d] * sizes[d];
      yo -= ys[d] * sizes[d];
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t st = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = st;
    st *= shape[d];
  }
  return s;
}

} // namespace

Status transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("transpose", x.dtype, out.dtype);
  if (perm.size() != x.shape.size())
    return Status::error("transpose: permutation of " +
                         std::to_string(perm.size()) + " dims for rank " +
                         std::to_string(x.shape.size()));
  const int64_t total = x.numel();
  if (total == 0)
    return Status::success();
  const size_t es = dtypeSize(x.dtype);
  const std::vector<int64_t> xsFull = contiguousStrides(x.shape);
  // Output dims (sizes, x strides): drop 1s, merge dims that stay adjacent.
  std::vector<int64_t> sizes, xst;
  for (int64_t p : perm) {
    int64_t n = x.shape[size_t(p)], s = xsFull[size_t(p)];
    if (n == 1)
      continue;
    if (!sizes.empty() && xst.back() == s * n) {
      sizes.back() *= n;
      xst.back() = s;
      continue;
    }
    sizes.push_back(n);
    xst.push_back(s);
  }
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(out.data);
  if (sizes.size() <= 1 || xst.back() == 1) {
    // Contiguous rows: copy them whole.
    if (sizes.empty()) {
      std::memcpy(dst, src, es);
      return Status::success();
    }
    const int64_t len = sizes.back();
    std::vector<int64_t> outer(sizes.begin(), sizes.end() - 1),
        ox(xst.begin(), xst.end() - 1), oy = contiguousStrides(outer);
    for (int64_t &s : oy)
      s *= len;
    const int64_t rows = product(outer, 0, outer.size());
    parallelRange(rows, shouldParallelize(total) && rows > 1,
                  [&](int64_t b, int64_t e) {
                    iterate(outer, ox, oy, b, e, [&](int64_t xo, int64_t yo) {
                      std::memcpy(dst + size_t(yo) * es, src + size_t(xo) * es,
                                  size_t(len) * es);
                    });
                  });
    return Status::success();
  }
  // The x-contiguous dim p is not the last output dim q: copy 2-D tiles of
  // (p, q) so that both reads and writes stay in cache lines.
  const size_t r = sizes.size(), q = r - 1;
  size_t p = 0;
  for (size_t d = 0; d < r; ++d)
    if (xst[d] == 1)
      p = d;
  const std::vector<int64_t> ys = contiguousStrides(sizes);
  std::vector<int64_t> oSizes, oX, oY;
  for (size_t d = 0; d < r; ++d)
    if (d != p && d != q) {
      oSizes.push_back(sizes[d]);
      oX.push_back(xst[d]);
      oY.push_back(ys[d]);
    }
  constexpr int64_t kTile = 32;
  const int64_t np = sizes[p], nq = sizes[q], yp = ys[p], xq = xst[q];
  const int64_t pTiles = (np + kTile - 1) / kTile;
  const int64_t nOuter = product(oSizes, 0, oSizes.size());
  dispatchBytes(es, [&](auto tag) {
    using T = decltype(tag);
    const T *sx = x.as<const T>();
    T *sy = out.as<T>();
    parallelRange(
        nOuter * pTiles, shouldParallelize(total), [&](int64_t b, int64_t e) {
          for (int64_t it = b; it < e; ++it) {
            const int64_t o = it / pTiles, pt = it % pTiles;
            iterate(oSizes, oX, oY, o, o + 1, [&](int64_t xo, int64_t yo) {
              const int64_t i0 = pt * kTile, i1 = std::min(np, i0 + kTile);
              for (int64_t j0 = 0; j0 < nq; j0 += kTile) {
                const int64_t j1 = std::min(nq, j0 + kTile);
                for (int64_t i = i0; i < i1; ++i) {
                  const T *xr = sx + xo + i;
                  T *yr = sy + yo + i * yp;
                  for (int64_t j = j0; j < j1; ++j)
                    yr[j] = xr[j * xq];
                }
              }
            });
          }
        });
  });
  return Status::success();
}

Status slice(const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &strides, Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("slice", x.dtype, out.dtype);
  const size_t r = out.shape.size();
  if (x.shape.size() != r)
    return Status::error("slice: result rank " + std::to_string(r) +
                         " differs from input rank " +
                         std::to_string(x.shape.size()));
  const int64_t total = out.numel();
  if (total == 0)
    return Status::success();
  const size_t es = dtypeSize(x.dtype);
  const std::vector<int64_t> xs = contiguousStrides(x.shape);
  int64_t base = 0;
  std::vector<int64_t> step(r);
  for (size_t d = 0; d < r; ++d) {
    int64_t s0 = d < starts.size() ? starts[d] : 0;
    int64_t st = d < strides.size() ? strides[d] : 1;
    base += s0 * xs[d];
    step[d] = st * xs[d];
  }
  if (r == 0) {
    std::memcpy(out.data, x.data, es);
    return Status::success();
  }
  const int64_t len = out.shape[r - 1], innerStep = step[r - 1];
  std::vector<int64_t> outer(out.shape.begin(), out.shape.end() - 1),
      ox(step.begin(), step.end() - 1), oy = contiguousStrides(outer);
  for (int64_t &s : oy)
    s *= len;
  const int64_t rows = product(outer, 0, outer.size());
  dispatchBytes(es, [&](auto tag) {
    using T = decltype(tag);
    const T *sx = x.as<const T>() + base;
    T *sy = out.as<T>();
    parallelRange(rows, shouldParallelize(total) && rows > 1,
                  [&](int64_t b, int64_t e) {
                    iterate(outer, ox, oy, b, e, [&](int64_t xo, int64_t yo) {
                      const T *xr = sx + xo;
                      T *yr = sy + yo;
                      if (innerStep == 1) {
                        std::memcpy(yr, xr, size_t(len) * sizeof(T));
                      } else {
                        for (int64_t j = 0; j < len; ++j)
                          yr[j] = xr[j * innerStep];
                      }
                    });
                  });
  });
  return Status::success();
}

namespace {
/// Copies between `whole` and its `parts` laid side by side along `axis`:
/// into `whole` for concat, out of it for split.
void copyParts(void *whole, const std::vector<int64_t> &wholeShape,
               const std::vector<const Tensor *> &parts, int64_t axis,
               size_t elementSize, bool intoWhole) {
  const int64_t outer = product(wholeShape, 0, size_t(axis));
  std::vector<size_t> chunk, offset;
  size_t row = 0;
  for (const Tensor *t : parts) {
    chunk.push_back(size_t(product(t->shape, size_t(axis), t->shape.size())) *
                    elementSize);
    offset.push_back(row);
    row += chunk.back();
  }
  char *base = static_cast<char *>(whole);
  const int64_t n = int64_t(parts.size());
  parallelRange(outer * n, shouldParallelize(int64_t(outer * row / 8)),
                [&](int64_t b, int64_t e) {
                  for (int64_t it = b; it < e; ++it) {
                    const int64_t o = it / n;
                    const size_t i = size_t(it % n);
                    if (!chunk[i])
                      continue;
                    char *w = base + size_t(o) * row + offset[i];
                    char *p = static_cast<char *>(parts[i]->data) +
                              size_t(o) * chunk[i];
                    if (intoWhole)
                      std::memcpy(w, p, chunk[i]);
                    else
                      std::memcpy(p, w, chunk[i]);
                  }
                });
}
} // namespace

Status concat(const std::vector<const Tensor *> &inputs, int64_t axis,
              Tensor &out) {
  for (const Tensor *t : inputs)
    if (t->dtype != out.dtype)
      return mismatch("concat", t->dtype, out.dtype);
  copyParts(out.data, out.shape, inputs, axis, dtypeSize(out.dtype),
            /*intoWhole=*/true);
  return Status::success();
}

Status split(const Tensor &x, int64_t axis, const std::vector<Tensor *> &outs) {
  for (const Tensor *t : outs)
    if (t->dtype != x.dtype)
      return mismatch("split", x.dtype, t->dtype);
  std::vector<const Tensor *> parts(outs.begin(), outs.end());
  copyParts(x.data, x.shape, parts, axis, dtypeSize(x.dtype),
            /*intoWhole=*/false);
  return Status::success();
}

Status gather(const Tensor &x, const Tensor &indices, int64_t axis,
              Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("gather", x.dtype, out.dtype);
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32)
    return Status::error(std::string("gather: unsupported index type ") +
                         dtypeName(indices.dtype));
  if (size_t(axis) >= x.shape.size())
    return Status::error("gather: axis " + std::to_string(axis) +
                         " out of range for rank " +
                         std::to_string(x.shape.size()));
  const size_t es = dtypeSize(x.dtype);
  const int64_t n = x.shape[size_t(axis)];
  const int64_t outer = product(x.shape, 0, size_t(axis));
  const size_t inner =
      size_t(product(x.shape, size_t(axis) + 1, x.shape.size())) * es;
  const int64_t count = indices.numel();
  std::vector<int64_t> idx(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = indices.dtype == DType::I64 ? indices.as<const int64_t>()[i]
                                            : indices.as<const int32_t>()[i];
    if (v < -n || v >= n)
      return Status::error("gather: index " + std::to_string(v) +
                           " out of range for a dim of size " +
                           std::to_string(n));
    idx[size_t(i)] = v < 0 ? v + n : v;
  }
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(out.data);
  parallelRange(outer * count,
                shouldParallelize(int64_t(size_t(outer * count) * inner / 4)),
                [&](int64_t b, int64_t e) {
                  for (int64_t it = b; it < e; ++it) {
                    const int64_t o = it / count, t = it % count;
                    std::memcpy(
                        dst + size_t(it) * inner,
                        src + (size_t(o) * size_t(n) + size_t(idx[size_t(t)])) *
                                  inner,
                        inner);
                  }
                });
  return Status::success();
}

Status trilu(const Tensor &x, bool upper, int64_t k, Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("trilu", x.dtype, out.dtype);
  const size_t r = x.shape.size();
  const int64_t rows = r >= 2 ? x.shape[r - 2] : 1;
  const int64_t cols = r >= 1 ? x.shape[r - 1] : 1;
  const int64_t total = x.numel();
  if (total == 0)
    return Status::success();
  const int64_t mats = total / (rows * cols);
  const size_t es = dtypeSize(x.dtype);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(out.data);
  const bool inPlace = src == dst;
  parallelRange(
      mats * rows, shouldParallelize(total), [&](int64_t b, int64_t e) {
        for (int64_t it = b; it < e; ++it) {
          const int64_t i = it % rows;
          // Kept columns [lo, hi).
          int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
          int64_t hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
          char *yr = dst + size_t(it * cols) * es;
          const char *xr = src + size_t(it * cols) * es;
          std::memset(yr, 0, size_t(lo) * es);
          if (hi > lo && !inPlace)
            std::memcpy(yr + size_t(lo) * es, xr + size_t(lo) * es,
                        size_t(hi - lo) * es);
          if (hi < cols)
            std::memset(yr + size_t(std::max(hi, lo)) * es, 0,
                        size_t(cols - std::max(hi, lo)) * es);
        }
      });
  return Status::success();
}

} // namespace mp::rt::cpu
