// The vector math of kernels/support/vector_math.h on both SIMD paths (accuracy against double
// precision over the whole float range, special values, tails, in-place), and the kernels
// that use it or the intra-op pool on tensors large enough to be split across threads,
// against the double-precision references, on both paths. Run by the binary of
// kernel_tests.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/base/error.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {
namespace {

namespace vm = kernels::vmath;

// Error of `got` against the exact value in units of the float ulp at `want` (denormals:
// the smallest denormal). NaN must match NaN, inf the same inf.
double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1e30;
  if (std::isinf(static_cast<float>(want)))
    return std::isinf(got) && (got > 0) == (want > 0) ? 0.0 : 1e30;
  if (std::isnan(got) || std::isinf(got)) return 1e30;
  int exponent;
  std::frexp(want, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Inputs over the whole float range: random bit patterns (every exponent, denormals), dense
// uniform ranges where the functions change shape, and the special values.
std::vector<float> WideInputs() {
  std::vector<float> x;
  std::mt19937 rng(2024);
  for (int i = 0; i < 1500000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  std::uniform_real_distribution<float> wide(-110.0f, 110.0f), mid(-6.0f, 6.0f), narrow(-1.2f, 1.2f);
  for (int i = 0; i < 500000; ++i) x.push_back(wide(rng));
  for (int i = 0; i < 500000; ++i) x.push_back(mid(rng));
  for (int i = 0; i < 300000; ++i) x.push_back(narrow(rng));
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-45f, -1e-45f, 1e-40f, -1e-40f,
                  1.17549435e-38f, 3.4028235e38f, -3.4028235e38f, 88.72f, 88.73f, -87.33f, -103.9f, -104.5f, 0.5f,
                  0.625f, -0.625f, 1.0f, -1.0f, 3.9f, 4.0f, 1e-8f, -1e-8f})
    x.push_back(f);
  return x;
}

// 0.5·x·(1 + erf(x/√2)) as 0.5·x·erfc(−x/√2), which keeps its relative accuracy in double for
// x << 0 (1 + erf cancels to 0 in double below x ≈ −8.3); −0 at −inf (the limit).
double GeluExact(double v) {
  return v == -std::numeric_limits<double>::infinity() ? -0.0 : 0.5 * v * std::erfc(-v * 0.70710678118654752440);
}
constexpr double kGeluMaxUlp = 5;  // vector_math.h

struct AccuracyCase {
  const char* name;
  std::function<void(const float*, float*, int64_t)> fn;
  std::function<double(double)> exact;
  double max_ulp;
  double skip_below;  // inputs below this are not measured (documented cancellation/denormal zones)
};

KERNEL_TEST(VectorMath_Accuracy_BothPaths) {
  const std::vector<float> x = WideInputs();
  const double kLowest = -std::numeric_limits<double>::infinity();
  const double kSqrt2OverPi = 0.79788456080286535588;
  const std::vector<AccuracyCase> cases = {
      {"Exp", vm::Exp, [](double v) { return std::exp(v); }, 2, kLowest},
      {"Log", vm::Log, [](double v) { return std::log(v); }, 2, kLowest},
      {"Tanh", vm::Tanh, [](double v) { return std::tanh(v); }, 3, kLowest},
      {"Erf", vm::Erf, [](double v) { return std::erf(v); }, 4, kLowest},
      {"Sigmoid", vm::Sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, 3, kLowest},
      // x·sigmoid(x) with sigmoid(x) a float denormal (x < -87) keeps only the denormal's bits.
      {"Swish", vm::Swish, [](double v) { return v / (1.0 + std::exp(-v)); }, 4, -87.0},
      {"Gelu", vm::Gelu, GeluExact, kGeluMaxUlp, kLowest},
      // 1 + tanh cancels for x < -1 in both paths (the formula, not the function).
      {"GeluTanh", vm::GeluTanh,
       [=](double v) { return 0.5 * v * (1.0 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))); }, 6, -1.0},
      {"Elu", [](const float* a, float* b, int64_t n) { vm::Elu(a, b, n, 1.0f, 1.0f); },
       [](double v) { return v < 0 ? std::expm1(v) : v; }, 3, kLowest},
  };
  ForEachSimdPath([&] {
    std::vector<float> y(x.size());
    for (const AccuracyCase& c : cases) {
      c.fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
      double worst = 0.0;
      float worst_at = 0.0f;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!(x[i] >= c.skip_below) && !std::isnan(x[i])) continue;
        const double e = UlpError(y[i], c.exact(static_cast<double>(x[i])));
        if (e > worst) worst = e, worst_at = x[i];
      }
      if (worst > c.max_ulp)
        Fail(std::string(c.name) + ": " + std::to_string(worst) + " ulp at x = " + std::to_string(worst_at) +
             " (documented bound " + std::to_string(c.max_ulp) + ")");
    }
  });
}

// The AVX-512 path's Sigmoid and Swish (16 lanes, vscalefps) compute the AVX2 path's bits, on
// the whole float range and for every tail length.
KERNEL_TEST(VectorMath_SigmoidSwish_Avx512BitIdenticalToAvx2) {
  if (!vm::CpuHasAvx512()) return;
  const std::vector<float> x = WideInputs();
  const vm::SimdPath before = vm::ActivePath();
  for (auto fn : {vm::Sigmoid, vm::Swish}) {
    std::vector<float> avx2(x.size()), avx512(x.size());
    for (int64_t n : {static_cast<int64_t>(x.size()), int64_t{1}, int64_t{15}, int64_t{17}, int64_t{31}}) {
      vm::SetPathForTesting(vm::SimdPath::kAvx2);
      fn(x.data(), avx2.data(), n);
      vm::SetPathForTesting(vm::SimdPath::kAvx512);
      fn(x.data(), avx512.data(), n);
      for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(&avx2[i], &avx512[i], sizeof(float)) != 0 && !(std::isnan(avx2[i]) && std::isnan(avx512[i]))) {
          Fail((fn == vm::Sigmoid ? std::string("Sigmoid") : std::string("Swish")) + " at x = " +
               std::to_string(x[i]) + " (n = " + std::to_string(n) + "): avx2 " + std::to_string(avx2[i]) +
               ", avx512 " + std::to_string(avx512[i]));
          break;
        }
    }
  }
  vm::SetPathForTesting(before);
}

