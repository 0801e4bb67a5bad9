// NchwcInvertedResidual (the fused expand 1x1 -> depthwise -> project 1x1 block on the blocked
// layout) on every SIMD path: float32 against a naive double-precision block, and float32 and
// float16 against the three NchwcConv steps it replaces, run one after the other (bit-identical:
// the fused kernel sums each pixel's products in the same order, and rounds float16 E and D as
// those steps store them). Bands of 1, 2, 3 rows and by the L2 budget, strides 1 and 2, odd
// planes, one-sided pads, unpaired channel blocks, two passes over the input channels, batch > 1
// (whole images per work item) and batch 1 (images cut into runs of rows per thread, or on small
// planes run in two phases: runs of expanded channels, then of the project's outputs). The same
// without the project stage (5 inputs, Y = D: EfficientNet's MBConv before its squeeze-and-excite)
// with swish on both stages, against the two NchwcConv steps it replaces. Where the kernel keeps
// float16 E and D in float32 band buffers (its own report, NchwcInvertedResidualFloatBands), the
// float16 reference is the float32 steps on the same values, rounded once. Float16 1x1 weights both
// as weights (read as float32 copies widened once) and as plain inputs (widened in registers).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/blocked_layout.h"
#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_inverted_residual.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace test {
namespace {

struct BlockCase {
  int64_t n, cin, cexp, cout, h, w, k, s, pt, pl, pb, pr;
  bool residual;
  int64_t band_rows;  // 0: by the kernel's L2 budget
  const char* expand_act = "Clip";
  const char* depthwise_act = "Clip";
  const char* project_act = "";
  bool project = true;  // false: no project stage, Y is D (cout must equal cexp)
  int64_t oh() const { return (h + pt + pb - k) / s + 1; }
  int64_t ow() const { return (w + pl + pr - k) / s + 1; }
  std::string Describe() const {
    return "block x [" + std::to_string(n) + ", " + std::to_string(cin) + ", " + std::to_string(h) + ", " +
           std::to_string(w) + "] " + std::to_string(cin) + "->" + std::to_string(cexp) + "->" + std::to_string(cout) +
           " depthwise " + std::to_string(k) + "x" + std::to_string(k) + "/" + std::to_string(s) + " pads " +
           std::to_string(pt) + "," + std::to_string(pl) + "," + std::to_string(pb) + "," + std::to_string(pr) +
           (residual ? " residual" : "") + " band_rows " + std::to_string(band_rows) + " activations '" +
           expand_act + "' '" + depthwise_act + "' '" + project_act + "'" + (project ? "" : " without project");
  }
};

std::vector<double> ActParams(const char* act) {
  if (std::string(act) == "Clip") return {0.0, 6.0};
  if (std::string(act) == "Swish") return {1.0};
  return {};
}

// Output channels per weight group, as the compiler picks them (compiler/onnx_graph/nchwc.py).
int64_t GroupOf(int64_t m) { return m % (2 * B) == 0 ? 2 * B : B; }

// ONNX 1x1 weights [m, c] -> [m/G, c/8, 1, 1, 8, G].
std::vector<double> BlockPointwise(const std::vector<double>& w, int64_t m, int64_t c) {
  const int64_t g = GroupOf(m);
  std::vector<double> out(w.size());
  for (int64_t o = 0; o < m; ++o)
    for (int64_t i = 0; i < c; ++i)
      out[static_cast<size_t>((((o / g) * (c / B) + i / B) * B + i % B) * g + o % g)] = w[static_cast<size_t>(o * c + i)];
  return out;
}
std::vector<int64_t> PointwiseShape(int64_t m, int64_t c) { return {m / GroupOf(m), c / B, 1, 1, B, GroupOf(m)}; }

// ONNX depthwise weights [c, 1, k, k] -> [c/8, k, k, 8].
std::vector<double> BlockDepthwise(const std::vector<double>& w, int64_t c, int64_t k) {
  std::vector<double> out(w.size());
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t a = 0; a < k * k; ++a)
      out[static_cast<size_t>((ch / B * k * k + a) * B + ch % B)] = w[static_cast<size_t>(ch * k * k + a)];
  return out;
}

struct BlockData {
  std::vector<double> x, we, be, wd, bd, wp, bp;  // NCHW / ONNX layouts
};

