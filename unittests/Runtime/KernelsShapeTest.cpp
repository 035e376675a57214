//===- KernelsShapeTest.cpp - CPU gather and data movement
//------------------===//
//
// gather, cross-entropy, einsum, trilu, transpose, slice, concat,
// split, expand, copy. Checked against references written here in double
// precision; see KernelTestUtil.h.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace mp::rt;
using namespace mp::rt::cpu;
using namespace mp::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// gather, crossEntropy, einsum, trilu
//===----------------------------------------------------------------------===//

TEST(KernelGather, AxesNegativeIndicesAndTypes) {
  uint32_t seed = 900;
  // Embedding: axis 0, i64 with negatives.
  Buf table = randomBuf(DType::F32, {10, 6}, seed++);
  Buf ids = fromValues(DType::I64, {2, 3}, {0, 9, -1, 3, -10, 4});
  Buf out(DType::F32, {2, 3, 6});
  ASSERT_TRUE(gather(table.t, ids.t, 0, out.t).ok);
  std::vector<double> ref;
  for (int64_t t = 0; t < 6; ++t) {
    int64_t r = int64_t(ids.get(t));
    r = r < 0 ? r + 10 : r;
    for (int64_t j = 0; j < 6; ++j)
      ref.push_back(table.get(r * 6 + j));
  }
  expectExact(out, ref, "axis 0");
  // axis 1, i32 indices of rank 2, on i64 and f16 data.
  for (DType dt : {DType::I64, DType::F16, DType::Bool}) {
    Buf x(dt, {3, 5, 4});
    for (int64_t i = 0; i < x.n(); ++i) {
      if (dt == DType::F16)
        x.p<uint16_t>()[i] = uint16_t(i * 7);
      else
        x.set(i, dt == DType::Bool ? double(i % 3 == 0) : double(i));
    }
    Buf idx = fromValues(DType::I32, {2, 2}, {4, -5, 2, -1});
    Buf o(dt, {3, 2, 2, 4});
    ASSERT_TRUE(gather(x.t, idx.t, 1, o.t).ok);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 4; ++c) {
          int64_t r = int64_t(idx.get(t));
          r = r < 0 ? r + 5 : r;
          int64_t src = (a * 5 + r) * 4 + c, dst = (a * 4 + t) * 4 + c;
          if (dt == DType::F16)
            EXPECT_EQ(o.p<uint16_t>()[dst], x.p<uint16_t>()[src]);
          else
            EXPECT_EQ(o.get(dst), x.get(src));
        }
  }
  // Out of range is an error, not a crash.
  Buf bad = fromValues(DType::I64, {1}, {10});
  Buf o1(DType::F32, {1, 6});
  EXPECT_FALSE(gather(table.t, bad.t, 0, o1.t).ok);
  // Large embedding lookup (parallel).
  Buf big = randomBuf(DType::F32, {1000, 64}, seed++);
  Buf bi = randomBuf(DType::I64, {4, 128}, seed++, -1000, 999);
  Buf bo(DType::F32, {4, 128, 64});
  ASSERT_TRUE(gather(big.t, bi.t, 0, bo.t).ok);
  std::vector<double> bref;
  for (int64_t t = 0; t < 512; ++t) {
    int64_t r = int64_t(bi.get(t));
    r = r < 0 ? r + 1000 : r;
    for (int64_t j = 0; j < 64; ++j)
      bref.push_back(big.get(r * 64 + j));
  }
  expectExact(bo, bref, "large");
}

TEST(KernelCrossEntropy, MeanNegativeLogSoftmax) {
  uint32_t seed = 1000;
  for (DType tt : {DType::I64, DType::I32})
    for (Shape s : {Shape{2, 3, 11}, Shape{64, 1000}}) {
      Buf logits = randomBuf(DType::F32, s, seed++, -5, 5);
      Shape ts(s.begin(), s.end() - 1);
      int64_t V = s.back();
      Buf targets = randomBuf(tt, ts, seed++, 0, double(V - 1));
      Buf out(DType::F32, {});
      ASSERT_TRUE(crossEntropy(logits.t, targets.t, out.t).ok);
      double total = 0;
      for (int64_t p = 0; p < targets.n(); ++p) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < V; ++j)
          m = std::max(m, logits.get(p * V + j));
        for (int64_t j = 0; j < V; ++j)
          sum += std::exp(logits.get(p * V + j) - m);
        total +=
            m + std::log(sum) - logits.get(p * V + int64_t(targets.get(p)));
      }
      expectClose(out, {total / double(targets.n())}, kRtol, 1e-6,
                  formatShape(s));
    }
}

