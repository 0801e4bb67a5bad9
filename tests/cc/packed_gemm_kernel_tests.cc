// The packed-weight GEMM (kernels/matmul/packed_gemm.h, packed_gemm_kernel.h) against a naive
// double-precision reference: every build of its register tiles (portable, AVX2, AVX-512, as
// this CPU has them) on pools of 1 and 2 threads, odd and edge shapes (partial tiles, partial
// panels, several column blocks and K blocks), every epilogue input, float32 and float16; then
// the ops that take it (MatMul, FusedMatMul, Gemm, FusedGemm with a weight B, MatMul of two
// activations) through the kernel registry, on every SIMD path, and its per-address packed
// copies of weights.
// Run by kernel_tests.cc (tests/cc/test_kernels_cc.py).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/scoped_env.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/kernels/matmul/packed_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {
namespace {

using kernels::PackedGemmTileFns;

struct GemmShape {
  int64_t m, n, k;
};

// Partial row tiles (m % 6, m % 4), partial vectors and panels (n % 8, n % 16, n % 64), more than
// one column block (n > 256), more than one K block (k > 512; k > 1024: three), more strips than
// one group (m = 61: 11 or 16 strips, over two K blocks), a batch-1 dense layer, and single rows
// (ResNet50's classifier: four column blocks, four K blocks, the last panel partial).
const GemmShape kShapes[] = {{1, 1, 1},     {2, 3, 5},      {5, 7, 3},     {6, 16, 8},    {7, 17, 9},
                             {13, 65, 31},  {4, 64, 16},    {9, 100, 600}, {3, 300, 7},   {25, 513, 70},
                             {128, 96, 64}, {11, 48, 1030}, {7, 150, 1500}, {61, 330, 600}, {1, 70, 600},
                             {1, 1000, 2048}};

struct Variant {
  bool trans_b = false;
  float alpha = 1.0f;
  bool bias = false;
  float bias_scale = 1.0f;
  bool sum = false;
  const char* activation = "";
  std::vector<double> params = {};
  std::string Describe() const {
    return std::string(trans_b ? "transB " : "") + "alpha " + std::to_string(alpha) + (bias ? " bias" : "") +
           (bias ? " x" + std::to_string(bias_scale) : "") + (sum ? " sum" : "") + " activation '" + activation + "'";
  }
};

const Variant kVariants[] = {
    {},
    {true, 2.0f, true, 0.5f, true, "GeluErf"},
    {false, 1.0f, true, 1.0f, false, "Relu"},
    {true, -0.75f, false, 1.0f, true, "Clip", {-0.5, 0.5}},
    // bias and sum with no activation (a residual down-projection): the tiles' additions alone
    {false, 1.0f, true, 1.0f, true, ""},
    {false, 1.0f, true, 1.0f, false, ""},
};

kernels::Epilogue MakeEpilogue(const Variant& v) {
  const nlohmann::json no_attrs = nlohmann::json::object();
  const KernelSpec spec{"FusedGemm", "test_node", {}, {}, tfpopef::Attrs(no_attrs, "test")};
  return kernels::Epilogue{kernels::ParseActivation(spec, v.activation, std::vector<float>(v.params.begin(), v.params.end()))};
}

template <typename T>
std::vector<T> Encode(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) out[i] = static_cast<float>(v[i]);
    else out[i] = FloatToHalf(static_cast<float>(v[i]));
  }
  return out;
}

inline double Decode(float v) { return v; }
inline double Decode(uint16_t v) { return HalfToFloat(v); }

// C = the GEMM of one shape and variant on the given values (encoded as Out), on one build of the
// tiles and one pool, followed by a guard element that must keep kGuard.
constexpr double kGuard = 1234.0;

