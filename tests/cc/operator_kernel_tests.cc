// Kernel cases of the ONNX operators (convolutions, pools, normalizations, data movement,
// reductions, comparisons, resize...), run by the same binary as kernel_tests.cc (which has
// main()). Convolutions are checked against a naive double-precision loop over every path
// (pointwise GEMM, depthwise direct loop, im2col + GEMM); the others are hand-computed.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"

namespace tfpopef {
namespace test {
namespace {

// ================================================================ Conv / ConvTranspose

struct Conv2dCase {
  int64_t n, c, h, w, m, kh, kw, stride, dilation, pad, group;
};

// Naive 2-D convolution in double, symmetric pads.
std::vector<double> NaiveConv2d(const Conv2dCase& k, const std::vector<double>& x, const std::vector<double>& wt,
                                const std::vector<double>& b, int64_t oh, int64_t ow) {
  std::vector<double> y(static_cast<size_t>(k.n * k.m * oh * ow), 0.0);
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b[static_cast<size_t>(m)];
          const int64_t g = m / mg;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t d = 0; d < k.kw; ++d) {
                const int64_t ih = i * k.stride - k.pad + a * k.dilation, iw = j * k.stride - k.pad + d * k.dilation;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                acc += x[static_cast<size_t>(((n * k.c + g * cg + c) * k.h + ih) * k.w + iw)] *
                       wt[static_cast<size_t>(((m * cg + c) * k.kh + a) * k.kw + d)];
              }
          y[static_cast<size_t>(((n * k.m + m) * oh + i) * ow + j)] = acc;
        }
  return y;
}

void RunConvCase(const Conv2dCase& k, DType dtype, uint32_t seed) {
  const int64_t oh = (k.h + 2 * k.pad - k.dilation * (k.kh - 1) - 1) / k.stride + 1;
  const int64_t ow = (k.w + 2 * k.pad - k.dilation * (k.kw - 1) - 1) / k.stride + 1;
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto x = round(RandomValues(k.n * k.c * k.h * k.w, -1, 1, seed));
  const auto w = round(RandomValues(k.m * (k.c / k.group) * k.kh * k.kw, -1, 1, seed + 1));
  const auto b = round(RandomValues(k.m, -1, 1, seed + 2));
  KernelTester("Conv")
      .Attr("strides", {k.stride, k.stride})
      .Attr("dilations", {k.dilation, k.dilation})
      .Attr("pads", {k.pad, k.pad, k.pad, k.pad})
      .Attr("group", k.group)
      .AddInput(dtype, {k.n, k.c, k.h, k.w}, x)
      .AddInput(dtype, {k.m, k.c / k.group, k.kh, k.kw}, w)
      .AddInput(dtype, {k.m}, b)
      .AddOutput(dtype, {k.n, k.m, oh, ow}, NaiveConv2d(k, x, w, b, oh, ow))
      .Tolerance(dtype == F16 ? 2e-2 : 1e-5, dtype == F16 ? 1e-2 : 1e-5)
      .Run();
}

KERNEL_TEST(Conv_EveryPath_VsNaive) {
  const Conv2dCase cases[] = {
      {2, 6, 5, 7, 4, 1, 1, 1, 1, 0, 1},    // pointwise: one GEMM
      {1, 6, 5, 7, 6, 1, 1, 1, 1, 0, 3},    // pointwise, grouped
      {2, 5, 6, 6, 5, 3, 3, 1, 1, 1, 5},    // depthwise
      {1, 4, 9, 8, 4, 3, 3, 2, 2, 2, 4},    // depthwise, strided and dilated
      {2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 1},    // im2col
      {1, 4, 8, 8, 6, 3, 3, 1, 2, 0, 2},    // im2col, grouped and dilated
      {1, 2, 4, 4, 4, 3, 3, 1, 1, 0, 2},    // depthwise multiplier 2 -> im2col
      {1, 1, 3, 3, 2, 1, 1, 2, 1, 1, 1},    // 1x1 window with stride and pad -> im2col
  };
  uint32_t seed = 100;
  for (const auto& k : cases) {
    RunConvCase(k, F32, seed += 3);
    RunConvCase(k, F16, seed += 3);
  }
}

KERNEL_TEST(Conv1d_And_ConvTranspose_HandComputed) {
  // y[i] = x[i-1] + 2 x[i] + 3 x[i+1] with zero padding
  KernelTester("Conv")
      .Attrs({{"strides", {1}}, {"dilations", {1}}, {"pads", {1, 1}}, {"group", 1}})
      .AddInput(F32, {1, 1, 4}, {1, 2, 3, 4})
      .AddInput(F32, {1, 1, 3}, {1, 2, 3})
      .AddOutput(F32, {1, 1, 4}, {8, 14, 20, 11})
      .Run();
  // Transposed, stride 2: each input scatters [1, 2, 3] at 2i; overlaps add.
  KernelTester("ConvTranspose")
      .Attrs({{"strides", {2}}, {"dilations", {1}}, {"pads", {0, 0}}, {"output_padding", {1}}, {"group", 1}})
      .AddInput(F32, {1, 1, 3}, {1, 10, 100})
      .AddInput(F32, {1, 1, 3}, {1, 2, 3})
      .AddInput(F32, {1}, {0.5})
      .AddOutput(F32, {1, 1, 8}, {1.5, 2.5, 13.5, 20.5, 130.5, 200.5, 300.5, 0.5})
      .Run();
}

KERNEL_TEST(Conv_Errors) {
  KernelTester("Conv")
      .Attrs({{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 2}})
      .AddInput(F32, {1, 3, 4, 4}, std::vector<double>(48))
      .AddInput(F32, {2, 1, 1, 1}, {1, 1})
      .AddOutput(F32, {1, 2, 4, 4}, std::vector<double>(32))
      .ExpectError(kInvalid, "group 2 does not fit input channels 3");
  KernelTester("Conv")
      .Attrs({{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 1}})
      .AddInput(F32, {1, 1, 4, 4}, std::vector<double>(16))
      .AddInput(F32, {1, 1, 3, 3}, std::vector<double>(9))
      .AddOutput(F32, {1, 1, 4, 4}, std::vector<double>(16))
      .ExpectError(kInvalid, "output 0 has shape [1, 1, 4, 4] but the inputs imply [1, 1, 2, 2]");
  KernelTester("Conv")
      .Attrs({{"strides", {1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 1}})
      .AddInput(F32, {1, 1, 4, 4}, std::vector<double>(16))
      .AddInput(F32, {1, 1, 1, 1}, {1})
      .AddOutput(F32, {1, 1, 4, 4}, std::vector<double>(16))
      .ExpectError(kInvalid, "attribute 'strides' has 1 values, expected 2");
  KernelTester("Conv")
      .Attrs({{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 1}})
      .AddInput(I64, {1, 1, 2, 2}, std::vector<double>(4))
      .AddInput(I64, {1, 1, 1, 1}, {1})
      .AddOutput(I64, {1, 1, 2, 2}, std::vector<double>(4))
      .ExpectError(kUnimpl, "dtype int64, which this kernel does not support");
}

// ================================================================ pools

KERNEL_TEST(MaxPool_IndicesAndCeilWindows) {
  // 1x1x3x3, 2x2 window, stride 2, ceil_mode output 2x2: the last windows are clipped.
  KernelTester("MaxPool")
      .Attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
              {"storage_order", 0}})
      .AddInput(F32, {1, 1, 3, 3}, {1, 9, 2, 3, 4, 8, 7, 6, 5})
      .AddOutput(F32, {1, 1, 2, 2}, {9, 8, 7, 5})
      .AddOutput<int64_t>({1, 1, 2, 2}, {1, 5, 6, 8})
      .Run();
  KernelTester("MaxPool")  // column-major indices: (h, w) -> h + w·H
      .Attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}},
              {"storage_order", 1}})
      .AddInput(F32, {1, 1, 3, 3}, {1, 9, 2, 3, 4, 8, 7, 6, 5})
      .AddOutput(F32, {1, 1, 2, 2}, {9, 8, 7, 5})
      .AddOutput<int64_t>({1, 1, 2, 2}, {3, 7, 2, 8})
      .Run();
}