BlockData RandomBlock(const BlockCase& k, uint32_t seed, DType values) {
  auto round = values == F16 ? AsFloat16 : AsFloat32;
  BlockData d;
  d.x = round(RandomValues(k.n * k.cin * k.h * k.w, -2, 2, seed));
  d.we = round(RandomValues(k.cexp * k.cin, -0.5, 0.5, seed + 1));
  d.be = round(RandomValues(k.cexp, -1, 1, seed + 2));
  d.wd = round(RandomValues(k.cexp * k.k * k.k, -0.5, 0.5, seed + 3));
  d.bd = round(RandomValues(k.cexp, -1, 1, seed + 4));
  d.wp = round(RandomValues(k.cout * k.cexp, -0.3, 0.3, seed + 5));
  d.bp = round(RandomValues(k.cout, -1, 1, seed + 6));
  return d;
}

// The block in double precision, NCHW.
std::vector<double> NaiveBlock(const BlockCase& k, const BlockData& d) {
  const int64_t oh = k.oh(), ow = k.ow();
  std::vector<double> e(static_cast<size_t>(k.n * k.cexp * k.h * k.w)), dw(static_cast<size_t>(k.n * k.cexp * oh * ow));
  std::vector<double> y(static_cast<size_t>(k.n * k.cout * oh * ow));
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t c = 0; c < k.cexp; ++c)
      for (int64_t p = 0; p < k.h * k.w; ++p) {
        double acc = d.be[static_cast<size_t>(c)];
        for (int64_t i = 0; i < k.cin; ++i)
          acc += d.x[static_cast<size_t>((n * k.cin + i) * k.h * k.w + p)] * d.we[static_cast<size_t>(c * k.cin + i)];
        e[static_cast<size_t>((n * k.cexp + c) * k.h * k.w + p)] = RefActivation(k.expand_act, ActParams(k.expand_act), acc);
      }
    for (int64_t c = 0; c < k.cexp; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = d.bd[static_cast<size_t>(c)];
          for (int64_t a = 0; a < k.k; ++a)
            for (int64_t b = 0; b < k.k; ++b) {
              const int64_t iy = i * k.s - k.pt + a, ix = j * k.s - k.pl + b;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              acc += e[static_cast<size_t>(((n * k.cexp + c) * k.h + iy) * k.w + ix)] *
                     d.wd[static_cast<size_t>((c * k.k + a) * k.k + b)];
            }
          dw[static_cast<size_t>(((n * k.cexp + c) * oh + i) * ow + j)] =
              RefActivation(k.depthwise_act, ActParams(k.depthwise_act), acc);
        }
    if (!k.project) continue;
    for (int64_t o = 0; o < k.cout; ++o)
      for (int64_t p = 0; p < oh * ow; ++p) {
        double acc = d.bp[static_cast<size_t>(o)];
        for (int64_t c = 0; c < k.cexp; ++c)
          acc += dw[static_cast<size_t>((n * k.cexp + c) * oh * ow + p)] * d.wp[static_cast<size_t>(o * k.cexp + c)];
        if (k.residual) acc += d.x[static_cast<size_t>((n * k.cin + o) * k.h * k.w + p)];
        y[static_cast<size_t>((n * k.cout + o) * oh * ow + p)] = RefActivation(k.project_act, ActParams(k.project_act), acc);
      }
  }
  return k.project ? y : dw;
}

std::vector<int64_t> BlockedShape(int64_t n, int64_t c, int64_t h, int64_t w) { return {n, c / B, h, w, B}; }

