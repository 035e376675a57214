//===- Elementwise.cu - elementwise CUDA kernels
//----------------------------===//
//
// Binary ops with numpy broadcasting, compare, where, unary ops, casts and
// trilu: one thread per output element, in Compute<T>.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace mp::rt::cuda {

namespace {

template <typename T>
__global__ void binaryKernel(int kind, const T *a, const T *b, T *o, int64_t n,
                             Dims dims, Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Compute<T> x = toC(a[offsetOf(i, dims, sa)]),
               y = toC(b[offsetOf(i, dims, sb)]), r = 0;
    switch (kind) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = m_pow(x, y); break;
    }
    o[i] = fromC<T>(r);
  }
}

/// Integer binary ops with the CPU kernels' semantics (IntegerArithmetic.h).
template <typename T>
__global__ void integerBinaryKernel(int kind, const T *a, const T *b, T *o,
                                    int64_t n, Dims dims, Strides sa,
                                    Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    T x = a[offsetOf(i, dims, sa)], y = b[offsetOf(i, dims, sb)], r = 0;
    switch (kind) {
    case 0: r = wrapAdd(x, y); break;
    case 1: r = wrapSub(x, y); break;
    case 2: r = wrapMul(x, y); break;
    case 3: r = intDiv(x, y); break;
    case 4: r = intPow(x, y); break;
    }
    o[i] = r;
  }
}

/// Compares in Compute<T>: exactly for 64-bit integers, bools as 0 or 1.
template <typename T>
__global__ void compareKernel(int kind, const T *a, const T *b, uint8_t *o,
                              int64_t n, Dims dims, Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Compute<T> x = toC(a[offsetOf(i, dims, sa)]),
               y = toC(b[offsetOf(i, dims, sb)]);
    bool r = false;
    switch (kind) {
    case 0: r = x == y; break;
    case 1: r = x != y; break;
    case 2: r = x < y; break;
    case 3: r = x <= y; break;
    case 4: r = x > y; break;
    case 5: r = x >= y; break;
    }
    o[i] = r;
  }
}

template <typename T>
__global__ void whereKernel(const uint8_t *c, const T *a, const T *b, T *o,
                            int64_t n, Dims dims, Strides sc, Strides sa,
                            Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = c[offsetOf(i, dims, sc)] ? a[offsetOf(i, dims, sa)]
                                    : b[offsetOf(i, dims, sb)];
}

/// 1 / (1 + e^-v), as e^v / (1 + e^v) for negative v so that the far tail
/// keeps e^v instead of overflowing to 0 (as the CPU's sigmoid does).
template <typename C> __device__ __forceinline__ C sigmoidOf(C v) {
  if (v >= 0)
    return C(1) / (C(1) + m_exp(-v));
  const C e = m_exp(v);
  return e / (C(1) + e);
}

/// Float unary ops in Compute<T>, with the CPU kernels' formulas.
template <typename T>
__global__ void unaryKernel(int kind, const T *x, T *o, int64_t n) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const C v = toC(x[i]), one = 1;
    C r = 0;
    switch (static_cast<cpu::UnaryKind>(kind)) {
    case cpu::UnaryKind::Neg: r = -v; break;
    case cpu::UnaryKind::Exp: r = m_exp(v); break;
    case cpu::UnaryKind::Log: r = m_log(v); break;
    case cpu::UnaryKind::Sqrt: r = m_sqrt(v); break;
    case cpu::UnaryKind::Rsqrt: r = one / m_sqrt(v); break;
    case cpu::UnaryKind::Reciprocal: r = one / v; break;
    case cpu::UnaryKind::Tanh: r = m_tanh(v); break;
    case cpu::UnaryKind::Erf: r = m_erf(v); break;
    case cpu::UnaryKind::Sigmoid: r = sigmoidOf(v); break;
    case cpu::UnaryKind::Relu: r = v < 0 ? C(0) : v; break; // NaN stays NaN
    case cpu::UnaryKind::Silu: r = v * sigmoidOf(v); break;
    case cpu::UnaryKind::Gelu:
      r = C(0.5) * v * m_erfc(v * C(-0.70710678118654752440));
      break;
    case cpu::UnaryKind::GeluTanh: {
      // x * sigmoid(2u) = 0.5 x (1 + tanh(u)), without cancellation.
      C u = C(0.79788456080286535588) * (v + C(0.044715) * v * v * v);
      r = v * sigmoidOf(C(2) * u);
      break;
    }
    case cpu::UnaryKind::Cos: r = m_cos(v); break;
    case cpu::UnaryKind::Sin: r = m_sin(v); break;
    }
    // At -inf, x times a factor tending to 0 is NaN; as on the CPU, the
    // limit (-0) instead.
    const bool limit = kind == static_cast<int>(cpu::UnaryKind::Silu) ||
                       kind == static_cast<int>(cpu::UnaryKind::Gelu) ||
                       kind == static_cast<int>(cpu::UnaryKind::GeluTanh);
    if (limit && isinf(v) && v < 0)
      r = -C(0);
    o[i] = fromC<T>(r);
  }
}