template <typename Out>
std::vector<Out> RunOnValues(const PackedGemmTileFns& tiles, kernels::ThreadPool& pool, const GemmShape& s,
                             const Variant& v, const std::vector<double>& a, const std::vector<double>& b,
                             const std::vector<double>& bias, const std::vector<double>& sum) {
  const std::vector<Out> a_t = Encode<Out>(a), b_t = Encode<Out>(b), bias_t = Encode<Out>(bias), sum_t = Encode<Out>(sum);
  // One guard element after C: the last panel's padding columns must not be stored.
  std::vector<Out> c(static_cast<size_t>(s.m * s.n + 1), Encode<Out>({kGuard})[0]);
  const kernels::PackedLayout layout = kernels::PackedLayoutFor(tiles, s.k, s.n);
  std::vector<float> packed(static_cast<size_t>(layout.floats()), 1e30f);  // padding must be written
  kernels::PackB(layout, b_t.data(), v.trans_b ? s.k : s.n, v.trans_b, v.alpha, packed.data());
  kernels::PackedGemmArgs<Out> args;
  args.m = s.m;
  args.a = a_t.data();
  args.lda = s.k;
  args.b = layout;
  args.b_data = packed.data();
  args.bias = v.bias ? bias_t.data() : nullptr;
  args.bias_scale = v.bias_scale;
  args.sum = v.sum ? sum_t.data() : nullptr;
  args.c = c.data();
  args.ldc = s.n;
  args.epilogue = MakeEpilogue(v);
  kernels::RunPackedGemm(tiles, args, pool);
  return c;
}

// One shape and variant on one build of the tiles and one pool, with T activations.
template <typename T>
void CheckPackedGemm(const PackedGemmTileFns& tiles, kernels::ThreadPool& pool, const GemmShape& s, const Variant& v,
                     uint32_t seed, const std::string& where) {
  auto round = std::is_same_v<T, float> ? AsFloat32 : AsFloat16;
  const auto a = round(RandomValues(s.m * s.k, -1, 1, seed));
  const auto b = round(RandomValues(s.k * s.n, -1, 1, seed + 1));  // [N, K] when trans_b
  const auto bias = round(RandomValues(s.n, -1, 1, seed + 2));
  const auto sum = round(RandomValues(s.m * s.n, -2, 2, seed + 3));
  std::vector<double> want(static_cast<size_t>(s.m * s.n));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p)
        acc += a[i * s.k + p] * (v.trans_b ? b[j * s.k + p] : b[p * s.n + j]);
      acc = static_cast<double>(v.alpha) * acc + (v.bias ? static_cast<double>(v.bias_scale) * bias[j] : 0.0) +
            (v.sum ? sum[i * s.n + j] : 0.0);
      want[i * s.n + j] = RefActivation(v.activation, v.params, acc);
    }
  const std::vector<T> c = RunOnValues<T>(tiles, pool, s, v, a, b, bias, sum);
  const bool half = std::is_same_v<T, uint16_t>;
  const double atol = 2e-6 * static_cast<double>(s.k), rtol = half ? 1.0 / 1024 : 1e-5;
  const std::string what = where + (half ? " float16" : " float32") + " M " + std::to_string(s.m) + " N " +
                           std::to_string(s.n) + " K " + std::to_string(s.k) + " " + v.Describe();
  if (Decode(c.back()) != kGuard) Fail(what + ": wrote past C");
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = Decode(c[i]);
    if (!(std::fabs(got - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      Fail(what + ": C[" + std::to_string(i / s.n) + ", " + std::to_string(i % s.n) + "] = " + std::to_string(got) +
           ", expected " + std::to_string(want[i]));
      return;
    }
  }
}

std::vector<std::pair<const PackedGemmTileFns*, std::string>> TileBuilds() {
  std::vector<std::pair<const PackedGemmTileFns*, std::string>> builds = {{&kernels::kPackedGemmPortableTiles, "portable"}};
#if defined(__x86_64__)
  if (kernels::vmath::CpuHasAvx2Fma()) builds.push_back({&kernels::kPackedGemmAvx2Tiles, "avx2"});
  if (kernels::vmath::CpuHasAvx512()) builds.push_back({&kernels::kPackedGemmAvx512Tiles, "avx512"});
#endif
  return builds;
}

