//===- Linalg.cpp - GEMM-based CPU kernels --------------------------------===//
//
// matmul, linear, attention, einsum and the thread settings. A linear goes
// to oneDNN where Dnnl.h chooses it (planned at load: planLinear), and so
// do attention's per-block GEMMs (smallGemm, one thread each). Other GEMMs
// go to OpenBLAS, one single-threaded call per output tile, with the
// tiles spread over OpenMP threads: OpenBLAS is held at one thread for the
// duration (the pthread build would otherwise start its own threads from
// every OpenMP thread), which also makes results independent of the thread
// count.
//
//===----------------------------------------------------------------------===//
#include "Attention.h"
#include "Common.h"
#include "Dnnl.h"
#include "Gemm.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Support/Einsum.h"

#include "OpenMP.h"
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <type_traits>

namespace mp::rt::cpu {
namespace {

/// Integer GEMMs with wrapping arithmetic.
template <class T>
void batchedGemmInt(int64_t nb, int64_t m, int64_t n, int64_t k, const T *a,
                    const std::vector<int64_t> &aOff, const T *b,
                    const std::vector<int64_t> &bOff, T *c) {
  using U = std::make_unsigned_t<T>;
  const int64_t rows = nb * m;
  auto row = [&](int64_t r) {
    int64_t i = r / m, mi = r % m;
    const T *ar = a + aOff[size_t(i)] + mi * k;
    const T *bb = b + bOff[size_t(i)];
    T *cr = c + r * n;
    std::vector<U> acc(static_cast<size_t>(n), U(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      const U av = U(ar[kk]);
      const T *br = bb + kk * n;
      for (int64_t j = 0; j < n; ++j)
        acc[size_t(j)] = U(acc[size_t(j)] + U(av * U(br[j])));
    }
    for (int64_t j = 0; j < n; ++j)
      cr[j] = T(acc[size_t(j)]);
  };
  if (shouldParallelize(rows * n * std::max<int64_t>(k, 1))) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r)
      row(r);
  }
}

//===----------------------------------------------------------------------===//
// einsum
//===----------------------------------------------------------------------===//

template <class T> struct EView {
  const T *data = nullptr;
  std::string labels;
  std::vector<int64_t> sizes, strides;
};

template <class T>
EView<T> contiguousView(const T *data, std::string labels,
                        std::vector<int64_t> sizes) {
  EView<T> v;
  v.data = data;
  v.labels = std::move(labels);
  v.strides.resize(sizes.size());
  int64_t st = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    v.strides[d] = st;
    st *= sizes[d];
  }
  v.sizes = std::move(sizes);
  return v;
}

/// Calls f(offsets...) for every index of `sizes` in row-major order, with
/// per-operand strides; `strides` holds one vector per operand.
template <class F>
void forEachIndex(const std::vector<int64_t> &sizes,
                  const std::vector<std::vector<int64_t>> &strides, F &&f) {
  const size_t r = sizes.size(), n = strides.size();
  for (int64_t s : sizes)
    if (s == 0)
      return;
  std::vector<int64_t> idx(r, 0), off(n, 0);
  while (true) {
    f(off);
    size_t d = r;
    while (true) {
      if (d == 0)
        return;
      --d;
      ++idx[d];
      for (size_t i = 0; i < n; ++i)
        off[i] += strides[i][d];
      if (idx[d] < sizes[d])
        break;
      for (size_t i = 0; i < n; ++i)
        off[i] -= strides[i][d] * sizes[d];
      idx[d] = 0;
    }
  }
}

/// Copies `v` laid out as `order` (sizes `sizes`, broadcasting size-1 dims)
/// into the contiguous `dst`.
template <class T>
void packView(const EView<T> &v, const std::string &order,
              const std::vector<int64_t> &sizes, T *dst) {
  const size_t r = order.size();
  std::vector<int64_t> st(r, 0);
  for (size_t d = 0; d < r; ++d) {
    size_t pos = v.labels.find(order[d]);
    st[d] =
        (pos == std::string::npos || v.sizes[pos] == 1) ? 0 : v.strides[pos];
  }
  if (r == 0) {
    dst[0] = v.data[0];
    return;
  }
  const int64_t len = sizes[r - 1], inner = st[r - 1];
  std::vector<int64_t> outer(sizes.begin(), sizes.end() - 1),
      ost(st.begin(), st.end() - 1), dstStrides(r - 1);
  int64_t s = len;
  for (size_t d = r - 1; d-- > 0;) {
    dstStrides[d] = s;
    s *= sizes[d];
  }
  if (len == 0)
    return;
  forEachIndex(outer, {ost, dstStrides}, [&](const std::vector<int64_t> &off) {
    const T *src = v.data + off[0];
    T *out = dst + off[1];
    if (inner == 1) {
      std::copy(src, src + len, out);
    } else {
      for (int64_t j = 0; j < len; ++j)
        out[j] = src[j * inner];
    }
  });
}

