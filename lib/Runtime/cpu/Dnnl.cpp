//===- Dnnl.cpp - oneDNN GEMMs for the CPU kernels ------------------------===//
#include "Dnnl.h"

#include "HugePages.h"
#include "OpenMP.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

#ifdef MP_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace mp::rt::cpu {

namespace {

/// The library MP_CPU_GEMM asks for (the only place that reads it).
enum class Request { Choose, OpenBLAS, OneDNN, Unknown };

Request requestedLibrary(std::string *value = nullptr) {
  const char *v = std::getenv("MP_CPU_GEMM");
  if (value)
    *value = v ? v : "";
  if (!v || !*v)
    return Request::Choose;
  if (std::strcmp(v, "openblas") == 0)
    return Request::OpenBLAS;
  if (std::strcmp(v, "onednn") == 0)
    return Request::OneDNN;
  return Request::Unknown;
}

} // namespace

Status checkGemmRequest() {
  std::string value;
  if (requestedLibrary(&value) != Request::Unknown)
    return Status::success();
  return Status::error("MP_CPU_GEMM is '" + value +
                       "'; expected 'openblas' or 'onednn' (or unset, to let "
                       "the runtime choose)");
}

#ifdef MP_HAVE_DNNL

namespace {

struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

DnnlContext &context() {
  static DnnlContext ctx;
  return ctx;
}

/// oneDNN's f32 brgemm kernels need AVX-512; on an AVX2-only CPU it gains
/// nothing over OpenBLAS.
bool hasAvx512Kernels() {
  return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
}

const char *isaName(dnnl::cpu_isa isa) {
  switch (isa) {
  case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
  case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
  case dnnl::cpu_isa::avx512_core: return "avx512_core";
  case dnnl::cpu_isa::avx2: return "avx2";
  default: return "older than avx2";
  }
}

/// The eltwise algorithm of an activation (SiLU is swish with alpha 1).
dnnl::algorithm eltwiseOf(contract::LinearActivation activation) {
  switch (activation) {
  case contract::LinearActivation::Gelu:
    return dnnl::algorithm::eltwise_gelu_erf;
  case contract::LinearActivation::GeluTanh:
    return dnnl::algorithm::eltwise_gelu_tanh;
  case contract::LinearActivation::Silu: return dnnl::algorithm::eltwise_swish;
  case contract::LinearActivation::None: break;
  }
  return dnnl::algorithm::eltwise_linear; // (alpha 1, beta 0: the identity)
}

} // namespace

GemmLibrary gemmLibrary() {
  switch (requestedLibrary()) {
  case Request::OpenBLAS: return GemmLibrary::OpenBLAS;
  case Request::OneDNN: return GemmLibrary::OneDNN;
  case Request::Choose:
  case Request::Unknown: break; // (Unknown: refused at load)
  }
  return hasAvx512Kernels() ? GemmLibrary::OneDNN : GemmLibrary::OpenBLAS;
}

std::string describeGemmLibrary() {
  const dnnl_version_t *v = dnnl_version();
  std::string name = "oneDNN " + std::to_string(v->major) + "." +
                     std::to_string(v->minor) + "." + std::to_string(v->patch) +
                     " (" + isaName(dnnl::get_effective_cpu_isa()) + ")";
  switch (requestedLibrary()) {
  case Request::OpenBLAS: return "OpenBLAS (MP_CPU_GEMM=openblas)";
  case Request::OneDNN: return name + " (MP_CPU_GEMM=onednn)";
  case Request::Choose:
  case Request::Unknown: break;
  }
  return hasAvx512Kernels() ? name
                            : "OpenBLAS (" + name + " has no AVX-512 here)";
}

/// Whether oneDNN can create a bf16 matmul on this CPU (it needs AVX-512;
/// AVX512_BF16 makes it fast), asked once.
bool bf16MatmulAvailable() {
  static const bool available = [] {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    try {
      dnnl::memory::desc d({16, 16}, dt::bf16, tag::ab);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(d, d, d),
                                      context().engine);
      return true;
    } catch (const std::exception &) {
      return false;
    }
  }();
  return available;
}

bool runsInBf16(const Tensor &x, const Tensor &weight) {
  // (m, n and k are all positive exactly when neither operand is empty.)
  return x.numel() > 0 && weight.numel() > 0 &&
         gemmLibrary() == GemmLibrary::OneDNN && bf16MatmulAvailable();
}

struct DnnlGemm::Impl {
  dnnl::matmul primitive;
  std::unordered_map<int, dnnl::memory> args;
  /// W as stored, when the primitive reads a packed copy.
  std::optional<dnnl::memory> storedWeight;
  /// The packed copy's memory.
  std::unique_ptr<void, void (*)(void *)> packed{nullptr, std::free};
};