/// Reference einsum by brute force over all label values.
std::vector<double> refEinsum(const std::vector<std::string> &terms,
                              const std::string &outTerm,
                              const std::vector<const Buf *> &ins) {
  std::string labels;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d)
      if (labels.find(terms[i][d]) == std::string::npos) {
        labels += terms[i][d];
        sizes.push_back(ins[i]->t.shape[d]);
      }
  Shape os;
  for (char c : outTerm)
    os.push_back(sizes[labels.find(c)]);
  std::vector<double> out(static_cast<size_t>(numelOf(os)), 0);
  for (int64_t it = 0; it < numelOf(sizes); ++it) {
    std::vector<int64_t> val = unravel(it, sizes);
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      std::vector<int64_t> idx;
      for (char c : terms[i])
        idx.push_back(val[labels.find(c)]);
      prod *= ins[i]->get(ravel(idx, ins[i]->t.shape));
    }
    std::vector<int64_t> oi;
    for (char c : outTerm)
      oi.push_back(val[labels.find(c)]);
    out[size_t(ravel(oi, os))] += prod;
  }
  return out;
}

TEST(KernelEinsum, Equations) {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
    std::vector<std::string> terms; // for the reference (no ellipsis)
    std::string out;
  };
  const Case cases[] = {
      {"i,j->ij", {{5}, {4}}, {"i", "j"}, "ij"},
      {"bij,bjk->bik", {{3, 4, 5}, {3, 5, 6}}, {"bij", "bjk"}, "bik"},
      {"ii->i", {{5, 5}}, {"ii"}, "i"},
      {"ij->ji", {{3, 7}}, {"ij"}, "ji"},
      {"ij->", {{3, 7}}, {"ij"}, ""},
      {"ij,jk", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"bhqd,bhkd->bhqk",
       {{2, 3, 5, 4}, {2, 3, 6, 4}},
       {"bhqd", "bhkd"},
       "bhqk"},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}, {"ij", "jk", "kl"}, "il"},
      {"bik,bkj->bji", {{2, 3, 4}, {2, 4, 5}}, {"bik", "bkj"}, "bji"},
      {"ij,ij->i", {{4, 6}, {4, 6}}, {"ij", "ij"}, "i"},
      {"ki,kj->ij", {{6, 3}, {6, 4}}, {"ki", "kj"}, "ij"}, // transposed A
      {"bkd,bqk->bqd", {{2, 5, 3}, {2, 4, 5}}, {"bkd", "bqk"}, "bqd"},
      {"iij,jk->ik", {{3, 3, 4}, {4, 2}}, {"iij", "jk"}, "ik"},
      {"ab,cd->", {{2, 3}, {4, 5}}, {"ab", "cd"}, ""},
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}, {"zij", "zjk"}, "zik"},
  };
  uint32_t seed = 1100;
  for (const Case &c : cases)
    for (DType dt : {DType::F32, DType::F64}) {
      std::vector<Buf> bufs;
      std::vector<const Tensor *> ins;
      std::vector<const Buf *> refIns;
      for (const Shape &s : c.shapes)
        bufs.push_back(randomBuf(dt, s, seed++));
      for (const Buf &b : bufs) {
        ins.push_back(&b.t);
        refIns.push_back(&b);
      }
      std::vector<double> ref = refEinsum(c.terms, c.out, refIns);
      Shape os;
      for (char ch : c.out)
        for (size_t i = 0; i < c.terms.size(); ++i) {
          size_t p = c.terms[i].find(ch);
          if (p != std::string::npos) {
            os.push_back(c.shapes[i][p]);
            break;
          }
        }
      Buf out(dt, os);
      Status st = einsum(c.eq, ins, out.t);
      ASSERT_TRUE(st.ok) << c.eq << ": " << st.message;
      expectClose(out, ref, dt == DType::F32 ? kRtol : 1e-12, 1e-6, c.eq);
    }
  // Ellipsis broadcasting: batch 1 against 3.
  Buf a = randomBuf(DType::F32, {1, 2, 4}, 1),
      b = randomBuf(DType::F32, {3, 4, 5}, 2);
  Buf out(DType::F32, {3, 2, 5});
  ASSERT_TRUE(einsum("...ij,...jk->...ik", {&a.t, &b.t}, out.t).ok);
  std::vector<double> ref;
  for (int64_t z = 0; z < 3; ++z)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 5; ++k) {
        double s = 0;
        for (int64_t j = 0; j < 4; ++j)
          s += a.get(i * 4 + j) * b.get((z * 4 + j) * 5 + k);
        ref.push_back(s);
      }
  expectClose(out, ref, kRtol, 1e-6, "ellipsis broadcast");
  // A malformed equation is an error.
  EXPECT_FALSE(einsum("ij,jk->ik", {&a.t}, out.t).ok);
}

