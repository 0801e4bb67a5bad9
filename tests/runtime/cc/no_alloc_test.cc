// Proves that the execute path allocates nothing in steady state: this program replaces the
// global operator new (every variant) and malloc with counting versions, warms a runner up,
// then counts the allocations made by any thread (caller, device thread, intra-op pool) during
// many ModelRunner::Execute calls. One exception, reported but not counted as ours: OpenBLAS's
// small-matrix SGEMM kernels (AVX-512 hosts only, e.g. sgemm_small_kernel_b0_nn_SKYLAKEX)
// malloc a buffer per call inside the library; malloc calls made from inside
// libscipy_openblas are told apart by their return address. Built and run by test_runtime_no_alloc.py; argv: a weight
// model [4, 2] (O = (X + W) * X, W a TensorData weight, the sum in the arena), a fused
// model (graph0: O = X + Y [4, 2]; graph1: O = (X + Y) * X [2, 3]; `index` picks one) and a
// compiled conv network (input "X" [2, 16, 48, 48]: pointwise, depthwise and im2col convs with
// fused epilogues and a FusedElementwise chain, see test_runtime_no_alloc.py), then the same
// network compiled to the blocked layout (NchwcConv with a zero-padded input copy in scratch,
// the reorders).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "tests/runtime/cc/check.h"
#include "tf_popef_op/runtime/cc/core/model_runner.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
std::atomic<long> blas_allocations{0};

// Whether `address` (a malloc caller) is code of the OpenBLAS library. dladdr does not allocate.
bool InOpenBlas(void* address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libscipy_openblas") != nullptr;
}

void* Counted(void* p) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return p;
}
void* CountedOrThrow(void* p) {
  if (p == nullptr) throw std::bad_alloc();
  return Counted(p);
}
void* Aligned(std::size_t n, std::align_val_t a) {
  void* p = nullptr;
  const std::size_t align = std::max(static_cast<std::size_t>(a), sizeof(void*));
  return posix_memalign(&p, align, n ? n : 1) == 0 ? p : nullptr;
}
}  // namespace

// glibc's allocator under its internal name: malloc itself is replaced below.
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* malloc(std::size_t n) {
  if (counting.load(std::memory_order_relaxed) && InOpenBlas(__builtin_return_address(0))) {
    blas_allocations.fetch_add(1, std::memory_order_relaxed);
    return __libc_malloc(n);
  }
  return Counted(__libc_malloc(n));
}