KERNEL_TEST(PackedGemm_EveryTileBuild_Threads1And2_VsNaive) {
  kernels::ThreadPool one(1), two(2);
  uint32_t seed = 50000;
  for (const auto& [tiles, name] : TileBuilds())
    for (kernels::ThreadPool* pool : {&one, &two})
      for (const GemmShape& s : kShapes)
        for (const Variant& v : kVariants) {
          const std::string where = "[" + name + " tiles, " + std::to_string(pool->num_threads()) + " threads]";
          CheckPackedGemm<float>(*tiles, *pool, s, v, seed += 4, where);
          CheckPackedGemm<uint16_t>(*tiles, *pool, s, v, seed += 4, where);
        }
}

// float16 computes the float32 product of the widened operands and rounds it once: its C is,
// bit for bit, the float32 GEMM's C on the same values narrowed to nearest even, whether the
// tiles narrow it as they store (no activation) or the row pass does (after the activation).
KERNEL_TEST(PackedGemm_Float16_EveryTileBuild_BitIdenticalToFloat32RoundedOnce) {
  kernels::ThreadPool one(1), two(2);
  uint32_t seed = 53000;
  for (const auto& [tiles, name] : TileBuilds())
    for (kernels::ThreadPool* pool : {&one, &two})
      for (const GemmShape& s : kShapes)
        for (const Variant& v : kVariants) {
          seed += 4;
          const auto a = AsFloat16(RandomValues(s.m * s.k, -1, 1, seed));
          const auto b = AsFloat16(RandomValues(s.k * s.n, -1, 1, seed + 1));
          const auto bias = AsFloat16(RandomValues(s.n, -1, 1, seed + 2));
          const auto sum = AsFloat16(RandomValues(s.m * s.n, -2, 2, seed + 3));
          const std::vector<uint16_t> half = RunOnValues<uint16_t>(*tiles, *pool, s, v, a, b, bias, sum);
          const std::vector<float> full = RunOnValues<float>(*tiles, *pool, s, v, a, b, bias, sum);
          for (size_t i = 0; i < static_cast<size_t>(s.m * s.n); ++i)
            if (half[i] != FloatToHalf(full[i])) {
              Fail("[" + name + " tiles, " + std::to_string(pool->num_threads()) + " threads] M " + std::to_string(s.m) +
                   " N " + std::to_string(s.n) + " K " + std::to_string(s.k) + " " + v.Describe() + ": C[" +
                   std::to_string(i / s.n) + ", " + std::to_string(i % s.n) + "] float16 " +
                   std::to_string(HalfToFloat(half[i])) + ", float32 rounded once " +
                   std::to_string(HalfToFloat(FloatToHalf(full[i]))));
              return;
            }
        }
}

// The Gelu epilogue, whether the tiles apply it in registers (PackedGemmTileFns::gelu: the
// AVX-512 build) or a pass over the stored rows does: on every SIMD path with that path's tiles,
// C is, bit for bit, vmath::Gelu of the same GEMM's C without the activation (whose accuracy
// VectorMath_Accuracy_BothPaths checks); partial panels included.
KERNEL_TEST(PackedGemm_Gelu_EverySimdPath_BitIdenticalToVectorMathGelu) {
  kernels::ThreadPool two(2);
  ForEachSimdPath([&] {
    const PackedGemmTileFns& tiles = kernels::PackedGemmTiles();
    uint32_t seed = 56000;
    for (const GemmShape& s : kShapes)
      for (bool with_sum : {false, true}) {
        seed += 4;
        Variant gelu;
        gelu.bias = true;
        gelu.sum = with_sum;
        gelu.activation = "GeluErf";
        Variant none = gelu;
        none.activation = "";
        const auto a = AsFloat32(RandomValues(s.m * s.k, -2, 2, seed));
        const auto b = AsFloat32(RandomValues(s.k * s.n, -1, 1, seed + 1));
        const auto bias = AsFloat32(RandomValues(s.n, -3, 3, seed + 2));
        const auto sum = AsFloat32(RandomValues(s.m * s.n, -4, 4, seed + 3));
        const std::vector<float> got = RunOnValues<float>(tiles, two, s, gelu, a, b, bias, sum);
        std::vector<float> want = RunOnValues<float>(tiles, two, s, none, a, b, bias, sum);
        kernels::vmath::Gelu(want.data(), want.data(), s.m * s.n);
        for (size_t i = 0; i < static_cast<size_t>(s.m * s.n); ++i)
          if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            Fail("M " + std::to_string(s.m) + " N " + std::to_string(s.n) + " K " + std::to_string(s.k) +
                 (with_sum ? " sum" : "") + ": C[" + std::to_string(i / s.n) + ", " + std::to_string(i % s.n) +
                 "] = " + std::to_string(got[i]) + ", vmath::Gelu of C without it " + std::to_string(want[i]));
            return;
          }
      }
  });
}