// constant_weights: the 1x1 weights are marked as weights (float16 ones are then read as float32
// copies widened once), else read as inputs (float16 widened in registers by the tiles).
KernelTester FusedTester(const BlockCase& k, const BlockData& d, DType dtype, bool constant_weights = true) {
  KernelTester t("NchwcInvertedResidual");
  t.Attrs({{"kernel_shape", {k.k, k.k}}, {"strides", {k.s, k.s}}, {"dilations", {1, 1}},
           {"pads", {k.pt, k.pl, k.pb, k.pr}}, {"residual", k.residual ? 1 : 0}})
      .Attr("expand_activation", k.expand_act)
      .Attr("expand_activation_params", ActParams(k.expand_act))
      .Attr("depthwise_activation", k.depthwise_act)
      .Attr("depthwise_activation_params", ActParams(k.depthwise_act));
  if (k.project)
    t.Attr("project_activation", k.project_act).Attr("project_activation_params", ActParams(k.project_act));
  if (k.band_rows > 0) t.Attr("band_rows", k.band_rows);
  t.AddInput(dtype, BlockedShape(k.n, k.cin, k.h, k.w), ToBlocked(d.x, k.n, k.cin, k.h * k.w))
      .AddInput(dtype, PointwiseShape(k.cexp, k.cin), BlockPointwise(d.we, k.cexp, k.cin))
      .AddInput(dtype, {k.cexp}, d.be)
      .AddInput(dtype, {k.cexp / B, k.k, k.k, B}, BlockDepthwise(d.wd, k.cexp, k.k))
      .AddInput(dtype, {k.cexp}, d.bd);
  if (k.project)
    t.AddInput(dtype, PointwiseShape(k.cout, k.cexp), BlockPointwise(d.wp, k.cout, k.cexp)).AddInput(dtype, {k.cout}, d.bp);
  for (size_t i = 1; i < (k.project ? 7u : 5u); ++i)
    if (constant_weights || (i != 1 && i != 5)) t.ConstantInput(i);
  return t;
}

// One NchwcConv step of the chain; returns its blocked output.
std::vector<double> RunConvStep(DType dtype, const std::vector<int64_t>& x_shape, const std::vector<double>& x,
                                const std::vector<int64_t>& w_shape, const std::vector<double>& w,
                                const std::vector<double>& b, int64_t k, int64_t s, std::vector<int64_t> pads,
                                int64_t group, const char* act, const std::vector<double>* sum,
                                const std::vector<int64_t>& y_shape) {
  KernelTester t("NchwcConv");
  t.Attrs({{"kernel_shape", {k, k}}, {"strides", {s, s}}, {"dilations", {1, 1}}, {"pads", pads}, {"group", group}})
      .Attr("activation", act)
      .Attr("activation_params", ActParams(act))
      .Attr("has_bias", 1)
      .Attr("has_sum", sum != nullptr ? 1 : 0);
  t.AddInput(dtype, x_shape, x).AddInput(dtype, w_shape, w).AddInput(dtype, {static_cast<int64_t>(b.size())}, b);
  if (sum != nullptr) t.AddInput(dtype, y_shape, *sum);
  t.ConstantInput(1).ConstantInput(2);
  return t.AddOutput(dtype, y_shape, std::vector<double>(static_cast<size_t>(NumElements(y_shape)))).RunAndGetOutput(0);
}

// The three NchwcConv steps the fused op replaces; blocked Y.
std::vector<double> ChainedSteps(const BlockCase& k, const BlockData& d, DType dtype) {
  const int64_t oh = k.oh(), ow = k.ow();
  const std::vector<double> x = ToBlocked(d.x, k.n, k.cin, k.h * k.w);
  const std::vector<double> e =
      RunConvStep(dtype, BlockedShape(k.n, k.cin, k.h, k.w), x, PointwiseShape(k.cexp, k.cin),
                  BlockPointwise(d.we, k.cexp, k.cin), d.be, 1, 1, {0, 0, 0, 0}, 1, k.expand_act, nullptr,
                  BlockedShape(k.n, k.cexp, k.h, k.w));
  const std::vector<double> dw =
      RunConvStep(dtype, BlockedShape(k.n, k.cexp, k.h, k.w), e, {k.cexp / B, k.k, k.k, B},
                  BlockDepthwise(d.wd, k.cexp, k.k), d.bd, k.k, k.s, {k.pt, k.pl, k.pb, k.pr}, k.cexp,
                  k.depthwise_act, nullptr, BlockedShape(k.n, k.cexp, oh, ow));
  if (!k.project) return dw;
  return RunConvStep(dtype, BlockedShape(k.n, k.cexp, oh, ow), dw, PointwiseShape(k.cout, k.cexp),
                     BlockPointwise(d.wp, k.cout, k.cexp), d.bp, 1, 1, {0, 0, 0, 0}, 1, k.project_act,
                     k.residual ? &x : nullptr, BlockedShape(k.n, k.cout, oh, ow));
}