KERNEL_TEST(AveragePool_CountIncludePad) {
  const nlohmann::json window = {{"kernel_shape", {3}}, {"strides", {2}}, {"dilations", {1}}, {"pads", {1, 1}}};
  nlohmann::json include = window, exclude = window;
  include["count_include_pad"] = 1;
  exclude["count_include_pad"] = 0;
  // windows [-1..1], [1..3], [3..5] over x = 1..5
  KernelTester("AveragePool").Attrs(exclude).AddInput(F32, {1, 1, 5}, {1, 2, 3, 4, 5})
      .AddOutput(F32, {1, 1, 3}, {1.5, 3, 4.5}).Run();
  KernelTester("AveragePool").Attrs(include).AddInput(F32, {1, 1, 5}, {1, 2, 3, 4, 5})
      .AddOutput(F32, {1, 1, 3}, {1, 3, 3}).Run();
  KernelTester("GlobalAveragePool").AddInput(F16, {1, 2, 2}, {1, 2, 3, 5}).AddOutput(F16, {1, 2, 1}, {1.5, 4}).Run();
  KernelTester("GlobalMaxPool").AddInput(F32, {1, 2, 2}, {1, 2, -3, -5}).AddOutput(F32, {1, 2, 1}, {2, -3}).Run();
}