// Batched products (attention's): each batch entry's A, packed B and C at its own offset.
KERNEL_TEST(PackedGemm_Batches_VsNaive) {
  kernels::ThreadPool two(2);
  const int64_t batches = 3, m = 7, k = 19, n = 70;
  uint32_t seed = 50500;
  for (const auto& [tiles, name] : TileBuilds()) {
    const auto a = AsFloat32(RandomValues(batches * m * k, -1, 1, seed++));
    const auto b = AsFloat32(RandomValues(batches * k * n, -1, 1, seed++));
    const auto sum = AsFloat32(RandomValues(batches * m * n, -1, 1, seed++));
    const kernels::PackedLayout layout = kernels::PackedLayoutFor(*tiles, k, n);
    const std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end()), sum32(sum.begin(), sum.end());
    std::vector<float> packed(static_cast<size_t>(batches * layout.floats()));
    for (int64_t i = 0; i < batches; ++i)
      kernels::PackB(layout, b32.data() + i * k * n, n, false, 1.0f, packed.data() + i * layout.floats());
    std::vector<float> c(static_cast<size_t>(batches * m * n));
    kernels::PackedGemmArgs<float> args;
    args.m = m;
    args.batches = batches;
    args.a = a32.data();
    args.lda = k;
    args.a_batch_stride = m * k;
    args.b = layout;
    args.b_data = packed.data();
    args.sum = sum32.data();
    args.c = c.data();
    args.ldc = n;
    args.c_batch_stride = m * n;
    kernels::RunPackedGemm(*tiles, args, two);
    for (int64_t i = 0; i < batches; ++i)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double want = sum[(i * m + r) * n + j];
          for (int64_t p = 0; p < k; ++p) want += a[(i * m + r) * k + p] * b[(i * k + p) * n + j];
          const double got = c[(i * m + r) * n + j];
          if (std::fabs(got - want) > 1e-5 + 1e-5 * std::fabs(want)) {
            Fail("[" + name + " tiles] batch " + std::to_string(i) + " C[" + std::to_string(r) + ", " +
                 std::to_string(j) + "] = " + std::to_string(got) + ", expected " + std::to_string(want));
            return;
          }
        }
  }
}

// ---------------------------------------------------------------- the ops, through the registry