// Gelu on every 2^-13 of [-16, 16]: the negative side down to where x·Φ(x) rounds to 0,
// the denormal results around x = -14, and the crossovers of the polynomial's argument.
KERNEL_TEST(VectorMath_GeluDenseSweep_BothPaths) {
  std::vector<float> x;
  for (int i = -16 * 8192; i <= 16 * 8192; ++i) x.push_back(static_cast<float>(i) / 8192.0f);
  ForEachSimdPath([&] {
    std::vector<float> y(x.size());
    vm::Gelu(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0.0;
    float worst_at = 0.0f;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = UlpError(y[i], GeluExact(x[i]));
      if (e > worst) worst = e, worst_at = x[i];
    }
    if (worst > kGeluMaxUlp)
      Fail("Gelu: " + std::to_string(worst) + " ulp at x = " + std::to_string(worst_at) + " (documented bound " +
           std::to_string(kGeluMaxUlp) + ")");
  });
}

// The AVX-512 path's Gelu (Φ(−t) from kGeluMillsTable and a 2^(j/16) table) keeps a tighter bound
// than the paths' common 5 ulp: 3.90 ulp on the dense sweep, 4.04 over wide random inputs
// (docs/benchmarks.md, "The Gelu from tables"), so 4.1 on both, including the interval edges
// t = k/2 ± 1/4 (every 2^-13) and the deep negative side where the result is a denormal.
KERNEL_TEST(VectorMath_GeluAvx512Tables_Within4Point1Ulp) {
  if (!vm::CpuHasAvx512()) return;
  std::vector<float> x = WideInputs();
  for (int i = -16 * 8192; i <= 16 * 8192; ++i) x.push_back(static_cast<float>(i) / 8192.0f);
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> deep(-14.6f, -8.0f);
  for (int i = 0; i < 500000; ++i) x.push_back(deep(rng));
  const vm::SimdPath before = vm::ActivePath();
  vm::SetPathForTesting(vm::SimdPath::kAvx512);
  std::vector<float> y(x.size());
  vm::Gelu(x.data(), y.data(), static_cast<int64_t>(x.size()));
  vm::SetPathForTesting(before);
  double worst = 0.0;
  float worst_at = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = UlpError(y[i], GeluExact(x[i]));
    if (e > worst) worst = e, worst_at = x[i];
  }
  if (worst > 4.1) Fail("AVX-512 Gelu: " + std::to_string(worst) + " ulp at x = " + std::to_string(worst_at));
}

// Every tail length of the 8- and 16-lane loops, in place and not, with guard values around.
KERNEL_TEST(VectorMath_GeluTailsInPlace_BothPaths) {
  ForEachSimdPath([&] {
    for (int64_t n = 0; n <= 35; ++n) {
      std::vector<float> src(static_cast<size_t>(n) + 32, -7.0f), dst(src);
      for (int64_t i = 0; i < n; ++i) src[16 + i] = 0.37f * static_cast<float>(i) - 6.1f;
      std::vector<float> in_place(src);
      vm::Gelu(src.data() + 16, dst.data() + 16, n);
      vm::Gelu(in_place.data() + 16, in_place.data() + 16, n);
      for (size_t i = 0; i < src.size(); ++i) {
        const bool inside = i >= 16 && i < 16 + static_cast<size_t>(n);
        const double want = inside ? GeluExact(src[i]) : -7.0;
        if (UlpError(dst[i], want) > kGeluMaxUlp || UlpError(in_place[i], want) > kGeluMaxUlp) {
          Fail("Gelu, n = " + std::to_string(n) + ": element " + std::to_string(i) + " is " + std::to_string(dst[i]) +
               " / " + std::to_string(in_place[i]) + " in place, expected " + std::to_string(want));
          break;
        }
      }
    }
  });
}

