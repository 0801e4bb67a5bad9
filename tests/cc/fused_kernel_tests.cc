// The fused ops (FusedConv, FusedGemm, FusedMatMul: docs/popef.md "Internal ops"),
// against a naive double-precision reference: every epilogue activation, with and without
// bias and residual sum, over the convolution paths (pointwise GEMM, depthwise direct loop,
// im2col + GEMM; groups, strides, pads, dilations), float32 and float16; plus the prepare-time
// errors. Run by the kernel_tests.cc binary (tests/cc/test_kernels_cc.py).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"

namespace tfpopef {
namespace test {
namespace {

struct ActivationCase {
  const char* name;
  std::vector<double> params;
};

const ActivationCase kActivations[] = {
    {"", {}},          {"Relu", {}},          {"Clip", {0, 6}},        {"Clip", {-0.5, 0.25}},
    {"LeakyRelu", {0.1}}, {"Sigmoid", {}},    {"Swish", {1.0}},        {"Swish", {1.7}},
    {"HardSigmoid", {0.3, 0.4}}, {"HardSwish", {}}, {"GeluErf", {}},   {"GeluTanh", {}},
    {"Tanh", {}},
};

double Activate(const ActivationCase& a, double x) { return RefActivation(a.name, a.params, x); }

struct ConvGeometry {
  const char* what;
  int64_t n, c, hw, m, k, stride, dilation, pad, group;
};

const ConvGeometry kGeometries[] = {
    {"pointwise", 2, 6, 5, 4, 1, 1, 1, 0, 1},
    {"pointwise grouped", 1, 6, 4, 6, 1, 1, 1, 0, 3},
    {"depthwise 3x3", 2, 5, 7, 5, 3, 1, 1, 1, 5},
    {"depthwise stride 2", 2, 4, 9, 4, 3, 2, 1, 1, 4},
    {"depthwise dilated", 1, 3, 9, 3, 3, 1, 2, 2, 3},
    {"im2col", 2, 3, 7, 4, 3, 1, 1, 1, 1},
    {"im2col strided, grouped", 1, 4, 8, 6, 3, 2, 1, 1, 2},
    {"im2col 1x1 stride 2", 2, 3, 6, 5, 1, 2, 1, 0, 1},
};

void RunFusedConv(const ConvGeometry& k, const ActivationCase& act, bool bias, bool sum, DType dtype,
                  uint32_t seed) {
  const int64_t o = (k.hw + 2 * k.pad - k.dilation * (k.k - 1) - 1) / k.stride + 1;
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto x = round(RandomValues(k.n * k.c * k.hw * k.hw, -1.5, 1.5, seed));
  const auto w = round(RandomValues(k.m * cg * k.k * k.k, -1, 1, seed + 1));
  const auto b = round(RandomValues(k.m, -1, 1, seed + 2));
  const auto s = round(RandomValues(k.n * k.m * o * o, -2, 2, seed + 3));
  std::vector<double> y(static_cast<size_t>(k.n * k.m * o * o));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < o; ++i)
        for (int64_t j = 0; j < o; ++j) {
          double acc = bias ? b[static_cast<size_t>(m)] : 0.0;
          const int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < k.k; ++a)
              for (int64_t d = 0; d < k.k; ++d) {
                const int64_t ih = i * k.stride - k.pad + a * k.dilation, iw = j * k.stride - k.pad + d * k.dilation;
                if (ih < 0 || ih >= k.hw || iw < 0 || iw >= k.hw) continue;
                acc += x[static_cast<size_t>(((n * k.c + g * cg + c) * k.hw + ih) * k.hw + iw)] *
                       w[static_cast<size_t>(((m * cg + c) * k.k + a) * k.k + d)];
              }
          const size_t at = static_cast<size_t>(((n * k.m + m) * o + i) * o + j);
          y[at] = Activate(act, acc + (sum ? s[at] : 0.0));
        }
  KernelTester t("FusedConv");
  t.Attrs({{"strides", {k.stride, k.stride}}, {"dilations", {k.dilation, k.dilation}},
           {"pads", {k.pad, k.pad, k.pad, k.pad}}, {"group", k.group}, {"activation", act.name},
           {"activation_params", act.params}, {"has_bias", bias ? 1 : 0}, {"has_sum", sum ? 1 : 0}});
  t.AddInput(dtype, {k.n, k.c, k.hw, k.hw}, x).AddInput(dtype, {k.m, cg, k.k, k.k}, w);
  if (bias) t.AddInput(dtype, {k.m}, b);
  if (sum) t.AddInput(dtype, {k.n, k.m, o, o}, s);
  t.AddOutput(dtype, {k.n, k.m, o, o}, y).Tolerance(dtype == F16 ? 2e-2 : 2e-5, dtype == F16 ? 1e-2 : 1e-5).Run();
}

KERNEL_TEST(FusedConv_EveryActivation_BiasAndSum_VsNaive) {
  uint32_t seed = 500;
  for (const auto& act : kActivations)
    for (bool bias : {false, true})
      for (bool sum : {false, true}) {
        RunFusedConv(kGeometries[5], act, bias, sum, F32, seed += 4);  // im2col
        RunFusedConv(kGeometries[2], act, bias, sum, F32, seed += 4);  // depthwise
      }
}

KERNEL_TEST(FusedConv_EveryPath_Float32AndFloat16_VsNaive) {
  uint32_t seed = 900;
  const ActivationCase relu6{"Clip", {0, 6}}, gelu{"GeluErf", {}};
  for (const auto& geometry : kGeometries)
    for (DType dtype : {F32, F16}) {
      RunFusedConv(geometry, relu6, true, true, dtype, seed += 4);
      RunFusedConv(geometry, gelu, true, false, dtype, seed += 4);
      RunFusedConv(geometry, relu6, false, true, dtype, seed += 4);
    }
}

// FusedGemm: Y = act(alpha·op(A)·op(B) + beta·C + Sum); FusedMatMul: act(A·B + bias[n] + Sum).
void RunFusedGemm(const ActivationCase& act, bool trans_b, bool with_c, bool sum, DType dtype, uint32_t seed) {
  const int64_t m = 5, k = 7, n = 19;
  const double alpha = 0.5, beta = 1.5;
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto a = round(RandomValues(m * k, -1, 1, seed));
  const auto b = round(RandomValues(k * n, -1, 1, seed + 1));
  const auto c = round(RandomValues(n, -1, 1, seed + 2));
  const auto s = round(RandomValues(m * n, -1, 1, seed + 3));
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(trans_b ? j * k + p : p * n + j)];
      acc = alpha * acc + (with_c ? beta * c[static_cast<size_t>(j)] : 0.0) + (sum ? s[static_cast<size_t>(i * n + j)] : 0);
      y[static_cast<size_t>(i * n + j)] = Activate(act, acc);
    }
  KernelTester t("FusedGemm");
  t.Attrs({{"alpha", alpha}, {"beta", beta}, {"transA", 0}, {"transB", trans_b ? 1 : 0}, {"activation", act.name},
           {"activation_params", act.params}, {"has_bias", with_c ? 1 : 0}, {"has_sum", sum ? 1 : 0}});
  t.AddInput(dtype, {m, k}, a).AddInput(dtype, trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, b);
  if (with_c) t.AddInput(dtype, {n}, c);
  if (sum) t.AddInput(dtype, {m, n}, s);
  t.AddOutput(dtype, {m, n}, y).Tolerance(dtype == F16 ? 2e-2 : 2e-5, dtype == F16 ? 1e-2 : 1e-5).Run();
}