void* operator new(std::size_t n) { return CountedOrThrow(__libc_malloc(n ? n : 1)); }
void* operator new[](std::size_t n) { return CountedOrThrow(__libc_malloc(n ? n : 1)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Counted(__libc_malloc(n ? n : 1)); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Counted(__libc_malloc(n ? n : 1)); }
void* operator new(std::size_t n, std::align_val_t a) { return CountedOrThrow(Aligned(n, a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return CountedOrThrow(Aligned(n, a)); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return Counted(Aligned(n, a)); }
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Counted(Aligned(n, a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace tfpopef;


namespace {

constexpr int kWarmup = 50;
constexpr int kRuns = 2000;

// Runs `call` kWarmup times, then kRuns times while counting; reports and checks zero.
template <typename Call>
void ExpectNoAllocation(const char* what, Call call) {
  for (int i = 0; i < kWarmup; ++i) call();
  allocations = 0;
  blas_allocations = 0;
  counting = true;
  for (int i = 0; i < kRuns; ++i) call();
  counting = false;
  const long n = allocations.load();
  std::printf("%s: %ld allocations in %d executes (%ld inside OpenBLAS)\n", what, n, kRuns, blas_allocations.load());
  if (n != 0) {
    std::fprintf(stderr, "%s: %ld allocations on the execute path\n", what, n);
    ++failures;
  }
}

float WeightModelExpected(float x, float w) { return (x + w) * x; }

void TestWeightModel(const char* path, bool profile, bool runner_outputs) {
  RuntimeConfig cfg;
  cfg.profile = profile;
  auto runner = ModelRunner::FromFile(path, cfg);
  // 8 rows = two compiled batches of the caller's contiguous rows (zero-copy).
  std::vector<float> x(16), out(16, 0.f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 1.f;
  const std::vector<HostTensor> inputs = {{"X", DType::kFloat32, {8, 2}, x.data()}};
  const std::vector<HostTensor> outputs =
      runner_outputs ? std::vector<HostTensor>{} : std::vector<HostTensor>{{"O", DType::kFloat32, {8, 2}, out.data()}};
  const float* result = nullptr;
  auto call = [&] {
    auto r = runner->Execute(inputs, outputs);
    result = static_cast<const float*>(r->outputs()[0].data);
    if (runner_outputs) std::memcpy(out.data(), result, out.size() * sizeof(float));
  };
  ExpectNoAllocation(profile ? (runner_outputs ? "weight model, runner outputs, profiling" : "weight model, profiling")
                             : (runner_outputs ? "weight model, runner outputs" : "weight model, caller outputs"),
                     call);
  // W is 0.5 * (i + 1) for element i of a [4, 2] batch (see test_runtime_no_alloc.py).
  for (size_t i = 0; i < x.size(); ++i) {
    const float w = 0.5f * static_cast<float>(i % 8 + 1);
    CHECK(std::abs(out[i] - WeightModelExpected(x[i], w)) < 1e-5f);
  }
  const RunnerStats s = runner->stats();
  CHECK(s.zero_copy_batches == 2u * (kWarmup + kRuns));
  if (profile) {
    const SessionProfile p = runner->Profile();
    CHECK(p.runs == 2u * (kWarmup + kRuns));
    CHECK(p.steps.size() == 2 && p.steps[0].calls == p.runs);
  }
}

void TestStagedBatches(const char* path) {
  RuntimeConfig cfg;
  cfg.batching_dim = 0;  // 3 rows, compiled batch 4: gathered into a zero-padded staging batch
  cfg.timeout_ns = 0;
  auto runner = ModelRunner::FromFile(path, cfg);
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, out(6);
  const std::vector<HostTensor> inputs = {{"X", DType::kFloat32, {3, 2}, x.data()}};
  const std::vector<HostTensor> outputs = {{"O", DType::kFloat32, {3, 2}, out.data()}};
  ExpectNoAllocation("weight model, staged (padded) batches", [&] { runner->Execute(inputs, outputs); });
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::abs(out[i] - WeightModelExpected(x[i], 0.5f * (i + 1))) < 1e-5f);
  CHECK(runner->stats().staged_batches == static_cast<uint64_t>(kWarmup + kRuns));
}

void TestFusedModel(const char* path) {
  auto runner = ModelRunner::FromFile(path);
  std::vector<float> x0(8), y0(8), o0(8), x1(6), y1(6), o1(6);
  for (int i = 0; i < 8; ++i) x0[i] = static_cast<float>(i), y0[i] = 1.f;
  for (int i = 0; i < 6; ++i) x1[i] = static_cast<float>(i), y1[i] = 2.f;
  int32_t index0 = 0, index1 = 1;
  const std::vector<HostTensor> in0 = {{"index", DType::kInt32, {1}, &index0},
                                       {"graph0/X", DType::kFloat32, {4, 2}, x0.data()},
                                       {"graph0/Y", DType::kFloat32, {4, 2}, y0.data()}};
  const std::vector<HostTensor> out0 = {{"graph0/O", DType::kFloat32, {4, 2}, o0.data()}};
  const std::vector<HostTensor> in1 = {{"index", DType::kInt32, {1}, &index1},
                                       {"graph1/X", DType::kFloat32, {2, 3}, x1.data()},
                                       {"graph1/Y", DType::kFloat32, {2, 3}, y1.data()}};
  const std::vector<HostTensor> out1 = {{"graph1/O", DType::kFloat32, {2, 3}, o1.data()}};
  ExpectNoAllocation("fused model, alternating subgraphs", [&] {
    runner->Execute(in0, out0);
    runner->Execute(in1, out1);
  });
  for (int i = 0; i < 8; ++i) CHECK(o0[i] == x0[i] + y0[i]);
  for (int i = 0; i < 6; ++i) CHECK(o1[i] == (x1[i] + y1[i]) * x1[i]);
}

// The kernels of real networks (blocked GEMM convolutions with per-thread scratch, the direct
// depthwise kernel, FusedElementwise; or the NCHW8c ones) on the intra-op pool.
void TestConvNetwork(const char* path, const char* what) {
  auto runner = ModelRunner::FromFile(path);
  std::vector<float> x(2 * 16 * 48 * 48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
  const std::vector<HostTensor> inputs = {{"X", DType::kFloat32, {2, 16, 48, 48}, x.data()}};
  bool finite = true;
  ExpectNoAllocation(what, [&] {
    auto r = runner->Execute(inputs);
    finite = finite && std::isfinite(static_cast<const float*>(r->outputs()[0].data)[0]);
  });
  CHECK(finite);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s WEIGHT_MODEL.popef FUSED_MODEL.popef CONV_NETWORK.popef BLOCKED_CONV_NETWORK.popef\n",
                 argv[0]);
    return 2;
  }
  TestWeightModel(argv[1], /*profile=*/false, /*runner_outputs=*/false);
  TestWeightModel(argv[1], /*profile=*/false, /*runner_outputs=*/true);
  TestWeightModel(argv[1], /*profile=*/true, /*runner_outputs=*/false);
  TestStagedBatches(argv[1]);
  TestFusedModel(argv[2]);
  TestConvNetwork(argv[3], "conv network (GEMM, depthwise, FusedElementwise)");
  TestConvNetwork(argv[4], "conv network, blocked layout (NchwcConv, reorders, FusedElementwise)");
  if (failures == 0) std::printf("no allocation on the execute path\n");
  return failures == 0 ? 0 : 1;
}