KERNEL_TEST(VectorMath_SpecialValues_BothPaths) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto one = [](void (*f)(const float*, float*, int64_t), float v) {
    float out;
    f(&v, &out, 1);
    return out;
  };
  auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; };
  ForEachSimdPath([&] {
    EXPECT_TRUE(one(vm::Exp, -inf) == 0.0f && one(vm::Exp, inf) == inf && std::isnan(one(vm::Exp, nan)));
    EXPECT_TRUE(one(vm::Exp, 0.0f) == 1.0f && one(vm::Exp, 1e-45f) == 1.0f && one(vm::Exp, 89.0f) == inf);
    EXPECT_TRUE(one(vm::Exp, -200.0f) == 0.0f);
    EXPECT_TRUE(UlpError(one(vm::Exp, -100.0f), std::exp(-100.0)) <= 1.0);  // a denormal result
    EXPECT_TRUE(one(vm::Log, 0.0f) == -inf && one(vm::Log, -0.0f) == -inf && std::isnan(one(vm::Log, -1.0f)));
    EXPECT_TRUE(one(vm::Log, inf) == inf && std::isnan(one(vm::Log, nan)) && one(vm::Log, 1.0f) == 0.0f);
    EXPECT_TRUE(std::isnan(one(vm::Log, -inf)));
    EXPECT_TRUE(UlpError(one(vm::Log, 1e-45f), std::log(static_cast<double>(1e-45f))) <= 1.0);  // denormal input
    EXPECT_TRUE(one(vm::Tanh, inf) == 1.0f && one(vm::Tanh, -inf) == -1.0f && std::isnan(one(vm::Tanh, nan)));
    EXPECT_TRUE(same_bits(one(vm::Tanh, -0.0f), -0.0f) && one(vm::Tanh, 1e-40f) == 1e-40f);
    EXPECT_TRUE(one(vm::Erf, inf) == 1.0f && one(vm::Erf, -inf) == -1.0f && std::isnan(one(vm::Erf, nan)));
    EXPECT_TRUE(same_bits(one(vm::Erf, -0.0f), -0.0f) && one(vm::Erf, 5.0f) == 1.0f);
    EXPECT_TRUE(one(vm::Sigmoid, inf) == 1.0f && one(vm::Sigmoid, -inf) == 0.0f && std::isnan(one(vm::Sigmoid, nan)));
    EXPECT_TRUE(one(vm::Sigmoid, 0.0f) == 0.5f && one(vm::Sigmoid, -200.0f) == 0.0f);
    EXPECT_TRUE(UlpError(one(vm::Sigmoid, -95.0f), 1.0 / (1.0 + std::exp(95.0))) <= 1.0);  // denormal, not 0
    // Either side of the normal/denormal boundary (the documented 3 ulp while the result keeps
    // ~24 bits) and the deepest denormals (1 ulp), -0 (the sign bit picks the x < 0 form there)
    // and a NaN with its sign bit set.
    const std::vector<std::pair<float, double>> tails = {
        {-87.0f, 3.0}, {-87.5f, 3.0}, {-88.0f, 3.0}, {-103.0f, 1.0}, {-103.9f, 1.0}};
    for (const auto& [v, bound] : tails)
      EXPECT_TRUE(UlpError(one(vm::Sigmoid, v), 1.0 / (1.0 + std::exp(-static_cast<double>(v)))) <= bound);
    EXPECT_TRUE(one(vm::Sigmoid, -0.0f) == 0.5f && std::isnan(one(vm::Sigmoid, std::copysign(nan, -1.0f))));
    EXPECT_TRUE(std::isnan(one(vm::Gelu, nan)) && one(vm::Gelu, inf) == inf && one(vm::Gelu, 0.0f) == 0.0f);
    EXPECT_TRUE(same_bits(one(vm::Gelu, -inf), -0.0f) && same_bits(one(vm::Gelu, -20.0f), -0.0f));
    EXPECT_TRUE(same_bits(one(vm::Gelu, -0.0f), -0.0f) && one(vm::Gelu, 3e38f) == 3e38f);
    EXPECT_TRUE(std::isnan(one(vm::GeluTanh, nan)) && one(vm::GeluTanh, inf) == inf);
    EXPECT_TRUE(std::isnan(one(vm::Swish, nan)) && one(vm::Swish, inf) == inf && one(vm::Swish, 0.0f) == 0.0f);
    float e;
    const float minus_inf = -inf;
    vm::Elu(&minus_inf, &e, 1, 2.0f, 3.0f);
    EXPECT_TRUE(e == -6.0f);
    const float tiny = -1e-20f;
    vm::Elu(&tiny, &e, 1, 1.0f, 1.0f);
    EXPECT_TRUE(e == -1e-20f);  // expm1, not exp − 1
    // Softmax helpers.
    const std::vector<float> row = {1.0f, nan, 3.0f, -inf, 2.0f, 0.5f, 7.0f, -1.0f, 6.5f, 4.0f, 2.5f};
    EXPECT_TRUE(vm::Max(row.data(), static_cast<int64_t>(row.size())) == 7.0f);
    EXPECT_TRUE(vm::Max(row.data(), 0) == -inf);
    const std::vector<float> r2 = {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f};
    std::vector<float> out(r2.size() + 1, 42.0f);
    const float sum = vm::ExpShiftedSum(r2.data(), out.data(), static_cast<int64_t>(r2.size()), 10.0f);
    double want = 0.0;
    for (size_t i = 0; i < r2.size(); ++i) {
      want += std::exp(r2[i] - 10.0);
      EXPECT_TRUE(UlpError(out[i], std::exp(r2[i] - 10.0)) <= 2.0);
    }
    EXPECT_TRUE(std::fabs(sum - want) <= 1e-6 * want);
    EXPECT_TRUE(out.back() == 42.0f);
  });
}

KERNEL_TEST(VectorMath_TailsInPlaceAndBounds_BothPaths) {
  ForEachSimdPath([&] {
    for (int64_t n = 0; n <= 19; ++n) {
      std::vector<float> buf(static_cast<size_t>(n) + 16, -7.0f);  // 8 guard values on both sides
      for (int64_t i = 0; i < n; ++i) buf[8 + i] = 0.25f * static_cast<float>(i) - 2.0f;
      std::vector<float> expected(buf);
      for (int64_t i = 0; i < n; ++i) expected[8 + i] = std::tanh(expected[8 + i]);
      vm::Tanh(buf.data() + 8, buf.data() + 8, n);  // in place
      for (size_t i = 0; i < buf.size(); ++i)
        if (!(std::fabs(buf[i] - expected[i]) <= 1e-6f)) {
          Fail("Tanh in place, n = " + std::to_string(n) + ": element " + std::to_string(i) + " is " +
               std::to_string(buf[i]) + ", expected " + std::to_string(expected[i]));
          break;
        }
      std::vector<float> src(static_cast<size_t>(n), 1.0f), dst(static_cast<size_t>(n) + 8, -7.0f);
      const float sum = vm::ExpShiftedSum(src.data(), dst.data(), n, 1.0f);
      EXPECT_TRUE(sum == static_cast<float>(n));
      for (int64_t i = 0; i < n + 8; ++i) EXPECT_TRUE(dst[i] == (i < n ? 1.0f : -7.0f));
    }
  });
}

