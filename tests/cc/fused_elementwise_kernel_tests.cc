// The internal op FusedElementwise (kernels/elementwise/fused_elementwise.cc, elementwise_program.h):
// one program using every opcode over full, per-last-axis and scalar inputs against a
// double-precision reference, on both SIMD paths, for the kernel's block layouts (whole rows
// tiled when the last dim is short, row segments when it is long, plain runs without vectors;
// one block and many, split over the pool), float32 and float16; plus the prepare-time errors.
// Run by the kernel_tests.cc binary (tests/cc/test_kernels_cc.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {
namespace {

// Every opcode once; inputs x0 full, x1 per last axis, x2 scalar, x3 full.
const char* kEveryOpcode =
    "mul x0 x1; add t0 x2; sigmoid t1; mul x0 t2; clip t3 -0.5 2.5; pow t4 2; sub t5 x3; div t6 1.5; "
    "abs t7; sqrt t8; add t9 1; reciprocal t10; tanh t11; max t12 x3; min t13 0.75; neg t14; relu x3; "
    "add t15 t16; erf t17; exp t18; log t19";

double EveryOpcode(double x0, double x1, double x2, double x3) {
  double t = 1.0 / (1.0 + std::exp(-(x0 * x1 + x2)));
  t = std::min(std::max(x0 * t, -0.5), 2.5);
  t = std::fabs((t * t - x3) / 1.5);
  t = std::tanh(1.0 / (std::sqrt(t) + 1.0));
  t = -std::min(std::max(t, x3), 0.75) + std::max(x3, 0.0);
  return std::log(std::exp(std::erf(t)));
}

void RunEveryOpcode(const std::vector<int64_t>& shape, DType dtype, uint32_t seed) {
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  const int64_t n = shape.back();
  auto round = dtype == F16 ? AsFloat16 : AsFloat32;
  const auto x0 = round(RandomValues(total, -2, 2, seed));
  const auto x1 = round(RandomValues(n, -1.5, 1.5, seed + 1));
  const auto x2 = round(RandomValues(1, -1, 1, seed + 2));
  const auto x3 = round(RandomValues(total, -1, 1, seed + 3));
  std::vector<double> y(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i)
    y[static_cast<size_t>(i)] = EveryOpcode(x0[static_cast<size_t>(i)], x1[static_cast<size_t>(i % n)], x2[0],
                                            x3[static_cast<size_t>(i)]);
  std::vector<int64_t> row_shape(shape.size(), 1);
  row_shape.back() = n;
  KernelTester t("FusedElementwise");
  t.Attrs({{"program", kEveryOpcode}});
  t.AddInput(dtype, shape, x0).AddInput(dtype, seed % 2 ? std::vector<int64_t>{n} : row_shape, x1);
  t.AddInput(dtype, {1}, x2).AddInput(dtype, shape, x3);
  t.AddOutput(dtype, shape, y).Tolerance(dtype == F16 ? 2e-2 : 2e-5, dtype == F16 ? 1e-2 : 1e-5).Run();
}

KERNEL_TEST(FusedElementwise_EveryOpcode_EveryBlockLayout_BothSimdPaths_VsDouble) {
  ForEachSimdPath([] {
    uint32_t seed = 4100;
    RunEveryOpcode({2, 3, 37}, F32, seed += 4);       // rows tiled, one block
    RunEveryOpcode({4, 700, 37}, F32, seed += 4);     // rows tiled, many blocks over the pool
    RunEveryOpcode({3, 2500}, F32, seed += 4);        // long rows: segments of 1024, 1024, 452
    RunEveryOpcode({1, 1024}, F32, seed += 4);        // one row, exactly one block
    RunEveryOpcode({7}, F32, seed += 4);              // rank 1: the vector is the whole tensor
    RunEveryOpcode({4, 50, 37}, F16, seed += 4);
    RunEveryOpcode({2, 1500}, F16, seed += 4);
  });
}

KERNEL_TEST(FusedElementwise_FullInputsOnly_PlainRuns_BothSimdPaths) {
  // x·σ(x)·0.5 + x, a runtime scalar first operand and literal-first operands; 5003 elements:
  // 4 full blocks and a tail.
  ForEachSimdPath([] {
    const int64_t total = 5003;
    const auto x = AsFloat32(RandomValues(total, -4, 4, 4200));
    const auto s = AsFloat32(RandomValues(1, 0.5, 1.5, 4201));
    std::vector<double> y(static_cast<size_t>(total));
    for (size_t i = 0; i < y.size(); ++i) {
      const double v = x[i] / (1.0 + std::exp(-x[i])) * 0.5 + x[i];
      y[i] = (2.0 - s[0] * v) / 4.0;
    }
    KernelTester("FusedElementwise")
        .Attrs({{"program", "sigmoid x0; mul x0 t0; mul 0.5 t1; add t2 x0; mul x1 t3; sub 2 t4; div t5 4"}})
        .AddInput(F32, {total}, x)
        .AddInput(F32, {1}, s)
        .AddOutput(F32, {total}, y)
        .Tolerance(2e-5, 1e-5)
        .Run();
  });
}

KERNEL_TEST(FusedElementwise_Errors) {
  auto expect = [](const std::string& program, const std::string& message) {
    KernelTester("FusedElementwise")
        .Attrs({{"program", program}})
        .AddInput(F32, {2, 3}, std::vector<double>(6))
        .AddOutput(F32, {2, 3}, std::vector<double>(6))
        .ExpectError(kInvalid, message);
  };
  expect("gelu x0", "unknown opcode 'gelu'");
  expect("add x0", "'add' takes 2 operand(s), got 1");
  expect("neg t0", "operand 't0' refers to instruction 0 but only 0 come before it");
  expect("add x0 x1", "operand 'x1' refers to input 1 but only 1 inputs exist");
  expect("pow x0 x0", "pow's exponent must be a literal");
  expect("clip x0 0 x0", "clip's bounds must be literals");
  expect("add x0 abc", "operand 'abc' is neither xI, tJ nor a number");
  expect(" ; ", "the program has no instructions");
  KernelTester("FusedElementwise")
      .Attrs({{"program", "add x0 x1"}})
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {2, 1}, std::vector<double>(2))
      .AddOutput(F32, {2, 3}, std::vector<double>(6))
      .ExpectError(kInvalid, "input 1 has shape [2, 1]; FusedElementwise reads inputs of the output's shape [2, 3]");
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
