// Depthwise convolution (Conv / FusedConv with group == C == M) against a naive double-precision
// loop, on both SIMD paths: the direct AVX2 kernel (3x3 and 5x5, stride 1 and 2, symmetric and
// asymmetric pads, planes from 1x1 to 112 wide, batch > 1, every epilogue kind) and the generic
// per-tap kernel (the portable path, and on either path dilations, other windows, 1-D and 3-D).
// Also checks which kernel each geometry gets, so the cases are known to reach the direct one.
// Run by the kernel_tests.cc binary (tests/cc/test_kernels_cc.py).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/kernels/conv/depthwise_conv.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {
namespace {

namespace vm = kernels::vmath;

// A 2-D depthwise layer; pads are top, left, bottom, right.
struct DwCase {
  int64_t n, c, h, w, kh, kw, sh, sw, dh, dw;
  int64_t pt, pl, pb, pr;
  int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
  std::string Describe() const {
    return "x [" + std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " +
           std::to_string(w) + "] window " + std::to_string(kh) + "x" + std::to_string(kw) + " stride " +
           std::to_string(sh) + "x" + std::to_string(sw) + " dilation " + std::to_string(dh) + "x" +
           std::to_string(dw) + " pads " + std::to_string(pt) + "," + std::to_string(pl) + "," + std::to_string(pb) +
           "," + std::to_string(pr);
  }
};

// The epilogue of a FusedConv case; activation "" and no bias/sum = a plain Conv.
struct DwEpilogue {
  const char* activation;
  std::vector<double> params;
  bool bias, sum;
};

double Activate(const DwEpilogue& e, double v) { return RefActivation(e.activation, e.params, v); }

void RunDepthwise(const DwCase& k, const DwEpilogue* epi, uint32_t seed) {
  const int64_t oh = k.oh(), ow = k.ow();
  const auto x = AsFloat32(RandomValues(k.n * k.c * k.h * k.w, -2, 2, seed));
  const auto w = AsFloat32(RandomValues(k.c * k.kh * k.kw, -1, 1, seed + 1));
  const auto b = AsFloat32(RandomValues(k.c, -1, 1, seed + 2));
  const auto s = AsFloat32(RandomValues(k.n * k.c * oh * ow, -2, 2, seed + 3));
  const bool bias = epi == nullptr || epi->bias;
  const bool sum = epi != nullptr && epi->sum;
  std::vector<double> y(static_cast<size_t>(k.n * k.c * oh * ow));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias ? b[static_cast<size_t>(c)] : 0.0;
          for (int64_t a = 0; a < k.kh; ++a)
            for (int64_t d = 0; d < k.kw; ++d) {
              const int64_t ih = i * k.sh - k.pt + a * k.dh, iw = j * k.sw - k.pl + d * k.dw;
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              acc += x[static_cast<size_t>(((n * k.c + c) * k.h + ih) * k.w + iw)] *
                     w[static_cast<size_t>((c * k.kh + a) * k.kw + d)];
            }
          const size_t at = static_cast<size_t>(((n * k.c + c) * oh + i) * ow + j);
          if (sum) acc += s[at];
          y[at] = epi != nullptr ? Activate(*epi, acc) : acc;
        }
  KernelTester t(epi != nullptr ? "FusedConv" : "Conv");
  t.Attrs({{"strides", {k.sh, k.sw}}, {"dilations", {k.dh, k.dw}}, {"pads", {k.pt, k.pl, k.pb, k.pr}},
           {"group", k.c}});
  if (epi != nullptr)
    t.Attr("activation", epi->activation)
        .Attr("activation_params", epi->params)
        .Attr("has_bias", epi->bias ? 1 : 0)
        .Attr("has_sum", epi->sum ? 1 : 0);
  t.AddInput(F32, {k.n, k.c, k.h, k.w}, x).AddInput(F32, {k.c, 1, k.kh, k.kw}, w);
  if (bias) t.AddInput(F32, {k.c}, b);
  if (sum) t.AddInput(F32, {k.n, k.c, oh, ow}, s);
  const size_t failures = CurrentFailures().size();
  t.AddOutput(F32, {k.n, k.c, oh, ow}, y).Tolerance(1e-5, 1e-5).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = k.Describe() + ": " + CurrentFailures()[i];
}

