//===- Rotary.cpp - rotary position embedding -----------------------------===//
//
// mp.rotary: each channel pair (a, b) of the first `rotaryDim` channels of
// a row becomes (a * cos + (-b) * sin, b * cos' + a * sin'), the rest
// copied.
// Built with -ffp-contract=off: each product is rounded before the sum, as
// the mul, neg and add kernels the op replaces round them, so the results
// are their bits.
//
//===----------------------------------------------------------------------===//
#include "Common.h"

#include <cstring>

namespace mp::rt::cpu {

namespace {

/// For each row of x (all dims but the last), the offset of its row of
/// cos/sin, which broadcast along x's leading dims.
class TableRows {
public:
  TableRows(const Shape &input, const Shape &table) {
    const size_t lead = input.size() - table.size();
    int64_t stride = table.back();
    strides.assign(input.size() - 1, 0);
    dims.assign(input.begin(), input.end() - 1);
    for (size_t i = table.size() - 1; i-- > 0;) {
      if (table[i] != 1)
        strides[lead + i] = stride;
      stride *= table[i];
    }
  }

  int64_t offset(int64_t row) const {
    int64_t offset = 0;
    for (size_t i = dims.size(); i-- > 0;) {
      offset += (row % dims[i]) * strides[i];
      row /= dims[i];
    }
    return offset;
  }

private:
  std::vector<int64_t> dims, strides;
};

/// One row: `pairs` pairs, the second of pair i at `second` after its first
/// (the half, or 1 interleaved), the first of pair i at i or 2i.
void rotateRow(const float *x, const float *cos, const float *sin, float *y,
               int64_t rotaryDim, bool interleaved) {
  const int64_t pairs = rotaryDim / 2;
  const int64_t second = interleaved ? 1 : pairs;
  const int64_t step = interleaved ? 2 : 1;
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t p = i * step, q = p + second;
    const float a = x[p], b = x[q];
    // (-b) * sin, as the ops it replaces compute it (a compiler may still
    // make it a subtraction: only a NaN's sign could tell).
    const float aCos = a * cos[p], negBSin = -b * sin[p];
    const float bCos = b * cos[q], aSin = a * sin[q];
    y[p] = aCos + negBSin;
    y[q] = bCos + aSin;
  }
}

} // namespace

Status rotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
              int64_t rotaryDim, bool interleaved, Tensor &out) {
  if (Status s = expectF32("rotary", {&x, &cos, &sin, &out}); !s)
    return s;
  const int64_t inner = x.shape.back();
  const int64_t rows = inner ? x.numel() / inner : 0;
  const TableRows table(x.shape, cos.shape);
  const float *in = x.as<const float>();
  const float *c = cos.as<const float>(), *s = sin.as<const float>();
  float *result = out.as<float>();
  parallelRange(rows, shouldParallelize(x.numel()), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float *xr = in + r * inner;
      float *yr = result + r * inner;
      const int64_t t = table.offset(r);
      rotateRow(xr, c + t, s + t, yr, rotaryDim, interleaved);
      if (yr != xr && inner > rotaryDim)
        std::memcpy(yr + rotaryDim, xr + rotaryDim,
                    static_cast<size_t>(inner - rotaryDim) * sizeof(float));
    }
  });
  return Status::success();
}

} // namespace mp::rt::cpu
