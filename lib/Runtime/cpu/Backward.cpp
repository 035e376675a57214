//===- Backward.cpp - CPU kernels of the gradient ops ---------------------===//
//
// The backward of a train step: linear weight gradients and attention on
// OpenBLAS GEMMs, norms, GELU, embedding, cross-entropy and slice gradients
// as loops. Like the forward kernels, results do not depend on the thread
// count: sums over rows go through fixed-size blocks added in order.
//
//===----------------------------------------------------------------------===//
#include "Attention.h"
#include "Common.h"
#include "Dnnl.h"
#include "FastMath.h"
#include "Gemm.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Support/DropoutMask.h"

#include "OpenMP.h"

#include <cmath>
#include <limits>

namespace mp::rt::cpu {
namespace {

/// Rows per block of a sum over rows: blocks are summed in order, so the
/// result does not depend on how blocks were spread over threads.
constexpr int64_t kRowBlock = 64;

/// For each block of rows, `rowFn(r, partial)` adds row r's contribution to
/// the block's partial sums (n values); the partials are then added in
/// block order into `total` (n values, overwritten).
template <class RowFn>
void sumOverRows(int64_t rows, int64_t n, float *total, RowFn &&rowFn) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  std::vector<double> partial(static_cast<size_t>(blocks * n), 0.0);
  parallelRange(blocks, shouldParallelize(rows * n),
                [&](int64_t b0, int64_t b1) {
                  for (int64_t blk = b0; blk < b1; ++blk) {
                    double *p = partial.data() + blk * n;
                    int64_t end = std::min(rows, (blk + 1) * kRowBlock);
                    for (int64_t r = blk * kRowBlock; r < end; ++r)
                      rowFn(r, p);
                  }
                });
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t blk = 0; blk < blocks; ++blk)
      s += partial[size_t(blk * n + j)];
    total[j] = static_cast<float>(s);
  }
}

int64_t indexAt(const Tensor &t, int64_t i) {
  return t.dtype == DType::I64 ? t.as<const int64_t>()[i]
                               : t.as<const int32_t>()[i];
}

} // namespace

Status linearWeightGrad(const Tensor &x, const Tensor &dy, bool transposeWeight,
                        Tensor &dw) {
  if (Status s = expectF32("linearWeightGrad", {&x, &dy, &dw}); !s)
    return s;
  const auto [m, n, k] = linearWeightGradDims(x.shape, dy.shape);
  // dW [K, N] = xᵀ · dy, or [N, K] = dyᵀ · x: A is stored transposed.
  if (transposeWeight)
    batchedGemm<float>(1, n, k, m, dy.as<const float>(), {0},
                       x.as<const float>(), {0}, dw.as<float>(), true, false);
  else
    batchedGemm<float>(1, k, n, m, x.as<const float>(), {0},
                       dy.as<const float>(), {0}, dw.as<float>(), true, false);
  return Status::success();
}

PlannedKernel planLinearWeightGrad(const Tensor &x, const Tensor &dy,
                                   bool transposeWeight, const Tensor &dw) {
  for (const Tensor *t : {&x, &dy, &dw})
    if (t->dtype != DType::F32 || t->shape.empty())
      return {};
  const auto [m, n, k] = linearWeightGradDims(x.shape, dy.shape);
  if (m == 0 || n == 0 || k == 0 || gemmLibrary() != GemmLibrary::OneDNN)
    return {};
  // As linearWeightGrad: xᵀ · dy, or dyᵀ · x.
  if (transposeWeight)
    return planGemm(dy.as<const float>(), x.as<const float>(), nullptr,
                    dw.as<float>(), {n, k, m, true, false}, false);
  return planGemm(x.as<const float>(), dy.as<const float>(), nullptr,
                  dw.as<float>(), {k, n, m, true, false}, false);
}