std::unique_ptr<DnnlGemm> DnnlGemm::create(const void *a, const void *b,
                                           const void *bias, void *c,
                                           const Problem &problem, bool packB,
                                           std::string &error) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const int64_t m = problem.m, n = problem.n, k = problem.k;
  try {
    DnnlContext &ctx = context();
    const dt type = problem.bf16 ? dt::bf16 : dt::f32;
    // A transposed operand is the matrix in column-major order (tag ba).
    dnnl::memory::desc ad({m, k}, type, problem.transA ? tag::ba : tag::ab);
    dnnl::memory::desc bd({k, n}, type, problem.transB ? tag::ba : tag::ab);
    dnnl::memory::desc cd({m, n}, type, tag::ab);
    dnnl::memory::desc biasd =
        bias ? dnnl::memory::desc({1, n}, type, tag::ab) : dnnl::memory::desc();
    dnnl::memory::desc wanted =
        packB ? dnnl::memory::desc({k, n}, type, tag::any) : bd;
    dnnl::primitive_attr attr;
    if (problem.activation != contract::LinearActivation::None) {
      dnnl::post_ops epilogue;
      epilogue.append_eltwise(1.0f, eltwiseOf(problem.activation), 1.0f, 0.0f);
      attr.set_post_ops(epilogue);
    }
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, wanted, biasd, cd),
                                    attr, ctx.engine);
    auto impl = std::make_unique<Impl>();
    impl->primitive = dnnl::matmul(pd);
    auto bind = [&](int arg, const dnnl::memory::desc &d, const void *p) {
      impl->args.emplace(arg,
                         dnnl::memory(d, ctx.engine, const_cast<void *>(p)));
    };
    bind(DNNL_ARG_SRC, ad, a);
    if (pd.weights_desc() == bd) {
      bind(DNNL_ARG_WEIGHTS, bd, b);
    } else {
      impl->storedWeight.emplace(bd, ctx.engine, const_cast<void *>(b));
      // The packed copy on huge pages too (HugePages.h).
      impl->packed.reset(allocateHugeAligned(pd.weights_desc().get_size()));
      if (!impl->packed)
        throw std::bad_alloc();
      impl->args.emplace(
          DNNL_ARG_WEIGHTS,
          dnnl::memory(pd.weights_desc(), ctx.engine, impl->packed.get()));
    }
    bind(DNNL_ARG_DST, cd, c);
    if (bias)
      bind(DNNL_ARG_BIAS, biasd, bias);
    std::unique_ptr<DnnlGemm> plan(new DnnlGemm(std::move(impl)));
    if (Status s = plan->refresh(); !s) {
      error = s.message;
      return nullptr;
    }
    return plan;
  } catch (const std::exception &e) { // (dnnl::error, std::bad_alloc)
    error = std::string("oneDNN cannot plan this GEMM: ") + e.what();
    return nullptr;
  }
}

Status DnnlGemm::run() {
  try {
    impl->primitive.execute(context().stream, impl->args);
    context().stream.wait();
  } catch (const dnnl::error &e) {
    return Status::error(std::string("oneDNN matmul failed: ") + e.what());
  }
  return Status::success();
}

Status DnnlGemm::refresh() {
  if (!impl->storedWeight)
    return Status::success();
  try {
    dnnl::memory &packed = impl->args.at(DNNL_ARG_WEIGHTS);
    dnnl::reorder(*impl->storedWeight, packed)
        .execute(context().stream, *impl->storedWeight, packed);
    context().stream.wait();
  } catch (const std::exception &e) {
    return Status::error(std::string("oneDNN cannot pack a weight: ") +
                         e.what());
  }
  return Status::success();
}

size_t DnnlGemm::packedBytes() const {
  return impl->storedWeight
             ? impl->args.at(DNNL_ARG_WEIGHTS).get_desc().get_size()
             : 0;
}

namespace {

/// What a small GEMM's primitive is planned for.
struct SmallGemmShape {
  int64_t m, n, k, lda, ldb, ldc;
  bool transA, transB, accumulate;
  float alpha;
  bool operator==(const SmallGemmShape &o) const {
    return m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb &&
           ldc == o.ldc && transA == o.transA && transB == o.transB &&
           accumulate == o.accumulate && alpha == o.alpha;
  }
};

struct SmallGemmShapeHash {
  size_t operator()(const SmallGemmShape &s) const {
    size_t h = std::hash<float>()(s.alpha) ^ (size_t(s.transA) << 1) ^
               (size_t(s.transB) << 2) ^ (size_t(s.accumulate) << 3);
    for (int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h;
  }
};

/// A primitive and its operands' memory (rebound at each call).
struct SmallGemmPlan {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

/// One thread's plans and stream. OpenMP's threads persist between
/// kernels, so the plans are made once per shape; a run whose shapes keep
/// changing starts over at kMaxPlans rather than grow.
struct SmallGemmPlans {
  static constexpr size_t kMaxPlans = 256;
  std::unordered_map<SmallGemmShape, SmallGemmPlan, SmallGemmShapeHash> plans;
  std::optional<dnnl::stream> stream;