kernels::SpatialGeometry Geometry(const DwCase& k) {
  kernels::SpatialGeometry g;
  g.in = {1, k.h, k.w};
  g.out = {1, k.oh(), k.ow()};
  g.kernel = {1, k.kh, k.kw};
  g.stride = {1, k.sh, k.sw};
  g.dilation = {1, k.dh, k.dw};
  g.pad_begin = {0, k.pt, k.pl};
  g.pad_end = {0, k.pb, k.pr};
  return g;
}

// Shapes of the direct kernel: MobileNetV2's layers (3x3, stride 1 pads 1, stride 2 pads 1 or
// Keras' folded ZeroPadding2D 0/1), 5x5 windows, and small, odd and even planes down to 1x1.
std::vector<DwCase> DirectCases() {
  std::vector<DwCase> cases;
  for (int64_t k : {3, 5})
    for (int64_t s : {1, 2}) {
      const int64_t p = k / 2;
      for (int64_t hw : {1, 2, 3, 5, 7, 8, 14, 17})
        cases.push_back({2, 3, hw, hw, k, k, s, s, 1, 1, p, p, p, p});
      cases.push_back({1, 2, 9, 23, k, k, s, s, 1, 1, 0, 0, p, p});     // pads only at the end
      cases.push_back({1, 2, 12, 31, k, k, s, s, 1, 1, p, p, 0, 0});    // pads only at the start
      cases.push_back({1, 2, 11, 19, k, k, s, s, 1, 1, p, 0, 0, p});    // mixed
      cases.push_back({1, 2, 6, 10, k, k, s, s, 1, 1, 0, 0, 0, 0});     // valid
      cases.push_back({1, 1, 5, 6, k, k, s, s, 1, 1, 3, 4, 2, 5});      // pads wider than the window
    }
  cases.push_back({1, 3, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});     // MobileNetV2's first block
  cases.push_back({2, 3, 56, 56, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1});       // folded ZeroPadding2D, stride 2
  cases.push_back({1, 4, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1});
  cases.push_back({3, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  cases.push_back({1, 2, 40, 13, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1});       // different strides: generic
  return cases;
}

KERNEL_TEST(Depthwise_DirectShapes_BothPaths_VsNaive) {
  uint32_t seed = 7000;
  ForEachSimdPath([&] {
    for (const DwCase& k : DirectCases()) RunDepthwise(k, nullptr, seed += 4);
  });
}

KERNEL_TEST(Depthwise_Epilogues_BothPaths_VsNaive) {
  const DwEpilogue epilogues[] = {
      {"", {}, false, false},        {"Clip", {0, 6}, true, false}, {"Clip", {-0.5, 0.25}, false, false},
      {"Relu", {}, true, false},     {"Sigmoid", {}, true, false},  {"Clip", {0, 6}, true, true},
      {"", {}, false, true},
  };
  const DwCase shapes[] = {
      {2, 3, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     {1, 3, 14, 14, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
      {1, 2, 9, 21, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},    {1, 2, 11, 11, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {1, 2, 10, 10, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},   // dilated: generic path
  };
  uint32_t seed = 8000;
  ForEachSimdPath([&] {
    for (const DwEpilogue& e : epilogues)
      for (const DwCase& k : shapes) RunDepthwise(k, &e, seed += 4);
  });
}

KERNEL_TEST(Depthwise_GenericShapes_BothPaths_VsNaive) {
  const DwCase cases[] = {
      {1, 3, 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},     // dilation 2
      {2, 2, 8, 11, 3, 3, 2, 2, 1, 2, 1, 1, 1, 2},    // mixed dilation
      {1, 2, 8, 8, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1},     // even window
      {1, 2, 9, 9, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},     // 7x7
      {1, 2, 9, 10, 3, 5, 1, 1, 1, 1, 1, 2, 1, 2},    // non-square window
      {1, 2, 13, 13, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},   // stride 3
  };
  uint32_t seed = 9000;
  ForEachSimdPath([&] {
    for (const DwCase& k : cases) RunDepthwise(k, nullptr, seed += 4);
  });
  // 1-D and 3-D depthwise convolutions.
  KernelTester("Conv")
      .Attrs({{"strides", {1}}, {"dilations", {1}}, {"pads", {1, 1}}, {"group", 2}})
      .AddInput(F32, {1, 2, 4}, {1, 2, 3, 4, 1, 0, 0, 1})
      .AddInput(F32, {2, 1, 3}, {1, 2, 3, 1, 1, 1})
      .AddOutput(F32, {1, 2, 4}, {8, 14, 20, 11, 1, 1, 1, 1})
      .Run();
  // 3-D: a 2x1x2 plane per channel and a 2x1x1 window weighting its two depth slices.
  KernelTester("Conv")
      .Attrs({{"strides", {1, 1, 1}}, {"dilations", {1, 1, 1}}, {"pads", {0, 0, 0, 0, 0, 0}}, {"group", 2}})
      .AddInput(F32, {1, 2, 2, 1, 2}, {1, 2, 3, 4, 5, 6, 7, 8})
      .AddInput(F32, {2, 1, 2, 1, 1}, {1, 10, 2, -1})
      .AddOutput(F32, {1, 2, 1, 1, 2}, {31, 42, 3, 4})
      .Run();
}

// The cases above reach the direct kernel exactly when the AVX2 path is active and the
// geometry is 3x3 / 5x5 with equal strides 1 or 2 and no dilation.
KERNEL_TEST(Depthwise_DirectKernel_ChosenForItsShapesOnly) {
  ForEachSimdPath([&] {
    const vm::SimdPath path = vm::ActivePath();
    for (const DwCase& k : DirectCases()) {
      const bool fits = k.kh == k.kw && (k.kh == 3 || k.kh == 5) && k.sh == k.sw && k.sh <= 2;
      const bool want = fits && vm::UsesAvx2(path);
      const kernels::DepthwiseDirectPlan plan = kernels::PlanDepthwiseDirect(Geometry(k));
      if (plan.usable != want)
        Fail(k.Describe() + ": direct kernel usable = " + std::to_string(plan.usable) + ", expected " +
             std::to_string(want));
      if (plan.usable && (plan.kernel != k.kh || plan.stride != k.sh || plan.scratch_floats() == 0))
        Fail(k.Describe() + ": plan kernel " + std::to_string(plan.kernel) + " stride " + std::to_string(plan.stride));
    }
    const DwCase dilated{1, 3, 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2};
    if (kernels::PlanDepthwiseDirect(Geometry(dilated)).usable) Fail("dilated 3x3 must use the generic kernel");
  });
}

// Many channels of a large plane from several threads at once: the planes are split over the
// pool (each pool thread its own strip buffer in scratch) and the kernel is shared.
KERNEL_TEST(Depthwise_Direct_ConcurrentRuns) {
  const DwCase k{2, 6, 30, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  const auto x = AsFloat32(RandomValues(k.n * k.c * k.h * k.w, -2, 2, 11));
  const auto w = AsFloat32(RandomValues(k.c * 9, -1, 1, 12));
  std::vector<double> y(static_cast<size_t>(k.n * k.c * 30 * 30));
  for (int64_t p = 0; p < k.n * k.c; ++p)
    for (int64_t i = 0; i < 30; ++i)
      for (int64_t j = 0; j < 30; ++j) {
        double acc = 0;
        for (int64_t a = 0; a < 3; ++a)
          for (int64_t d = 0; d < 3; ++d) {
            const int64_t ih = i - 1 + a, iw = j - 1 + d;
            if (ih < 0 || ih >= 30 || iw < 0 || iw >= 30) continue;
            acc += x[static_cast<size_t>((p * 30 + ih) * 30 + iw)] * w[static_cast<size_t>((p % k.c) * 9 + a * 3 + d)];
          }
        y[static_cast<size_t>((p * 30 + i) * 30 + j)] = std::min(std::max(acc, 0.0), 6.0);
      }
  ForEachSimdPath([&] {
    KernelTester("FusedConv")
        .Attrs({{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"group", k.c},
                {"activation", "Clip"}, {"activation_params", {0, 6}}, {"has_bias", 0}, {"has_sum", 0}})
        .AddInput(F32, {k.n, k.c, 30, 30}, x)
        .AddInput(F32, {k.c, 1, 3, 3}, w)
        .AddOutput(F32, {k.n, k.c, 30, 30}, y)
        .Tolerance(1e-5, 1e-5)
        .Concurrently(3, 4)
        .Run();
  });
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