// ================================================================ normalizations

KERNEL_TEST(BatchNorm_LayerNorm_HandComputed) {
  KernelTester("BatchNormalization")
      .Attr("epsilon", 0.0)
      .AddInput(F32, {1, 2, 2}, {1, 2, 3, 4})
      .AddInput(F32, {2}, {2, 1})   // scale
      .AddInput(F32, {2}, {0, 10})  // bias
      .AddInput(F32, {2}, {1, 3})   // mean
      .AddInput(F32, {2}, {4, 1})   // var
      .AddOutput(F32, {1, 2, 2}, {0, 1, 10, 11})
      .Run();
  // rows [1, 3] and [2, 6]: mean 2 / 4, variance 1 / 4
  KernelTester("LayerNormalization")
      .Attrs({{"axis", 1}, {"epsilon", 0.0}, {"mean_output", 1}, {"inv_std_dev_output", 1}})
      .AddInput(F32, {2, 2}, {1, 3, 2, 6})
      .AddInput(F32, {2}, {1, 2})
      .AddInput(F32, {1}, {0.5})
      .AddOutput(F32, {2, 2}, {-0.5, 2.5, -0.5, 2.5})
      .AddOutput(F32, {2, 1}, {2, 4})
      .AddOutput(F32, {2, 1}, {1, 0.5})
      .Run();
}

// ================================================================ data movement

KERNEL_TEST(Pad_AllModes_NegativePadsCrop) {
  const std::vector<double> x = {1, 2, 3};
  auto pad = [&](const char* mode, std::vector<double> expected) {
    KernelTester("Pad").Attrs({{"mode", mode}, {"pads", {2, 3}}, {"value", 9}})
        .AddInput(F32, {3}, x).AddOutput(F32, {8}, expected).Run();
  };
  pad("constant", {9, 9, 1, 2, 3, 9, 9, 9});
  pad("edge", {1, 1, 1, 2, 3, 3, 3, 3});
  pad("reflect", {3, 2, 1, 2, 3, 2, 1, 2});
  pad("wrap", {2, 3, 1, 2, 3, 1, 2, 3});
  KernelTester("Pad").Attrs({{"mode", "constant"}, {"pads", {0, -1, 1, 0}}, {"value", 0}})
      .AddInput<int64_t>({2, 2}, {1, 2, 3, 4}).AddOutput<int64_t>({3, 1}, {2, 4, 0}).Run();
}