void RunFusedMatMul(const ActivationCase& act, bool bias, bool sum, DType dtype, uint32_t seed) {
  const int64_t batch = 3, m = 4, k = 6, n = 21;  // A [3, 4, 6] x B [6, 21]: batches folded into M
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto a = round(RandomValues(batch * m * k, -1, 1, seed));
  const auto b = round(RandomValues(k * n, -1, 1, seed + 1));
  const auto bv = round(RandomValues(n, -1, 1, seed + 2));
  const auto s = round(RandomValues(batch * m * n, -1, 1, seed + 3));
  std::vector<double> y(static_cast<size_t>(batch * m * n));
  for (int64_t i = 0; i < batch * m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias ? bv[static_cast<size_t>(j)] : 0.0;
      for (int64_t p = 0; p < k; ++p) acc += a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
      if (sum) acc += s[static_cast<size_t>(i * n + j)];
      y[static_cast<size_t>(i * n + j)] = Activate(act, acc);
    }
  KernelTester t("FusedMatMul");
  t.Attrs({{"activation", act.name}, {"activation_params", act.params}, {"has_bias", bias ? 1 : 0},
           {"has_sum", sum ? 1 : 0}});
  t.AddInput(dtype, {batch, m, k}, a).AddInput(dtype, {k, n}, b);
  if (bias) t.AddInput(dtype, {n}, bv);
  if (sum) t.AddInput(dtype, {batch, m, n}, s);
  t.AddOutput(dtype, {batch, m, n}, y).Tolerance(dtype == F16 ? 2e-2 : 2e-5, dtype == F16 ? 1e-2 : 1e-5).Run();
}