template <class T>
bool isDense(const EView<T> &v, const std::string &order,
             const std::vector<int64_t> &sizes) {
  if (v.labels != order || v.sizes != sizes)
    return false;
  int64_t st = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1 && v.strides[d] != st)
      return false;
    st *= sizes[d];
  }
  return true;
}

template <class T> struct EinsumState {
  std::deque<std::vector<T>> storage;

  T *alloc(int64_t n) {
    storage.emplace_back(size_t(std::max<int64_t>(n, 1)), T(0));
    return storage.back().data();
  }

  /// Sums `v` over every label not in `keep` (keeping v's label order).
  EView<T> sumOut(const EView<T> &v, const std::string &keep) {
    std::string labels;
    std::vector<int64_t> sizes;
    for (size_t d = 0; d < v.labels.size(); ++d)
      if (keep.find(v.labels[d]) != std::string::npos) {
        labels += v.labels[d];
        sizes.push_back(v.sizes[d]);
      }
    if (labels.size() == v.labels.size())
      return v;
    T *res = alloc(product(sizes));
    EView<T> out = contiguousView<T>(res, labels, sizes);
    std::vector<int64_t> os(v.labels.size(), 0);
    for (size_t d = 0; d < v.labels.size(); ++d) {
      size_t pos = labels.find(v.labels[d]);
      if (pos != std::string::npos)
        os[d] = out.strides[pos];
    }
    forEachIndex(v.sizes, {v.strides, os},
                 [&](const std::vector<int64_t> &off) {
                   res[off[1]] += v.data[off[0]];
                 });
    return out;
  }

  /// Contracts a and b, keeping the labels in `keep`.
  EView<T> contract(EView<T> a, EView<T> b, const std::string &keep) {
    auto has = [](const std::string &s, char c) {
      return s.find(c) != std::string::npos;
    };
    std::string aKeep, bKeep;
    for (char c : a.labels)
      if (has(b.labels, c) || has(keep, c))
        aKeep += c;
    for (char c : b.labels)
      if (has(a.labels, c) || has(keep, c))
        bKeep += c;
    a = sumOut(a, aKeep);
    b = sumOut(b, bKeep);
    std::string bl, kl, ml, nl;
    for (char c : a.labels) {
      if (has(b.labels, c))
        (has(keep, c) ? bl : kl) += c;
      else
        ml += c;
    }
    for (char c : b.labels)
      if (!has(a.labels, c))
        nl += c;
    auto sizeOf = [&](char c) {
      size_t pa = a.labels.find(c), pb = b.labels.find(c);
      int64_t sa = pa == std::string::npos ? 1 : a.sizes[pa];
      int64_t sb = pb == std::string::npos ? 1 : b.sizes[pb];
      return sa == 1 ? sb : sa;
    };
    auto sizesOf = [&](const std::string &ls) {
      std::vector<int64_t> s;
      for (char c : ls)
        s.push_back(sizeOf(c));
      return s;
    };
    const int64_t nb = product(sizesOf(bl)), m = product(sizesOf(ml)),
                  k = product(sizesOf(kl)), n = product(sizesOf(nl));
    const std::string orderA = bl + ml + kl, orderB = bl + kl + nl,
                      orderC = bl + ml + nl;
    const std::vector<int64_t> sizesA = sizesOf(orderA),
                               sizesB = sizesOf(orderB);
    // Operands already laid out as [batch, m, k] / [batch, k, n], or with
    // the two inner groups swapped (a transposed GEMM), are used in place.
    const T *pa = a.data, *pb = b.data;
    bool ta = false, tb = false;
    const std::string orderAT = bl + kl + ml, orderBT = bl + nl + kl;
    if (!isDense(a, orderA, sizesA)) {
      if (isDense(a, orderAT, sizesOf(orderAT))) {
        ta = true;
      } else {
        T *buf = alloc(nb * m * k);
        packView(a, orderA, sizesA, buf);
        pa = buf;
      }
    }
    if (!isDense(b, orderB, sizesB)) {
      if (isDense(b, orderBT, sizesOf(orderBT))) {
        tb = true;
      } else {
        T *buf = alloc(nb * k * n);
        packView(b, orderB, sizesB, buf);
        pb = buf;
      }
    }
    T *pc = alloc(nb * m * n);
    std::vector<int64_t> aOff(static_cast<size_t>(nb)),
        bOff(static_cast<size_t>(nb));
    for (int64_t i = 0; i < nb; ++i) {
      aOff[size_t(i)] = i * m * k;
      bOff[size_t(i)] = i * k * n;
    }
    batchedGemm(nb, m, n, k, pa, aOff, pb, bOff, pc, ta, tb);
    return contiguousView<T>(pc, orderC, sizesOf(orderC));
  }
};