// op(A) [.., M, K] x weight B, the reference in double; float16 rounded once at the end.
void RunGemmOp(const std::string& op, DType dtype, const Shape& a_shape, int64_t n, bool trans_b, float alpha,
               float beta, bool bias, bool sum, const char* activation, uint32_t seed) {
  const int64_t k = a_shape.back(), m = NumElements(a_shape) / k;
  const bool gemm = op == "Gemm" || op == "FusedGemm", fused = op.rfind("Fused", 0) == 0;
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto a = round(RandomValues(m * k, -1, 1, seed));
  const auto b = round(RandomValues(k * n, -1, 1, seed + 1));
  const auto c = round(RandomValues(n, -1, 1, seed + 2));
  const auto s = round(RandomValues(m * n, -1, 1, seed + 3));
  Shape y_shape = a_shape;
  y_shape.back() = n;
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * (trans_b ? b[j * k + p] : b[p * n + j]);
      acc = alpha * acc + (bias ? beta * c[j] : 0.0) + (sum ? s[i * n + j] : 0.0);
      y[i * n + j] = RefActivation(activation, {}, acc);
    }
  KernelTester t(op);
  nlohmann::json attrs = nlohmann::json::object();
  if (gemm) attrs = {{"transA", 0}, {"transB", trans_b ? 1 : 0}, {"alpha", alpha}, {"beta", beta}};
  if (fused) {
    attrs["has_bias"] = bias ? 1 : 0;
    attrs["has_sum"] = sum ? 1 : 0;
    attrs["activation"] = activation;
    attrs["activation_params"] = nlohmann::json::array();
    if (!gemm && alpha != 1.0f) attrs["alpha"] = alpha;  // FusedMatMul's optional alpha
  }
  t.Attrs(attrs);
  t.AddInput(dtype, a_shape, a).AddInput(dtype, trans_b ? Shape{n, k} : Shape{k, n}, b).ConstantInput(1);
  if (bias) t.AddInput(dtype, gemm ? Shape{1, n} : Shape{n}, c);
  if (sum) t.AddInput(dtype, y_shape, s);
  const double tol = dtype == F16 ? 1.0 / 1024 : 1e-5;
  t.AddOutput(dtype, y_shape, dtype == F16 ? AsFloat16(y) : y).Tolerance(2e-6 * k, tol).Concurrently(2, 2).Run();
}

// MatMul of two activations (B packed on every run into scratch), against numpy.matmul in double.
void RunActivationMatMul(DType dtype, const Shape& a_shape, const Shape& b_shape, uint32_t seed) {
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto a = round(RandomValues(NumElements(a_shape), -1, 1, seed));
  const auto b = round(RandomValues(NumElements(b_shape), -1, 1, seed + 1));
  Shape out;
  const auto y = RefMatMul(a, a_shape, b, b_shape, &out);
  KernelTester("MatMul")
      .AddInput(dtype, a_shape, a)
      .AddInput(dtype, b_shape, b)
      .AddOutput(dtype, out, dtype == F16 ? AsFloat16(y) : y)
      .Tolerance(2e-6 * a_shape.back(), dtype == F16 ? 1.0 / 1024 : 1e-5)
      .Concurrently(2, 2)
      .Run();
}

KERNEL_TEST(PackedGemm_Ops_EverySimdPath_VsNaive) {
  ScopedEnv packed("TF_POPEF_GEMM", "packed");
  ForEachSimdPath([&] {
    uint32_t seed = 51000;
    for (DType dtype : {F32, F16}) {
      RunGemmOp("MatMul", dtype, {2, 37, 70}, 90, false, 1, 1, false, false, "", seed += 4);
      RunGemmOp("MatMul", dtype, {1, 1, 33}, 300, false, 1, 1, false, false, "", seed += 4);
      RunGemmOp("FusedMatMul", dtype, {3, 13, 40}, 70, false, 1, 1, true, true, "Relu", seed += 4);
      RunGemmOp("FusedMatMul", dtype, {9, 520}, 33, false, 1, 1, true, false, "GeluErf", seed += 4);
      RunGemmOp("Gemm", dtype, {7, 29}, 65, true, 0.5f, 2.0f, true, false, "", seed += 4);
      RunGemmOp("Gemm", dtype, {7, 29}, 65, false, 1.5f, 0.0f, true, false, "", seed += 4);  // beta 0: C unread
      RunGemmOp("FusedGemm", dtype, {12, 50}, 17, true, 1.0f, 1.0f, true, true, "Sigmoid", seed += 4);
      RunActivationMatMul(dtype, {2, 3, 13, 20}, {2, 3, 20, 17}, seed += 4);  // attention-like
      RunActivationMatMul(dtype, {9, 40}, {40, 70}, seed += 4);
      RunActivationMatMul(dtype, {2, 5, 8}, {8, 33}, seed += 4);  // one B for both batch entries
    }
  });
}

