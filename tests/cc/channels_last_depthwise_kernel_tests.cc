// ChannelsLastDepthwiseConv (kernels/nchwc/channels_last_depthwise.cc) against a naive
// double-precision loop on every SIMD path: the window tiles (3, 5 and 7 wide, stride 1 and 2,
// rows narrower and wider than a tile, one row or a band of rows per work item), the generic
// loop (other widths, dilations), with and
// without bias, with and without the LayerNormalization epilogue (with and without beta), in
// float32 and float16; and the named errors for bad specs. Run by the kernel_tests.cc binary
// (tests/cc/test_kernels_cc.py).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"

namespace tfpopef {
namespace test {
namespace {

constexpr int64_t B = 8;

struct ClCase {
  int64_t n, h, w, c, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t oh() const { return (h + pt + pb - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - dw * (kw - 1) - 1) / sw + 1; }
  std::string Describe() const {
    return "x [" + std::to_string(n) + ", " + std::to_string(h) + ", " + std::to_string(w) + ", " +
           std::to_string(c) + "] window " + std::to_string(kh) + "x" + std::to_string(kw) + " stride " +
           std::to_string(sh) + "x" + std::to_string(sw) + " dilation " + std::to_string(dh) + "x" +
           std::to_string(dw) + " pads " + std::to_string(pt) + "," + std::to_string(pl) + "," +
           std::to_string(pb) + "," + std::to_string(pr);
  }
};

struct ClEpilogue {
  bool bias, layer_norm, beta;
};

// The step's tester with inputs from `seed` (float16: values rounded to float16 first) and the
// naive result in *y: the depthwise convolution in double, + bias, then the LayerNormalization
// over C in double.
KernelTester ClTester(const ClCase& k, const ClEpilogue& e, uint32_t seed, DType dtype, std::vector<double>* y_out) {
  auto round = [&](std::vector<double> v) { return dtype == F16 ? AsFloat16(v) : AsFloat32(v); };
  const auto x = round(RandomValues(k.n * k.h * k.w * k.c, -2, 2, seed));
  const auto w = round(RandomValues(k.c * k.kh * k.kw, -0.5, 0.5, seed + 1));  // [C/8, KH, KW, 8]
  const auto b = round(RandomValues(k.c, -1, 1, seed + 2));
  const auto gamma = round(RandomValues(k.c, 0.5, 1.5, seed + 3));
  const auto beta = round(RandomValues(k.c, -1, 1, seed + 4));
  const int64_t oh = k.oh(), ow = k.ow();
  std::vector<double>& y = *y_out;
  y.assign(static_cast<size_t>(k.n * oh * ow * k.c), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double* out = y.data() + ((n * oh + i) * ow + j) * k.c;
        for (int64_t ch = 0; ch < k.c; ++ch) {
          double acc = e.bias ? b[static_cast<size_t>(ch)] : 0.0;
          for (int64_t a = 0; a < k.kh; ++a)
            for (int64_t d = 0; d < k.kw; ++d) {
              const int64_t ih = i * k.sh - k.pt + a * k.dh, iw = j * k.sw - k.pl + d * k.dw;
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              acc += x[static_cast<size_t>(((n * k.h + ih) * k.w + iw) * k.c + ch)] *
                     w[static_cast<size_t>(((ch / B * k.kh + a) * k.kw + d) * B + ch % B)];
            }
          out[ch] = acc;
        }
        if (!e.layer_norm) continue;
        double mean = 0.0, var = 0.0;
        for (int64_t ch = 0; ch < k.c; ++ch) mean += out[ch];
        mean /= static_cast<double>(k.c);
        for (int64_t ch = 0; ch < k.c; ++ch) var += (out[ch] - mean) * (out[ch] - mean);
        var /= static_cast<double>(k.c);
        const double inv_std = 1.0 / std::sqrt(var + 1e-6);
        for (int64_t ch = 0; ch < k.c; ++ch)
          out[ch] = (out[ch] - mean) * inv_std * gamma[static_cast<size_t>(ch)] +
                    (e.beta ? beta[static_cast<size_t>(ch)] : 0.0);
      }
  KernelTester t("ChannelsLastDepthwiseConv");
  t.Attrs({{"kernel_shape", {k.kh, k.kw}}, {"strides", {k.sh, k.sw}}, {"dilations", {k.dh, k.dw}},
           {"pads", {k.pt, k.pl, k.pb, k.pr}}, {"has_bias", e.bias ? 1 : 0}, {"layer_norm", e.layer_norm ? 1 : 0},
           {"epsilon", 1e-6}});
  t.AddInput(dtype, {k.n, k.h, k.w, k.c}, x).AddInput(dtype, {k.c / B, k.kh, k.kw, B}, w);
  if (e.bias) t.AddInput(dtype, {k.c}, b);
  if (e.layer_norm) t.AddInput(dtype, {k.c}, gamma);
  if (e.layer_norm && e.beta) t.AddInput(dtype, {k.c}, beta);
  return t;
}

void RunCl(const ClCase& k, const ClEpilogue& e, uint32_t seed, DType dtype) {
  std::vector<double> y;
  KernelTester t = ClTester(k, e, seed, dtype, &y);
  const size_t failures = CurrentFailures().size();
  // float32: sums of up to 49 products, normalized (outputs of a few units): rounding is
  // ~1e-6; float16 adds the output's one rounding (2^-11 relative, outputs up to ~4).
  const double tolerance = dtype == F16 ? 4e-3 : 1e-4;
  t.AddOutput(dtype, {k.n, k.oh(), k.ow(), k.c}, y).Tolerance(tolerance, tolerance).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = k.Describe() + (dtype == F16 ? " float16" : "") + (e.bias ? " bias" : "") +
                           (e.layer_norm ? (e.beta ? " layer_norm+beta" : " layer_norm") : "") + ": " +
                           CurrentFailures()[i];
}

const std::vector<ClCase>& Cases() {
  static const std::vector<ClCase> cases = {
      // ConvNeXt's 7x7 / 1 / pad 3: rows of 9 (a tile + a tail), 14 (two tiles), 3 (narrower than a tile)
      {2, 5, 9, 16, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      {1, 14, 14, 24, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      {1, 4, 3, 8, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      {1, 7, 7, 40, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      // the other window tiles, stride 1 and 2, asymmetric pads
      {2, 6, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 9, 13, 8, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
      {1, 8, 15, 16, 7, 7, 2, 2, 1, 1, 3, 2, 2, 3},
      {1, 6, 10, 8, 3, 3, 1, 2, 1, 1, 0, 1, 1, 0},
      // several images on planes at least 28 wide: bands of rows per work item
      {2, 8, 28, 16, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3},
      {3, 6, 30, 8, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2},
      // the generic loop: a 4-wide window, dilation 2, a 1x1
      {1, 6, 9, 16, 4, 4, 1, 1, 1, 1, 1, 2, 2, 1},
      {1, 9, 9, 8, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
      {2, 3, 5, 16, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
  };
  return cases;
}

KERNEL_TEST(ChannelsLastDepthwise_EveryPath_Float32_VsNaive) {
  ForEachSimdPath([&] {
    uint32_t seed = 10;
    for (const ClCase& k : Cases())
      for (const ClEpilogue& e : {ClEpilogue{false, false, false}, ClEpilogue{true, false, false},
                                  ClEpilogue{true, true, true}, ClEpilogue{false, true, false}})
        RunCl(k, e, seed++, F32);
  });
}

KERNEL_TEST(ChannelsLastDepthwise_EveryPath_Float16_VsNaive) {
  ForEachSimdPath([&] {
    uint32_t seed = 200;
    for (const ClCase& k : Cases())
      for (const ClEpilogue& e : {ClEpilogue{true, false, false}, ClEpilogue{true, true, true}})
        RunCl(k, e, seed++, F16);
  });
}

KERNEL_TEST(ChannelsLastDepthwise_ConcurrentRuns) {
  std::vector<double> y;
  const ClCase k{2, 8, 28, 32, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3};  // in bands of rows
  ClTester(k, {true, true, true}, 7, F32, &y)
      .AddOutput(F32, {k.n, k.oh(), k.ow(), k.c}, y)
      .Tolerance(1e-4, 1e-4)
      .Concurrently(3, 4)
      .Run();
}

KERNEL_TEST(ChannelsLastDepthwise_BadSpecs_RaiseNamedErrors) {
  auto step = [](std::vector<int64_t> x, std::vector<int64_t> w, std::vector<std::vector<int64_t>> rest, int bias,
                 int layer_norm, std::vector<int64_t> y) {
    KernelTester t("ChannelsLastDepthwiseConv");
    t.Attrs({{"kernel_shape", {w.size() == 4 ? w[1] : 3, w.size() == 4 ? w[2] : 3}}, {"strides", {1, 1}},
             {"dilations", {1, 1}}, {"pads", {1, 1, 1, 1}}, {"has_bias", bias}, {"layer_norm", layer_norm}});
    t.AddInput(F32, x, std::vector<double>(static_cast<size_t>(NumElements(x))));
    t.AddInput(F32, w, std::vector<double>(static_cast<size_t>(NumElements(w))));
    for (const auto& shape : rest) t.AddInput(F32, shape, std::vector<double>(static_cast<size_t>(NumElements(shape))));
    t.AddOutput(F32, y, std::vector<double>(static_cast<size_t>(NumElements(y))));
    return t;
  };
  step({1, 4, 4, 12}, {1, 3, 3, 8}, {}, 0, 0, {1, 4, 4, 12})
      .ExpectError(kInvalid, "expected channels last [N, H, W, C]");
  step({1, 4, 4, 16, 1}, {2, 3, 3, 8}, {}, 0, 0, {1, 4, 4, 16}).ExpectError(kInvalid, "input X has shape");
  step({1, 4, 4, 16}, {1, 3, 3, 8}, {}, 0, 0, {1, 4, 4, 16}).ExpectError(kInvalid, "depthwise weights W");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {{8}}, 1, 0, {1, 4, 4, 16}).ExpectError(kInvalid, "bias B");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {{16}, {15}}, 0, 1, {1, 4, 4, 16})
      .ExpectError(kInvalid, "LayerNormalization bias beta");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {{4}}, 0, 1, {1, 4, 4, 16}).ExpectError(kInvalid, "LayerNormalization scale gamma");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {}, 0, 1, {1, 4, 4, 16}).ExpectError(kInvalid, "expects 3..4 inputs");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {{16}}, 0, 0, {1, 4, 4, 16}).ExpectError(kInvalid, "expects 2 inputs");
  step({1, 4, 4, 16}, {2, 3, 3, 8}, {}, 0, 0, {1, 4, 5, 16}).ExpectError(kInvalid, "output");
  step({1, 2, 2, 16}, {2, 7, 7, 8}, {}, 0, 0, {1, 2, 2, 16}).ExpectError(kInvalid, "larger than the padded input");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