/// The integer unary ops the CPU has: negation (wrapping) and relu.
template <typename T>
__global__ void integerUnaryKernel(bool relu, const T *x, T *o, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = relu ? (x[i] < 0 ? T(0) : x[i]) : wrapSub(T(0), x[i]);
}

/// One element converted as the CPU's cast does: through fp32 from fp16
/// and bf16, one rounding from integers and fp64, floats to integers
/// saturating (IntegerArithmetic.h), integers narrowed with wrap-around,
/// anything to Bool as != 0.
template <typename D, typename S> __device__ D convertElement(S s) {
  const Compute<S> v = toC(s);
  if constexpr (std::is_same_v<D, uint8_t>)
    return v != 0;
  else if constexpr (std::is_same_v<D, __half>)
    return std::is_same_v<Compute<S>, float> ? __float2half(float(v))
                                             : __double2half(double(v));
  else if constexpr (std::is_same_v<D, __nv_bfloat16>)
    return std::is_same_v<Compute<S>, float> ? __float2bfloat16(float(v))
                                             : __double2bfloat16(double(v));
  else if constexpr (std::is_integral_v<D> &&
                     std::is_floating_point_v<Compute<S>>)
    return saturatingToInt<D>(double(v));
  else
    return static_cast<D>(v);
}

template <typename D, typename S>
__global__ void castKernel(const S *x, D *o, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = convertElement<D>(x[i]);
}

template <typename E>
__global__ void triluKernel(const E *x, E *o, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = i % cols, r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    o[i] = keep ? x[i] : E(0);
  }
}

/// mp.rotary (cpu::rotary): each thread one channel pair of a row, or one
/// channel past `rotaryDim` to copy. __fmul_rn and friends keep each
/// product rounded before the sum, as the ops it replaces round it.
__global__ void rotaryKernel(const float *x, const float *cos, const float *sin,
                             float *o, int64_t rows, int64_t inner,
                             int64_t rotaryDim, bool interleaved, Dims rotated,
                             Strides table) {
  const int64_t pairs = rotaryDim / 2, rest = inner - rotaryDim;
  const int64_t perRow = pairs + rest, n = rows * perRow;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t row, k;
    divMod(i, perRow, row, k);
    const float *xr = x + row * inner;
    float *orow = o + row * inner;
    if (k >= pairs) {
      const int64_t c = rotaryDim + (k - pairs);
      if (orow != xr)
        orow[c] = xr[c];
      continue;
    }
    const int64_t p = interleaved ? 2 * k : k;
    const int64_t q = p + (interleaved ? 1 : pairs);
    const int64_t t = offsetOf(row * rotaryDim, rotated, table);
    const float a = xr[p], b = xr[q];
    orow[p] = __fadd_rn(__fmul_rn(a, cos[t + p]), __fmul_rn(-b, sin[t + p]));
    orow[q] = __fadd_rn(__fmul_rn(b, cos[t + q]), __fmul_rn(a, sin[t + q]));
  }
}

/// The index space of an elementwise result and the broadcast strides of
/// up to three operands, coalesced (absent operands have zero strides,
/// which never keep dims apart).
struct Broadcast {
  int64_t n = 0;
  Dims dims;
  Strides st[3];
};

Broadcast broadcastTo(const Tensor &out,
                      std::initializer_list<const Tensor *> operands) {
  Broadcast b;
  b.n = out.numel();
  b.dims = dimsOf(out.shape);
  int i = 0;
  for (const Tensor *t : operands)
    b.st[i++] = broadcastStrides(out.shape, t->shape);
  coalesce(b.dims, {&b.st[0], &b.st[1], &b.st[2]});
  return b;
}

} // namespace

Status binary(cpu::BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &out) {
  if (Status s = sameTypes("binary", {&a, &b, &out}); !s)
    return s;
  const Broadcast p = broadcastTo(out, {&a, &b});
  if (p.n == 0)
    return Status::success();
  const int k = static_cast<int>(kind);
  const int grid = blocksFor(p.n);
  switch (a.dtype) {
    MP_INTEGER_CASES(
        integerBinaryKernel<<<grid, kThreads, 0, computeStream()>>>(
            k, a.as<T>(), b.as<T>(), out.as<T>(), p.n, p.dims, p.st[0],
            p.st[1]))
  default:
    MP_REAL_TYPES(a.dtype, "binary",
                  binaryKernel<<<grid, kThreads, 0, computeStream()>>>(
                      k, a.as<T>(), b.as<T>(), out.as<T>(), p.n, p.dims,
                      p.st[0], p.st[1]));
  }
  return launched("binary");
}

