// Times vector_math's Gelu, Sigmoid, Swish, Exp and ExpShiftedSum per element and core on one
// SIMD path (one thread, an array of `n` floats that stays in L1, best of `reps` passes of `iters` calls),
// and the Gelu's worst error in ulp against x·Φ(x) in double over those inputs and over every
// 2^-13 of [-16, 16], 2^20 random bit patterns and the special values.
// Build against a checkout's sources (or another build's, to compare two builds alternately):
//
//   INC=$(.venv/bin/python -c "import nlohmann_json; print(nlohmann_json.get_include())")
//   K=tf_popef_op/runtime/cc/kernels/support
//   g++ -std=c++17 -O3 -I. -I$INC benchmarks/cc/gelu_timing.cc $K/vector_math.cc
//       $K/vector_math_avx2.cc $K/vector_math_avx512.cc -o gelu_new   (one command)
//   ./gelu_new [avx512|avx2|portable] [n=4096] [sigma=2] [iters=2000] [reps=7]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace vm = tfpopef::kernels::vmath;

namespace {

double UlpError(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1e9;
  const double ulp = want == 0.0 ? std::ldexp(1.0, -149)
                                 : std::max(std::ldexp(1.0, std::ilogb(static_cast<float>(want)) - 23),
                                            std::ldexp(1.0, -149));
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

template <typename F>
double NsPerElement(F f, const float* x, float* y, int64_t n, int iters, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f(x, y, n);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s * 1e9 / (static_cast<double>(n) * iters));
  }
  return best;
}


// Worst ulp error of f over every 2^-13 of [-16, 16] and `extra` random bit patterns.
template <typename F>
double Sweep(F f, int extra) {
  std::vector<float> x;
  for (int64_t i = -16 * 8192; i <= 16 * 8192; ++i) x.push_back(static_cast<float>(i) / 8192.0f);
  std::mt19937 rng(7);
  for (int i = 0; i < extra; ++i) {
    uint32_t bits = rng();
    float v;
    std::memcpy(&v, &bits, 4);
    x.push_back(v);
  }
  for (float v : {__builtin_inff(), -__builtin_inff(), 3.4e38f, -3.4e38f, 1e-45f, -1e-45f, 0.0f, -0.0f}) x.push_back(v);
  std::vector<float> y(x.size());
  f(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0.0;
  float worst_at = 0.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    double want = std::isinf(v) ? (v > 0 ? v : -0.0) : v * 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double e = UlpError(y[i], want);
    if (e > worst) { worst = e; worst_at = x[i]; }
  }
  std::printf("  sweep: worst %.2f ulp at x = %g\n", worst, worst_at);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "avx512";
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 4096;
  const float sigma = argc > 3 ? std::atof(argv[3]) : 2.0f;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 2000;
  const int reps = argc > 5 ? std::atoi(argv[5]) : 7;
  vm::SetPathForTesting(vm::SimdPathFromSetting(path));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n), y(n);
  for (auto& v : x) v = normal(rng);
  double worst = 0.0;
  vm::Gelu(x.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    worst = std::max(worst, UlpError(y[i], v * 0.5 * std::erfc(-v / std::sqrt(2.0))));
  }
  std::printf("path %s, n %lld, inputs N(0, %g)\n", vm::SimdPathName(vm::ActivePath()), static_cast<long long>(n),
              sigma);
  std::printf("Gelu    %.3f ns per element (worst error here %.2f ulp)\n",
              NsPerElement(vm::Gelu, x.data(), y.data(), n, iters, reps), worst);
  std::printf("Sigmoid %.3f ns per element\n", NsPerElement(vm::Sigmoid, x.data(), y.data(), n, iters, reps));
  std::printf("Swish   %.3f ns per element\n", NsPerElement(vm::Swish, x.data(), y.data(), n, iters, reps));
  std::printf("Exp     %.3f ns per element\n", NsPerElement(vm::Exp, x.data(), y.data(), n, iters, reps));
  auto softmax_exp = [](const float* in, float* out, int64_t count) { vm::ExpShiftedSum(in, out, count, 9.0f); };
  std::printf("ExpShiftedSum %.3f ns per element\n", NsPerElement(softmax_exp, x.data(), y.data(), n, iters, reps));
  Sweep(vm::Gelu, 1 << 20);
  return 0;
}