template <class T>
Status einsumTyped(const std::string &equation,
                   const std::vector<const Tensor *> &inputs, Tensor &out) {
  if (inputs.empty())
    return Status::error("einsum: no operands");
  std::vector<int64_t> ranks;
  for (const Tensor *t : inputs)
    ranks.push_back(int64_t(t->shape.size()));
  EinsumSpec spec;
  std::string error;
  if (!parseEinsum(equation, ranks, spec, error))
    return Status::error("einsum: " + error);
  if (spec.output.size() != out.shape.size())
    return Status::error(
        "einsum: result has rank " + std::to_string(out.shape.size()) +
        " but '" + equation + "' gives " + std::to_string(spec.output.size()));
  EinsumState<T> state;
  std::vector<EView<T>> ops;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &t = *inputs[i];
    EView<T> c = contiguousView<T>(t.as<const T>(), "", t.shape);
    // Repeated labels take the diagonal: one dim with the summed stride.
    EView<T> v;
    v.data = c.data;
    const std::string &term = spec.inputs[i];
    for (size_t d = 0; d < term.size(); ++d) {
      size_t pos = v.labels.find(term[d]);
      if (pos == std::string::npos) {
        v.labels += term[d];
        v.sizes.push_back(t.shape[d]);
        v.strides.push_back(c.strides[d]);
      } else {
        v.strides[pos] += c.strides[d];
        v.sizes[pos] = std::min(v.sizes[pos], t.shape[d]);
      }
    }
    ops.push_back(std::move(v));
  }
  // Labels needed by the output or by operands other than `self`.
  auto neededBy = [&](size_t from, size_t self) {
    std::string keep = spec.output;
    for (size_t i = from; i < ops.size(); ++i)
      if (i != self)
        keep += ops[i].labels;
    return keep;
  };
  for (size_t i = 0; i < ops.size(); ++i)
    ops[i] = state.sumOut(ops[i], neededBy(0, i));
  while (ops.size() > 1) {
    EView<T> r = state.contract(ops[0], ops[1], neededBy(2, ops.size()));
    ops.erase(ops.begin(), ops.begin() + 2);
    ops.insert(ops.begin(), std::move(r));
  }
  EView<T> result = state.sumOut(ops[0], spec.output);
  packView(result, spec.output, out.shape, out.as<T>());
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public kernels
//===----------------------------------------------------------------------===//