// The softmax's exponentials are vm::Exp's, bit for bit (the AVX-512 path has its own 16-lane
// loop), over the whole float range and every tail length of the 8- and 16-lane loops, with
// guard values around; the sum is theirs to float accuracy.
KERNEL_TEST(VectorMath_ExpShiftedSumIsExp_BothPaths) {
  const std::vector<float> wide = WideInputs();
  ForEachSimdPath([&] {
    for (const float shift : {0.0f, 3.5f, -20.0f}) {
      std::vector<float> shifted(wide.size()), want(wide.size()), got(wide.size());
      for (size_t i = 0; i < wide.size(); ++i) shifted[i] = wide[i] - shift;
      vm::Exp(shifted.data(), want.data(), static_cast<int64_t>(wide.size()));
      vm::ExpShiftedSum(wide.data(), got.data(), static_cast<int64_t>(wide.size()), shift);
      for (size_t i = 0; i < wide.size(); ++i) {
        const bool same = std::isnan(want[i]) ? std::isnan(got[i]) : std::memcmp(&want[i], &got[i], 4) == 0;
        if (!same) {
          Fail("ExpShiftedSum(shift " + std::to_string(shift) + ") at x = " + std::to_string(wide[i]) + ": " +
               std::to_string(got[i]) + ", Exp gives " + std::to_string(want[i]));
          break;
        }
      }
    }
    for (int64_t n = 0; n <= 35; ++n) {
      std::vector<float> src(static_cast<size_t>(n) + 32, 5.0f), dst(src.size(), -7.0f);
      double want_sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        src[16 + i] = 0.37f * static_cast<float>(i) - 6.1f;
        want_sum += std::exp(static_cast<double>(src[16 + i] - 2.0f));
      }
      const float sum = vm::ExpShiftedSum(src.data() + 16, dst.data() + 16, n, 2.0f);
      if (!(std::fabs(sum - want_sum) <= 1e-6 * want_sum)) Fail("ExpShiftedSum, n = " + std::to_string(n) + ": sum");
      for (size_t i = 0; i < dst.size(); ++i) {
        const bool inside = i >= 16 && i < 16 + static_cast<size_t>(n);
        const double want = inside ? std::exp(static_cast<double>(src[i] - 2.0f)) : -7.0;
        if (inside ? UlpError(dst[i], want) > 2.0 : dst[i] != -7.0f) {
          Fail("ExpShiftedSum, n = " + std::to_string(n) + ": element " + std::to_string(i) + " is " +
               std::to_string(dst[i]) + ", expected " + std::to_string(want));
          break;
        }
      }
    }
  });
}

KERNEL_TEST(VectorMath_SimdSetting) {
  EXPECT_TRUE(vm::SimdPathFromSetting("portable") == vm::SimdPath::kPortable);
  const vm::SimdPath best = vm::CpuHasAvx512()    ? vm::SimdPath::kAvx512
                            : vm::CpuHasAvx2Fma() ? vm::SimdPath::kAvx2
                                                  : vm::SimdPath::kPortable;
  EXPECT_TRUE(vm::SimdPathFromSetting(nullptr) == best);
  EXPECT_TRUE(vm::SimdPathFromSetting("") == best);
  EXPECT_TRUE(vm::SimdPathFromSetting("auto") == best);
  if (vm::CpuHasAvx2Fma()) EXPECT_TRUE(vm::SimdPathFromSetting("avx2") == vm::SimdPath::kAvx2);
  if (vm::CpuHasAvx512()) EXPECT_TRUE(vm::SimdPathFromSetting("avx512") == vm::SimdPath::kAvx512);
  EXPECT_TRUE(!vm::CpuHasAvx512() || vm::CpuHasAvx2Fma());  // AVX-512 path includes the AVX2 code
  for (const char* name : {"avx2", "avx512"}) {  // a path the CPU lacks is refused, named
    const vm::SimdPath path = std::string(name) == "avx2" ? vm::SimdPath::kAvx2 : vm::SimdPath::kAvx512;
    if (path == vm::SimdPath::kAvx2 ? vm::CpuHasAvx2Fma() : vm::CpuHasAvx512()) continue;
    bool refused = false;
    try {
      vm::SimdPathFromSetting(name);
    } catch (const Error& e) {
      refused = e.code() == ErrorCode::kUnimplemented;
    }
    EXPECT_TRUE(refused);
  }
  for (const char* bad : {"AVX2", "sse", "1", "portable "}) {
    std::string message;
    try {
      vm::SimdPathFromSetting(bad);
    } catch (const Error& e) {
      message = e.what();
      EXPECT_TRUE(e.code() == ErrorCode::kInvalidArgument);
    }
    if (message != "TF_POPEF_SIMD=\"" + std::string(bad) + "\": expected 'auto', 'avx512', 'avx2' or 'portable'")
      Fail(std::string("TF_POPEF_SIMD=") + bad + " gave '" + message + "'");
  }
}

// ---------------------------------------------------------------- kernels on large tensors

// Big enough that every kernel below splits across the pool (> 2 chunks of its grain).
const Shape kBig = {2, 3, 97, 151};  // 87,882 elements, odd sizes for the vector tails

std::vector<double> Map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y;
  y.reserve(x.size());
  for (double v : x) y.push_back(f(v));
  return y;
}

KERNEL_TEST(Unary_LargeTensors_BothPaths_VsReference) {
  const auto x = AsFloat32(RandomValues(NumElements(kBig), -9, 9, 4242));
  auto positive = AsFloat32(RandomValues(NumElements(kBig), 1e-6, 50, 4243));
  const double k = 0.79788456080286535588;
  ForEachSimdPath([&] {
    auto check = [&](const char* op, const std::vector<double>& in, const std::function<double(double)>& f,
                     nlohmann::json attrs) {
      KernelTester t(op);
      for (auto& [name, value] : attrs.items()) t.Attr(name, value);
      t.AddInput(F32, kBig, in).AddOutput(F32, kBig, Map(in, f)).Tolerance(1e-30, 1e-6).Run();
    };
    check("Sigmoid", x, [](double v) { return 1 / (1 + std::exp(-v)); }, nlohmann::json::object());
    check("Tanh", x, [](double v) { return std::tanh(v); }, nlohmann::json::object());
    check("Exp", x, [](double v) { return std::exp(v); }, nlohmann::json::object());
    check("Erf", x, [](double v) { return std::erf(v); }, nlohmann::json::object());
    check("Log", positive, [](double v) { return std::log(v); }, nlohmann::json::object());
    check("Elu", x, [](double v) { return v < 0 ? 0.7 * std::expm1(v) : v; }, {{"alpha", 0.7}});
    check("Selu", x, [](double v) { return 1.05 * (v < 0 ? 1.67 * std::expm1(v) : v); },
          {{"alpha", 1.67}, {"gamma", 1.05}});
    KernelTester("Gelu")
        .Attr("approximate", "none")
        .AddInput(F32, kBig, x)
        .AddOutput(F32, kBig, Map(x, GeluExact))
        .Tolerance(1e-30, 1e-6)
        .Run();
    // GeluTanh's 1 + tanh cancels for x << 0, where only an absolute bound is meaningful.
    KernelTester("Gelu")
        .Attr("approximate", "tanh")
        .AddInput(F32, kBig, x)
        .AddOutput(F32, kBig,
                   Map(x, [&](double v) { return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))); }))
        .Tolerance(1e-7, 1e-6)
        .Run();
    KernelTester("Relu").AddInput(F32, kBig, x).AddOutput(F32, kBig, Map(x, [](double v) { return v < 0 ? 0 : v; })).Run();
    KernelTester("Clip")
        .Attr("min", -1.5)
        .Attr("max", 2.0)
        .AddInput(F32, kBig, x)
        .AddOutput(F32, kBig, Map(x, [](double v) { return std::min(2.0, std::max(-1.5, v)); }))
        .Run();
    // float16 through the adapter (its conversions split on the pool too).
    const auto h = AsFloat16(x);
    KernelTester("Sigmoid")
        .AddInput(F16, kBig, h)
        .AddOutput(F16, kBig, Map(h, [](double v) { return 1 / (1 + std::exp(-v)); }))
        .Tolerance(1e-4, 1e-3)
        .Concurrently(2, 2)
        .Run();
  });
}

