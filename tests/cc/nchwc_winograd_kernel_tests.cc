// NchwcWinogradConv (nchwc_winograd_conv.cc) against a naive double-precision 3x3 convolution in
// plain NCHW, on every SIMD path, for F(2x2,3x3) and F(4x4,3x3), single and paired weight groups:
// tile edges (output sizes that are no multiple of the tile), symmetric, one-sided and no pads,
// batches, several chunks of tiles and several passes over the input channels, and the epilogues;
// float16 activations (X, Sum, Y) with float32 U (as the compiler writes it) or float16 U, against
// the naive convolution and bit for bit against float32 on the same values rounded once.
// The test transforms the weights itself (U = G g G^T, the compiler's job in production), so the
// layout of the contract is checked too. Run by kernel_tests.cc (tests/cc/test_kernels_cc.py).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/blocked_layout.h"
#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"

namespace tfpopef {
namespace test {
namespace {

// G of F(2x2,3x3) and F(4x4,3x3), a x 3 (points 0, ±1 and 0, -1, 1, 1/2, -2, each with ∞).
const std::vector<std::vector<double>>& WinogradG(int tile) {
  static const std::vector<std::vector<double>> f2 = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  static const std::vector<std::vector<double>> f4 = {{1, 0, 0},
                                                      {-1.0 / 3, 1.0 / 3, -1.0 / 3},
                                                      {1.0 / 3, 1.0 / 3, 1.0 / 3},
                                                      {-16.0 / 15, -8.0 / 15, -4.0 / 15},
                                                      {1.0 / 15, -2.0 / 15, 4.0 / 15},
                                                      {0, 0, 1}};
  return tile == 2 ? f2 : f4;
}

struct WinogradCase {
  int64_t n, c, m, h, w, pt, pl, pb, pr;
  int tile;             // 2 or 4
  int64_t group = 1;    // output blocks per weight group (2: U's last axis 16)
  int64_t oh() const { return h + pt + pb - 2; }
  int64_t ow() const { return w + pl + pr - 2; }
  std::string Describe() const {
    return "F(" + std::to_string(tile) + "x" + std::to_string(tile) + ",3x3)" + (group == 2 ? " paired" : "") +
           " x [" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
           std::to_string(w) + "] m " + std::to_string(m) + " pads " + std::to_string(pt) + "," + std::to_string(pl) +
           "," + std::to_string(pb) + "," + std::to_string(pr);
  }
};

struct Epi {
  const char* activation;
  std::vector<double> params;
  bool bias, sum;
};

std::string Describe(const WinogradCase& k, const Epi& e, DType dtype) {
  return k.Describe() + (dtype == F16 ? " float16" : "") + " activation '" + e.activation + "'";
}

// The NchwcWinogradConv step of case k with random inputs (values representable in `values`),
// X, B and Sum of type `dtype`, U of type `u_dtype` (U's values: G g G^T in double, rounded to it),
// and the naive result in *y_out (NCHW).
KernelTester WinogradTester(const WinogradCase& k, const Epi& e, uint32_t seed, DType values, DType dtype,
                            DType u_dtype, std::vector<double>* y_out) {
  const int64_t oh = k.oh(), ow = k.ow(), a = k.tile + 2;
  const auto round = values == F16 ? AsFloat16 : AsFloat32;
  const auto x = round(RandomValues(k.n * k.c * k.h * k.w, -2, 2, seed));
  const auto w = round(RandomValues(k.m * k.c * 9, -1, 1, seed + 1));
  const auto b = round(RandomValues(k.m, -1, 1, seed + 2));
  const auto s = round(RandomValues(k.n * k.m * oh * ow, -2, 2, seed + 3));
  std::vector<double>& y = *y_out;
  y.assign(static_cast<size_t>(k.n * k.m * oh * ow), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = e.bias ? b[static_cast<size_t>(m)] : 0.0;
          for (int64_t c = 0; c < k.c; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t ih = i - k.pt + ky, iw = j - k.pl + kx;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                acc += x[static_cast<size_t>(((n * k.c + c) * k.h + ih) * k.w + iw)] *
                       w[static_cast<size_t>(((m * k.c + c) * 3 + ky) * 3 + kx)];
              }
          const size_t at = static_cast<size_t>(((n * k.m + m) * oh + i) * ow + j);
          if (e.sum) acc += s[at];
          y[at] = RefActivation(e.activation, e.params, acc);
        }
  // U [a², M/GB, C/8, 8, GB]: point (i, j) of G g G^T.
  const auto& G = WinogradG(k.tile);
  const int64_t GB = B * k.group;
  std::vector<double> u(static_cast<size_t>(a * a * k.m * k.c));
  for (int64_t m = 0; m < k.m; ++m)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t i = 0; i < a; ++i)
        for (int64_t j = 0; j < a; ++j) {
          const auto& gi = G[static_cast<size_t>(i)];
          const auto& gj = G[static_cast<size_t>(j)];
          double v = 0;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx)
              v += gi[static_cast<size_t>(ky)] * gj[static_cast<size_t>(kx)] *
                   w[static_cast<size_t>(((m * k.c + c) * 3 + ky) * 3 + kx)];
          const int64_t t = i * a + j;
          u[static_cast<size_t>((((t * (k.m / GB) + m / GB) * (k.c / B) + c / B) * B + c % B) * GB + m % GB)] = v;
        }
  KernelTester t("NchwcWinogradConv");
  t.Attrs({{"pads", {k.pt, k.pl, k.pb, k.pr}}})
      .Attr("activation", e.activation)
      .Attr("activation_params", e.params)
      .Attr("has_bias", e.bias ? 1 : 0)
      .Attr("has_sum", e.sum ? 1 : 0);
  t.AddInput(dtype, {k.n, k.c / B, k.h, k.w, B}, ToBlocked(x, k.n, k.c, k.h * k.w));
  t.AddInput(u_dtype, {a * a, k.m / GB, k.c / B, B, GB}, (u_dtype == F16 ? AsFloat16 : AsFloat32)(u));
  t.ConstantInput(1);  // U is a weight: a float16 U is widened once, as in a compiled model
  if (e.bias) t.AddInput(dtype, {k.m}, b);
  if (e.sum) t.AddInput(dtype, {k.n, k.m / B, oh, ow, B}, ToBlocked(s, k.n, k.m, oh * ow));
  return t;
}

void RunWinograd(const WinogradCase& k, const Epi& e, uint32_t seed, DType dtype = F32) {
  std::vector<double> y;
  KernelTester t = WinogradTester(k, e, seed, dtype, dtype, F32, &y);
  const size_t failures = CurrentFailures().size();
  // float32 sums of up to 9·C products of values in [-2, 2] and Winograd's transforms, whose
  // points ±2 and ∞ of F(4x4) scale the rounding errors by up to ~10 (measured max: see
  // docs/benchmarks.md, "Winograd"); F(2x2) is as accurate as the direct convolution. float16
  // adds one rounding of the output (2^-11 relative), as NchwcConv's float16 tests allow.
  const double tolerance = dtype == F16 ? 2e-3 : k.tile == 2 ? 1e-4 : 5e-4;
  t.AddOutput(dtype, {k.n, k.m / B, k.oh(), k.ow(), B}, ToBlocked(y, k.n, k.m, k.oh() * k.ow()))
      .Tolerance(tolerance, tolerance)
      .Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = Describe(k, e, dtype) + ": " + CurrentFailures()[i];
}

// Float16 activations must be bit-identical to float32 on the same values rounded once to nearest
// even: widening float16 is exact, the transforms and products are the same float32 code, and
// every activation is applied to the float32 row before the one rounding. U of type u_dtype in
// both runs.
void RunWinogradFloat16AgainstFloat32(const WinogradCase& k, const Epi& e, uint32_t seed, DType u_dtype) {
  std::vector<double> naive;
  const std::vector<int64_t> y_shape = {k.n, k.m / B, k.oh(), k.ow(), B};
  const std::vector<double> zeros(static_cast<size_t>(NumElements(y_shape)));
  const std::vector<double> y32 =
      WinogradTester(k, e, seed, F16, F32, u_dtype, &naive).AddOutput(F32, y_shape, zeros).RunAndGetOutput(0);
  const size_t failures = CurrentFailures().size();
  WinogradTester(k, e, seed, F16, F16, u_dtype, &naive).AddOutput(F16, y_shape, AsFloat16(y32)).Tolerance(0, 0).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = Describe(k, e, F16) + (u_dtype == F16 ? " float16 U" : "") + " vs float32 rounded once: " +
                           CurrentFailures()[i];
}

// Each case for both tile sizes, and with paired weights where M/8 is even.
std::vector<WinogradCase> EveryVariant(const std::vector<WinogradCase>& base) {
  std::vector<WinogradCase> cases;
  for (WinogradCase k : base)
    for (int tile : {2, 4}) {
      k.tile = tile;
      k.group = 1;
      cases.push_back(k);
      if (k.m % (2 * B) == 0) {
        k.group = 2;
        cases.push_back(k);
      }
    }
  return cases;
}

std::vector<WinogradCase> Geometries() {
  return EveryVariant({
      {1, 8, 8, 5, 5, 1, 1, 1, 1, 0},       // one partial tile of F(4x4)
      {2, 16, 16, 14, 14, 1, 1, 1, 1, 0},   // ResNet-like, batch 2
      {1, 8, 24, 9, 13, 1, 1, 1, 1, 0},     // odd sizes: tile edges on both axes
      {1, 16, 32, 7, 7, 1, 1, 1, 1, 0},     // ResNet's 7x7 stage
      {1, 8, 16, 6, 7, 0, 0, 0, 0, 0},      // no pads
      {1, 8, 16, 10, 11, 2, 0, 1, 3, 0},    // one-sided and wide pads
      {1, 8, 8, 1, 1, 1, 1, 1, 1, 0},       // 1x1 plane: the pads alone
      {2, 16, 16, 20, 20, 1, 1, 1, 1, 0},   // several chunks of tiles
      {1, 72, 512, 4, 5, 1, 1, 1, 1, 0},    // several passes over the input channels
      // Tiles that fit one chunk, with at least 32 output blocks, split them into groups: unequal
      // groups (paired: 30 + 28 blocks), and several passes over the input channels per group (17
      // input blocks). With at most 24 tiles (both) the AVX-512 paired products prefetch U ahead,
      // past the last group's end at the last point.
      {1, 16, 464, 7, 7, 1, 1, 1, 1, 0},
      {1, 136, 512, 4, 5, 1, 1, 1, 1, 0},
  });
}

KERNEL_TEST(NchwcWinogradConv_Geometries_EveryPath_VsNaive) {
  uint32_t seed = 21000;
  ForEachSimdPath([&] {
    for (const WinogradCase& k : Geometries()) RunWinograd(k, {"", {}, false, false}, seed += 4);
  });
}

const Epi kEpilogues[] = {
    {"", {}, true, false},        {"Relu", {}, true, true},         {"Clip", {0, 6}, true, true},
    {"Sigmoid", {}, true, false}, {"HardSwish", {}, false, true}, {"Clip", {-0.5, 0.25}, false, false},
};

KERNEL_TEST(NchwcWinogradConv_Epilogues_EveryPath_VsNaive) {
  uint32_t seed = 22000;
  ForEachSimdPath([&] {
    for (const Epi& e : kEpilogues)
      for (const WinogradCase& k : EveryVariant({{2, 16, 16, 9, 10, 1, 1, 1, 1, 0}})) RunWinograd(k, e, seed += 4);
  });
}

KERNEL_TEST(NchwcWinogradConv_Float16_Geometries_EveryPath_VsNaive) {
  uint32_t seed = 23000;
  ForEachSimdPath([&] {
    for (const WinogradCase& k : Geometries()) RunWinograd(k, {"Relu", {}, true, true}, seed += 4, F16);
  });
}

KERNEL_TEST(NchwcWinogradConv_Float16_EveryPath_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 24000;
  ForEachSimdPath([&] {
    for (const Epi& e : kEpilogues)
      for (const WinogradCase& k : EveryVariant({{2, 16, 16, 9, 10, 1, 1, 1, 1, 0}}))
        RunWinogradFloat16AgainstFloat32(k, e, seed += 4, F32);
    for (const WinogradCase& k : EveryVariant({{1, 8, 24, 9, 13, 1, 1, 1, 1, 0}, {1, 72, 512, 4, 5, 1, 1, 1, 1, 0}}))
      for (DType u_dtype : {F32, F16})
        RunWinogradFloat16AgainstFloat32(k, {"Swish", {1.0}, true, true}, seed += 4, u_dtype);
  });
}

KERNEL_TEST(NchwcWinogradConv_BadSpecs_RaiseNamedErrors) {
  auto conv = [](std::vector<int64_t> x, std::vector<int64_t> u, std::vector<int64_t> y, DType dtype = F32,
                 DType y_dtype = F32) {
    KernelTester t("NchwcWinogradConv");
    t.Attrs({{"pads", {1, 1, 1, 1}}})
        .Attr("activation", "")
        .Attr("activation_params", std::vector<double>{})
        .Attr("has_bias", 0)
        .Attr("has_sum", 0);
    t.AddInput(dtype, x, std::vector<double>(static_cast<size_t>(NumElements(x))));
    t.AddInput(dtype, u, std::vector<double>(static_cast<size_t>(NumElements(u))));
    t.AddOutput(y_dtype, y, std::vector<double>(static_cast<size_t>(NumElements(y))));
    return t;
  };
  conv({1, 2, 5, 5, 8}, {25, 1, 2, 8, 8}, {1, 1, 5, 5, 8}).ExpectError(kInvalid, "a² = 16 (F(2x2,3x3)) or 36");
  conv({1, 2, 5, 5, 8}, {36, 1, 3, 8, 8}, {1, 1, 5, 5, 8}).ExpectError(kInvalid, "transformed weights U has shape");
  conv({1, 2, 5, 5, 8}, {36, 1, 2, 8, 16}, {1, 1, 5, 5, 8}).ExpectError(kInvalid, "output 0 has shape");
  conv({1, 2, 5, 5, 4}, {36, 1, 2, 8, 8}, {1, 1, 5, 5, 8}).ExpectError(kInvalid, "blocked tensor");
  conv({1, 2, 5, 5, 8}, {16, 1, 2, 8, 8}, {1, 1, 5, 5, 8}, I32, I32).ExpectError(kUnimpl, "input X has dtype int32");
  conv({1, 2, 5, 5, 8}, {16, 1, 2, 8, 8}, {1, 1, 5, 5, 8}, F16, F32)
      .ExpectError(kInvalid, "output Y has dtype float32 but input X has float16");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
