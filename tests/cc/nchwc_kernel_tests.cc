// The blocked-layout kernels (NchwcConv, NchwcMaxPool, NchwcAveragePool, ToNchwc, FromNchwc; docs/popef.md
// "Blocked layout") against naive double-precision loops in plain NCHW, on every SIMD path, in
// float32 and float16 (computed in float32, rounded once).
// The test blocks the inputs and weights itself (the compiler's job in production), so the
// layouts of the contract are checked too. Run by kernel_tests.cc (tests/cc/test_kernels_cc.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cc/blocked_layout.h"
#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {
namespace {

struct ConvCase {
  int64_t n, c, m, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool depthwise = false, plain_input = false;
  bool channels_last = false;  // X [N, H, W, C] (C = 1 or 3), W [M/GB, KH, KW, C, GB]: the stem on the NHWC input
  int64_t out_group = 1;  // output blocks per weight group: 2 = paired weights (W's last axis 16)
  int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
  std::string Describe() const {
    return std::string(depthwise       ? "depthwise"
                       : channels_last ? "channels-last"
                       : plain_input   ? "plain-input"
                                       : "blocked") +
           (out_group == 2 ? " paired" : "") + " x [" +
           std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) +
           "] m " + std::to_string(m) + " window " + std::to_string(kh) + "x" + std::to_string(kw) + " stride " +
           std::to_string(sh) + "x" + std::to_string(sw) + " dilation " + std::to_string(dh) + "x" +
           std::to_string(dw) + " pads " + std::to_string(pt) + "," + std::to_string(pl) + "," + std::to_string(pb) +
           "," + std::to_string(pr);
  }
};

struct Epi {
  const char* activation;
  std::vector<double> params;
  bool bias, sum;
  bool input_scale = false;  // S [N, C/8, 1, 1, 8] scales X per image and channel (regular, blocked X)
};

double Activate(const Epi& e, double v) { return RefActivation(e.activation, e.params, v); }

// The NchwcConv step of case k with random inputs (values representable in `values`, tensors
// of `dtype`), and the naive result in *y (NCHW).
// With scale_into_x (an input scale, blocked X), X·S rounded to float32 is the input and S is
// left out: float32's Mul before the convolution.
KernelTester ConvTester(const ConvCase& k, const Epi& e, uint32_t seed, DType values, DType dtype,
                        std::vector<double>* y_out, bool scale_into_x = false) {
  const int64_t oh = k.oh(), ow = k.ow(), cg = k.depthwise ? 1 : k.c;
  auto round = values == F16 ? AsFloat16 : AsFloat32;
  const auto x = round(RandomValues(k.n * k.c * k.h * k.w, -2, 2, seed));
  const auto w = round(RandomValues(k.m * cg * k.kh * k.kw, -1, 1, seed + 1));
  const auto b = round(RandomValues(k.m, -1, 1, seed + 2));
  const auto s = round(RandomValues(k.n * k.m * oh * ow, -2, 2, seed + 3));
  const auto scale = round(RandomValues(k.n * k.c, -1.5, 1.5, seed + 4));
  std::vector<double>& y = *y_out;
  y.assign(static_cast<size_t>(k.n * k.m * oh * ow), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = e.bias ? b[static_cast<size_t>(m)] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t d = 0; d < k.kw; ++d) {
                const int64_t ih = i * k.sh - k.pt + a * k.dh, iw = j * k.sw - k.pl + d * k.dw;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const int64_t xc = k.depthwise ? m : c;
                acc += x[static_cast<size_t>(((n * k.c + xc) * k.h + ih) * k.w + iw)] *
                       (e.input_scale ? scale[static_cast<size_t>(n * k.c + xc)] : 1.0) *
                       w[static_cast<size_t>(((m * cg + c) * k.kh + a) * k.kw + d)];
              }
          const size_t at = static_cast<size_t>(((n * k.m + m) * oh + i) * ow + j);
          if (e.sum) acc += s[at];
          y[at] = Activate(e, acc);
        }
  // The contract's weight layouts (regular: groups of out_group blocks, GB output channels).
  const int64_t GB = B * k.out_group;
  std::vector<double> wb(w.size());
  for (int64_t m = 0; m < k.m; ++m)
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t a = 0; a < k.kh; ++a)
        for (int64_t d = 0; d < k.kw; ++d) {
          const double v = w[static_cast<size_t>(((m * cg + c) * k.kh + a) * k.kw + d)];
          int64_t at;
          if (k.depthwise) at = ((m / B * k.kh + a) * k.kw + d) * B + m % B;
          else if (k.channels_last) at = (((m / GB * k.kh + a) * k.kw + d) * k.c + c) * GB + m % GB;
          else if (k.plain_input) at = (((m / GB * k.c + c) * k.kh + a) * k.kw + d) * GB + m % GB;
          else at = (((((m / GB) * (k.c / B) + c / B) * k.kh + a) * k.kw + d) * B + c % B) * GB + m % GB;
          wb[static_cast<size_t>(at)] = v;
        }
  std::vector<int64_t> w_shape;
  if (k.depthwise) w_shape = {k.c / B, k.kh, k.kw, B};
  else if (k.channels_last) w_shape = {k.m / GB, k.kh, k.kw, k.c, GB};
  else if (k.plain_input) w_shape = {k.m / GB, k.c, k.kh, k.kw, GB};
  else w_shape = {k.m / GB, k.c / B, k.kh, k.kw, B, GB};
  KernelTester t("NchwcConv");
  t.Attrs({{"kernel_shape", {k.kh, k.kw}}, {"strides", {k.sh, k.sw}}, {"dilations", {k.dh, k.dw}},
           {"pads", {k.pt, k.pl, k.pb, k.pr}}, {"group", k.depthwise ? k.c : 1}})
      .Attr("activation", e.activation)
      .Attr("activation_params", e.params)
      .Attr("has_bias", e.bias ? 1 : 0)
      .Attr("has_sum", e.sum ? 1 : 0);
  if (k.channels_last) {
    std::vector<double> nhwc(x.size());
    for (int64_t n = 0; n < k.n; ++n)
      for (int64_t c = 0; c < k.c; ++c)
        for (int64_t i = 0; i < k.h * k.w; ++i)
          nhwc[static_cast<size_t>((n * k.h * k.w + i) * k.c + c)] = x[static_cast<size_t>((n * k.c + c) * k.h * k.w + i)];
    t.Attr("channels_last", 1).AddInput(dtype, {k.n, k.h, k.w, k.c}, nhwc);
  } else if (k.plain_input) {
    t.AddInput(dtype, {k.n, k.c, k.h, k.w}, x);
  } else if (scale_into_x) {
    std::vector<double> xs(x.size());
    for (size_t i = 0; i < x.size(); ++i) xs[i] = x[i] * scale[i / static_cast<size_t>(k.h * k.w)];
    t.AddInput(dtype, {k.n, k.c / B, k.h, k.w, B}, ToBlocked(AsFloat32(xs), k.n, k.c, k.h * k.w));
  } else {
    t.AddInput(dtype, {k.n, k.c / B, k.h, k.w, B}, ToBlocked(x, k.n, k.c, k.h * k.w));
  }
  t.AddInput(dtype, w_shape, wb);
  if (e.bias) t.AddInput(dtype, {k.m}, b);
  if (e.sum) t.AddInput(dtype, {k.n, k.m / B, oh, ow, B}, ToBlocked(s, k.n, k.m, oh * ow));
  if (e.input_scale && !scale_into_x) t.Attr("has_input_scale", 1).AddInput(dtype, {k.n, k.c / B, 1, 1, B}, scale);
  return t;
}

std::string Describe(const ConvCase& k, const Epi& e, DType dtype) {
  return k.Describe() + (dtype == F16 ? " float16" : "") + " activation '" + e.activation + "'" +
         (e.input_scale ? " input scale" : "");
}