KERNEL_TEST(Softmax_LargeTensors_BothPaths_VsReference) {
  const Shape shape = {3, 5, 67, 131};
  const auto x = AsFloat32(RandomValues(NumElements(shape), -20, 20, 77));
  ForEachSimdPath([&] {
    for (size_t axis : {3, 2, 1})  // rows (inner == 1) and the strided path
      for (const char* op : {"Softmax", "LogSoftmax"}) {
        std::vector<double> want = RefSoftmax(x, shape, axis, false);
        if (std::string(op) == "LogSoftmax")
          for (double& v : want) v = std::log(v);
        KernelTester(op)
            .Attr("axis", axis)
            .Attr("coerce_2d", 0)
            .AddInput(F32, shape, x)
            .AddOutput(F32, shape, want)
            // LogSoftmax's x − (max + log(sum)) cancels near 0: an absolute error of an ulp of
            // the shift (|x| ≤ 20 here) is the float formula's own.
            .Tolerance(std::string(op) == "LogSoftmax" ? 1e-5 : 1e-6, 1e-5)
            .Concurrently(2, 2)
            .Run();
      }
  });
}

// The squeeze-and-excite means: a blocked [N, C/8, H, W, 8] reduced over H and W runs
// reduction/blocked_runs.h's loop, one build per path. Against the double-precision sums on every
// path, and the same bits on every path (each build adds in the same order). H·W of 1073 runs:
// batches of 64 with a tail that is no multiple of 4.
KERNEL_TEST(ReduceMean_BlockedRuns_EveryPath_VsReference_SameBitsOnEveryPath) {
  for (const Shape& s : {Shape{2, 3, 37, 29, 8}, Shape{1, 4, 56, 56, 8}, Shape{3, 2, 7, 7, 8}}) {
    const auto x = AsFloat32(RandomValues(NumElements(s), 99, 101, 123));
    const Shape out = {s[0], s[1], 1, 1, 8};
    const int64_t plane = s[2] * s[3];
    std::vector<double> mean(static_cast<size_t>(NumElements(out))), sum(mean.size());
    for (int64_t b = 0; b < s[0] * s[1]; ++b)
      for (int64_t lane = 0; lane < 8; ++lane) {
        double total = 0;
        for (int64_t p = 0; p < plane; ++p) total += x[static_cast<size_t>((b * plane + p) * 8 + lane)];
        sum[static_cast<size_t>(b * 8 + lane)] = total;
        mean[static_cast<size_t>(b * 8 + lane)] = total / static_cast<double>(plane);
      }
    std::vector<std::vector<double>> per_path;
    ForEachSimdPath([&] {
      for (const char* op : {"ReduceMean", "ReduceSum"}) {
        KernelTester t(op);
        t.Attr("axes", {2, 3})
            .AddInput(F32, s, x)
            .AddOutput(F32, out, std::string(op) == "ReduceMean" ? mean : sum)
            .Tolerance(1e-6, 1e-6)
            .Concurrently(2, 2)
            .Run();
        per_path.push_back(t.RunAndGetOutput(0));
      }
    });
    for (size_t i = 2; i < per_path.size(); ++i)
      if (per_path[i] != per_path[i % 2])
        Fail("ReduceMean/ReduceSum of " + ShapeToString(s) + ": SIMD path " + std::to_string(i / 2) +
             " gives other bits than the portable path");
  }
}

KERNEL_TEST(Binary_LargeBroadcast_SplitsAcrossThreads_VsReference) {
  const Shape a = {4, 64, 23, 29}, row = {29}, channel = {1, 64, 1, 1}, column = {4, 1, 23, 1};
  const auto xa = AsFloat32(RandomValues(NumElements(a), -3, 3, 11));
  for (const Shape& b : {a, row, channel, column, Shape{}}) {
    const auto xb = AsFloat32(RandomValues(NumElements(b), -3, 3, 12));
    KernelTester("Mul")
        .AddInput(F32, a, xa)
        .AddInput(F32, b, xb)
        .AddOutput(F32, a, RefBinary(xa, a, xb, b, [](double p, double q) { return p * q; }))
        .Tolerance(0, 1e-7)
        .Run();
    KernelTester("Sub")  // broadcast operand first
        .AddInput(F32, b, xb)
        .AddInput(F32, a, xa)
        .AddOutput(F32, a, RefBinary(xb, b, xa, a, [](double p, double q) { return p - q; }))
        .Tolerance(1e-7, 1e-7)
        .Run();
  }
  // Both operands broadcast: [4, 1, 23, 1] + [64, 1, 29] -> [4, 64, 23, 29].
  const Shape other = {64, 1, 29};
  const auto xc = AsFloat32(RandomValues(NumElements(column), -3, 3, 13));
  const auto xo = AsFloat32(RandomValues(NumElements(other), -3, 3, 14));
  KernelTester("Add")
      .AddInput(F32, column, xc)
      .AddInput(F32, other, xo)
      .AddOutput(F32, a, RefBinary(xc, column, xo, other, [](double p, double q) { return p + q; }))
      .Tolerance(1e-7, 1e-7)
      .Run();
}