// Whether the kernel keeps float32 band buffers for float16 k with constant 1x1 weights (its own
// rule, as it prepares): E and D are then not rounded to float16, so the result is the float32
// steps' on the same values, rounded once.
bool Float16FloatBands(const BlockCase& k, const BlockData& d) {
  const std::vector<int64_t> y_shape = BlockedShape(k.n, k.cout, k.oh(), k.ow());
  KernelTester t = FusedTester(k, d, F16);
  t.AddOutput(F16, y_shape, std::vector<double>(static_cast<size_t>(NumElements(y_shape))));
  return tfpopef::kernels::NchwcInvertedResidualFloatBands(t.Spec());
}

std::vector<BlockCase> Cases() {
  std::vector<BlockCase> cases = {
      // MobileNetV2's stride-1 residual block (t = 6) on a 14x14 plane: bands of 1, 3 and by budget
      {1, 16, 96, 16, 14, 14, 3, 1, 1, 1, 1, 1, true, 1},
      {1, 16, 96, 16, 14, 14, 3, 1, 1, 1, 1, 1, true, 3},
      {1, 16, 96, 16, 14, 14, 3, 1, 1, 1, 1, 1, true, 0},
      // stride 2, odd plane, batch 2 (whole images per item with 2 threads), bands of 2 and by budget
      {2, 8, 48, 24, 15, 13, 3, 2, 1, 1, 1, 1, false, 2},
      {2, 8, 48, 24, 15, 13, 3, 2, 1, 1, 1, 1, false, 0},
      // TF's SAME pads for stride 2 on an even plane (bottom/right only), unpaired blocks (40, 8)
      {1, 8, 40, 8, 10, 9, 3, 2, 0, 0, 1, 1, false, 1},
      {3, 8, 40, 8, 10, 9, 3, 2, 0, 0, 1, 1, false, 0},
      // MobileNetV2's block 13 at batch 1: 14x14 -> 7 rows, stride 2, cut into runs of 3 and 4 rows
      {1, 16, 96, 32, 14, 14, 3, 2, 0, 0, 1, 1, false, 0},
      // 7x7 planes, batch 3: the whole-image path (1x1 stages on whole planes)
      {3, 24, 144, 24, 7, 7, 3, 1, 1, 1, 1, 1, true, 0},
      // more expanded channels than one float32 pass takes (72 blocks > 64), residual
      {1, 16, 576, 16, 5, 6, 3, 1, 1, 1, 1, 1, true, 2},
      // bands whose window rows outnumber the plane's (E's planes taller than X's)
      {1, 8, 24, 8, 3, 5, 3, 1, 1, 1, 1, 1, true, 2},
      // a 1x1 plane, a 5x5 window, Relu / no activation / Clip on the projection
      {2, 8, 16, 8, 1, 1, 3, 1, 1, 1, 1, 1, true, 0, "Relu", "", "Clip"},
      {1, 8, 32, 16, 11, 12, 5, 1, 2, 2, 2, 2, false, 2, "Relu", "Relu", "Relu"},
      {1, 8, 32, 16, 11, 12, 5, 2, 2, 2, 2, 2, false, 3},
      // batch 1 on planes where a cut into rows would expand a fifth of them twice: two phases,
      // the project split by output groups (32: 2 pairs), by pixels (16: one pair; 24: 3 blocks),
      // residual, a 5x5 window, stride 2, a float32 project in two passes (576 channels)
      {1, 16, 96, 32, 7, 7, 3, 1, 1, 1, 1, 1, false, 0},
      {1, 16, 96, 16, 7, 7, 3, 1, 1, 1, 1, 1, true, 0},
      {1, 24, 48, 24, 7, 7, 3, 1, 1, 1, 1, 1, true, 0},
      {1, 16, 64, 32, 6, 5, 5, 1, 2, 2, 2, 2, false, 0, "Relu", "Relu", "Relu"},
      {1, 16, 64, 32, 6, 7, 5, 2, 2, 2, 2, 2, false, 0},
      {1, 16, 576, 16, 5, 6, 3, 1, 1, 1, 1, 1, true, 0},
  };
  // Without the project stage, swish on both stages (EfficientNet's MBConv up to its
  // squeeze-and-excite): 3x3 and 5x5, strides 1 and 2, TF's SAME pads, bands of 1, 2 and by the
  // budget, batch 1 (rows per thread) and 3 (whole images), two float32 passes (72 blocks).
  const std::vector<BlockCase> no_project = {
      {1, 16, 96, 96, 14, 14, 3, 1, 1, 1, 1, 1, false, 1},
      {1, 16, 96, 96, 14, 14, 3, 1, 1, 1, 1, 1, false, 0},
      {1, 24, 144, 144, 15, 13, 3, 2, 1, 1, 1, 1, false, 2},
      {3, 8, 48, 48, 10, 9, 3, 2, 0, 0, 1, 1, false, 0},
      {1, 16, 96, 96, 11, 12, 5, 1, 2, 2, 2, 2, false, 2},
      {2, 24, 144, 144, 14, 14, 5, 2, 1, 1, 2, 2, false, 0},
      {1, 16, 576, 576, 5, 6, 5, 1, 2, 2, 2, 2, false, 0},
      {3, 40, 240, 240, 7, 7, 3, 1, 1, 1, 1, 1, false, 0},
  };
  for (BlockCase k : no_project) {
    k.expand_act = k.depthwise_act = "Swish";
    k.project = false;
    cases.push_back(k);
  }
  cases.push_back({1, 8, 16, 16, 6, 7, 3, 2, 0, 0, 1, 1, false, 0, "Relu", "Clip", "", false});
  // bands of 1 on an odd plane with the zero pad rows below, a depthwise without activation and
  // with HardSwish (in the tiles on every path)
  cases.push_back({1, 16, 32, 32, 9, 11, 5, 2, 1, 2, 2, 2, false, 1, "Swish", "", "", false});
  cases.push_back({2, 8, 24, 24, 7, 5, 3, 1, 1, 1, 1, 1, false, 1, "Relu", "HardSwish", "", false});
  return cases;
}