  SmallGemmPlan &planFor(const SmallGemmShape &s) {
    auto it = plans.find(s);
    if (it != plans.end())
      return it->second;
    if (plans.size() >= kMaxPlans)
      plans.clear();
    using dims = dnnl::memory::dims;
    const dnnl::memory::data_type f32 = dnnl::memory::data_type::f32;
    // (A transposed operand: its rows are the stored matrix's columns.)
    dnnl::memory::desc ad({s.m, s.k}, f32,
                          s.transA ? dims{1, s.lda} : dims{s.lda, 1});
    dnnl::memory::desc bd({s.k, s.n}, f32,
                          s.transB ? dims{1, s.ldb} : dims{s.ldb, 1});
    dnnl::memory::desc cd({s.m, s.n}, f32, dims{s.ldc, 1});
    dnnl::primitive_attr attr;
    if (s.alpha != 1.0f)
      attr.set_output_scales(0, {s.alpha});
    if (s.accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    const dnnl::engine &engine = context().engine;
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr,
                                    engine);
    SmallGemmPlan plan{dnnl::matmul(pd), dnnl::memory(ad, engine, nullptr),
                       dnnl::memory(bd, engine, nullptr),
                       dnnl::memory(cd, engine, nullptr)};
    return plans.emplace(s, std::move(plan)).first->second;
  }
};

} // namespace

bool smallGemm(const SmallGemm &g) {
  if (g.m < kSmallGemmMinRows || g.n < kSmallGemmMinRows || g.k <= 0 ||
      gemmLibrary() != GemmLibrary::OneDNN)
    return false;
  thread_local SmallGemmPlans cache;
  // Planned and run for one thread wherever it is called (oneDNN plans a
  // primitive for omp_get_max_threads() threads and writes only the shares
  // of the threads it gets), so each result depends on its shape alone.
  OneThreadScope oneThread;
  try {
    if (!cache.stream)
      cache.stream.emplace(context().engine);
    SmallGemmPlan &plan =
        cache.planFor({g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.transA, g.transB,
                       g.accumulate, g.alpha});
    plan.a.set_data_handle(const_cast<float *>(g.a));
    plan.b.set_data_handle(const_cast<float *>(g.b));
    plan.c.set_data_handle(g.c);
    plan.primitive.execute(*cache.stream, {{DNNL_ARG_SRC, plan.a},
                                           {DNNL_ARG_WEIGHTS, plan.b},
                                           {DNNL_ARG_DST, plan.c}});
    cache.stream->wait();
    return true;
  } catch (const std::exception &) { // (dnnl::error, std::bad_alloc)
    return false; // (a shape oneDNN cannot plan: OpenBLAS runs it)
  }
}

#else // !MP_HAVE_DNNL

bool smallGemm(const SmallGemm &) { return false; }

GemmLibrary gemmLibrary() { return GemmLibrary::OpenBLAS; }

std::string describeGemmLibrary() {
  switch (requestedLibrary()) {
  case Request::OpenBLAS: return "OpenBLAS (MP_CPU_GEMM=openblas)";
  case Request::OneDNN:
    return "OpenBLAS (MP_CPU_GEMM=onednn, but this runtime was built without "
           "oneDNN)";
  case Request::Choose:
  case Request::Unknown: break;
  }
  return "OpenBLAS";
}

bool runsInBf16(const Tensor &, const Tensor &) { return false; }

struct DnnlGemm::Impl {};

std::unique_ptr<DnnlGemm> DnnlGemm::create(const void *, const void *,
                                           const void *, void *,
                                           const Problem &, bool,
                                           std::string &error) {
  error = "this runtime was built without oneDNN";
  return nullptr;
}

Status DnnlGemm::run() {
  return Status::error("this runtime was built without oneDNN");
}
Status DnnlGemm::refresh() { return run(); }
size_t DnnlGemm::packedBytes() const { return 0; }

#endif // MP_HAVE_DNNL

DnnlGemm::DnnlGemm(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
DnnlGemm::~DnnlGemm() = default;

PlannedKernel planGemm(const void *a, const void *b, const void *bias, void *c,
                       const DnnlGemm::Problem &problem, bool packB) {
  std::string error;
  std::shared_ptr<DnnlGemm> plan =
      DnnlGemm::create(a, b, bias, c, problem, packB, error);
  if (!plan)
    return {};
  PlannedKernel planned;
  planned.run = [plan]() { return plan->run(); };
  if ((planned.packedBytes = plan->packedBytes()))
    planned.refresh = [plan]() { return plan->refresh(); };
  return planned;
}

} // namespace mp::rt::cpu