// FusedMatMul's alpha (the power of two fold_column_scale_into_matmul leaves for a float16 layer
// scale) on the packed GEMM and on OpenBLAS (the unpacked kernel behind the float16 adapter).
KERNEL_TEST(FusedMatMul_Alpha_PackedAndBlas_EverySimdPath_VsNaive) {
  for (const char* gemm : {"packed", "blas"}) {
    ScopedEnv choice("TF_POPEF_GEMM", gemm);
    ForEachSimdPath([&] {
      uint32_t seed = 51500;
      for (DType dtype : {F32, F16}) {
        RunGemmOp("FusedMatMul", dtype, {2, 7, 96}, 40, false, 0.375f, 1, true, true, "", seed += 4);
        RunGemmOp("FusedMatMul", dtype, {5, 384}, 96, false, 2.5f, 1, false, true, "", seed += 4);
        RunGemmOp("FusedMatMul", dtype, {3, 40}, 24, false, 0.0625f, 1, true, false, "Relu", seed += 4);
      }
    });
  }
}

// A weight's packed copy belongs to its address: a kernel run on another device (other weight
// memory, here other bytes) packs that device's weights, and the first device's copy is still
// right afterwards (more devices than the copies kept).
KERNEL_TEST(PackedGemm_OneCopyPerWeightAddress) {
  ScopedEnv packed("TF_POPEF_GEMM", "packed");
  const Shape a_shape = {5, 40}, b_shape = {40, 70}, y_shape = {5, 70};
  const auto a = AsFloat32(RandomValues(NumElements(a_shape), -2, 2, 52000));
  std::vector<std::vector<float>> weights;
  std::vector<std::vector<double>> expected;
  for (uint32_t device = 0; device < 6; ++device) {
    const auto w = AsFloat32(RandomValues(NumElements(b_shape), -2, 2, 52001 + device));
    Shape out;
    expected.push_back(RefMatMul(a, a_shape, w, b_shape, &out));
    weights.emplace_back(w.begin(), w.end());
  }
  const nlohmann::json no_attrs = nlohmann::json::object();
  KernelSpec spec{"MatMul", "test_node", {{F32, a_shape}, {F32, b_shape}}, {{F32, y_shape}},
                  tfpopef::Attrs(no_attrs, "op 'MatMul' (node 'test_node')")};
  spec.constant_inputs = {false, true};
  const std::unique_ptr<Kernel> kernel = KernelRegistry::Get().Create(spec);
  const std::vector<float> a32(a.begin(), a.end());
  std::vector<uint8_t> scratch(kernel->scratch_bytes() + 64);
  void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  for (size_t device : {0, 1, 0, 2, 3, 4, 5, 0, 1, 5}) {
    std::vector<float> y(static_cast<size_t>(NumElements(y_shape)));
    const void* inputs[] = {a32.data(), weights[device].data()};
    void* outputs[] = {y.data()};
    kernel->Run(KernelContext{inputs, outputs, aligned});
    for (size_t i = 0; i < y.size(); ++i)
      if (std::fabs(y[i] - expected[device][i]) > 1e-4) {
        Fail("device " + std::to_string(device) + ": output " + std::to_string(i) + " is " + std::to_string(y[i]) +
             ", expected " + std::to_string(expected[device][i]));
        break;
      }
  }
}

KERNEL_TEST(PackedGemm_Errors_BadSetting) {
  ScopedEnv bad("TF_POPEF_GEMM", "fastest");
  KernelTester("MatMul")
      .AddInput(F32, {4, 8}, std::vector<double>(32))
      .AddInput(F32, {8, 4}, std::vector<double>(32))
      .ConstantInput(1)
      .AddOutput(F32, {4, 4}, std::vector<double>(16))
      .ExpectError(kInvalid, "TF_POPEF_GEMM=\"fastest\": expected one of auto, packed, blas");
}