void Label(size_t failures, const std::string& what) {
  for (size_t i = failures; i < CurrentFailures().size(); ++i) CurrentFailures()[i] = what + ": " + CurrentFailures()[i];
}

KERNEL_TEST(NchwcInvertedResidual_EveryPath_VsNaiveDouble) {
  uint32_t seed = 31000;
  ForEachSimdPath([&] {
    for (const BlockCase& k : Cases()) {
      const BlockData d = RandomBlock(k, seed += 8, F32);
      const size_t failures = CurrentFailures().size();
      // float32 sums of up to 576 products through three stages: errors of a few 1e-5 are rounding
      FusedTester(k, d, F32)
          .AddOutput(F32, BlockedShape(k.n, k.cout, k.oh(), k.ow()),
                     ToBlocked(NaiveBlock(k, d), k.n, k.cout, k.oh() * k.ow()))
          .Tolerance(2e-4, 2e-4)
          .Run();
      Label(failures, k.Describe());
    }
  });
}

KERNEL_TEST(NchwcInvertedResidual_EveryPath_BitIdenticalToThreeNchwcConvs) {
  uint32_t seed = 32000;
  ForEachSimdPath([&] {
    for (DType dtype : {F32, F16})
      for (const BlockCase& k : Cases()) {
        const BlockData d = RandomBlock(k, seed += 8, dtype);
        const size_t failures = CurrentFailures().size();
        // float16 with float32 band buffers: the float32 steps on the same (float16) values, rounded once
        const bool float_bands = dtype == F16 && Float16FloatBands(k, d);
        FusedTester(k, d, dtype)
            .AddOutput(dtype, BlockedShape(k.n, k.cout, k.oh(), k.ow()),
                       float_bands ? AsFloat16(ChainedSteps(k, d, F32)) : ChainedSteps(k, d, dtype))
            .Tolerance(0, 0)
            .Run();
        Label(failures, k.Describe() + (dtype == F16 ? " float16" : " float32") +
                            (float_bands ? " (float32 bands) vs float32 NchwcConv x3 rounded once" : " vs NchwcConv x3"));
      }
  });
}