Status layerNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                     int64_t axis, float epsilon, Tensor &dx, Tensor &dscale) {
  if (Status s = expectF32("layerNormGrad", {&x, &scale, &dy, &dx, &dscale});
      !s)
    return s;
  const int64_t rows = product(x.shape, 0, size_t(axis));
  const int64_t n = product(x.shape, size_t(axis), x.shape.size());
  const float *px = x.as<const float>(), *pw = scale.as<const float>(),
              *pg = dy.as<const float>();
  float *pdx = dx.as<float>();
  sumOverRows(rows, n, dscale.as<float>(), [&](int64_t r, double *dw) {
    const float *xr = px + r * n, *gr = pg + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += xr[j];
    mean /= double(n);
    for (int64_t j = 0; j < n; ++j)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= double(n);
    const double rstd = 1.0 / std::sqrt(var + double(epsilon));
    // dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)), g = dy · scale.
    double meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xhat = (xr[j] - mean) * rstd, g = double(gr[j]) * pw[j];
      meanG += g;
      meanGX += g * xhat;
      dw[j] += double(gr[j]) * xhat;
    }
    meanG /= double(n);
    meanGX /= double(n);
    float *dxr = pdx + r * n;
    for (int64_t j = 0; j < n; ++j) {
      const double xhat = (xr[j] - mean) * rstd, g = double(gr[j]) * pw[j];
      dxr[j] = static_cast<float>(rstd * (g - meanG - xhat * meanGX));
    }
  });
  return Status::success();
}

Status rmsNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                   float epsilon, Tensor &dx, Tensor &dscale) {
  if (Status s = expectF32("rmsNormGrad", {&x, &scale, &dy, &dx, &dscale}); !s)
    return s;
  const int64_t n = x.shape.empty() ? 1 : x.shape.back();
  const int64_t rows = n ? x.numel() / n : 0;
  const float *px = x.as<const float>(), *pw = scale.as<const float>(),
              *pg = dy.as<const float>();
  float *pdx = dx.as<float>();
  sumOverRows(rows, n, dscale.as<float>(), [&](int64_t r, double *dw) {
    const float *xr = px + r * n, *gr = pg + r * n;
    double ms = 0;
    for (int64_t j = 0; j < n; ++j)
      ms += double(xr[j]) * xr[j];
    const double rstd = 1.0 / std::sqrt(ms / double(n) + double(epsilon));
    // dx = rstd · (g − x̂ · mean(g · x̂)), x̂ = x · rstd, g = dy · scale.
    double meanGX = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double xhat = xr[j] * rstd;
      meanGX += double(gr[j]) * pw[j] * xhat;
      dw[j] += double(gr[j]) * xhat;
    }
    meanGX /= double(n);
    float *dxr = pdx + r * n;
    for (int64_t j = 0; j < n; ++j)
      dxr[j] = static_cast<float>(
          rstd * (double(gr[j]) * pw[j] - xr[j] * rstd * meanGX));
  });
  return Status::success();
}

Status geluGrad(const Tensor &x, const Tensor &dy, bool tanhForm, Tensor &dx) {
  if (Status s = expectF32("geluGrad", {&x, &dy, &dx}); !s)
    return s;
  const float *px = x.as<const float>(), *pg = dy.as<const float>();
  float *pdx = dx.as<float>();
  const int64_t n = x.numel();
  // Float math that vectorizes (FastMath.h): within 2e-6 of the double
  // formulas, and 6 times faster than glibc's double erf and exp (a
  // GPT-2-small train step's 12 calls: 98 -> 16.5 ms on 2 threads).
  parallelRange(n, shouldParallelize(n), [&](int64_t b, int64_t e) {
    if (tanhForm)
      for (int64_t i = b; i < e; ++i)
        pdx[i] = pg[i] * fastmath::geluTanhGrad(px[i]);
    else
      for (int64_t i = b; i < e; ++i)
        pdx[i] = pg[i] * fastmath::geluErfGrad(px[i]);
  });
  return Status::success();
}