void RunConv(const ConvCase& k, const Epi& e, uint32_t seed, DType dtype = F32) {
  const int64_t oh = k.oh(), ow = k.ow();
  std::vector<double> y;
  KernelTester t = ConvTester(k, e, seed, dtype, dtype, &y);
  const size_t failures = CurrentFailures().size();
  // float32 sums of up to ~650 products of values in [-2, 2]: errors of a few 1e-5 are rounding;
  // float16 adds one rounding of the output (2^-11 relative).
  const double tolerance = dtype == F16 ? 2e-3 : 1e-4;
  t.AddOutput(dtype, {k.n, k.m / B, oh, ow, B}, ToBlocked(y, k.n, k.m, oh * ow)).Tolerance(tolerance, tolerance).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = Describe(k, e, dtype) + ": " + CurrentFailures()[i];
}

// Float16 must be bit-identical to float32 on the same values rounded once to nearest even:
// widening float16 is exact and the sums are float32 in both, whether the tiles convert in
// registers (no activation or Relu/Clip) or the float16 adapter widens and narrows around them.
// With constant_weights W is announced as a weight (KernelSpec::constant_inputs), so the tiles
// read a float32 copy of W widened once, on the first run (nchwc_conv.cc): two
// threads with their own buffers (their own copies), two runs each (the second from the copy).
// There an input scale on fewer pixels per image than outputs scales the widened X rows
// (NchwcEpilogue::scale_input_rows): float32 on X·S rounded to float32, as float32's Mul, is the
// reference.
void RunConvFloat16AgainstFloat32(const ConvCase& k, const Epi& e, uint32_t seed, bool constant_weights = false) {
  std::vector<double> naive;
  const bool scale_rows = constant_weights && e.input_scale && k.h * k.w < k.m;
  const std::vector<double> y32 = ConvTester(k, e, seed, F16, F32, &naive, scale_rows)
                                      .AddOutput(F32, {k.n, k.m / B, k.oh(), k.ow(), B},
                                                 std::vector<double>(static_cast<size_t>(k.n * k.m * k.oh() * k.ow())))
                                      .RunAndGetOutput(0);
  const size_t failures = CurrentFailures().size();
  KernelTester t = ConvTester(k, e, seed, F16, F16, &naive);
  if (constant_weights) t.ConstantInput(1).Concurrently(2, 2);
  t.AddOutput(F16, {k.n, k.m / B, k.oh(), k.ow(), B}, AsFloat16(y32)).Tolerance(0, 0).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = Describe(k, e, F16) + (constant_weights ? " constant W" : "") +
                           " vs float32 rounded once: " + CurrentFailures()[i];
}

const Epi kPlain{"", {}, false, false};

// The cases, plus each regular one whose M/8 is even again with paired weights (the compiler
// pairs them whenever it can; the AVX-512 path runs them on 16-float tiles).
std::vector<ConvCase> WithPairedWeights(std::vector<ConvCase> cases) {
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i)
    if (!cases[i].depthwise && cases[i].m % (2 * B) == 0) {
      cases.push_back(cases[i]);
      cases.back().out_group = 2;
    }
  return cases;
}