Status compare(cpu::CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out) {
  if (Status s = sameTypes("compare", {&a, &b}); !s)
    return s;
  if (out.dtype != DType::Bool)
    return typeError("compare (result)", out.dtype);
  const Broadcast p = broadcastTo(out, {&a, &b});
  if (p.n == 0)
    return Status::success();
  MP_ALL_TYPES(a.dtype, "compare",
               compareKernel<<<blocksFor(p.n), kThreads, 0, computeStream()>>>(
                   static_cast<int>(kind), a.as<T>(), b.as<T>(),
                   out.as<uint8_t>(), p.n, p.dims, p.st[0], p.st[1]));
  return launched("compare");
}

Status where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Tensor &out) {
  if (Status s = sameTypes("where", {&a, &b, &out}); !s)
    return s;
  if (cond.dtype != DType::Bool)
    return typeError("where (condition)", cond.dtype);
  const Broadcast p = broadcastTo(out, {&cond, &a, &b});
  if (p.n == 0)
    return Status::success();
  // Any element type: only bytes move.
  auto launch = [&](auto element) {
    using E = decltype(element);
    whereKernel<<<blocksFor(p.n), kThreads, 0, computeStream()>>>(
        cond.as<uint8_t>(), a.as<E>(), b.as<E>(), out.as<E>(), p.n, p.dims,
        p.st[0], p.st[1], p.st[2]);
  };
  switch (dtypeSize(a.dtype)) {
  case 1: launch(uint8_t{}); break;
  case 2: launch(uint16_t{}); break;
  case 4: launch(uint32_t{}); break;
  case 8: launch(uint64_t{}); break;
  default: return typeError("where", a.dtype);
  }
  return launched("where");
}

Status unary(cpu::UnaryKind kind, const Tensor &x, Tensor &out) {
  if (Status s = sameTypes("unary", {&x, &out}); !s)
    return s;
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  const int grid = blocksFor(n);
  const bool integerKind =
      kind == cpu::UnaryKind::Neg || kind == cpu::UnaryKind::Relu;
  switch (x.dtype) {
    MP_INTEGER_CASES(
        if (!integerKind) return typeError("unary", x.dtype);
        integerUnaryKernel<<<grid, kThreads, 0, computeStream()>>>(
            kind == cpu::UnaryKind::Relu, x.as<T>(), out.as<T>(), n))
  default:
    MP_REAL_TYPES(x.dtype, "unary",
                  unaryKernel<<<grid, kThreads, 0, computeStream()>>>(
                      static_cast<int>(kind), x.as<T>(), out.as<T>(), n));
  }
  return launched("unary");
}

/// Casts from source type S to out's element type.
template <typename S>
static Status castFrom(const S *x, Tensor &out, int64_t n) {
  MP_ALL_TYPES(out.dtype, "cast (result)",
               castKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                   x, out.as<T>(), n));
  return launched("cast");
}

Status cast(const Tensor &x, Tensor &out) {
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  if (x.dtype == out.dtype) // exact, also for 64-bit integers
    return copy(x, out);
  MP_ALL_TYPES(x.dtype, "cast", return castFrom(x.as<T>(), out, n));
  return Status::success();
}

Status trilu(const Tensor &x, bool upper, int64_t k, Tensor &out) {
  int64_t n = x.numel();
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  if (n == 0)
    return Status::success();
  switch (dtypeSize(x.dtype)) {
  case 1:
    triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
        x.as<uint8_t>(), out.as<uint8_t>(), n, rows, cols, upper, k);
    break;
  case 2:
    triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
        x.as<uint16_t>(), out.as<uint16_t>(), n, rows, cols, upper, k);
    break;
  case 4:
    triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
        x.as<uint32_t>(), out.as<uint32_t>(), n, rows, cols, upper, k);
    break;
  case 8:
    triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
        x.as<uint64_t>(), out.as<uint64_t>(), n, rows, cols, upper, k);
    break;
  default: return typeError("trilu", x.dtype);
  }
  return launched("trilu");
}

Status rotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
              int64_t rotaryDim, bool interleaved, Tensor &out) {
  for (const Tensor *t :
       std::initializer_list<const Tensor *>{&x, &cos, &sin, &out})
    if (t->dtype != DType::F32)
      return typeError("rotary", t->dtype);
  const int64_t inner = x.shape.back();
  const int64_t rows = inner ? x.numel() / inner : 0;
  const int64_t n = rows * (inner - rotaryDim / 2);
  if (n == 0)
    return Status::success();
  std::vector<int64_t> rotated = x.shape;
  rotated.back() = rotaryDim;
  rotaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
      x.as<const float>(), cos.as<const float>(), sin.as<const float>(),
      out.as<float>(), rows, inner, rotaryDim, interleaved, dimsOf(rotated),
      broadcastStrides(rotated, cos.shape));
  return launched("rotary");
}

} // namespace mp::rt::cuda