Status matmul(const Tensor &a, const Tensor &b, Tensor &out) {
  if (a.dtype != b.dtype)
    return mismatch("matmul", a.dtype, b.dtype);
  if (out.dtype != a.dtype)
    return mismatch("matmul", a.dtype, out.dtype);
  if (a.shape.empty() || b.shape.empty())
    return Status::error("matmul: operands must have rank >= 1");
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t m = ra == 1 ? 1 : a.shape[ra - 2];
  const int64_t k = a.shape[ra - 1];
  const int64_t n = rb == 1 ? 1 : b.shape[rb - 1];
  std::vector<int64_t> aBatch(a.shape.begin(),
                              a.shape.end() - (ra == 1 ? 1 : 2));
  std::vector<int64_t> bBatch(b.shape.begin(),
                              b.shape.end() - (rb == 1 ? 1 : 2));
  const size_t rbat = std::max(aBatch.size(), bBatch.size());
  std::vector<int64_t> batch(rbat, 1), aSt(rbat, 0), bSt(rbat, 0);
  {
    int64_t sa = m * k, sb = k * n;
    for (size_t d = rbat; d-- > 0;) {
      size_t da = d + aBatch.size(), db = d + bBatch.size();
      int64_t na = da >= rbat ? aBatch[da - rbat] : 1;
      int64_t nbv = db >= rbat ? bBatch[db - rbat] : 1;
      batch[d] = na == 1 ? nbv : na;
      aSt[d] = na == 1 ? 0 : sa;
      bSt[d] = nbv == 1 ? 0 : sb;
      sa *= na;
      sb *= nbv;
    }
  }
  const int64_t nb = product(batch);
  if (nb * m * n == 0)
    return Status::success();
  std::vector<int64_t> aOff, bOff;
  aOff.reserve(size_t(nb));
  bOff.reserve(size_t(nb));
  forEachIndex(batch, {aSt, bSt}, [&](const std::vector<int64_t> &off) {
    aOff.push_back(off[0]);
    bOff.push_back(off[1]);
  });
  // b shared by every batch and a not broadcast: one GEMM over nb * m rows.
  const bool fold = product(bBatch) == 1 && product(aBatch) == nb;
  switch (a.dtype) {
  case DType::F32:
    if (fold)
      batchedGemm<float>(1, nb * m, n, k, a.as<const float>(), {0},
                         b.as<const float>(), {0}, out.as<float>());
    else
      batchedGemm<float>(nb, m, n, k, a.as<const float>(), aOff,
                         b.as<const float>(), bOff, out.as<float>());
    return Status::success();
  case DType::F64:
    if (fold)
      batchedGemm<double>(1, nb * m, n, k, a.as<const double>(), {0},
                          b.as<const double>(), {0}, out.as<double>());
    else
      batchedGemm<double>(nb, m, n, k, a.as<const double>(), aOff,
                          b.as<const double>(), bOff, out.as<double>());
    return Status::success();
  case DType::I64:
    batchedGemmInt(nb, m, n, k, a.as<const int64_t>(), aOff,
                   b.as<const int64_t>(), bOff, out.as<int64_t>());
    return Status::success();
  case DType::I32:
    batchedGemmInt(nb, m, n, k, a.as<const int32_t>(), aOff,
                   b.as<const int32_t>(), bOff, out.as<int32_t>());
    return Status::success();
  case DType::I8:
    batchedGemmInt(nb, m, n, k, a.as<const int8_t>(), aOff,
                   b.as<const int8_t>(), bOff, out.as<int8_t>());
    return Status::success();
  default: return typeError("matmul", a.dtype);
  }
}

Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out) {
  if (x.dtype != DType::F32)
    return typeError("linear", x.dtype);
  if (weight.dtype != DType::F32)
    return typeError("linear (weight)", weight.dtype);
  if (bias && bias->dtype != DType::F32)
    return typeError("linear (bias)", bias->dtype);
  if (out.dtype != DType::F32)
    return typeError("linear (result)", out.dtype);
  if (x.shape.empty() || weight.shape.size() != 2)
    return Status::error("linear: expected x of rank >= 1 and a rank-2 weight");
  const auto [m, n, k] = linearDims(x.shape, weight.shape, transposeWeight);
  if (m == 0 || n == 0)
    return Status::success();
  float *y = out.as<float>();
  if (k == 0)
    std::fill(y, y + m * n, 0.0f);
  else // (a dense [m, k] x: one GEMM over all its rows)
    batchedGemm<float>(1, m, n, k, x.as<const float>(), {0},
                       weight.as<const float>(), {0}, y, false,
                       transposeWeight);
  if (bias) {
    const float *bb = bias->as<const float>();
    auto rows = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float *yr = y + r * n;
        for (int64_t j = 0; j < n; ++j)
          yr[j] += bb[j];
      }
    };
    if (shouldParallelize(m * n) && m > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < m; ++r)
        rows(r, r + 1);
    } else {
      rows(0, m);
    }
  }
  return Status::success();
}

PlannedKernel planLinear(const Tensor &x, const Tensor &weight,
                         const Tensor *bias, bool transposeWeight,
                         const Tensor &out, bool packWeight,
                         contract::LinearActivation activation) {
  const DType type = x.dtype;
  if ((type != DType::F32 && type != DType::BF16) || weight.dtype != type ||
      out.dtype != type || (bias && bias->dtype != type) || x.shape.empty() ||
      weight.shape.size() != 2)
    return {};
  const auto [m, n, k] = linearDims(x.shape, weight.shape, transposeWeight);
  if (m == 0 || n == 0 || k == 0 || gemmLibrary() != GemmLibrary::OneDNN)
    return {};
  return planGemm(
      x.data, weight.data, bias ? bias->data : nullptr, out.data,
      {m, n, k, false, transposeWeight, activation, type == DType::BF16},
      packWeight);
}

Status prepareCpu() { return checkGemmRequest(); }

std::string describeCpu() { return "GEMMs: " + describeGemmLibrary(); }