TEST(KernelTrilu, UpperLowerOffsets) {
  uint32_t seed = 1200;
  for (DType dt : {DType::F32, DType::I64, DType::Bool})
    for (bool upper : {true, false})
      for (int64_t k : {-1, 0, 2, -7, 9}) {
        Buf x = randomBuf(dt, {2, 5, 7}, seed++, dt == DType::Bool ? 0 : -5,
                          dt == DType::Bool ? 1 : 5);
        Buf out(dt, {2, 5, 7});
        ASSERT_TRUE(trilu(x.t, upper, k, out.t).ok);
        std::vector<double> ref;
        for (int64_t i = 0; i < x.n(); ++i) {
          int64_t r = (i / 7) % 5, c = i % 7;
          bool keep = upper ? c - r >= k : c - r <= k;
          ref.push_back(keep ? x.get(i) : 0);
        }
        expectExact(out, ref,
                    std::string(dtypeName(dt)) +
                        (upper ? " upper " : " lower ") + std::to_string(k));
      }
  // In place.
  Buf x = fromValues(DType::F32, {2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(trilu(x.t, true, 0, x.t).ok);
  expectExact(x, {1, 2, 0, 4});
}

//===----------------------------------------------------------------------===//
// data movement
//===----------------------------------------------------------------------===//

std::vector<double> refTranspose(const Buf &x, const std::vector<int64_t> &perm,
                                 const Shape &os) {
  std::vector<double> ref(static_cast<size_t>(x.n()));
  for (int64_t o = 0; o < x.n(); ++o) {
    std::vector<int64_t> oi = unravel(o, os), xi(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      xi[size_t(perm[d])] = oi[d];
    ref[size_t(o)] = x.get(ravel(xi, x.t.shape));
  }
  return ref;
}

TEST(KernelTranspose, EveryRank4Perm) {
  Shape s = {2, 3, 4, 5};
  std::vector<int64_t> perm = {0, 1, 2, 3};
  uint32_t seed = 1300;
  do {
    for (DType dt : {DType::F32, DType::I64, DType::I8}) {
      Buf x = randomBuf(dt, s, seed++, dt == DType::F32 ? -1 : -100,
                        dt == DType::F32 ? 1 : 100);
      Shape os;
      for (int64_t p : perm)
        os.push_back(s[size_t(p)]);
      Buf out(dt, os);
      ASSERT_TRUE(transpose(x.t, perm, out.t).ok);
      expectExact(out, refTranspose(x, perm, os),
                  std::string(dtypeName(dt)) + " perm " +
                      std::to_string(perm[0]) + std::to_string(perm[1]) +
                      std::to_string(perm[2]) + std::to_string(perm[3]));
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(KernelTranspose, LargeAndHalf) {
  struct Case {
    Shape s;
    std::vector<int64_t> perm;
  };
  uint32_t seed = 1400;
  for (Case c :
       {Case{{4, 64, 12, 33}, {0, 2, 1, 3}},
        Case{{4, 12, 64, 33}, {0, 1, 3, 2}}, Case{{300, 301}, {1, 0}},
        Case{{8, 1, 70, 65}, {3, 1, 0, 2}}, Case{{1, 1, 1}, {2, 0, 1}}}) {
    Buf x = randomBuf(DType::F32, c.s, seed++);
    Shape os;
    for (int64_t p : c.perm)
      os.push_back(c.s[size_t(p)]);
    Buf out(DType::F32, os);
    ASSERT_TRUE(transpose(x.t, c.perm, out.t).ok);
    expectExact(out, refTranspose(x, c.perm, os), formatShape(c.s));
    // Same movement on 2-byte elements.
    Buf h(DType::F16, c.s), ho(DType::F16, os);
    for (int64_t i = 0; i < h.n(); ++i)
      h.p<uint16_t>()[i] = uint16_t(i * 2654435761u >> 7);
    ASSERT_TRUE(transpose(h.t, c.perm, ho.t).ok);
    Buf hi(DType::I32, c.s);
    for (int64_t i = 0; i < h.n(); ++i)
      hi.p<int32_t>()[i] = h.p<uint16_t>()[i];
    std::vector<double> ref = refTranspose(hi, c.perm, os);
    int failures = 0;
    for (int64_t i = 0; i < ho.n(); ++i)
      failures += ho.p<uint16_t>()[i] != uint16_t(ref[size_t(i)]);
    EXPECT_EQ(failures, 0) << "f16 " << formatShape(c.s);
  }
}

TEST(KernelSlice, NegativeStrides) {
  uint32_t seed = 1500;
  struct Case {
    Shape x, out;
    std::vector<int64_t> starts, strides;
  };
  for (Case c : {Case{{5, 6, 7}, {5, 3, 3}, {4, 1, 6}, {-1, 2, -3}},
                 Case{{5, 6, 7}, {2, 6, 7}, {1, 0, 0}, {2, 1, 1}},
                 Case{{10, 9}, {3, 9}, {9, 8}, {-3, -1}},
                 Case{{200, 300}, {100, 150}, {199, 1}, {-2, 2}},
                 Case{{4}, {0}, {0}, {1}}})
    for (DType dt : {DType::F32, DType::I64, DType::I8}) {
      Buf x = randomBuf(dt, c.x, seed++, -100, 100);
      Buf out(dt, c.out);
      ASSERT_TRUE(slice(x.t, c.starts, c.strides, out.t).ok);
      std::vector<double> ref;
      for (int64_t o = 0; o < out.n(); ++o) {
        std::vector<int64_t> oi = unravel(o, c.out), xi(oi.size());
        for (size_t d = 0; d < oi.size(); ++d)
          xi[d] = c.starts[d] + oi[d] * c.strides[d];
        ref.push_back(x.get(ravel(xi, c.x)));
      }
      expectExact(out, ref, formatShape(c.x) + " -> " + formatShape(c.out));
    }
}

TEST(KernelConcatSplit, AxesAndRoundTrip) {
  uint32_t seed = 1600;
  for (int64_t axis : {0, 1, 2})
    for (DType dt : {DType::F32, DType::I8, DType::F64}) {
      std::vector<Buf> parts;
      std::vector<int64_t> sizes = {2, 0, 3, 1};
      Shape os = {3, 4, 5};
      os[size_t(axis)] = 6;
      for (int64_t n : sizes) {
        Shape s = os;
        s[size_t(axis)] = n;
        parts.push_back(randomBuf(dt, s, seed++, -100, 100));
      }
      std::vector<const Tensor *> ins;
      for (const Buf &b : parts)
        ins.push_back(&b.t);
      Buf out(dt, os);
      ASSERT_TRUE(concat(ins, axis, out.t).ok);
      std::vector<double> ref(static_cast<size_t>(out.n()));
      for (int64_t o = 0; o < out.n(); ++o) {
        std::vector<int64_t> oi = unravel(o, os);
        int64_t pos = oi[size_t(axis)];
        size_t p = 0;
        while (pos >= sizes[p]) {
          pos -= sizes[p];
          ++p;
        }
        oi[size_t(axis)] = pos;
        ref[size_t(o)] = parts[p].get(ravel(oi, parts[p].t.shape));
      }
      expectExact(out, ref, "concat axis " + std::to_string(axis));
      // split back
      std::vector<Buf> back;
      std::vector<Tensor *> outs;
      for (const Buf &b : parts)
        back.push_back(Buf(dt, b.t.shape));
      for (Buf &b : back)
        outs.push_back(&b.t);
      ASSERT_TRUE(split(out.t, axis, outs).ok);
      for (size_t i = 0; i < parts.size(); ++i)
        expectExact(back[i], parts[i].values(),
                    "split axis " + std::to_string(axis));
    }
}

TEST(KernelExpand, Broadcast) {
  struct Case {
    Shape x, out;
  };
  uint32_t seed = 1700;
  for (Case c : {Case{{3, 1}, {2, 3, 4}}, Case{{}, {5}}, Case{{4}, {3, 4}},
                 Case{{2, 1, 3}, {2, 4, 3}}, Case{{1, 600}, {100, 600}}})
    for (DType dt : {DType::F32, DType::Bool, DType::I64}) {
      Buf x = randomBuf(dt, c.x, seed++, dt == DType::Bool ? 0 : -9,
                        dt == DType::Bool ? 1 : 9);
      Buf out(dt, c.out);
      ASSERT_TRUE(expand(x.t, out.t).ok);
      std::vector<double> ref;
      for (int64_t i = 0; i < out.n(); ++i)
        ref.push_back(x.get(broadcastIndex(c.x, c.out, i)));
      expectExact(out, ref, formatShape(c.x) + " -> " + formatShape(c.out));
    }
}

TEST(KernelCopy, Reshape) {
  Buf x = randomBuf(DType::F32, {3, 4, 5}, 1);
  Buf out(DType::F32, {12, 5});
  ASSERT_TRUE(copy(x.t, out.t).ok);
  expectExact(out, x.values());
  Buf big = randomBuf(DType::I64, {300000}, 2, -5, 5);
  Buf bo(DType::I64, {600, 500});
  ASSERT_TRUE(copy(big.t, bo.t).ok);
  expectExact(bo, big.values());
}

} // namespace