std::vector<ConvCase> Geometries() {
  std::vector<ConvCase> cases = {
      // pointwise: one long row (MobileNetV2 shapes, more than two 192-pixel segments)
      {1, 16, 24, 28, 28, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {2, 8, 16, 5, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      {1, 64, 48, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // 1x1 stride 2 (ResNet's projection shortcut) and a padded 1x1; strided 1x1 on narrow
      // rows runs on a copy of the pixels it reads (also per-axis strides over two passes on the
      // input channels), on rows of more than 16 pixels in place
      {1, 16, 32, 9, 11, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},
      {2, 536, 16, 7, 9, 1, 1, 2, 3, 1, 1, 0, 0, 0, 0},
      {1, 8, 16, 4, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},
      {1, 8, 8, 4, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      // 3x3: stride 1 and 2, odd/even planes, one-sided and wide pads, 1x1 planes
      {2, 16, 16, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 8, 24, 15, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
      {1, 8, 8, 9, 13, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
      {1, 8, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 8, 8, 5, 6, 3, 3, 1, 1, 1, 1, 3, 4, 2, 5},
      // dilation, non-square windows, different strides per axis
      {1, 8, 16, 12, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {1, 16, 8, 10, 9, 3, 5, 1, 2, 1, 1, 1, 2, 1, 2},
      // more input channels than one pass over them takes (3x3: 7 blocks, 1x1: 64 blocks)
      {1, 64, 16, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 528, 8, 3, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
      // 7x7 stride 2 (ResNet's stem on a blocked input) and 5x5
      {1, 8, 16, 23, 23, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
      {2, 8, 8, 11, 11, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
  };
  // rows of 96 pixels or more, where float16 weights are widened once per work item and pass:
  // pointwise (one and two passes over the input channels; 8 images: enough work items that
  // a pool of up to 4 threads keeps row segments of 96 pixels or more), 3x3 with borders and
  // batch 2, dilated with a tail of output blocks, and the plain-input 7x7/2 stem below
  cases.push_back({8, 16, 32, 10, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({8, 536, 16, 1, 200, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  // few work items (one block group, one image): the rows are cut into segments for the pool's
  // threads, with one and two passes over the input channels and a tail of output blocks
  cases.push_back({1, 16, 32, 10, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({1, 536, 16, 1, 100, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({1, 48, 56, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({1, 24, 16, 1, 61, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  cases.push_back({2, 16, 48, 3, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  cases.push_back({1, 8, 80, 2, 98, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2});
  // plain NCHW input (the RGB stem: 3 channels, MobileNetV2's 3x3/2 and ResNet's 7x7/2)
  ConvCase stem3{1, 3, 32, 32, 32, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1};
  stem3.plain_input = true;
  ConvCase stem7{2, 3, 16, 29, 29, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3};
  stem7.plain_input = true;
  ConvCase odd{1, 5, 8, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  odd.plain_input = true;
  ConvCase wide_stem{1, 3, 16, 9, 203, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3};
  wide_stem.plain_input = true;
  cases.insert(cases.end(), {stem3, stem7, odd, wide_stem});
  // channels-last input (the stem reading the NHWC input): C = 1 to 4; EfficientNet's and
  // MobileNetV2's 3x3/2 with TF's one-sided pads, ResNet's 7x7/2 (batch 2, wide rows), InceptionV3's
  // unpadded 3x3/2, ConvNeXt's 4x4/4 patches (column stride 4: the generic stride), a 3x3/1
  // on a narrow plane, an output tail of one block
  for (ConvCase k : std::vector<ConvCase>{{1, 3, 32, 32, 32, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
                                          {2, 3, 64, 29, 45, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
                                          {1, 3, 32, 9, 203, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
                                          {1, 3, 32, 19, 19, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0},
                                          {1, 3, 16, 16, 20, 4, 4, 4, 4, 1, 1, 0, 0, 0, 0},
                                          {2, 3, 24, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {1, 1, 8, 11, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
                                          {1, 1, 40, 10, 9, 5, 5, 1, 2, 2, 1, 2, 2, 2, 2}}) {
    k.channels_last = true;
    cases.push_back(k);
  }
  // output blocks for every paired tile width (pairs of 4, 3, 2 and 1, items of 8 blocks)
  cases.push_back({1, 16, 64, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
  cases.push_back({1, 8, 48, 13, 13, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({2, 24, 96, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1});
  // depthwise: MobileNetV2's 3x3 stride 1 / 2, 5x5, dilation, planes down to 1x1
  for (ConvCase d : std::vector<ConvCase>{{1, 16, 16, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {2, 8, 8, 15, 15, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1},
                                          {1, 24, 24, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                                          {1, 8, 8, 11, 10, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
                                          {1, 8, 8, 9, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
                                          {1, 8, 8, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}}) {
    d.depthwise = true;
    cases.push_back(d);
  }
  return WithPairedWeights(cases);
}

// Pointwise, 3x3 (one and two passes over the input channels), the plain-input stem, depthwise,
// the channels-last stem.
std::vector<ConvCase> OneOfEachVariant() {
  ConvCase stem{1, 3, 16, 12, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  stem.plain_input = true;
  ConvCase dw{1, 16, 16, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  dw.depthwise = true;
  ConvCase affine{2, 24, 24, 6, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};  // a per-channel affine
  affine.depthwise = true;
  ConvCase nhwc_stem{1, 3, 32, 14, 15, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1};
  nhwc_stem.channels_last = true;
  return WithPairedWeights({{1, 16, 24, 20, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                            {2, 8, 48, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                            {1, 72, 16, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // two passes over the channels
                            stem, dw, affine, nhwc_stem});
}

KERNEL_TEST(NchwcConv_Geometries_BothPaths_VsNaive) {
  uint32_t seed = 12000;
  ForEachSimdPath([&] {
    for (const ConvCase& k : Geometries()) RunConv(k, kPlain, seed += 4);
  });
}

KERNEL_TEST(NchwcConv_Epilogues_BothPaths_VsNaive) {
  const Epi epilogues[] = {
      {"", {}, true, false},        {"Relu", {}, true, false},   {"Clip", {0, 6}, true, true},
      {"Clip", {-0.5, 0.25}, false, false}, {"Sigmoid", {}, true, false}, {"HardSwish", {}, false, true},
      {"Relu", {}, true, true},     {"Swish", {1.0}, true, true}, {"Swish", {1.702}, true, false},
      {"HardSigmoid", {0.2, 0.5}, true, false}, {"Elu", {1.0}, true, false},
  };
  uint32_t seed = 13000;
  ForEachSimdPath([&] {
    for (const Epi& e : epilogues)
      for (const ConvCase& k : OneOfEachVariant()) RunConv(k, e, seed += 4);
  });
}

// 1x1 over 64 and 128 input channels (ResNet50's and the inverted residuals' short-K layers,
// where a tile's finish is a large part of its work): bias or none, Sum or none, no
// activation, Relu, Clip, the sigmoid family; tiles of 6 and 5 pixels, 4 to 1 pairs and the
// unpaired blocks, two passes over the input channels; float32 and float16.
KERNEL_TEST(NchwcConv_ShortKPointwise_EveryEpilogue_VsNaive) {
  const Epi epilogues[] = {
      {"", {}, false, false},      {"", {}, true, true},         {"Relu", {}, true, false},
      {"Relu", {}, true, true},    {"Clip", {0, 6}, false, true}, {"Clip", {-0.5, 0.25}, true, false},
      {"Swish", {1.0}, true, true}, {"HardSigmoid", {0.2, 0.5}, true, false},
  };
  const std::vector<ConvCase> shapes = WithPairedWeights({
      {1, 64, 64, 13, 15, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 195 pixels: tiles of 6 and 5
      {2, 128, 48, 7, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // a tail of 2 pairs
      {1, 64, 16, 5, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // one pair
      {1, 536, 32, 3, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // two passes over the input channels
  });
  uint32_t seed = 15500;
  ForEachSimdPath([&] {
    for (const Epi& e : epilogues)
      for (const ConvCase& k : shapes) {
        RunConv(k, e, seed += 4);
        RunConv(k, e, seed += 4, F16);
      }
  });
}

KERNEL_TEST(NchwcConv_Float16_EveryVariant_VsNaive) {
  uint32_t seed = 16000;
  ForEachSimdPath([&] {
    for (const Epi& e : {Epi{"Relu", {}, true, true}, Epi{"Sigmoid", {}, true, false}, Epi{"Swish", {1.0}, true, true},
                         Epi{"HardSwish", {}, true, false}, kPlain})
      for (const ConvCase& k : OneOfEachVariant()) RunConv(k, e, seed += 4, F16);
  });
}

KERNEL_TEST(NchwcConv_Float16_EveryGeometry_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 17000;
  ForEachSimdPath([&] {
    for (const ConvCase& k : Geometries()) RunConvFloat16AgainstFloat32(k, Epi{"Relu", {}, true, true}, seed += 4);
    for (const Epi& e : {kPlain, Epi{"Clip", {0, 6}, true, false}, Epi{"Clip", {-0.5, 0.25}, false, true},
                         Epi{"Sigmoid", {}, true, true}, Epi{"Swish", {1.0}, true, false},
                         Epi{"HardSigmoid", {0.2, 0.5}, false, true}, Epi{"HardSwish", {}, true, true}})
      for (const ConvCase& k : OneOfEachVariant()) RunConvFloat16AgainstFloat32(k, e, seed += 4);
    // every geometry (tile widths, paired weights, passes over the channels) with a sigmoid in registers
    for (const ConvCase& k : Geometries()) RunConvFloat16AgainstFloat32(k, Epi{"Swish", {1.0}, true, true}, seed += 4);
  });
}

// The same with W a weight, widened once into a float32 copy the kernel keeps: every geometry
// (short rows and long, one and several passes over the input channels), the epilogue classes
// (in registers, after the tiles through the adapter, a Sum, an input scale).
KERNEL_TEST(NchwcConv_Float16_ConstantWeights_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 17500;
  ForEachSimdPath([&] {
    for (const ConvCase& k : Geometries())
      RunConvFloat16AgainstFloat32(k, Epi{"Relu", {}, true, true}, seed += 4, /*constant_weights=*/true);
    Epi scaled{"Clip", {0, 6}, true, false};
    scaled.input_scale = true;
    for (const Epi& e : {kPlain, Epi{"Swish", {1.0}, true, false}, Epi{"Elu", {1.0}, true, true}, scaled})
      for (const ConvCase& k : OneOfEachVariant()) {
        if (e.input_scale && (k.depthwise || k.plain_input || k.channels_last)) continue;  // (regular, blocked X only)
        RunConvFloat16AgainstFloat32(k, e, seed += 4, /*constant_weights=*/true);
      }
  });
}

// Float16 X and Y with a weight W: each work item of at most 5 output blocks widens the window
// rows its row segment reads into a float32 copy and runs the tiles on it, storing float16 Y
// (nchwc_tiles.inc, ConvRowWidenedInput). 1x7 and 7x1 and an unpadded 3x3/2, windows whose rows
// or columns lie partly or wholly in the pads, dilation, rows cut into segments, several passes
// over the input channels, 1 to 5 output blocks an item and items of 8 beside one of 4 (M = 96)
// or 6 (M = 112, the float16 tiles); 1x1 layers with few outputs (the inverted residuals' and
// EfficientNet's projects: 2, 3, 5 and 6 blocks, an item of 8 beside one of 2 or 6, two passes,
// long rows in segments); every epilogue
// (none, Relu, Clip, the sigmoid family, a Sum, an input scale). Bit-identical to float32
// rounded once. With an input scale on fewer pixels than outputs (the 7x7 projects: items of 8
// blocks too, a window, two passes, rows in segments) the copy holds X·S, and float32 on X·S is
// the reference.
KERNEL_TEST(NchwcConv_Float16_WidenedInput_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 17800;
  const std::vector<ConvCase> shapes = WithPairedWeights({
      {1, 24, 32, 17, 17, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3},   // 1x7
      {2, 16, 24, 17, 17, 7, 1, 1, 1, 1, 1, 3, 0, 3, 0},   // 7x1, batch 2
      {1, 16, 32, 15, 15, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0},   // unpadded 3x3/2
      {1, 8, 16, 3, 4, 3, 3, 1, 1, 1, 1, 3, 3, 3, 3},      // rows and columns wholly in the pads
      {1, 8, 96, 9, 40, 3, 3, 1, 2, 2, 3, 2, 3, 1, 2},     // dilation, column stride 2, unequal pads
      {1, 72, 8, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // two passes over the input channels
      {1, 8, 16, 3, 800, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1},    // rows cut into segments
      {1, 16, 24, 6, 9, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},     // the generic column stride
      {1, 16, 112, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // items of 8 and 6 blocks
      {1, 32, 16, 28, 28, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1, one pair, rows in segments
      {2, 96, 24, 9, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // 1x1, 3 blocks
      {1, 40, 80, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // 1x1, items of 8 and 2 blocks
      {1, 536, 32, 3, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // 1x1, two passes over the input channels
      {1, 16, 40, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // 5 blocks, a window
      {1, 48, 40, 28, 28, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1, 5 blocks, rows in segments
      {2, 24, 48, 7, 10, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // 1x1, 6 blocks (the float16 tiles)
      {1, 64, 112, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},  // 1x1, items of 8 and 6 blocks
      {1, 144, 192, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1 at 7x7: the scale on the rows
      {1, 64, 320, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // the same, 5 items of 8 in segments
      {2, 536, 80, 3, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // the same, two passes
      {1, 16, 64, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // the same, a padded window
  });
  Epi scaled{"Relu", {}, true, false}, scaled_sum{"", {}, true, true};
  scaled.input_scale = scaled_sum.input_scale = true;
  const std::vector<Epi> epilogues = {kPlain,
                                      Epi{"Relu", {}, true, false},
                                      Epi{"Clip", {0, 6}, false, false},
                                      Epi{"Swish", {1.0}, true, false},
                                      Epi{"HardSigmoid", {0.2, 0.5}, true, false},
                                      Epi{"Relu", {}, true, true},  // a Sum
                                      scaled,
                                      scaled_sum};
  ForEachSimdPath([&] {
    for (const ConvCase& k : shapes)
      for (const Epi& e : epilogues) RunConvFloat16AgainstFloat32(k, e, seed += 4, /*constant_weights=*/true);
    // the plain-input and channels-last stems
    ConvCase plain{1, 3, 16, 20, 23, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1};
    plain.plain_input = true;
    ConvCase nhwc{2, 3, 32, 11, 30, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
    nhwc.channels_last = true;
    for (const ConvCase& k : WithPairedWeights({plain, nhwc}))
      for (const Epi& e : {kPlain, Epi{"Swish", {1.0}, true, false}})
        RunConvFloat16AgainstFloat32(k, e, seed += 4, /*constant_weights=*/true);
  });
}

// The channels-last stem sums each output channel by channel, window row, column, as the
// plain-input path does: the same bits from the same values, float32 and float16, every
// channels-last geometry, every epilogue class (none, Clip, a sigmoid in registers).
KERNEL_TEST(NchwcConv_ChannelsLast_BitIdenticalToPlainInput) {
  uint32_t seed = 21000;
  ForEachSimdPath([&] {
    for (ConvCase k : Geometries()) {
      if (!k.channels_last) continue;
      for (const Epi& e : {kPlain, Epi{"Clip", {0, 6}, true, false}, Epi{"Swish", {1.0}, true, true}})
        for (DType dtype : {F32, F16}) {
          seed += 2;
          std::vector<double> naive;
          ConvCase plain = k;
          plain.channels_last = false;
          plain.plain_input = true;
          const std::vector<int64_t> y_shape = {k.n, k.m / B, k.oh(), k.ow(), B};
          const std::vector<double> want =
              ConvTester(plain, e, seed, dtype, dtype, &naive)
                  .AddOutput(dtype, y_shape, std::vector<double>(static_cast<size_t>(NumElements(y_shape))))
                  .RunAndGetOutput(0);
          const size_t failures = CurrentFailures().size();
          ConvTester(k, e, seed, dtype, dtype, &naive).AddOutput(dtype, y_shape, want).Tolerance(0, 0).Run();
          for (size_t i = failures; i < CurrentFailures().size(); ++i)
            CurrentFailures()[i] = Describe(k, e, dtype) + " vs plain input: " + CurrentFailures()[i];
        }
    }
  });
}

// Float32 outputs of 4 MB or more with a residual sum are written with streaming stores
// (NchwcGeometry::stream_output; the AVX-512 paired tiles): a 1x1 (Y 16 MB) and a padded 3x3
// (8 MB: its border pixels take 1-pixel tiles) with bias, residual sum and Relu, paired and
// unpaired weights, against the naive loops; the 1x1 in float16 (ordinary stores) bit-identical
// to float32 rounded once.
KERNEL_TEST(NchwcConv_LargeOutput_StreamingStores_VsNaive) {
  uint32_t seed = 19500;
  const Epi e{"Relu", {}, true, true};
  ForEachSimdPath([&] {
    for (ConvCase k : {ConvCase{4, 16, 256, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
                       ConvCase{2, 8, 256, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}})
      for (int64_t out_group : {2, 1}) {
        k.out_group = out_group;
        RunConv(k, e, seed += 4);
        if (k.kh == 1) {
          RunConv(k, e, seed += 4, F16);
          RunConvFloat16AgainstFloat32(k, e, seed += 4);
        }
      }
  });
}

// Y in the residual Sum's bytes (KernelSpec::in_place_input: the memory plan's in-place Sum):
// with one pass over the input channels each tile reads its Sum pixels before it stores them;
// with several a float32 Y holds the partial sums, so the Sum starts the accumulators at the
// first pass. Against the naive loops on every SIMD path, float32 and float16: one and two
// passes (float32 Y as its own partial buffer; float16 through its float32 scratch, with
// weights widened per item or in registers), paired and unpaired tiles, 1x1 long rows, the
// strided 1x1 on a subsample copy, a padded 3x3 on a pad copy, bias or not (Sum at input 2 or
// 3), Relu and Swish, and a 16 MB Y (streaming stores without in place). Float16 in place is
// bit-identical to float16 with separate buffers.
KERNEL_TEST(NchwcConv_InPlaceSum_EveryPath_VsNaive) {
  uint32_t seed = 21500;
  std::vector<ConvCase> cases = WithPairedWeights({
      {1, 16, 32, 10, 20, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // one pass, long row
      {1, 528, 16, 3, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},     // float32: two passes
      {1, 1040, 16, 3, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},    // float16 in registers: two passes too
      {8, 536, 16, 1, 200, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // two passes, float16 weights widened
      {2, 536, 16, 7, 9, 1, 1, 2, 3, 1, 1, 0, 0, 0, 0},     // strided 1x1 on a subsample copy
      {1, 64, 16, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // padded 3x3, two passes
      {4, 16, 256, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // Y 16 MB: streams when not in place
  });
  const std::vector<Epi> epilogues = {Epi{"Relu", {}, true, true}, Epi{"", {}, false, true},
                                      Epi{"Swish", {1.0}, true, true}};
  ForEachSimdPath([&] {
    for (const ConvCase& k : cases)
      for (const Epi& e : epilogues)
        for (DType dtype : {F32, F16}) {
          seed += 2;
          if (k.h == 64 && &e != &epilogues[0]) continue;  // (the big case: one epilogue is enough)
          const std::vector<int64_t> y_shape = {k.n, k.m / B, k.oh(), k.ow(), B};
          const size_t sum_input = e.bias ? 3 : 2;
          std::vector<double> naive;
          KernelTester t = ConvTester(k, e, seed, dtype, dtype, &naive);
          const size_t failures = CurrentFailures().size();
          const double tolerance = dtype == F16 ? 2e-3 : 1e-4;
          t.InPlaceInput(sum_input)
              .AddOutput(dtype, y_shape, ToBlocked(naive, k.n, k.m, k.oh() * k.ow()))
              .Tolerance(tolerance, tolerance)
              .Run();
          if (dtype == F16) {
            const std::vector<double> apart = ConvTester(k, e, seed, dtype, dtype, &naive)
                                                  .AddOutput(dtype, y_shape, std::vector<double>(naive.size()))
                                                  .RunAndGetOutput(0);
            ConvTester(k, e, seed, dtype, dtype, &naive)
                .InPlaceInput(sum_input)
                .AddOutput(dtype, y_shape, apart)
                .Tolerance(0, 0)
                .Run();
          }
          for (size_t i = failures; i < CurrentFailures().size(); ++i)
            CurrentFailures()[i] = Describe(k, e, dtype) + " in place: " + CurrentFailures()[i];
        }
  });
}

// in_place_input names only the residual Sum of a regular convolution.
KERNEL_TEST(NchwcConv_InPlaceInput_NotTheSum_Rejected) {
  const ConvCase k{1, 16, 16, 4, 4, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
  std::vector<double> naive;
  ConvTester(k, Epi{"", {}, true, true}, 1, F32, F32, &naive)
      .InPlaceInput(0)
      .AddOutput(F32, {1, 2, 4, 4, B}, std::vector<double>(256))
      .ExpectError(kInvalid, "Y may take only the residual Sum's bytes");
  ConvTester(k, Epi{"", {}, true, false}, 1, F32, F32, &naive)
      .InPlaceInput(2)
      .AddOutput(F32, {1, 2, 4, 4, B}, std::vector<double>(256))
      .ExpectError(kInvalid, "has_sum = 1: input 3");
}

// The sigmoid and swish the tiles apply in registers (8-float tiles, and on AVX-512 the 16-float
// paired tiles) are vector_math's, bit for bit: the step with the activation against the same
// step without it, finished by vmath::Sigmoid on the same path (swish: x·σ(alpha·x), each
// product rounded), for every geometry (tile widths, paired weights, the plain-input stem,
// depthwise, passes over the channels).
KERNEL_TEST(NchwcConv_SigmoidFamilyInRegisters_BitIdenticalToVectorMath) {
  uint32_t seed = 18500;
  ForEachSimdPath([&] {
    for (const ConvCase& k : Geometries())
      for (const Epi& e : {Epi{"Sigmoid", {}, true, false}, Epi{"Swish", {1.0}, true, true},
                           Epi{"Swish", {1.702}, true, false}}) {
        seed += 2;
        const std::vector<int64_t> y_shape = {k.n, k.m / B, k.oh(), k.ow(), B};
        const std::vector<double> zeros(static_cast<size_t>(NumElements(y_shape)));
        std::vector<double> naive;
        const std::vector<double> plain = ConvTester(k, Epi{"", {}, e.bias, e.sum}, seed, F32, F32, &naive)
                                              .AddOutput(F32, y_shape, zeros)
                                              .RunAndGetOutput(0);
        const std::vector<double> got =
            ConvTester(k, e, seed, F32, F32, &naive).AddOutput(F32, y_shape, zeros).RunAndGetOutput(0);
        const float alpha = e.params.empty() ? 1.0f : static_cast<float>(e.params[0]);
        std::vector<float> v(plain.begin(), plain.end()), t(v.size()), sig(v.size());
        for (size_t i = 0; i < v.size(); ++i) t[i] = e.params.empty() ? v[i] : alpha * v[i];
        kernels::vmath::Sigmoid(t.data(), sig.data(), static_cast<int64_t>(t.size()));
        size_t differ = 0;
        for (size_t i = 0; i < v.size(); ++i) {
          const float want = e.params.empty() ? sig[i] : v[i] * sig[i];
          differ += static_cast<float>(got[i]) != want;
        }
        if (differ != 0)
          Fail(Describe(k, e, F32) + ": " + std::to_string(differ) + " of " + std::to_string(v.size()) +
               " outputs differ from vector_math's");
      }
  });
}

// X scaled per image and input channel (squeeze-and-excite folded into the convolution after
// it): every regular blocked-input geometry (tile widths, paired weights, one and several passes
// over the input channels, float16 weights widened per item or in registers), float32 and
// float16, against the naive loops; float16 bit-identical to float32 on the rounded values.
KERNEL_TEST(NchwcConv_InputScale_EveryPath_VsNaive) {
  auto regular = [](const std::vector<ConvCase>& cases) {
    std::vector<ConvCase> kept;
    for (const ConvCase& k : cases)
      if (!k.depthwise && !k.plain_input && !k.channels_last) kept.push_back(k);
    return kept;
  };
  auto check = [](const ConvCase& k, const Epi& e, uint32_t seed) {
    RunConv(k, e, seed);
    RunConv(k, e, seed + 1, F16);
    RunConvFloat16AgainstFloat32(k, e, seed + 2);
  };
  uint32_t seed = 19000;
  ForEachSimdPath([&] {
    for (const ConvCase& k : regular(Geometries())) check(k, Epi{"Swish", {1.0}, true, true, true}, seed += 3);
    for (const Epi& e : {Epi{"", {}, false, false, true}, Epi{"Relu", {}, true, false, true}})
      for (const ConvCase& k : regular(OneOfEachVariant())) check(k, e, seed += 3);
  });
}

KERNEL_TEST(NchwcConv_InputScale_BadSpecs_RaiseNamedErrors) {
  auto conv = [](std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> s, int64_t group) {
    KernelTester t("NchwcConv");
    t.Attrs({{"kernel_shape", {1, 1}}, {"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
             {"group", group}})
        .Attr("activation", "")
        .Attr("activation_params", std::vector<double>{})
        .Attr("has_bias", 0)
        .Attr("has_sum", 0)
        .Attr("has_input_scale", 1);
    for (const auto& shape : {x, w, s})
      t.AddInput(F32, shape, std::vector<double>(static_cast<size_t>(NumElements(shape))));
    const std::vector<int64_t> y = {x[0], 2, x[2], x[3], 8};
    t.AddOutput(F32, y, std::vector<double>(static_cast<size_t>(NumElements(y))));
    return t;
  };
  conv({2, 2, 3, 3, 8}, {1, 2, 1, 1, 8, 16}, {1, 2, 1, 1, 8}, 1).ExpectError(kInvalid, "input scale S has shape");
  conv({1, 2, 3, 3, 8}, {1, 2, 1, 1, 8, 16}, {1, 16}, 1).ExpectError(kInvalid, "input scale S has shape");
  conv({1, 2, 3, 3, 8}, {2, 1, 1, 8}, {1, 2, 1, 1, 8}, 16).ExpectError(kUnimpl, "has_input_scale = 1 on a depthwise");
}

// A float16 convolution whose activation the tiles apply in registers reads and writes its
// float16 tensors itself: no scratch for widened copies of X and Y (a 1x1 convolution in one
// pass over its channels needs none), unlike an activation finished outside the tiles (Elu).
KERNEL_TEST(NchwcConv_Float16_InRegisterActivations_NoWidenedCopies) {
  auto scratch_bytes = [](const char* activation, std::vector<double> params) {
    const nlohmann::json attrs = {{"kernel_shape", {1, 1}}, {"strides", {1, 1}}, {"dilations", {1, 1}},
                                  {"pads", {0, 0, 0, 0}}, {"group", 1}, {"activation", activation},
                                  {"activation_params", params}, {"has_bias", 0}, {"has_sum", 0}};
    const KernelSpec spec{"NchwcConv", "test_node", {{F16, {1, 2, 6, 6, B}}, {F16, {2, 2, 1, 1, B, B}}},
                          {{F16, {1, 2, 6, 6, B}}}, tfpopef::Attrs(attrs, "op 'NchwcConv' (node 'test_node')")};
    return KernelRegistry::Get().Create(spec)->scratch_bytes();
  };
  for (const auto& [name, params] : std::vector<std::pair<const char*, std::vector<double>>>{
           {"Relu", {}}, {"Sigmoid", {}}, {"Swish", {1.0}}, {"HardSigmoid", {0.2, 0.5}}, {"HardSwish", {}}})
    if (const size_t bytes = scratch_bytes(name, params); bytes != 0)
      Fail(std::string("float16 NchwcConv with ") + name + " asks for " + std::to_string(bytes) +
           " scratch bytes: its tensors go through the float16 adapter");
  if (scratch_bytes("Elu", {1.0}) == 0) Fail("float16 NchwcConv with Elu: expected the adapter's widened copies");
}

// Depthwise windows 3, 5 and 7 wide (the compile-time tiles) at strides 1 and 2, plus one each
// of what they leave to the generic tile: rows narrower than, equal to and longer than a tile
// (7 pixels), odd sizes, one- and two-sided and wider-than-window pads, non-square windows,
// row dilation, batch 2, rows longer than two float16 pieces.
std::vector<ConvCase> DepthwiseWindows() {
  std::vector<ConvCase> cases;
  for (int64_t k : {3, 5, 7})
    for (int64_t s : {1, 2}) {
      const int64_t p = k / 2;
      cases.push_back({1, 8, 8, 7, 7, k, k, s, s, 1, 1, p, p, p, p});
      cases.push_back({2, 16, 16, 15, 17, k, k, s, s, 1, 1, p, p, p, p});
      cases.push_back({1, 8, 8, 30, 29, k, k, s, s, 1, 1, p - 1, p - 1, p + 1, p + 1});
      cases.push_back({1, 8, 8, 4, 3, k, k, s, s, 1, 1, p, p, p, p});
      cases.push_back({1, 8, 8, 12, 23, k, k, s, s, 1, 1, 0, 0, 0, 0});
      cases.push_back({1, 8, 8, 9, 9, k, k, s, s, 1, 1, k, k + 1, k, k - 1});
    }
  cases.push_back({1, 16, 16, 3, 121, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});  // rows of 3 float16 pieces (56 pixels)
  cases.push_back({1, 8, 8, 13, 22, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2});
  cases.push_back({1, 8, 8, 13, 22, 7, 3, 2, 1, 2, 1, 6, 1, 6, 1});
  cases.push_back({1, 8, 8, 13, 22, 3, 3, 1, 3, 1, 1, 1, 1, 1, 1});  // (generic: column stride 3)
  cases.push_back({1, 8, 8, 13, 22, 3, 3, 1, 1, 1, 2, 2, 2, 2, 2});  // (generic: column dilation)
  // 1x1 unpadded: per-channel affines, the streaming planes (nchwc_channel_affine.h) of one and
  // several chunks, two images; 1x1 padded: the generic tile
  cases.push_back({1, 24, 24, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({2, 16, 16, 56, 56, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
  cases.push_back({1, 8, 8, 5, 6, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0});
  for (ConvCase& d : cases) d.depthwise = true;
  return cases;
}

KERNEL_TEST(NchwcConv_DepthwiseWindows_EveryPath_VsNaive) {
  uint32_t seed = 18000;
  ForEachSimdPath([&] {
    for (const ConvCase& k : DepthwiseWindows()) {
      RunConv(k, Epi{"Clip", {-0.5, 0.75}, true, true}, seed += 4);
      RunConv(k, Epi{"Swish", {1.0}, true, false}, seed += 4);
      RunConv(k, kPlain, seed += 4, F16);
    }
  });
}

KERNEL_TEST(NchwcConv_DepthwiseWindows_Float16_BitIdenticalToFloat32RoundedOnce) {
  uint32_t seed = 19000;
  ForEachSimdPath([&] {
    for (const ConvCase& k : DepthwiseWindows()) {
      RunConvFloat16AgainstFloat32(k, Epi{"Relu", {}, true, true}, seed += 4);
      RunConvFloat16AgainstFloat32(k, Epi{"Swish", {1.0}, true, false}, seed += 4);
    }
  });
}

// A depthwise step's Sigmoid and Swish (the AVX-512 build applies them on 16 lanes over each
// finished float32 row, the other builds in the tiles) give the bits of the step without an
// activation followed by vector_math's Sigmoid or Swish on the same path: odd and even rows,
// rows of one and several float16 pieces (56 pixels), 3x3 and 5x5 windows, with a Sum.
KERNEL_TEST(NchwcConv_DepthwiseSigmoid_EveryPath_BitIdenticalToVectorMath) {
  uint32_t seed = 19500;
  ForEachSimdPath([&] {
    for (const ConvCase& k : DepthwiseWindows())
      for (const bool swish : {false, true})
        for (const bool sum : {false, true}) {
          // (Without a Sum a plain 1x1 unpadded step runs the per-channel affine loop, whose
          // multiply-add may round once: not the tiles' bits. With one it runs the tiles.)
          if (!sum && k.kh == 1 && k.kw == 1) continue;
          const Epi plain{"", {}, true, sum}, act = swish ? Epi{"Swish", {1.0}, true, sum} : Epi{"Sigmoid", {}, true, sum};
          const std::vector<int64_t> y_shape = {k.n, k.m / B, k.oh(), k.ow(), B};
          const std::vector<double> zeros(static_cast<size_t>(k.n * k.m * k.oh() * k.ow()));
          std::vector<double> naive;
          const std::vector<double> linear =
              ConvTester(k, plain, seed, F32, F32, &naive).AddOutput(F32, y_shape, zeros).RunAndGetOutput(0);
          std::vector<float> v(linear.begin(), linear.end()), expected(v.size());
          if (swish) kernels::vmath::Swish(v.data(), expected.data(), static_cast<int64_t>(v.size()));
          else kernels::vmath::Sigmoid(v.data(), expected.data(), static_cast<int64_t>(v.size()));
          const size_t failures = CurrentFailures().size();
          ConvTester(k, act, seed, F32, F32, &naive)
              .AddOutput(F32, y_shape, std::vector<double>(expected.begin(), expected.end()))
              .Tolerance(0, 0)
              .Run();
          for (size_t i = failures; i < CurrentFailures().size(); ++i)
            CurrentFailures()[i] = Describe(k, act, F32) + (sum ? " with sum" : "") +
                                   " vs vector_math after the plain step: " + CurrentFailures()[i];
          seed += 5;
        }
  });
}

KERNEL_TEST(NchwcConv_BadSpecs_RaiseNamedErrors) {
  auto conv = [](std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> y, int64_t group) {
    KernelTester t("NchwcConv");
    t.Attrs({{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {1, 1, 1, 1}},
             {"group", group}})
        .Attr("activation", "")
        .Attr("activation_params", std::vector<double>{})
        .Attr("has_bias", 0)
        .Attr("has_sum", 0);
    t.AddInput(F32, x, std::vector<double>(static_cast<size_t>(NumElements(x))));
    t.AddInput(F32, w, std::vector<double>(static_cast<size_t>(NumElements(w))));
    t.AddOutput(F32, y, std::vector<double>(static_cast<size_t>(NumElements(y))));
    return t;
  };
  conv({1, 2, 5, 5, 8}, {1, 2, 3, 3, 8, 4}, {1, 1, 5, 5, 8}, 1).ExpectError(kInvalid, "weights W has shape");
  conv({1, 2, 5, 5, 8}, {1, 2, 3, 3, 8, 8}, {1, 1, 4, 5, 8}, 1).ExpectError(kInvalid, "output 0 has shape");
  // paired weights (last axis 16) make 2 output blocks per group: Y must have them
  conv({1, 2, 5, 5, 8}, {1, 2, 3, 3, 8, 16}, {1, 1, 5, 5, 8}, 1).ExpectError(kInvalid, "output 0 has shape");
  conv({1, 2, 5, 5, 4}, {1, 2, 3, 3, 8, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kInvalid, "blocked tensor");
  conv({1, 4, 5, 5, 8}, {2, 2, 3, 3, 8, 8}, {1, 2, 5, 5, 8}, 2).ExpectError(kUnimpl, "group 2");
  conv({1, 16, 5, 5}, {2, 3, 3, 8}, {1, 2, 5, 5, 8}, 16).ExpectError(kUnimpl, "group 16");
  conv({1, 2, 5, 5, 8}, {2, 3, 1, 8}, {1, 2, 5, 5, 8}, 16).ExpectError(kInvalid, "depthwise weights W");
  // channels last: X [N, H, W, C = 1 or 3], W [M/G, KH, KW, C, G], group 1
  auto nhwc = [&](std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> y, int64_t group) {
    KernelTester t = conv(x, w, y, group);
    t.Attr("channels_last", 1);
    return t;
  };
  nhwc({1, 5, 5, 5}, {1, 3, 3, 5, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kUnimpl, "channels_last = 1 with input X [1, 5, 5, 5]");
  // only the counts the tiles are instantiated for (each is a copy of every tile)
  nhwc({1, 5, 5, 2}, {1, 3, 3, 2, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kUnimpl, "X [N, H, W, C] with C = 1 or 3");
  nhwc({1, 5, 5, 4}, {1, 3, 3, 4, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kUnimpl, "X [N, H, W, C] with C = 1 or 3");
  nhwc({1, 5, 5, 3}, {1, 3, 3, 3, 8}, {1, 1, 5, 5, 8}, 3).ExpectError(kUnimpl, "channels_last = 1 with input X");
  nhwc({1, 2, 5, 5, 8}, {1, 2, 3, 3, 8, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kUnimpl, "channels_last = 1 with input X");
  // (the plain-input layout [M/G, C, KH, KW, G])
  nhwc({1, 5, 5, 1}, {1, 1, 3, 3, 8}, {1, 1, 5, 5, 8}, 1).ExpectError(kInvalid, "weights W has shape");
  KernelTester mixed("NchwcConv");
  mixed.Attrs({{"kernel_shape", {1, 1}}, {"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
               {"group", 1}})
      .Attr("activation", "")
      .Attr("activation_params", std::vector<double>{})
      .Attr("has_bias", 0)
      .Attr("has_sum", 0)
      .AddInput(F16, {1, 1, 2, 2, 8}, std::vector<double>(32))
      .AddInput(F32, {1, 1, 1, 1, 8, 8}, std::vector<double>(64))
      .AddOutput(F16, {1, 1, 2, 2, 8}, std::vector<double>(32))
      .ExpectError(kInvalid, "input 1 has dtype float32 but input 0 has float16");
}

KERNEL_TEST(NchwcMaxPool_EveryPath_Float32AndFloat16_VsNaive) {
  struct PoolCase {
    int64_t n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr;
    bool ceil;
    bool zero_pads = false;  // a folded zero Pad: the pads hold zeros
  };
  const PoolCase cases[] = {
      {1, 16, 12, 12, 3, 3, 2, 2, 1, 1, 1, 1, false},  // ResNet's 3x3/2 pads 1
      {2, 8, 7, 9, 2, 2, 2, 2, 0, 0, 0, 0, false},
      {1, 8, 7, 7, 3, 3, 2, 2, 0, 0, 0, 0, true},      // ceil_mode: the last window is clipped
      {1, 8, 5, 6, 3, 3, 1, 1, 2, 2, 2, 2, false},
      {1, 16, 12, 12, 3, 3, 2, 2, 1, 1, 1, 1, false, true},  // ResNet's stem: Pad(0) + MaxPool 3x3/2
      {2, 8, 5, 6, 3, 3, 1, 1, 2, 0, 1, 2, false, true},     // windows wholly in the pads: 0
      {1, 8, 5, 150, 3, 3, 1, 1, 1, 1, 1, 1, false},          // two-pass rows over several pieces
      {1, 8, 6, 70, 5, 5, 1, 1, 2, 2, 2, 2, false, true},     // a 5-wide two-pass window, zero pads
      {1, 8, 4, 40, 2, 17, 1, 1, 0, 0, 0, 0, false},          // wider than the two-pass buffer: direct
      {2, 16, 14, 14, 1, 1, 2, 2, 0, 0, 0, 0, false},         // 1x1/2: a subsample, copied
      {1, 8, 13, 11, 1, 1, 2, 3, 0, 0, 0, 0, false},          // ... odd sides, unequal strides
      {1, 8, 6, 6, 1, 1, 2, 2, 1, 1, 1, 1, false, true},      // 1x1 with zero pads: not a subsample
      {1, 16, 15, 17, 3, 3, 2, 2, 0, 0, 0, 0, false},         // InceptionV3's reductions: every window row inside
      {1, 8, 8, 10, 3, 3, 2, 2, 0, 0, 0, 0, true},            // ... with ceil_mode's clipped last row and column
      {1, 8, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, false},           // 3x3/1 sliding rows, full and clipped
      {2, 24, 19, 17, 3, 3, 2, 2, 0, 0, 0, 0, false},         // strips of rows over images and blocks
  };
  uint32_t seed = 14000;
  ForEachSimdPath([&] {
    for (DType dtype : {F32, F16})
      for (const PoolCase& k : cases) {
        const int64_t span_h = (k.h + k.pt + k.pb - k.kh), span_w = (k.w + k.pl + k.pr - k.kw);
        const int64_t oh = (k.ceil ? (span_h + k.sh - 1) / k.sh : span_h / k.sh) + 1;
        const int64_t ow = (k.ceil ? (span_w + k.sw - 1) / k.sw : span_w / k.sw) + 1;
        const auto round = dtype == F16 ? AsFloat16 : AsFloat32;
        const auto x = round(RandomValues(k.n * k.c * k.h * k.w, -3, 3, seed += 2));
        std::vector<double> y(static_cast<size_t>(k.n * k.c * oh * ow));
        for (int64_t p = 0; p < k.n * k.c; ++p)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              double m = -std::numeric_limits<double>::infinity();
              for (int64_t a = 0; a < k.kh; ++a)
                for (int64_t d = 0; d < k.kw; ++d) {
                  const int64_t ih = i * k.sh - k.pt + a, iw = j * k.sw - k.pl + d;
                  if (ih >= 0 && ih < k.h && iw >= 0 && iw < k.w)
                    m = std::max(m, x[static_cast<size_t>((p * k.h + ih) * k.w + iw)]);
                  else if (k.zero_pads)
                    m = std::max(m, 0.0);
                }
              y[static_cast<size_t>((p * oh + i) * ow + j)] = m;
            }
        KernelTester("NchwcMaxPool")
            .Attrs({{"kernel_shape", {k.kh, k.kw}}, {"strides", {k.sh, k.sw}}, {"dilations", {1, 1}},
                    {"pads", {k.pt, k.pl, k.pb, k.pr}}, {"zero_pads", k.zero_pads ? 1 : 0}})
            .AddInput(dtype, {k.n, k.c / B, k.h, k.w, B}, ToBlocked(x, k.n, k.c, k.h * k.w))
            .AddOutput(dtype, {k.n, k.c / B, oh, ow, B}, ToBlocked(y, k.n, k.c, oh * ow))
            .Tolerance(0, 0)  // a maximum of representable values is exact in either type
            .Run();
      }
  });
  KernelTester("NchwcMaxPool")
      .Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}})
      .AddInput(F32, {1, 1, 7, 7, 8}, std::vector<double>(392))
      .AddOutput(F32, {1, 1, 5, 3, 8}, std::vector<double>(120))
      .ExpectError(kInvalid, "output Y has shape");
  auto zero_padded = [](int64_t zero_pads, int64_t oh) {
    return KernelTester("NchwcMaxPool")
        .Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
                {"zero_pads", zero_pads}})
        .AddInput(F32, {1, 1, 8, 7, 8}, std::vector<double>(448))
        .AddOutput(F32, {1, 1, oh, 3, 8}, std::vector<double>(static_cast<size_t>(oh * 24)));
  };
  zero_padded(2, 3).ExpectError(kInvalid, "attribute 'zero_pads' is 2, expected 0 or 1");
  zero_padded(1, 4).ExpectError(kInvalid, "zero_pads = 1 takes the floor formula");  // a ceil_mode shape
}

KERNEL_TEST(NchwcAveragePool_EveryPath_Float32AndFloat16_VsNaive) {
  struct PoolCase {
    int64_t n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool ceil, count_include_pad;
  };
  const PoolCase cases[] = {
      {2, 16, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, false},  // DenseNet's transitions
      {1, 8, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},   // Inception's 3x3/1 'same' branch
      {1, 8, 9, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      {1, 8, 7, 7, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true, false},    // ceil_mode: the last window is clipped
      {1, 8, 7, 8, 3, 2, 2, 2, 1, 1, 1, 0, 1, 1, true, true},     // ... and counts only the padded input
      {2, 8, 5, 6, 3, 3, 1, 1, 1, 1, 2, 0, 1, 2, false, true},    // windows wholly in the pads
      {1, 8, 9, 9, 2, 3, 1, 2, 2, 2, 1, 1, 1, 1, false, true},    // dilations
      {1, 8, 5, 150, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}, // two-pass rows over several pieces
      {1, 8, 9, 70, 3, 5, 1, 1, 2, 1, 2, 2, 2, 2, false, true},   // two-pass, 5 wide, dilated rows
      {2, 8, 8, 8, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, true, false},    // ceil_mode at stride 1 (no extra column)
      {1, 8, 4, 40, 2, 17, 1, 1, 1, 1, 0, 8, 0, 8, false, false}, // wider than the two-pass buffer: direct
      {2, 16, 14, 13, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, false, false}, // 1x1/2: a subsample, copied
      {1, 16, 11, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},  // 3x3/1 'same', count_include_pad
      {1, 8, 10, 9, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, false, false},   // 3x3/2 sliding rows, all windows inside
      {1, 8, 10, 9, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true, true},     // ... ceil_mode: clipped last row and column
      {1, 8, 12, 12, 3, 3, 1, 1, 2, 1, 1, 1, 1, 1, false, true},   // dilated rows at a 3x3/1 sliding row
      {2, 24, 17, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}, // strips of rows, the last one short
  };
  uint32_t seed = 16000;
  ForEachSimdPath([&] {
    for (DType dtype : {F32, F16})
      for (const PoolCase& k : cases) {
        const int64_t span_h = k.h + k.pt + k.pb - k.dh * (k.kh - 1) - 1;
        const int64_t span_w = k.w + k.pl + k.pr - k.dw * (k.kw - 1) - 1;
        int64_t oh = (k.ceil ? (span_h + k.sh - 1) / k.sh : span_h / k.sh) + 1;
        int64_t ow = (k.ceil ? (span_w + k.sw - 1) / k.sw : span_w / k.sw) + 1;
        if (k.ceil && (oh - 1) * k.sh >= k.h + k.pt) --oh;  // no window starting in the end padding
        if (k.ceil && (ow - 1) * k.sw >= k.w + k.pl) --ow;
        const auto round = dtype == F16 ? AsFloat16 : AsFloat32;
        const auto x = round(RandomValues(k.n * k.c * k.h * k.w, -3, 3, seed += 2));
        std::vector<double> y(static_cast<size_t>(k.n * k.c * oh * ow));
        for (int64_t p = 0; p < k.n * k.c; ++p)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              double sum = 0;
              int64_t inside = 0, padded = 0;
              for (int64_t a = 0; a < k.kh; ++a)
                for (int64_t d = 0; d < k.kw; ++d) {
                  const int64_t ih = i * k.sh - k.pt + a * k.dh, iw = j * k.sw - k.pl + d * k.dw;
                  if (ih >= -k.pt && ih < k.h + k.pb && iw >= -k.pl && iw < k.w + k.pr) ++padded;
                  if (ih >= 0 && ih < k.h && iw >= 0 && iw < k.w) {
                    sum += x[static_cast<size_t>((p * k.h + ih) * k.w + iw)];
                    ++inside;
                  }
                }
              const int64_t count = k.count_include_pad ? padded : inside;
              y[static_cast<size_t>((p * oh + i) * ow + j)] = count ? sum / static_cast<double>(count) : 0.0;
            }
        auto tester = [&](DType y_dtype, const std::vector<double>& expected) {
          return KernelTester("NchwcAveragePool")
              .Attrs({{"kernel_shape", {k.kh, k.kw}}, {"strides", {k.sh, k.sw}}, {"dilations", {k.dh, k.dw}},
                      {"pads", {k.pt, k.pl, k.pb, k.pr}}, {"count_include_pad", k.count_include_pad ? 1 : 0}})
              .AddInput(y_dtype, {k.n, k.c / B, k.h, k.w, B}, ToBlocked(x, k.n, k.c, k.h * k.w))
              .AddOutput(y_dtype, {k.n, k.c / B, oh, ow, B}, expected);
        };
        tester(dtype, ToBlocked(y, k.n, k.c, oh * ow))
            .Tolerance(1e-6, dtype == F16 ? 1e-3 : 1e-6)
            .Concurrently(2, 2)
            .Run();
        if (dtype == F16) {  // float16 averages in float32 and rounds once: the float32 pool, rounded
          const std::vector<double> y32 = tester(F32, ToBlocked(y, k.n, k.c, oh * ow)).RunAndGetOutput(0);
          tester(F16, AsFloat16(y32)).Tolerance(0, 0).Run();
        }
      }
  });
  auto pool = [](int64_t count_include_pad, int64_t oh) {
    return KernelTester("NchwcAveragePool")
        .Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
                {"count_include_pad", count_include_pad}})
        .AddInput(F32, {1, 1, 7, 7, 8}, std::vector<double>(392))
        .AddOutput(F32, {1, 1, oh, 3, 8}, std::vector<double>(static_cast<size_t>(oh * 24)));
  };
  pool(2, 3).ExpectError(kInvalid, "attribute 'count_include_pad' is 2, expected 0 or 1");
  pool(0, 5).ExpectError(kInvalid, "output Y has shape");
}

KERNEL_TEST(NchwcReorders_RoundTrip_MatchTheLayout) {
  const int64_t n = 2, c = 16, h = 5, w = 67;  // 335 pixels: more than one 256-pixel strip
  for (DType dtype : {F32, F16}) {  // float16 is moved as 16-bit words: exact
    const auto x = (dtype == F16 ? AsFloat16 : AsFloat32)(RandomValues(n * c * h * w, -1, 1, 15000));
    const auto blocked = ToBlocked(x, n, c, h * w);
    KernelTester("ToNchwc")
        .AddInput(dtype, {n, c, h, w}, x)
        .AddOutput(dtype, {n, c / B, h, w, B}, blocked)
        .Tolerance(0, 0)
        .Run();
    KernelTester("FromNchwc")
        .AddInput(dtype, {n, c / B, h, w, B}, blocked)
        .AddOutput(dtype, {n, c, h, w}, x)
        .Tolerance(0, 0)
        .Run();
  }
  KernelTester("ToNchwc")
      .AddInput(F32, {1, 12, 2, 2}, std::vector<double>(48))
      .AddOutput(F32, {1, 2, 2, 2, 8}, std::vector<double>(64))
      .ExpectError(kInvalid, "input X has shape");
  KernelTester("FromNchwc")
      .AddInput(F32, {1, 2, 2, 2, 4}, std::vector<double>(32))
      .AddOutput(F32, {1, 8, 2, 2}, std::vector<double>(32))
      .ExpectError(kInvalid, "blocked tensor");
}

// channels_last = 1: the plain side is [N, H, W, C]. 24 channels (3 blocks) by 1500 pixels: a
// float32 strip holds 341 pixels, so the last strip of each image is partial.
KERNEL_TEST(NchwcReorders_ChannelsLast_MatchTheLayout) {
  const int64_t n = 2, c = 24, h = 30, w = 50;
  for (DType dtype : {F32, F16}) {
    const auto nhwc = (dtype == F16 ? AsFloat16 : AsFloat32)(RandomValues(n * h * w * c, -1, 1, 15001));
    std::vector<double> nchw(nhwc.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t p = 0; p < h * w; ++p)
        for (int64_t ch = 0; ch < c; ++ch) nchw[(i * c + ch) * h * w + p] = nhwc[(i * h * w + p) * c + ch];
    const auto blocked = ToBlocked(nchw, n, c, h * w);
    KernelTester("ToNchwc")
        .Attr("channels_last", 1)
        .AddInput(dtype, {n, h, w, c}, nhwc)
        .AddOutput(dtype, {n, c / B, h, w, B}, blocked)
        .Tolerance(0, 0)
        .Run();
    KernelTester("FromNchwc")
        .Attr("channels_last", 1)
        .AddInput(dtype, {n, c / B, h, w, B}, blocked)
        .AddOutput(dtype, {n, h, w, c}, nhwc)
        .Tolerance(0, 0)
        .Run();
  }
  KernelTester("FromNchwc")
      .Attr("channels_last", 1)
      .AddInput(F32, {1, 2, 2, 3, 8}, std::vector<double>(96))
      .AddOutput(F32, {1, 16, 2, 3}, std::vector<double>(96))
      .ExpectError(kInvalid, "output Y has shape [1, 16, 2, 3]");
  KernelTester("ToNchwc")
      .Attr("channels_last", 2)
      .AddInput(F32, {1, 2, 3, 16}, std::vector<double>(96))
      .AddOutput(F32, {1, 2, 2, 3, 8}, std::vector<double>(96))
      .ExpectError(kInvalid, "attribute 'channels_last' must be 0 or 1");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