Status attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *mask, const Tensor &out, const Tensor &dout,
                     float scale, bool causal, Tensor &dq, Tensor &dk,
                     Tensor &dv) {
  if (Status s = expectF32("attentionGrad",
                           {&q, &k, &v, mask, &out, &dout, &dq, &dk, &dv});
      !s)
    return s;
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], Sk = k.shape[2], Dv = v.shape[3];
  if (Hkv <= 0 || H % Hkv != 0)
    return Status::error("attentionGrad: " + std::to_string(H) +
                         " query heads do not group into " +
                         std::to_string(Hkv) + " key/value heads");
  const int64_t group = H / Hkv, offset = Sk - Sq;
  int64_t ms[4];
  maskStrides(mask, ms);
  const float *pq = q.as<const float>(), *pk = k.as<const float>(),
              *pv = v.as<const float>(), *po = out.as<const float>(),
              *pdo = dout.as<const float>();
  const float *pm = mask ? mask->as<const float>() : nullptr;
  float *pdq = dq.as<float>(), *pdk = dk.as<float>(), *pdv = dv.as<float>();
  std::fill(pdk, pdk + dk.numel(), 0.0f);
  std::fill(pdv, pdv + dv.numel(), 0.0f);
  std::fill(pdq, pdq + dq.numel(), 0.0f);
  constexpr int64_t kRows = 64;
  const int64_t blocks = (Sq + kRows - 1) / kRows;
  const int64_t width = std::max<int64_t>(Sk, 1);

  // One item per (batch, kv head): it owns that head's dk and dv, and the
  // dq rows of the query heads that share it.
  auto item = [&](int64_t it, float *P, float *dP) {
    const int64_t b = it / Hkv, hk = it % Hkv;
    const float *kb = pk + (b * Hkv + hk) * Sk * D;
    const float *vb = pv + (b * Hkv + hk) * Sk * Dv;
    float *dkb = pdk + (b * Hkv + hk) * Sk * D;
    float *dvb = pdv + (b * Hkv + hk) * Sk * Dv;
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const int64_t bh = b * H + h;
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t i0 = blk * kRows, rows = std::min(kRows, Sq - i0);
        const int64_t keys =
            causal ? std::clamp<int64_t>(i0 + rows + offset, 0, Sk) : Sk;
        if (keys == 0)
          continue;
        const float *qb = pq + (bh * Sq + i0) * D;
        const float *ob = po + (bh * Sq + i0) * Dv;
        const float *dob = pdo + (bh * Sq + i0) * Dv;
        float *dqb = pdq + (bh * Sq + i0) * D;
        // P: the forward's probabilities, recomputed.
        attentionProbabilities(qb, kb, rows, keys, D, scale, i0, offset, causal,
                               pm ? pm + b * ms[0] + h * ms[1] : nullptr, ms[2],
                               ms[3], P);
        // dV += Pᵀ·dO; dP = dO·Vᵀ.
        attentionGemm({keys, Dv, rows, 1.0f, P, keys, true, dob, Dv, false, dvb,
                       Dv, true});
        attentionGemm(
            {rows, keys, Dv, 1.0f, dob, Dv, false, vb, Dv, true, dP, keys});
        // dS = P ∘ (dP − Σ dO·O), in place in dP.
        for (int64_t r = 0; r < rows; ++r) {
          double dot = 0;
          for (int64_t d = 0; d < Dv; ++d)
            dot += double(dob[r * Dv + d]) * ob[r * Dv + d];
          float *ds = dP + r * keys;
          const float *p = P + r * keys;
          for (int64_t j = 0; j < keys; ++j)
            ds[j] = p[j] * (ds[j] - static_cast<float>(dot));
        }
        // dQ = scale · dS·K; dK += scale · dSᵀ·Q.
        attentionGemm(
            {rows, D, keys, scale, dP, keys, false, kb, D, false, dqb, D});
        attentionGemm(
            {keys, D, rows, scale, dP, keys, true, qb, D, false, dkb, D, true});
      }
    }
  };

  const int64_t items = B * Hkv;
  const double work = double(B * H) * double(Sq) * double(Sk) * double(D + Dv);
  const size_t scratch = static_cast<size_t>(kRows * width);
  if (items > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() &&
      work >= double(1 << 18)) {
    BlasSerialScope serial;
#pragma omp parallel
    {
      std::vector<float> P(scratch), dP(scratch);
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < items; ++it)
        item(it, P.data(), dP.data());
    }
  } else {
    std::vector<float> P(scratch), dP(scratch);
    for (int64_t it = 0; it < items; ++it)
      item(it, P.data(), dP.data());
  }
  return Status::success();
}

Status embeddingGrad(const Tensor &ids, const Tensor &dy, int64_t offset,
                     int64_t vocab, Tensor &dtable) {
  if (Status s = expectF32("embeddingGrad", {&dy, &dtable}); !s)
    return s;
  if (ids.dtype != DType::I64 && ids.dtype != DType::I32)
    return typeError("embeddingGrad (indices)", ids.dtype);
  const int64_t rows = dtable.shape[0], h = dtable.shape[1];
  const int64_t positions = ids.numel();
  const float *pg = dy.as<const float>();
  float *pt = dtable.as<float>();
  std::fill(pt, pt + dtable.numel(), 0.0f);
  // Threads take column ranges, so each row sums its positions in order.
  parallelRange(h, shouldParallelize(positions * h),
                [&](int64_t c0, int64_t c1) {
                  for (int64_t p = 0; p < positions; ++p) {
                    int64_t id = indexAt(ids, p);
                    if (id < 0)
                      id += vocab;
                    const int64_t local = id - offset;
                    if (local < 0 || local >= rows)
                      continue;
                    const float *g = pg + p * h;
                    float *t = pt + local * h;
                    for (int64_t c = c0; c < c1; ++c)
                      t[c] += g[c];
                  }
                });
  return Status::success();
}