KERNEL_TEST(Slice_Tile_Expand_Split) {
  KernelTester("Slice").Attrs({{"starts", {1, 3}}, {"steps", {1, -2}}})
      .AddInput(F32, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}).AddOutput(F32, {1, 2}, {7, 5}).Run();
  KernelTester("Tile").AddInput(BOOL, {1, 2}, {1, 0}).AddOutput(BOOL, {2, 4}, {1, 0, 1, 0, 1, 0, 1, 0}).Run();
  KernelTester("Expand").AddInput(F16, {2, 1}, {1, 2}).AddOutput(F16, {2, 2, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2})
      .Run();
  KernelTester("Split").Attr("axis", 1).AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddOutput(F32, {2, 1}, {1, 4}).AddOutput(F32, {2, 2}, {2, 3, 5, 6}).Run();
}

KERNEL_TEST(Gather_NegativeAndOutOfRangeIndices) {
  KernelTester("Gather").Attr("axis", 1)
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddInput<int64_t>({2}, {-1, 7})  // 7 is out of range: zeros, never a wild read
      .AddOutput(F32, {2, 2}, {3, 0, 6, 0})
      .Run();
  KernelTester("GatherElements").Attr("axis", 0)
      .AddInput(F32, {2, 2}, {1, 2, 3, 4})
      .AddInput<int32_t>({2, 2}, {1, 0, -1, 0})
      .AddOutput(F32, {2, 2}, {3, 2, 3, 2})
      .Run();
}

KERNEL_TEST(Resize_TapTables) {
  KernelTester("Resize").Attrs({{"mode", "nearest"}, {"axes", {1}}, {"taps", {1}}, {"indices", {0, 0, 1, 1}}})
      .AddInput<int64_t>({1, 2}, {5, 6}).AddOutput<int64_t>({1, 4}, {5, 5, 6, 6}).Run();
  KernelTester("Resize")
      .Attrs({{"mode", "linear"}, {"axes", {0, 1}}, {"taps", {2, 1}}, {"indices", {0, 1, 1}},
              {"weights", {0.25, 0.75, 1}}})
      .AddInput(F32, {2, 2}, {0, 1, 4, 8})
      .AddOutput(F32, {1, 1}, {6.25})  // row 0.25·[0, 1] + 0.75·[4, 8] = [3, 6.25], then column 1
      .Run();
}

// ================================================================ elementwise

KERNEL_TEST(Compare_Logical_Where_Pow) {
  KernelTester("Less").AddInput(F32, {3}, {1, 2, 3}).AddInput(F32, {1}, {2}).AddOutput(BOOL, {3}, {1, 0, 0}).Run();
  KernelTester("Equal").AddInput<int64_t>({2}, {4, 5}).AddInput<int64_t>({2}, {4, 4}).AddOutput(BOOL, {2}, {1, 0})
      .Run();
  KernelTester("Xor").AddInput(BOOL, {2, 1}, {0, 1}).AddInput(BOOL, {2}, {0, 1}).AddOutput(BOOL, {2, 2}, {0, 1, 1, 0})
      .Run();
  KernelTester("Not").AddInput(BOOL, {2}, {0, 1}).AddOutput(BOOL, {2}, {1, 0}).Run();
  KernelTester("Where").AddInput(BOOL, {2, 1}, {1, 0}).AddInput(F16, {2}, {1, 2}).AddInput(F16, {1}, {-1})
      .AddOutput(F16, {2, 2}, {1, 2, -1, -1}).Run();
  KernelTester("Pow").AddInput(F32, {3}, {2, -2, 4}).AddInput<int64_t>({3}, {3, 2, -1})
      .AddOutput(F32, {3}, {8, 4, 0.25}).Run();
  KernelTester("Pow").AddInput<int32_t>({2}, {3, -2}).AddInput(F32, {1}, {2}).AddOutput<int32_t>({2}, {9, 4}).Run();
}

