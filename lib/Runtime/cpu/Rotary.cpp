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

/// The offsets of x's rows' rows of cos/sin (all dims but the last; the
/// tables broadcast along x's leading dims), walked row by row as an
/// odometer over the row dims: no division per row.
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

  /// Starts the walk at `row`.
  void seek(int64_t row) {
    index.assign(dims.size(), 0);
    offset = 0;
    for (size_t i = dims.size(); i-- > 0;) {
      index[i] = row % dims[i];
      offset += index[i] * strides[i];
      row /= dims[i];
    }
  }

  /// The current row's table offset.
  int64_t current() const { return offset; }

  /// Steps to the next row.
  void next() {
    for (size_t i = dims.size(); i-- > 0;) {
      offset += strides[i];
      if (++index[i] < dims[i])
        return;
      offset -= index[i] * strides[i];
      index[i] = 0;
    }
  }

private:
  std::vector<int64_t> dims, strides, index;
  int64_t offset = 0;
};

// One row's `pairs` channel pairs: (a, b) at (i, i + pairs) ("halves") or
// (2i, 2i + 1) (interleaved). Each a * cos + (-b) * sin as the ops it
// replaces compute it (a compiler may still make it a subtraction: only a
// NaN's sign could tell). The loops are written for the vectorizer: unit
// or pair strides, and either one pointer read and written (in place: each
// iteration writes only what it read) or pointers that do not alias.

/// Where pair i's a and b are.
template <bool Interleaved> struct PairAt {
  int64_t pairs;
  int64_t first(int64_t i) const { return Interleaved ? 2 * i : i; }
  int64_t second(int64_t i) const {
    return Interleaved ? 2 * i + 1 : i + pairs;
  }
};

template <bool Interleaved>
void rotate(const float *__restrict x, const float *__restrict cos,
            const float *__restrict sin, float *__restrict y, int64_t pairs) {
  const PairAt<Interleaved> at{pairs};
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t p = at.first(i), q = at.second(i);
    const float a = x[p], b = x[q];
    y[p] = a * cos[p] + -b * sin[p];
    y[q] = b * cos[q] + a * sin[q];
  }
}

template <bool Interleaved>
void rotateInPlace(float *x, const float *__restrict cos,
                   const float *__restrict sin, int64_t pairs) {
  const PairAt<Interleaved> at{pairs};
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t p = at.first(i), q = at.second(i);
    const float a = x[p], b = x[q];
    x[p] = a * cos[p] + -b * sin[p];
    x[q] = b * cos[q] + a * sin[q];
  }
}

void rotateRow(const float *x, const float *cos, const float *sin, float *y,
               int64_t rotaryDim, bool interleaved) {
  const int64_t pairs = rotaryDim / 2;
  if (y == x)
    interleaved ? rotateInPlace<true>(y, cos, sin, pairs)
                : rotateInPlace<false>(y, cos, sin, pairs);
  else
    interleaved ? rotate<true>(x, cos, sin, y, pairs)
                : rotate<false>(x, cos, sin, y, pairs);
}

} // namespace

Status rotary(const Tensor &x, const Tensor &cos, const Tensor &sin,
              int64_t rotaryDim, bool interleaved, Tensor &out) {
  if (Status s = expectF32("rotary", {&x, &cos, &sin, &out}); !s)
    return s;
  const int64_t inner = x.shape.back();
  const int64_t rows = inner ? x.numel() / inner : 0;
  const TableRows rowsOfTable(x.shape, cos.shape);
  const float *in = x.as<const float>();
  const float *c = cos.as<const float>(), *s = sin.as<const float>();
  float *result = out.as<float>();
  parallelRange(rows, shouldParallelize(x.numel()), [&](int64_t b, int64_t e) {
    TableRows table = rowsOfTable;
    table.seek(b);
    for (int64_t r = b; r < e; ++r, table.next()) {
      const float *xr = in + r * inner;
      float *yr = result + r * inner;
      const int64_t t = table.current();
      rotateRow(xr, c + t, s + t, yr, rotaryDim, interleaved);
      if (yr != xr && inner > rotaryDim)
        std::memcpy(yr + rotaryDim, xr + rotaryDim,
                    static_cast<size_t>(inner - rotaryDim) * sizeof(float));
    }
  });
  return Status::success();
}

} // namespace mp::rt::cpu