Status attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, float scale, bool causal, Tensor &out) {
  for (const Tensor *t : {&q, &k, &v, static_cast<const Tensor *>(&out)})
    if (t->dtype != DType::F32)
      return typeError("attention", t->dtype);
  if (mask && mask->dtype != DType::F32)
    return typeError("attention (mask)", mask->dtype);
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4 ||
      (mask && mask->shape.size() > 4))
    return Status::error("attention: expected q, k, v of rank 4");
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const int64_t Hkv = k.shape[1], Sk = k.shape[2], Dv = v.shape[3];
  if (Hkv <= 0 || H % Hkv != 0)
    return Status::error("attention: " + std::to_string(H) +
                         " query heads do not group into " +
                         std::to_string(Hkv) + " key/value heads");
  const int64_t group = H / Hkv;
  int64_t ms[4];
  maskStrides(mask, ms);
  const float *pq = q.as<const float>(), *pk = k.as<const float>(),
              *pv = v.as<const float>();
  const float *pm = mask ? mask->as<const float>() : nullptr;
  float *po = out.as<float>();
  // Items are (batch, head, block of query rows); the block size is fixed so
  // that results do not depend on the thread count.
  constexpr int64_t kRows = 64;
  const int64_t nblk = (Sq + kRows - 1) / kRows;
  const int64_t items = B * H * nblk;
  const int64_t offset = Sk - Sq;
  if (items == 0 || Dv == 0)
    return Status::success();

  auto item = [&](int64_t it, float *S) {
    const int64_t bh = it / nblk, blk = it % nblk;
    const int64_t b = bh / H, h = bh % H, hk = h / group;
    const int64_t i0 = blk * kRows, rows = std::min(kRows, Sq - i0);
    const float *qb = pq + (bh * Sq + i0) * D;
    const float *kb = pk + (b * Hkv + hk) * Sk * D;
    const float *vb = pv + (b * Hkv + hk) * Sk * Dv;
    float *ob = po + (bh * Sq + i0) * Dv;
    int64_t keys = Sk;
    if (causal)
      keys = std::clamp<int64_t>(i0 + rows + offset, 0, Sk);
    if (keys == 0) {
      std::fill(ob, ob + rows * Dv, 0.0f);
      return;
    }
    attentionProbabilities(qb, kb, rows, keys, D, scale, i0, offset, causal,
                           pm ? pm + b * ms[0] + h * ms[1] : nullptr, ms[2],
                           ms[3], S);
    attentionGemm(
        {rows, Dv, keys, 1.0f, S, keys, false, vb, Dv, false, ob, Dv});
  };

  const double work = double(B * H) * double(Sq) * double(Sk) * double(D + Dv);
  if (items > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() &&
      work >= double(1 << 18)) {
    BlasSerialScope serial;
#pragma omp parallel
    {
      std::vector<float> S(
          static_cast<size_t>(kRows * std::max<int64_t>(Sk, 1)));
#pragma omp for schedule(dynamic)
      for (int64_t it = 0; it < items; ++it)
        item(it, S.data());
    }
  } else {
    std::vector<float> S(static_cast<size_t>(kRows * std::max<int64_t>(Sk, 1)));
    for (int64_t it = 0; it < items; ++it)
      item(it, S.data());
  }
  return Status::success();
}

Status einsum(const std::string &equation,
              const std::vector<const Tensor *> &inputs, Tensor &out) {
  for (const Tensor *t : inputs)
    if (t->dtype != out.dtype)
      return mismatch("einsum", t->dtype, out.dtype);
  switch (out.dtype) {
  case DType::F32: return einsumTyped<float>(equation, inputs, out);
  case DType::F64: return einsumTyped<double>(equation, inputs, out);
  default: return typeError("einsum", out.dtype);
  }
}

void setNumThreads(int threads) {
  // oneDNN plans a primitive for omp_get_max_threads() threads and writes
  // only the shares of the threads a run gets: a team smaller than that
  // (OMP_DYNAMIC, OMP_THREAD_LIMIT, OMP_MAX_ACTIVE_LEVELS=0) would leave
  // part of its output unwritten. So teams are not shrunk, and the count is
  // one every team can have.
  omp_set_dynamic(0);
  int count = threads > 0 ? threads : omp_get_max_threads();
  count = std::min(count, omp_get_thread_limit());
  if (omp_get_max_active_levels() < 1)
    count = 1;
  omp_set_num_threads(count);
  openblas_set_num_threads(count);
}

int getNumThreads() { return omp_get_max_threads(); }

} // namespace mp::rt::cpu