// Naive 2-D pool in double over one [N, C, H, W] tensor with symmetric pads.
std::vector<double> NaivePool(const std::vector<double>& x, const Shape& s, int64_t k, int64_t stride, int64_t pad,
                              bool max, bool include_pad, int64_t oh, int64_t ow) {
  std::vector<double> y;
  for (int64_t p = 0; p < s[0] * s[1]; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = max ? -INFINITY : 0.0;
        int64_t count = 0, padded = 0;
        for (int64_t a = 0; a < k; ++a)
          for (int64_t b = 0; b < k; ++b) {
            const int64_t h = i * stride - pad + a, w = j * stride - pad + b;
            if (h >= -pad && h < s[2] + pad && w >= -pad && w < s[3] + pad) ++padded;
            if (h < 0 || h >= s[2] || w < 0 || w >= s[3]) continue;
            const double v = x[static_cast<size_t>((p * s[2] + h) * s[3] + w)];
            acc = max ? std::max(acc, v) : acc + v;
            ++count;
          }
        y.push_back(max ? acc : acc / static_cast<double>(include_pad ? padded : count));
      }
  return y;
}

KERNEL_TEST(Pool_LargeTensors_RowPath_VsReference) {
  const Shape s = {2, 24, 37, 41};
  const auto x = AsFloat32(RandomValues(NumElements(s), -5, 5, 91));
  struct Case {
    int64_t k, stride, pad;
  };
  for (const Case& c : {Case{3, 2, 1}, Case{3, 1, 1}, Case{2, 2, 0}, Case{5, 3, 2}}) {
    const int64_t oh = (s[2] + 2 * c.pad - c.k) / c.stride + 1, ow = (s[3] + 2 * c.pad - c.k) / c.stride + 1;
    const Shape out = {s[0], s[1], oh, ow};
    const nlohmann::json window = {{"kernel_shape", {c.k, c.k}}, {"strides", {c.stride, c.stride}},
                                   {"pads", {c.pad, c.pad, c.pad, c.pad}}, {"dilations", {1, 1}}};
    KernelTester max("MaxPool");
    for (auto& [name, value] : window.items()) max.Attr(name, value);
    max.Attr("storage_order", 0).AddInput(F32, s, x).AddOutput(F32, out, NaivePool(x, s, c.k, c.stride, c.pad, true, false, oh, ow));
    max.Concurrently(2, 2).Run();
    for (int include_pad = 0; include_pad < 2; ++include_pad) {
      KernelTester avg("AveragePool");
      for (auto& [name, value] : window.items()) avg.Attr(name, value);
      avg.Attr("count_include_pad", include_pad)
          .AddInput(F32, s, x)
          .AddOutput(F32, out, NaivePool(x, s, c.k, c.stride, c.pad, false, include_pad == 1, oh, ow))
          .Tolerance(1e-6, 1e-5)
          .Concurrently(2, 2)
          .Run();
    }
  }
  // NaN in the first tap of a window wins (as the generic path), later NaNs never do.
  KernelTester("MaxPool")
      .Attr("kernel_shape", {2, 2})
      .Attr("strides", {2, 2})
      .Attr("pads", {0, 0, 0, 0})
      .Attr("dilations", {1, 1})
      .Attr("storage_order", 0)
      .AddInput(F32, {1, 1, 2, 4}, {kNaN, 1, 2, kNaN, 3, 4, 5, 6})
      .AddOutput(F32, {1, 1, 1, 2}, {kNaN, 6})
      .Run();
}

// The blocked layout's per-channel operands: [N, C/8, H, W, 8] against [1 or N, C/8, 1, 1, 8]
// leaves runs of 8 elements, walked two loop levels at a time.
KERNEL_TEST(Binary_BlockedPerChannelOperand_ShortRuns_VsReference) {
  const Shape a = {3, 5, 11, 13, 8};
  const auto xa = AsFloat32(RandomValues(NumElements(a), -3, 3, 21));
  for (const Shape& b : {Shape{1, 5, 1, 1, 8}, Shape{3, 5, 1, 1, 8}, Shape{5, 1, 1, 8}, Shape{3, 1, 11, 1, 8}}) {
    const auto xb = AsFloat32(RandomValues(NumElements(b), 0.5, 2, 22));
    KernelTester("Mul")
        .AddInput(F32, a, xa)
        .AddInput(F32, b, xb)
        .AddOutput(F32, a, RefBinary(xa, a, xb, b, [](double p, double q) { return p * q; }))
        .Tolerance(0, 1e-7)
        .Concurrently(2, 2)
        .Run();
    KernelTester("Div")  // broadcast operand first
        .AddInput(F32, b, xb)
        .AddInput(F32, a, xa)
        .AddOutput(F32, a, RefBinary(xb, b, xa, a, [](double p, double q) { return p / q; }))
        .Tolerance(1e-6, 1e-6)
        .Run();
  }
  const Shape h = {2, 4, 3, 3, 8}, c = {1, 4, 1, 1, 8};  // float16, through the float32 kernel
  const auto xh = AsFloat16(RandomValues(NumElements(h), -2, 2, 23)), xc = AsFloat16(RandomValues(NumElements(c), -2, 2, 24));
  KernelTester("Add")
      .AddInput(F16, h, xh)
      .AddInput(F16, c, xc)
      .AddOutput(F16, h, RefBinary(xh, h, xc, c, [](double p, double q) { return p + q; }))
      .Tolerance(1e-6, 1e-3)
      .Run();
}