// The float32 band buffers are taken by every pair of Cases() (no project stage), and by its 7x7
// blocks at batch 1 on two threads or more (on one thread by none): guards the bit-identity
// test's float32-bands reference against a rule no case reaches.
KERNEL_TEST(NchwcInvertedResidual_Float16FloatBands_ReachedByTheCases) {
  int64_t blocks = 0, pairs = 0, all_pairs = 0;
  for (const BlockCase& k : Cases()) {
    const bool reached = Float16FloatBands(k, RandomBlock(k, 0, F16));
    if (k.project) {
      blocks += reached ? 1 : 0;
    } else {
      pairs += reached ? 1 : 0;
      ++all_pairs;
    }
  }
  EXPECT_TRUE(all_pairs > 0 && pairs == all_pairs);
  if (tfpopef::kernels::ThreadPool::Global().num_threads() >= 2) EXPECT_TRUE(blocks >= 3);
  else EXPECT_TRUE(blocks == 0);
}

KERNEL_TEST(NchwcInvertedResidual_EveryPath_Float16WeightsNotConstant_BitIdenticalToThreeNchwcConvs) {
  uint32_t seed = 32500;
  ForEachSimdPath([&] {
    for (const BlockCase& k : Cases()) {
      const BlockData d = RandomBlock(k, seed += 8, F16);
      const size_t failures = CurrentFailures().size();
      FusedTester(k, d, F16, /*constant_weights=*/false)
          .AddOutput(F16, BlockedShape(k.n, k.cout, k.oh(), k.ow()), ChainedSteps(k, d, F16))
          .Tolerance(0, 0)
          .Run();
      Label(failures, k.Describe() + " float16, 1x1 weights not constant, vs NchwcConv x3");
    }
  });
}

KERNEL_TEST(NchwcInvertedResidual_ConcurrentRuns_ShareNothing) {
  const BlockCase k{1, 16, 96, 16, 14, 14, 3, 1, 1, 1, 1, 1, true, 3};
  const BlockData d = RandomBlock(k, 33000, F32);
  FusedTester(k, d, F32)
      .AddOutput(F32, BlockedShape(k.n, k.cout, k.oh(), k.ow()), ChainedSteps(k, d, F32))
      .Concurrently(3, 2)
      .Run();
}

KERNEL_TEST(NchwcInvertedResidual_BadSpecs_RaiseNamedErrors) {
  const BlockCase ok{1, 8, 16, 8, 6, 6, 3, 1, 1, 1, 1, 1, true, 0};
  const BlockData d = RandomBlock(ok, 34000, F32);
  auto tester = [&](const BlockCase& k) {
    return FusedTester(k, RandomBlock(k, 34000, F32), F32)
        .AddOutput(F32, BlockedShape(k.n, k.cout, k.oh(), k.ow()),
                   std::vector<double>(static_cast<size_t>(k.n * k.cout * k.oh() * k.ow())));
  };
  BlockCase strided = ok;
  strided.s = 2;
  tester(strided).ExpectError(kInvalid, "residual = 1 adds X");
  BlockCase tanh = ok;
  tanh.expand_act = "Tanh";
  tester(tanh).ExpectError(kUnimpl, "expand_activation 'Tanh'");
  BlockCase no_project = ok;
  no_project.project = false;
  no_project.cout = no_project.cexp;
  tester(no_project).ExpectError(kInvalid, "residual = 1 needs the project stage");
  no_project.residual = false;
  tester(no_project).AddInput(F32, {8}, d.bp).ExpectError(kInvalid, "6 inputs");
  tester(ok).Attr("dilations", std::vector<int64_t>{2, 2}).ExpectError(kUnimpl, "depthwise dilations 2x2");
  tester(ok).Attr("residual", 2).ExpectError(kInvalid, "attribute 'residual' is 2");
  tester(ok).Attr("band_rows", -1).ExpectError(kInvalid, "attribute 'band_rows' is -1");
  KernelTester wrong("NchwcInvertedResidual");
  wrong.Attrs({{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {1, 1, 1, 1}}});
  wrong.AddInput(F32, {1, 1, 6, 6, 8}, ToBlocked(d.x, 1, 8, 36))
      .AddInput(F32, {2, 1, 3, 3, 8, 8}, std::vector<double>(2 * 9 * 64))
      .AddInput(F32, {16}, d.be)
      .AddInput(F32, {2, 3, 3, 8}, d.wd)
      .AddInput(F32, {16}, d.bd)
      .AddInput(F32, {1, 2, 1, 1, 8, 8}, std::vector<double>(128))
      .AddInput(F32, {8}, d.bp)
      .AddOutput(F32, {1, 1, 6, 6, 8}, std::vector<double>(288))
      .ExpectError(kInvalid, "expand weights We has shape");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