Status crossEntropyGrad(const Tensor &logits, const Tensor &targets,
                        const Tensor &dloss, Tensor &dlogits) {
  if (Status s = expectF32("crossEntropyGrad", {&logits, &dloss, &dlogits}); !s)
    return s;
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return typeError("crossEntropyGrad (targets)", targets.dtype);
  const int64_t v = logits.shape.empty() ? 1 : logits.shape.back();
  const int64_t positions = targets.numel();
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t t = indexAt(targets, p);
    if (t == kIgnoreIndex)
      continue;
    if (t < 0 || t >= v)
      return Status::error("crossEntropyGrad: target " + std::to_string(t) +
                           " at position " + std::to_string(p) +
                           " is out of range [0, " + std::to_string(v) + ")");
    ++counted;
  }
  const float weight =
      counted ? dloss.as<const float>()[0] / static_cast<float>(counted) : 0.0f;
  const float *x = logits.as<const float>();
  float *g = dlogits.as<float>();
  parallelRange(
      positions, shouldParallelize(positions * v), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const int64_t t = indexAt(targets, p);
          float *row = g + p * v;
          if (t == kIgnoreIndex) {
            std::fill(row, row + v, 0.0f);
            continue;
          }
          const float m = detail::maxOf(x + p * v, v);
          const float inv = weight / detail::expSubSum(x + p * v, m, row, v);
          for (int64_t j = 0; j < v; ++j)
            row[j] *= inv;
          row[t] -= weight;
        }
      });
  return Status::success();
}

Status sliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &strides, Tensor &dx) {
  if (dy.dtype != dx.dtype)
    return mismatch("sliceGrad", dy.dtype, dx.dtype);
  const size_t es = dtypeSize(dx.dtype), rank = dx.shape.size();
  std::memset(dx.data, 0, dx.bytes());
  const int64_t n = dy.numel();
  if (n == 0)
    return Status::success();
  std::vector<int64_t> xStride(rank, 1);
  for (size_t d = rank; d-- > 1;)
    xStride[d - 1] = xStride[d] * dx.shape[d];
  // Walk dy in order; its element i lands at Σ (start + idx·stride)·xStride.
  std::vector<int64_t> idx(rank, 0);
  const auto *src = static_cast<const uint8_t *>(dy.data);
  auto *dst = static_cast<uint8_t *>(dx.data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at += (starts[d] + idx[d] * strides[d]) * xStride[d];
    std::memcpy(dst + at * es, src + i * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < dy.shape[d])
        break;
      idx[d] = 0;
    }
  }
  return Status::success();
}

namespace {

template <class T>
void dropoutTyped(const T *x, T *out, int64_t n, float ratio, uint64_t key) {
  const T scale = T(1) / (T(1) - T(ratio));
  const uint64_t threshold = mp::dropout::threshold(ratio);
  parallelRange(n, shouldParallelize(n * 4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = mp::dropout::keep(key, static_cast<uint64_t>(i), threshold)
                   ? x[i] * scale
                   : T(0);
  });
}

} // namespace

uint64_t dropoutKey(uint64_t seed, uint64_t step, uint64_t id, uint64_t rank) {
  using mp::dropout::mix;
  return mix(mix(mix(mix(seed) ^ step) ^ id) ^ rank);
}

Status dropout(const Tensor &x, float ratio, uint64_t key, Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("dropout", x.dtype, out.dtype);
  switch (x.dtype) {
  case DType::F32:
    dropoutTyped(x.as<const float>(), out.as<float>(), x.numel(), ratio, key);
    return Status::success();
  case DType::F64:
    dropoutTyped(x.as<const double>(), out.as<double>(), x.numel(), ratio, key);
    return Status::success();
  default: return typeError("dropout", x.dtype);
  }
}

} // namespace mp::rt::cpu