// The scaled tiles' row scale (PackedGemmTileAdd::row_scale) and B read in place with its own row
// stride (ldb), as attention's P·V uses them: on every SIMD path, every tile height and panel width, full
// and partial panels, with and without accumulating, C is bit for bit the plain tile's C on the
// packed copy of B times the row's scale, and float16 C (half_c) that value rounded once.
KERNEL_TEST(PackedGemm_TileRowScaleAndStridedB_EverySimdPath_BitIdenticalToScaledPlainTile) {
  ForEachSimdPath([&] {
    const PackedGemmTileFns& tiles = kernels::PackedGemmTiles();
    uint32_t seed = 57000;
    const int64_t k = 37;
    const auto floats = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    for (int64_t rows = 1; rows <= tiles.rows; ++rows)
      for (int64_t width = tiles.lanes; width <= tiles.panel_width; width += tiles.lanes)
        for (int64_t cols : {width, width - 3})
          for (bool accumulate : {false, true}) {
            if (cols < 1) continue;
            seed += 4;
            const int64_t ldb = width + 13, ldc = width + 5;
            const auto a = floats(AsFloat32(RandomValues(rows * k, -2, 2, seed)));
            const auto strided = floats(AsFloat32(RandomValues(k * ldb, -1, 1, seed + 1)));
            const auto scale = floats(AsFloat32(RandomValues(rows, 0.01, 1, seed + 2)));
            const auto c0 = floats(AsFloat32(RandomValues(rows * ldc, -3, 3, seed + 3)));
            std::vector<float> packed(static_cast<size_t>(k * width));
            for (int64_t p = 0; p < k; ++p)
              for (int64_t j = 0; j < width; ++j) packed[p * width + j] = strided[p * ldb + j];
            std::vector<float> want(c0.begin(), c0.end()), got(c0.begin(), c0.end());
            tiles.tile(rows, cols, k, a.data(), k, packed.data(), width, want.data(), ldc, accumulate, nullptr);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < cols; ++j) want[r * ldc + j] *= scale[r];
            kernels::PackedGemmTileAdd add;
            add.row_scale = scale.data();
            add.ldb = ldb;
            tiles.scaled_tile(rows, cols, k, a.data(), k, strided.data(), width, got.data(), ldc, accumulate, &add);
            std::vector<uint16_t> half(static_cast<size_t>(rows * ldc), 0x7e00);
            std::vector<float> untouched(c0.begin(), c0.end());
            add.half_c = half.data();
            add.ldhalf = ldc;
            if (!accumulate)
              tiles.scaled_tile(rows, cols, k, a.data(), k, strided.data(), width, untouched.data(), ldc, false, &add);
            const std::string where = "rows " + std::to_string(rows) + " width " + std::to_string(width) + " cols " +
                                      std::to_string(cols) + (accumulate ? " accumulating" : "");
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < ldc; ++j) {
                const size_t i = static_cast<size_t>(r * ldc + j);
                if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                  Fail(where + ": C[" + std::to_string(r) + ", " + std::to_string(j) + "] = " + std::to_string(got[i]) +
                       ", the plain tile's times the row scale " + std::to_string(want[i]));
                  return;
                }
                if (accumulate) continue;
                const uint16_t want_half = j < cols ? FloatToHalf(want[i]) : uint16_t{0x7e00};
                if (half[i] != want_half || std::memcmp(&untouched[i], &c0[i], sizeof(float)) != 0) {
                  Fail(where + ": float16 C[" + std::to_string(r) + ", " + std::to_string(j) + "] = " +
                       std::to_string(half[i]) + ", want " + std::to_string(want_half) + " (and float32 C untouched)");
                  return;
                }
              }
          }
  });
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