KERNEL_TEST(Clip_MinAboveMax_And_MissingBounds) {
  KernelTester("Clip").Attrs({{"min", 2}, {"max", 1}}).AddInput(F32, {2}, {0, 5}).AddOutput(F32, {2}, {1, 1}).Run();
  KernelTester("Clip").Attr("max", 6).AddInput(F32, {3}, {-kInf, 3, kInf}).AddOutput(F32, {3}, {-kInf, 3, 6}).Run();
  KernelTester("Clip").Attr("min", -3).AddInput<int64_t>({2}, {-9, 9}).AddOutput<int64_t>({2}, {-3, 9}).Run();
}

KERNEL_TEST(Reduce_AxesEmptySetsAndIdentities) {
  KernelTester("ReduceSum").Attr("axes", {0, 2})
      .AddInput(F32, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}).AddOutput(F32, {2}, {14, 22}).Run();
  KernelTester("ReduceMax").Attr("axes", {1})
      .AddInput(F32, {2, 0}, {}).AddOutput(F32, {2, 1}, {-kInf, -kInf}).Run();
  KernelTester("ReduceL2").Attr("axes", std::vector<int64_t>{})
      .AddInput(F32, {2}, {-3, 4}).AddOutput(F32, {2}, {3, 4}).Run();
  KernelTester("ReduceLogSumExp").Attr("axes", {0})
      .AddInput(F32, {2}, {1000, 1000}).AddOutput(F32, {1}, {1000 + std::log(2.0)}).Run();
  KernelTester("ReduceMean").Attr("axes", {0})
      .AddInput<int64_t>({2}, {3, 4}).AddOutput<int64_t>({1}, {3}).Run();
}

KERNEL_TEST(Registry_HasEveryOperatorKernel) {
  for (const char* op :
       {"Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool",
        "GlobalAveragePool", "GlobalMaxPool", "Pow", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
        "Or", "Xor", "Not", "Where", "Clip", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Gelu", "Erf", "Exp", "Log",
        "Sqrt", "Reciprocal", "Softplus", "Softsign", "HardSwish", "Neg", "Abs", "LogSoftmax", "ReduceSum",
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
        "ReduceLogSum", "ReduceLogSumExp", "Pad", "Slice", "Tile", "Expand", "Split", "Gather", "GatherElements",
        "Resize"})
    if (!KernelRegistry::Get().Has(op)) Fail(std::string("no kernel registered for ") + op);
}

KERNEL_TEST(Operator_Errors) {
  KernelTester("Pad").Attrs({{"mode", "mirror"}, {"pads", {0, 0}}, {"value", 0}})
      .AddInput(F32, {1}, {1}).AddOutput(F32, {1}, {1}).ExpectError(kUnimpl, "pad mode 'mirror' is not supported");
  KernelTester("Reduce" "Sum").Attr("axes", {1, 0})
      .AddInput(F32, {2, 2}, std::vector<double>(4)).AddOutput(F32, {1}, {0})
      .ExpectError(kInvalid, "'axes' must be sorted, unique");
  KernelTester("Gather").Attr("axis", 0)
      .AddInput(F32, {2}, {1, 2}).AddInput(F32, {1}, {0}).AddOutput(F32, {1}, {1})
      .ExpectError(kUnimpl, "input 1 (indices) has dtype float32");
  KernelTester("Resize").Attrs({{"mode", "linear"}, {"axes", {0}}, {"taps", {2}}, {"indices", {0}}, {"weights", {1}}})
      .AddInput(F32, {2}, {1, 2}).AddOutput(F32, {1}, {1})
      .ExpectError(kInvalid, "the tap tables (axes/taps/indices/weights) do not match");
  KernelTester("Where").AddInput(F32, {1}, {1}).AddInput(F32, {1}, {1}).AddInput(F32, {1}, {1})
      .AddOutput(F32, {1}, {1}).ExpectError(kUnimpl, "input 0 (condition) has dtype float32");
  KernelTester("Split").Attr("axis", 0).AddInput(F32, {3}, {1, 2, 3}).AddOutput(F32, {1}, {1})
      .ExpectError(kInvalid, "outputs take 1 of the 3 entries of axis 0");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