// The blocked spatial mean: [N, C/8, H, W, 8] over axes 2, 3 (runs of 8 kept elements, rows of
// them summed in local accumulators), and a short run under a reduced level in the middle.
KERNEL_TEST(Reduce_ShortKeptRuns_VsReference) {
  const Shape s = {3, 6, 17, 19, 8};
  const auto x = AsFloat32(RandomValues(NumElements(s), -4, 4, 41));
  std::vector<double> mean(static_cast<size_t>(3 * 6 * 8), 0.0), max(mean.size(), -1e30);
  for (int64_t p = 0; p < 3 * 6; ++p)
    for (int64_t i = 0; i < 17 * 19; ++i)
      for (int64_t l = 0; l < 8; ++l) {
        const double v = x[static_cast<size_t>((p * 17 * 19 + i) * 8 + l)];
        mean[static_cast<size_t>(p * 8 + l)] += v / (17 * 19);
        max[static_cast<size_t>(p * 8 + l)] = std::max(max[static_cast<size_t>(p * 8 + l)], v);
      }
  KernelTester("ReduceMean").Attr("axes", {2, 3}).AddInput(F32, s, x).AddOutput(F32, {3, 6, 1, 1, 8}, mean)
      .Tolerance(1e-6, 1e-6).Concurrently(2, 2).Run();
  KernelTester("ReduceMax").Attr("axes", {2, 3}).AddInput(F32, s, x).AddOutput(F32, {3, 6, 1, 1, 8}, max)
      .Tolerance(0, 0).Run();
  const Shape m = {5, 7, 3};  // axis 1: runs of 3 under the reduced 7
  const auto xm = AsFloat32(RandomValues(NumElements(m), -4, 4, 42));
  std::vector<double> sum(15, 0.0);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t k = 0; k < 3; ++k) sum[static_cast<size_t>(i * 3 + k)] += xm[static_cast<size_t>((i * 7 + j) * 3 + k)];
  KernelTester("ReduceSum").Attr("axes", {1}).AddInput(F32, m, xm).AddOutput(F32, {5, 1, 3}, sum)
      .Tolerance(1e-6, 1e-6).Run();
}

// LayerNorm over rows of `inner` elements, in double: Y, each row's mean and 1/sqrt(var + eps).
struct LayerNormReference {
  std::vector<double> y, mean, inv_std;
};
LayerNormReference ReferenceLayerNorm(const std::vector<double>& x, int64_t outer, int64_t inner,
                                      const std::vector<double>& scale, const std::vector<double>& bias, double eps) {
  LayerNormReference r{std::vector<double>(x.size()), std::vector<double>(static_cast<size_t>(outer)),
                       std::vector<double>(static_cast<size_t>(outer))};
  for (int64_t o = 0; o < outer; ++o) {
    double m = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) m += x[o * inner + i];
    m /= inner;
    for (int64_t i = 0; i < inner; ++i) var += (x[o * inner + i] - m) * (x[o * inner + i] - m);
    var /= inner;
    r.mean[o] = m;
    r.inv_std[o] = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i) r.y[o * inner + i] = (x[o * inner + i] - m) * r.inv_std[o] * scale[i] + bias[i];
  }
  return r;
}

KERNEL_TEST(Normalization_And_Reduce_LargeTensors_VsReference) {
  const Shape s = {4, 96, 13, 17};
  const auto x = AsFloat32(RandomValues(NumElements(s), -4, 4, 31));
  // LayerNorm over the last two dims.
  const int64_t inner = 13 * 17, outer = 4 * 96;
  const auto scale = AsFloat32(RandomValues(inner, 0.5, 1.5, 32)), bias = AsFloat32(RandomValues(inner, -1, 1, 33));
  const std::vector<double> ln = ReferenceLayerNorm(x, outer, inner, scale, bias, 1e-5).y;
  KernelTester("LayerNormalization")
      .Attr("axis", 2)
      .Attr("epsilon", 1e-5)
      .Attr("mean_output", 0)
      .Attr("inv_std_dev_output", 0)
      .AddInput(F32, s, x)
      .AddInput(F32, {13, 17}, scale)
      .AddInput(F32, {13, 17}, bias)
      .AddOutput(F32, s, ln)
      .Tolerance(1e-5, 1e-5)
      .Concurrently(2, 2)
      .Run();
  // ReduceMean over the trailing axes (split across threads) and over the leading axis (not).
  std::vector<double> mean_hw, mean_n(static_cast<size_t>(96 * inner), 0.0);
  for (int64_t p = 0; p < outer; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i) sum += x[p * inner + i];
    mean_hw.push_back(sum / inner);
  }
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t i = 0; i < 96 * inner; ++i) mean_n[i] += x[n * 96 * inner + i] / 4;
  KernelTester("ReduceMean").Attr("axes", {2, 3}).AddInput(F32, s, x).AddOutput(F32, {4, 96, 1, 1}, mean_hw).Tolerance(1e-6, 1e-6).Run();
  KernelTester("ReduceMean").Attr("axes", {0}).AddInput(F32, s, x).AddOutput(F32, {96, 13, 17}, mean_n).Tolerance(1e-6, 1e-6).Run();
  KernelTester("GlobalAveragePool").AddInput(F32, s, x).AddOutput(F32, {4, 96, 1, 1}, mean_hw).Tolerance(1e-6, 1e-6).Run();
}

// Row lengths around the 16- and 8-float steps (tails of every size), ConvNeXt's and BERT's
// widths, rows whose mean is large against their spread (the split float mean must keep the
// deviations), and rows whose first element is an outlier 10^4 times the rest's spread (the
// float32 sums are centred on it first), fp32 and fp16, on every SIMD path.
KERNEL_TEST(LayerNorm_Rows_BothPaths_VsReference) {
  ForEachSimdPath([&] {
    for (int64_t inner : {1, 7, 15, 17, 96, 256, 769}) {
      for (const double offset : {0.0, 1000.0, -1.0}) {
        const int64_t outer = 37;
        const double spread = offset > 0 ? 0.01 : 3.0;
        auto x = AsFloat32(RandomValues(outer * inner, -spread, spread, 600 + inner));
        for (double& v : x) v = static_cast<double>(static_cast<float>(v + std::max(offset, 0.0)));
        if (offset < 0)
          for (int64_t o = 0; o < outer; ++o) x[o * inner] = 3e4 * (o % 2 ? 1 : -1);
        const auto scale = AsFloat32(RandomValues(inner, 0.5, 1.5, 700 + inner));
        const auto bias = AsFloat32(RandomValues(inner, -1, 1, 800 + inner));
        const std::vector<double> want = ReferenceLayerNorm(x, outer, inner, scale, bias, 1e-6).y;
        // A few float roundings of normalized values up to ~2 (the reference reads the same
        // float inputs, so the offset rows need no more).
        const double tol = 1e-5;
        KernelTester("LayerNormalization")
            .Attr("axis", 1).Attr("epsilon", 1e-6).Attr("mean_output", 0).Attr("inv_std_dev_output", 0)
            .AddInput(F32, {outer, inner}, x).AddInput(F32, {inner}, scale).AddInput(F32, {inner}, bias)
            .AddOutput(F32, {outer, inner}, want)
            .Tolerance(tol, tol)
            .Run();
      }
    }
  });
}