KERNEL_TEST(FusedGemm_And_FusedMatMul_EveryActivation_VsNaive) {
  uint32_t seed = 1300;
  for (const auto& act : kActivations)
    for (bool flag : {false, true}) {
      RunFusedGemm(act, flag, !flag, flag, F32, seed += 4);
      RunFusedGemm(act, !flag, flag, true, F16, seed += 4);
      RunFusedMatMul(act, flag, !flag, F32, seed += 4);
      RunFusedMatMul(act, true, flag, F16, seed += 4);
    }
}

KERNEL_TEST(Fused_Errors) {
  const nlohmann::json conv = {{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 1},
                               {"has_bias", 0}, {"has_sum", 0}};
  auto with = [&](nlohmann::json extra) {
    nlohmann::json a = conv;
    for (auto it = extra.begin(); it != extra.end(); ++it) a[it.key()] = it.value();
    return a;
  };
  KernelTester("FusedConv")
      .Attrs(with({{"activation", "Mish"}}))
      .AddInput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .AddInput(F32, {1, 1, 1, 1}, {1})
      .AddOutput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .ExpectError(kUnimpl, "unknown activation 'Mish'");
  KernelTester("FusedConv")
      .Attrs(with({{"activation", "Clip"}, {"activation_params", {0.0}}}))
      .AddInput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .AddInput(F32, {1, 1, 1, 1}, {1})
      .AddOutput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "activation 'Clip' takes 2 activation_params, got 1");
  KernelTester("FusedConv")
      .Attrs(with({{"has_sum", 1}}))
      .AddInput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .AddInput(F32, {1, 1, 1, 1}, {1})
      .AddOutput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "has_bias = 0 and has_sum = 1 need 3 inputs, got 2");
  KernelTester("FusedConv")
      .Attrs(with({{"has_sum", 1}}))
      .AddInput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .AddInput(F32, {1, 1, 1, 1}, {1})
      .AddInput(F32, {1, 1, 2, 1}, std::vector<double>(2))
      .AddOutput(F32, {1, 1, 2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "sum has shape [1, 1, 2, 1], expected the output shape [1, 1, 2, 2]");
  KernelTester("FusedMatMul")
      .Attrs({{"has_bias", 1}, {"has_sum", 0}})
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {3, 4}, std::vector<double>(12))
      .AddInput(F32, {3}, std::vector<double>(3))
      .AddOutput(F32, {2, 4}, std::vector<double>(8))
      .ExpectError(kInvalid, "bias has shape [3], expected [4]");
  KernelTester("FusedGemm")
      .Attrs({{"alpha", 1.0}, {"beta", 1.0}, {"transA", 0}, {"transB", 0}, {"has_bias", 0}, {"has_sum", 1}})
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {3, 4}, std::vector<double>(12))
      .AddInput(F32, {4}, std::vector<double>(4))
      .AddOutput(F32, {2, 4}, std::vector<double>(8))
      .ExpectError(kInvalid, "sum has shape [4], expected the output shape [2, 4]");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