// Constant rows (the first pass's mean may be an ulp off; the second pass's Σd takes that back,
// so Y is the bias, and the variance's two float terms cancel to 0 or a tiny negative, clamped)
// and rows whose mean is 300 times their spread, with the Mean and InvStdDev outputs, on every
// SIMD path.
KERNEL_TEST(LayerNorm_ConstantAndOffsetRows_BothPaths_VsReference) {
  ForEachSimdPath([&] {
    for (int64_t inner : {5, 8, 33, 256}) {
      const int64_t outer = 6;
      std::vector<double> x(static_cast<size_t>(outer * inner));
      const auto noise = AsFloat32(RandomValues(outer * inner, -1, 1, 900 + inner));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const size_t at = static_cast<size_t>(o * inner + i);
          // rows 0-2 constant (0.1, -7.3, 1e4), rows 3-5 offset by 300 with spread 1
          const double constant[3] = {0.1, -7.3, 1e4};
          x[at] = static_cast<float>(o < 3 ? constant[o] : 300.0 * (o % 2 ? 1 : -1) + noise[at]);
        }
      const auto scale = AsFloat32(RandomValues(inner, 0.5, 1.5, 950 + inner));
      const auto bias = AsFloat32(RandomValues(inner, -1, 1, 970 + inner));
      const LayerNormReference want = ReferenceLayerNorm(x, outer, inner, scale, bias, 1e-5);
      KernelTester("LayerNormalization")
          .Attr("axis", 1).Attr("epsilon", 1e-5).Attr("mean_output", 1).Attr("inv_std_dev_output", 1)
          .AddInput(F32, {outer, inner}, x).AddInput(F32, {inner}, scale).AddInput(F32, {inner}, bias)
          .AddOutput(F32, {outer, inner}, want.y).AddOutput(F32, {outer, 1}, want.mean)
          .AddOutput(F32, {outer, 1}, want.inv_std)
          .Tolerance(1e-5, 1e-5)
          .Run();
    }
  });
}

KERNEL_TEST(Transpose_Cast_LargeTensors_VsReference) {
  const Shape s = {3, 40, 37, 29};
  const auto x = AsFloat32(RandomValues(NumElements(s), -100, 100, 55));
  for (const Shape& perm : {Shape{0, 2, 3, 1}, Shape{3, 2, 1, 0}, Shape{0, 2, 1, 3}, Shape{1, 0, 2, 3}}) {
    Shape out;
    const std::vector<double> want = RefTranspose(x, s, perm, &out);
    KernelTester("Transpose").Attr("perm", perm).AddInput(F32, s, x).AddOutput(F32, out, want).Run();
  }
  std::vector<double> truncated;
  for (double v : x) truncated.push_back(std::trunc(v));
  KernelTester("Cast").Attr("to", "int32").AddInput(F32, s, x).AddOutput(I32, s, truncated).Run();
  KernelTester("Cast").Attr("to", "float16").AddInput(F32, s, x).AddOutput(F16, s, AsFloat16(x)).Run();
}

KERNEL_TEST(DataMovement_LargeTensors_SplitAcrossThreads) {
  // [6, 50, 37, 23] = 255,300 elements; every kernel below splits it across the pool.
  const Shape a = {6, 20, 37, 23}, b = {6, 30, 37, 23};
  const auto xa = AsFloat32(RandomValues(NumElements(a), -9, 9, 61)), xb = AsFloat32(RandomValues(NumElements(b), -9, 9, 62));
  Shape cat;
  const std::vector<double> joined = RefConcat({xa, xb}, {a, b}, 1, &cat);
  KernelTester("Concat").Attr("axis", 1).AddInput(F32, a, xa).AddInput(F32, b, xb).AddOutput(F32, cat, joined).Run();
  KernelTester("Split").Attr("axis", 1).AddInput(F32, cat, joined).AddOutput(F32, a, xa).AddOutput(F32, b, xb).Run();
  // Gather along axis 1 with negative and out-of-range indices (zeros).
  const std::vector<int64_t> idx = {3, -1, 0, 45, 17, 17, 49, 2, -50, 60};
  std::vector<double> gathered;
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t j : idx) {
      const int64_t i = j < 0 ? j + 50 : j;
      for (int64_t k = 0; k < 37 * 23; ++k)
        gathered.push_back(i < 0 || i >= 50 ? 0.0 : joined[static_cast<size_t>((n * 50 + i) * 37 * 23 + k)]);
    }
  KernelTester("Gather")
      .Attr("axis", 1)
      .AddInput(F32, cat, joined)
      .AddInput<int64_t>({static_cast<int64_t>(idx.size())}, idx)
      .AddOutput(F32, {6, static_cast<int64_t>(idx.size()), 37, 23}, gathered)
      .Run();
  // Pad (constant) and Slice with a negative step go through the parallel index map.
  std::vector<double> padded;
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t c = 0; c < 20; ++c)
      for (int64_t h = -1; h < 38; ++h)
        for (int64_t w = -2; w < 23; ++w)
          padded.push_back(h < 0 || h >= 37 || w < 0 ? 7.0 : xa[static_cast<size_t>(((n * 20 + c) * 37 + h) * 23 + w)]);
  KernelTester("Pad")
      .Attrs({{"mode", "constant"}, {"pads", {0, 0, 1, 2, 0, 0, 1, 0}}, {"value", 7}})
      .AddInput(F32, a, xa)
      .AddOutput(F32, {6, 20, 39, 25}, padded)
      .Run();
  std::vector<double> reversed;
  for (int64_t n = 0; n < 6; ++n)
    for (int64_t c = 0; c < 20; ++c)
      for (int64_t h = 0; h < 37; ++h)
        for (int64_t w = 22; w >= 0; --w) reversed.push_back(xa[static_cast<size_t>(((n * 20 + c) * 37 + h) * 23 + w)]);
  KernelTester("Slice")
      .Attrs({{"starts", {0, 0, 0, 22}}, {"steps", {1, 1, 1, -1}}})
      .AddInput(F32, a, xa)
      .AddOutput(F32, a, reversed)
      .Run();
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
