// Test cases for every emulator kernel. Small cases have hand-computed expectations; larger
// ones (broadcast patterns, batched matmul, all transpose perms, softmax over several axes)
// are checked against the naive double-precision references in reference_ops.h.
// Run: the binary built by tests/cc/test_kernels_cc.py; optional args: a name filter, -v.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"

namespace tfpopef {
namespace test {
namespace {

// ================================================================ Add / Sub / Mul / Div

KERNEL_TEST(Add_SameShape_Float32) {
  KernelTester("Add")
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddInput(F32, {2, 3}, {10, 20, 30, 40, 50, 60})
      .AddOutput(F32, {2, 3}, {11, 22, 33, 44, 55, 66})
      .Run();
}

KERNEL_TEST(Sub_ScalarOperands) {
  KernelTester("Sub")  // rank-0 A
      .AddInput(F32, {}, {10})
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddOutput(F32, {2, 3}, {9, 8, 7, 6, 5, 4})
      .Run();
  KernelTester("Sub")  // [1] B
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddInput(F32, {1}, {0.5})
      .AddOutput(F32, {2, 3}, {0.5, 1.5, 2.5, 3.5, 4.5, 5.5})
      .Run();
  KernelTester("Sub")  // scalar - scalar
      .AddInput(F32, {}, {1.5})
      .AddInput(F32, {}, {4})
      .AddOutput(F32, {}, {-2.5})
      .Run();
}

KERNEL_TEST(Mul_RowAndColumnBroadcast) {
  KernelTester("Mul")  // trailing-dim (row) broadcast
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddInput(F32, {3}, {10, 100, 1000})
      .AddOutput(F32, {2, 3}, {10, 200, 3000, 40, 500, 6000})
      .Run();
  KernelTester("Mul")  // column broadcast: each row times its own scalar
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddInput(F32, {2, 1}, {2, -1})
      .AddOutput(F32, {2, 3}, {2, 4, 6, -4, -5, -6})
      .Run();
}

KERNEL_TEST(Add_BothOperandsBroadcast) {
  KernelTester("Add")
      .AddInput(F32, {3, 1}, {1, 2, 3})
      .AddInput(F32, {1, 4}, {10, 20, 30, 40})
      .AddOutput(F32, {3, 4}, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43})
      .Run();
}

KERNEL_TEST(Div_Float32_IEEE) {
  KernelTester("Div")
      .AddInput(F32, {5}, {1, -1, 0, 6, 1})
      .AddInput(F32, {5}, {0, 0, 0, 4, 3})
      .AddOutput(F32, {5}, {kInf, -kInf, kNaN, 1.5, 1.0f / 3.0f})
      .Run();
}

struct BroadcastCase {
  Shape a, b;
};

const std::vector<BroadcastCase>& BroadcastCases() {
  static const std::vector<BroadcastCase> cases = {
      {{2, 3, 4}, {2, 3, 4}},
      {{2, 1, 4}, {3, 1}},
      {{5, 1, 3, 1, 2}, {4, 3, 1, 2}},
      {{1}, {2, 2, 2}},
      {{2, 3, 1, 1, 4}, {1, 3, 5, 1, 4}},
      {{3, 4, 5}, {4, 1}},
      {{7, 1}, {1, 1, 9}},
      {{2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 2}},  // rank 8, 8 loop levels
      {{0, 3}, {3}},                                      // empty output
      {{2, 3, 4, 5}, {1}},
  };
  return cases;
}

double TruncDiv(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

KERNEL_TEST(Binary_BroadcastPatterns_Float32_VsReference) {
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
      {"Div", [](double a, double b) { return a / b; }}};
  uint32_t seed = 1;
  for (const auto& c : BroadcastCases())
    for (const auto& [op, f] : ops) {
      const auto a = AsFloat32(RandomValues(NumElements(c.a), -2, 2, seed++));
      const auto b = AsFloat32(RandomValues(NumElements(c.b), 0.5, 2, seed++));  // no division by ~0
      KernelTester(op)
          .AddInput(F32, c.a, a)
          .AddInput(F32, c.b, b)
          .AddOutput(F32, RefBroadcastShape(c.a, c.b), RefBinary(a, c.a, b, c.b, f))
          .Tolerance(1e-6, 1e-6)
          .Run();
    }
}

// Squeeze-and-excite's excitation on the blocked layout: D [N, C/8, H, W, 8] times the gate
// [N, C/8, 1, 1, 8], large enough to be split into chunks over the pool's threads (chunk
// boundaries inside a plane of 8-channel runs), against the reference.
KERNEL_TEST(Mul_BlockedPerChannel_SplitOverThreads_VsReference) {
  const std::vector<BroadcastCase> cases = {{{1, 144, 7, 7, 8}, {1, 144, 1, 1, 8}},
                                            {{3, 23, 7, 9, 8}, {3, 23, 1, 1, 8}},
                                            {{2, 3, 1, 1, 8}, {2, 3, 7, 5, 8}}};  // the gate first
  uint32_t seed = 77;
  for (const auto& c : cases) {
    const auto a = AsFloat32(RandomValues(NumElements(c.a), -2, 2, seed++));
    const auto b = AsFloat32(RandomValues(NumElements(c.b), -2, 2, seed++));
    KernelTester("Mul")
        .AddInput(F32, c.a, a)
        .AddInput(F32, c.b, b)
        .AddOutput(F32, RefBroadcastShape(c.a, c.b), RefBinary(a, c.a, b, c.b, [](double x, double y) { return x * y; }))
        .Tolerance(1e-6, 1e-6)
        .Run();
  }
}

KERNEL_TEST(Binary_BroadcastPatterns_Int_VsReference) {
  const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
      {"Div", TruncDiv}};  // includes zero divisors: defined as 0
  uint32_t seed = 100;
  for (DType t : {I32, I64})
    for (const auto& c : BroadcastCases())
      for (const auto& [op, f] : ops) {
        const auto a = RandomInts(NumElements(c.a), -50, 50, seed++);
        const auto b = RandomInts(NumElements(c.b), -7, 7, seed++);
        KernelTester(op)
            .AddInput(t, c.a, a)
            .AddInput(t, c.b, b)
            .AddOutput(t, RefBroadcastShape(c.a, c.b), RefBinary(a, c.a, b, c.b, f))
            .Run();
      }
}

KERNEL_TEST(Binary_BroadcastPatterns_Float16_VsReference) {
  uint32_t seed = 200;
  for (const auto& c : BroadcastCases()) {
    const auto a = AsFloat16(RandomValues(NumElements(c.a), -2, 2, seed++));
    const auto b = AsFloat16(RandomValues(NumElements(c.b), 0.5, 2, seed++));
    KernelTester("Mul")
        .AddInput(F16, c.a, a)
        .AddInput(F16, c.b, b)
        .AddOutput(F16, RefBroadcastShape(c.a, c.b), RefBinary(a, c.a, b, c.b, [](double x, double y) { return x * y; }))
        .Tolerance(0, 1e-3)  // one float16 ulp
        .Run();
  }
}

KERNEL_TEST(Div_Int_TruncatesTowardZero_DefinesDivisionByZero) {
  const int32_t kMin32 = std::numeric_limits<int32_t>::min();
  KernelTester("Div")
      .AddInput<int32_t>({8}, {7, -7, 7, -7, 5, 0, kMin32, -9})
      .AddInput<int32_t>({8}, {2, 2, -2, -2, 0, 3, -1, 0})
      .AddOutput<int32_t>({8}, {3, -3, -3, 3, 0, 0, kMin32, 0})  // x/0 := 0, MIN/-1 wraps
      .Run();
  const int64_t kMin64 = std::numeric_limits<int64_t>::min();
  KernelTester("Div")
      .AddInput<int64_t>({4}, {kMin64, 9000000000000, -1, 123})
      .AddInput<int64_t>({1}, {-1})
      .AddOutput<int64_t>({4}, {kMin64, -9000000000000, 1, -123})
      .Run();
  KernelTester("Div")
      .AddInput<int64_t>({2}, {kMin64, 9})
      .AddInput<int64_t>({}, {0})
      .AddOutput<int64_t>({2}, {0, 0})
      .Run();
}

KERNEL_TEST(AddMul_Int_WrapAround) {
  const int32_t kMax32 = std::numeric_limits<int32_t>::max();
  KernelTester("Add")
      .AddInput<int32_t>({2}, {kMax32, -5})
      .AddInput<int32_t>({2}, {1, 3})
      .AddOutput<int32_t>({2}, {std::numeric_limits<int32_t>::min(), -2})
      .Run();
  KernelTester("Mul")
      .AddInput<int64_t>({2, 3}, {3000000000000, -2, 7, 1, 0, -1})
      .AddInput<int64_t>({3}, {3, 4000000000, -5})
      .AddOutput<int64_t>({2, 3}, {9000000000000, -8000000000, -35, 3, 0, 5})
      .Run();
}

KERNEL_TEST(Add_Float16_RoundsOnceToNearestEven) {
  // 2048+1 = 2049 ties to 2048; 2048+3 = 2051 ties to 2052; fp16(0.1)+fp16(0.2) =
  // 0.2999267578125 exactly, a tie between 0.2998046875 (even) and 0.300048828125;
  // 60000+60000 overflows to inf.
  KernelTester("Add")
      .AddInput(F16, {5}, {2048, 2048, 0.1, 60000, -1})
      .AddInput(F16, {5}, {1, 3, 0.2, 60000, 0.25})
      .AddOutput(F16, {5}, {2048, 2052, 0.2998046875, kInf, -0.75})
      .Run();
  KernelTester("Div")
      .AddInput(F16, {2, 2}, {1, 2, 3, 4})
      .AddInput(F16, {2}, {3, 0})
      .AddOutput(F16, {2, 2}, {0.333251953125, kInf, 1, kInf})
      .Run();
}

KERNEL_TEST(Binary_Rank9_CollapsesOrFailsClearly) {
  const Shape nine = {2, 1, 2, 1, 2, 1, 2, 1, 2};
  std::vector<double> ones(32, 1.0), twos(32, 2.0);
  KernelTester("Add")  // equal shapes merge into one flat loop whatever the rank
      .AddInput(F32, nine, ones)
      .AddInput(F32, nine, ones)
      .AddOutput(F32, nine, twos)
      .Run();
  const Shape other = {1, 2, 1, 2, 1, 2, 1, 2, 1};
  KernelTester("Add")
      .AddInput(F32, nine, ones)
      .AddInput(F32, other, std::vector<double>(16, 1.0))
      .AddOutput(F32, Shape(9, 2), std::vector<double>(512, 2.0))
      .ExpectError(kUnimpl, "at most 8");
}

KERNEL_TEST(Binary_Errors) {
  KernelTester("Add")
      .AddInput(BOOL, {2}, {1, 0})
      .AddInput(BOOL, {2}, {1, 1})
      .AddOutput(BOOL, {2}, {1, 1})
      .ExpectError(kUnimpl, "dtype bool");
  KernelTester("Mul")
      .AddInput(F32, {2}, {1, 0})
      .AddInput(I32, {2}, {1, 1})
      .AddOutput(F32, {2}, {1, 1})
      .ExpectError(kInvalid, "input 1 has dtype int32 but input 0 has float32");
  KernelTester("Sub")
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {4}, std::vector<double>(4))
      .AddOutput(F32, {2, 4}, std::vector<double>(8))
      .ExpectError(kInvalid, "[2, 3] and [4] are not broadcastable");
  KernelTester("Div")
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {3}, std::vector<double>(3))
      .AddOutput(F32, {3, 2}, std::vector<double>(6))
      .ExpectError(kInvalid, "output 0 has shape [3, 2] but the inputs imply [2, 3]");
  KernelTester("Add")
      .AddInput(F32, {1}, {1})
      .AddOutput(F32, {1}, {1})
      .ExpectError(kInvalid, "expects 2 inputs, got 1");
  KernelTester("Add")
      .AddInput(F32, {2}, {1, 2})
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(F32, {2}, {2, 4})
      .AddOutput(F32, {2}, {2, 4})
      .ExpectError(kInvalid, "expects 1 outputs, got 2");
}

// ================================================================ Reshape

KERNEL_TEST(Reshape_CopiesBytes_AnyDType) {
  KernelTester("Reshape").AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6}).AddOutput(F32, {3, 2}, {1, 2, 3, 4, 5, 6}).Run();
  KernelTester("Reshape")
      .AddInput<int64_t>({4}, {1, -2, 3000000000000, 4})
      .AddOutput<int64_t>({2, 2, 1}, {1, -2, 3000000000000, 4})
      .Run();
  KernelTester("Reshape").AddInput(BOOL, {2, 2}, {1, 0, 0, 1}).AddOutput(BOOL, {4}, {1, 0, 0, 1}).Run();
  KernelTester("Reshape").AddInput(F16, {3}, {0.5, -2, 65504}).AddOutput(F16, {3, 1}, {0.5, -2, 65504}).Run();
  KernelTester("Reshape").AddInput(U8, {}, {7}).AddOutput(U8, {1, 1}, {7}).Run();
  KernelTester("Reshape").AddInput(F32, {0, 3}, {}).AddOutput(F32, {3, 0}, {}).Run();
}

KERNEL_TEST(Reshape_InPlaceIsNoOp) {
  KernelTester("Reshape").AddInput(F32, {2, 2}, {1, 2, 3, 4}).AddOutput(F32, {4}, {1, 2, 3, 4}).InPlace().Run();
}

KERNEL_TEST(Reshape_Errors) {
  KernelTester("Reshape")
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddOutput(F32, {4}, std::vector<double>(4))
      .ExpectError(kInvalid, "cannot reshape [2, 3] (6 elements) to [4] (4 elements)");
  KernelTester("Reshape")
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(I32, {2}, {1, 2})
      .ExpectError(kInvalid, "output dtype int32 differs from input dtype float32");
  KernelTester("Reshape")
      .AddInput(F32, {2}, {1, 2})
      .AddInput<int64_t>({1}, {2})
      .AddOutput(F32, {2}, {1, 2})
      .ExpectError(kInvalid, "expects 1 inputs, got 2");
}

// ================================================================ MatMul

KERNEL_TEST(MatMul_HandComputed_1D_2D) {
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  KernelTester("MatMul").AddInput(F32, {2, 3}, a).AddInput(F32, {3, 2}, b).AddOutput(F32, {2, 2}, {58, 64, 139, 154}).Run();
  KernelTester("MatMul").AddInput(F32, {3}, {1, 2, 3}).AddInput(F32, {3, 2}, b).AddOutput(F32, {2}, {58, 64}).Run();
  KernelTester("MatMul").AddInput(F32, {2, 3}, a).AddInput(F32, {3}, {1, 1, 1}).AddOutput(F32, {2}, {6, 15}).Run();
  KernelTester("MatMul").AddInput(F32, {3}, {1, 2, 3}).AddInput(F32, {3}, {4, 5, 6}).AddOutput(F32, {}, {32}).Run();
}

struct MatMulCase {
  Shape a, b;
};

const std::vector<MatMulCase>& MatMulCases() {
  static const std::vector<MatMulCase> cases = {
      {{2, 3, 4}, {2, 4, 5}},        // plain batch
      {{2, 1, 3, 4}, {3, 4, 2}},     // batch broadcast on A's side
      {{1, 2, 3}, {4, 3, 2}},        // A batch of 1 broadcast
      {{4, 3}, {2, 3, 5}},           // unbatched A, batched B
      {{2, 3, 4, 5}, {5, 6}},        // unbatched B: folded into one GEMM
      {{3, 1, 4, 5}, {1, 5, 6}},     // B batch of 1: folded as well
      {{2, 1, 2, 3}, {1, 3, 3, 2}},  // both broadcast
      {{3}, {2, 3, 4}},              // 1-D A with batched B
      {{2, 4, 3}, {3}},              // batched A with 1-D B
      {{0, 2, 3}, {3, 4}},           // empty batch
      {{2, 0}, {0, 3}},              // K = 0: zeros
      {{2, 3}, {3, 0}},              // N = 0
      {{17, 33}, {33, 65}},          // beyond BLAS micro-kernel sizes
  };
  return cases;
}

KERNEL_TEST(MatMul_Batched_Broadcast_Float32_VsReference) {
  uint32_t seed = 300;
  for (const auto& c : MatMulCases()) {
    const auto a = AsFloat32(RandomValues(NumElements(c.a), -1, 1, seed++));
    const auto b = AsFloat32(RandomValues(NumElements(c.b), -1, 1, seed++));
    Shape out;
    const auto y = RefMatMul(a, c.a, b, c.b, &out);
    KernelTester("MatMul").AddInput(F32, c.a, a).AddInput(F32, c.b, b).AddOutput(F32, out, y).Tolerance(1e-5, 1e-5).Run();
  }
}

KERNEL_TEST(MatMul_Float16_VsReference) {
  uint32_t seed = 400;
  for (const auto& c : MatMulCases()) {
    const auto a = AsFloat16(RandomValues(NumElements(c.a), -1, 1, seed++));
    const auto b = AsFloat16(RandomValues(NumElements(c.b), -1, 1, seed++));
    Shape out;
    const auto y = RefMatMul(a, c.a, b, c.b, &out);
    KernelTester("MatMul").AddInput(F16, c.a, a).AddInput(F16, c.b, b).AddOutput(F16, out, y).Tolerance(1e-3, 1e-3).Run();
  }
}

KERNEL_TEST(MatMul_ConcurrentRuns) {
  const Shape as = {2, 3, 16, 16}, bs = {3, 16, 8};
  const auto a = AsFloat32(RandomValues(NumElements(as), -1, 1, 7));
  const auto b = AsFloat32(RandomValues(NumElements(bs), -1, 1, 8));
  Shape out;
  const auto y = RefMatMul(a, as, b, bs, &out);
  KernelTester("MatMul").AddInput(F32, as, a).AddInput(F32, bs, b).AddOutput(F32, out, y).Tolerance(1e-5, 1e-5)
      .Concurrently(4, 50).Run();
}

KERNEL_TEST(MatMul_Errors) {
  KernelTester("MatMul")
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {4, 2}, std::vector<double>(8))
      .AddOutput(F32, {2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "inner dimensions differ: A [2, 3] has K = 3 but B [4, 2] has K = 4");
  KernelTester("MatMul")
      .AddInput(F32, {2, 2, 3}, std::vector<double>(12))
      .AddInput(F32, {3, 3, 4}, std::vector<double>(36))
      .AddOutput(F32, {3, 2, 4}, std::vector<double>(24))
      .ExpectError(kInvalid, "batch dims of A [2, 2, 3] and B [3, 3, 4] are not broadcastable");
  KernelTester("MatMul")
      .AddInput(I32, {2, 2}, std::vector<double>(4))
      .AddInput(I32, {2, 2}, std::vector<double>(4))
      .AddOutput(I32, {2, 2}, std::vector<double>(4))
      .ExpectError(kUnimpl, "dtype int32, which this kernel does not support (supported: float32, float16)");
  KernelTester("MatMul")
      .AddInput(F32, {}, {1})
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(F32, {2}, {1, 2})
      .ExpectError(kInvalid, "rank >= 1");
  KernelTester("MatMul")
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddInput(F32, {3, 4}, std::vector<double>(12))
      .AddOutput(F32, {2, 5}, std::vector<double>(10))
      .ExpectError(kInvalid, "output 0 has shape [2, 5] but the inputs imply [2, 4]");
}

// ================================================================ Gemm

std::vector<double> RefGemm(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>* c,
                            const Shape& c_shape, int64_t m, int64_t n, int64_t k, bool ta, bool tb, double alpha,
                            double beta) {
  std::vector<double> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      y[i * n + j] = alpha * s + (c ? beta * (*c)[BroadcastOffset({i, j}, c_shape)] : 0.0);
    }
  return y;
}

KERNEL_TEST(Gemm_Transposes_And_CBroadcast_VsReference) {
  const int64_t m = 3, k = 4, n = 5;
  const std::vector<Shape> c_shapes = {{m, n}, {n}, {1, n}, {m, 1}, {}, {1, 1}, {1}};
  uint32_t seed = 500;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int ci = -1; ci < static_cast<int>(c_shapes.size()); ++ci)
        for (DType t : {F32, F16}) {
          const Shape as = ta ? Shape{k, m} : Shape{m, k};
          const Shape bs = tb ? Shape{n, k} : Shape{k, n};
          auto round = [&](std::vector<double> v) { return t == F16 ? AsFloat16(v) : AsFloat32(v); };
          const auto a = round(RandomValues(m * k, -1, 1, seed++));
          const auto b = round(RandomValues(k * n, -1, 1, seed++));
          const double alpha = 0.5, beta = 2.0;
          KernelTester g("Gemm");
          g.Attr("alpha", alpha).Attr("beta", beta).Attr("transA", ta).Attr("transB", tb);
          g.AddInput(t, as, a).AddInput(t, bs, b);
          std::vector<double> c;
          if (ci >= 0) {
            c = round(RandomValues(NumElements(c_shapes[ci]), -1, 1, seed++));
            g.AddInput(t, c_shapes[ci], c);
          }
          g.AddOutput(t, {m, n},
                      RefGemm(a, b, ci >= 0 ? &c : nullptr, ci >= 0 ? c_shapes[ci] : Shape{}, m, n, k, ta, tb, alpha,
                              beta));
          g.Tolerance(t == F16 ? 2e-3 : 1e-5, t == F16 ? 1e-3 : 1e-5).Run();
        }
}

KERNEL_TEST(Gemm_HandComputed_BetaZeroIgnoresC_KZero) {
  KernelTester("Gemm")
      .Attrs({{"alpha", 1.0}, {"beta", 1.0}, {"transA", 0}, {"transB", 0}})
      .AddInput(F32, {2, 2}, {1, 2, 3, 4})
      .AddInput(F32, {2, 2}, {5, 6, 7, 8})
      .AddInput(F32, {2}, {100, 200})
      .AddOutput(F32, {2, 2}, {119, 222, 143, 250})
      .Run();
  KernelTester("Gemm")  // beta = 0: C is not read, so its NaN does not reach Y
      .Attrs({{"alpha", 2.0}, {"beta", 0.0}, {"transA", 0}, {"transB", 0}})
      .AddInput(F32, {1, 2}, {1, 2})
      .AddInput(F32, {2, 1}, {3, 4})
      .AddInput(F32, {1, 1}, {kNaN})
      .AddOutput(F32, {1, 1}, {22})
      .Run();
  KernelTester("Gemm")  // K = 0: Y = beta * C
      .Attrs({{"alpha", 1.0}, {"beta", 3.0}, {"transA", 0}, {"transB", 0}})
      .AddInput(F32, {2, 0}, {})
      .AddInput(F32, {0, 2}, {})
      .AddInput(F32, {2}, {1, -2})
      .AddOutput(F32, {2, 2}, {3, -6, 3, -6})
      .Run();
  KernelTester("Gemm")  // K = 0 without C: zeros
      .Attrs({{"alpha", 1.0}, {"beta", 1.0}, {"transA", 1}, {"transB", 0}})
      .AddInput(F32, {0, 2}, {})
      .AddInput(F32, {0, 3}, {})
      .AddOutput(F32, {2, 3}, {0, 0, 0, 0, 0, 0})
      .Run();
}

KERNEL_TEST(Gemm_Errors) {
  const nlohmann::json attrs = {{"alpha", 1.0}, {"beta", 1.0}, {"transA", 0}, {"transB", 0}};
  KernelTester("Gemm")
      .Attrs({{"alpha", 1.0}, {"beta", 1.0}, {"transA", 2}, {"transB", 0}})
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddOutput(F32, {2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "attribute 'transA' must be 0 or 1, got 2");
  KernelTester("Gemm")
      .Attrs(attrs)
      .AddInput(F32, {3, 4}, std::vector<double>(12))
      .AddInput(F32, {4, 5}, std::vector<double>(20))
      .AddInput(F32, {4}, std::vector<double>(4))
      .AddOutput(F32, {3, 5}, std::vector<double>(15))
      .ExpectError(kInvalid, "C [4] cannot be broadcast to the output [3, 5]");
  KernelTester("Gemm")
      .Attrs(attrs)
      .AddInput(F32, {1, 3, 4}, std::vector<double>(12))
      .AddInput(F32, {4, 5}, std::vector<double>(20))
      .AddOutput(F32, {3, 5}, std::vector<double>(15))
      .ExpectError(kInvalid, "needs 2-D A and B");
  KernelTester("Gemm")
      .Attrs({{"alpha", 1.0}, {"beta", 1.0}, {"transA", 1}, {"transB", 0}})
      .AddInput(F32, {3, 4}, std::vector<double>(12))
      .AddInput(F32, {4, 5}, std::vector<double>(20))
      .AddOutput(F32, {4, 5}, std::vector<double>(20))
      .ExpectError(kInvalid, "inner dimensions differ: op(A) of A [3, 4] (transA=1) has K = 3");
  KernelTester("Gemm")
      .Attrs({{"beta", 1.0}, {"transA", 0}, {"transB", 0}})
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddOutput(F32, {2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "missing attribute 'alpha'");
}

// ================================================================ Relu / Sigmoid / Tanh

KERNEL_TEST(Relu_AllDTypes) {
  KernelTester("Relu")
      .AddInput(F32, {2, 3}, {-2, -0.5, 0, 0.5, 3, kNaN})
      .AddOutput(F32, {2, 3}, {0, 0, 0, 0.5, 3, kNaN})
      .Run();
  KernelTester("Relu").AddInput(F16, {4}, {-2, 0.1, 65504, -kInf}).AddOutput(F16, {4}, {0, 0.1, 65504, 0}).Run();
  KernelTester("Relu").AddInput<int32_t>({3}, {-7, 0, 7}).AddOutput<int32_t>({3}, {0, 0, 7}).Run();
  KernelTester("Relu")
      .AddInput<int64_t>({3}, {std::numeric_limits<int64_t>::min(), 1, 5000000000})
      .AddOutput<int64_t>({3}, {0, 1, 5000000000})
      .Run();
}

std::vector<double> Map(const std::vector<double>& x, double (*f)(double)) {
  std::vector<double> y;
  for (double v : x) y.push_back(f(v));
  return y;
}
double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Tanh(double x) { return std::tanh(x); }

KERNEL_TEST(Sigmoid_Tanh_StableAtExtremes) {
  const std::vector<double> x = {-1000, -100, -20, -1, -1e-3, 0, 1e-3, 1, 20, 100, 1000};
  KernelTester("Sigmoid").AddInput(F32, {11}, x).AddOutput(F32, {11}, Map(x, Sigmoid)).Tolerance(1e-7, 1e-6).Run();
  KernelTester("Tanh").AddInput(F32, {11}, x).AddOutput(F32, {11}, Map(x, Tanh)).Tolerance(1e-7, 1e-6).Run();
  KernelTester("Sigmoid").AddInput(F32, {2}, {kNaN, -kInf}).AddOutput(F32, {2}, {kNaN, 0}).Run();
  KernelTester("Sigmoid").AddInput(F32, {1}, {kInf}).AddOutput(F32, {1}, {1}).Run();
}

KERNEL_TEST(Sigmoid_Tanh_Float16) {
  const auto x = AsFloat16(RandomValues(64, -8, 8, 600));
  KernelTester("Sigmoid").AddInput(F16, {8, 8}, x).AddOutput(F16, {8, 8}, Map(x, Sigmoid)).Tolerance(1e-4, 1e-3).Run();
  KernelTester("Tanh").AddInput(F16, {8, 8}, x).AddOutput(F16, {8, 8}, Map(x, Tanh)).Tolerance(1e-4, 1e-3).Run();
  // Exact float16 results: tanh(0) = 0, sigmoid(0) = 0.5, sigmoid(-20) ~ 2e-9 underflows to 0.
  KernelTester("Sigmoid").AddInput(F16, {2}, {0, -20}).AddOutput(F16, {2}, {0.5, 0}).Run();
}

KERNEL_TEST(Unary_Errors) {
  KernelTester("Sigmoid")
      .AddInput(I32, {2}, {1, 2})
      .AddOutput(I32, {2}, {1, 2})
      .ExpectError(kUnimpl, "dtype int32, which this kernel does not support (supported: float32, float16)");
  KernelTester("Relu").AddInput(BOOL, {1}, {1}).AddOutput(BOOL, {1}, {1}).ExpectError(kUnimpl, "dtype bool");
  KernelTester("Tanh")
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddOutput(F32, {4}, std::vector<double>(4))
      .ExpectError(kInvalid, "output 0 has shape [4] but the inputs imply [2, 2]");
  KernelTester("Relu")
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(F16, {2}, {1, 2})
      .ExpectError(kInvalid, "output 0 has dtype float16 but input 0 has float32");
}

// ================================================================ Softmax

KERNEL_TEST(Softmax_HandComputed_LargeValuesStable) {
  KernelTester("Softmax")
      .Attr("axis", 1)
      .Attr("coerce_2d", 0)
      .AddInput(F32, {2, 3}, {1000, 1001, 1002, 0, 0, 0})
      .AddOutput(F32, {2, 3}, {0.0900305732, 0.244728471, 0.665240956, 1.0 / 3, 1.0 / 3, 1.0 / 3})
      .Tolerance(1e-7, 1e-6)
      .Run();
  KernelTester("Softmax")  // along axis 0: columns
      .Attr("axis", 0)
      .Attr("coerce_2d", 0)
      .AddInput(F32, {2, 3}, {0, 1, -1000, 0, 0, -1000})
      .AddOutput(F32, {2, 3}, {0.5, 0.731058579, 0.5, 0.5, 0.268941421, 0.5})
      .Tolerance(1e-7, 1e-6)
      .Run();
}

KERNEL_TEST(Softmax_AllAxes_BothModes_VsReference) {
  const Shape shape = {2, 3, 4, 5};
  const auto x = AsFloat32(RandomValues(NumElements(shape), -5, 5, 700));
  for (int coerce = 0; coerce < 2; ++coerce)
    for (size_t axis = 0; axis < shape.size(); ++axis)
      KernelTester("Softmax")
          .Attr("axis", axis)
          .Attr("coerce_2d", coerce)
          .AddInput(F32, shape, x)
          .AddOutput(F32, shape, RefSoftmax(x, shape, axis, coerce == 1))
          .Tolerance(1e-7, 1e-5)
          .Run();
}

KERNEL_TEST(Softmax_Float16_And_Concurrent) {
  const Shape shape = {3, 4, 6};
  const auto x = AsFloat16(RandomValues(NumElements(shape), -4, 4, 800));
  for (size_t axis = 0; axis < 3; ++axis)
    KernelTester("Softmax")
        .Attr("axis", axis)
        .Attr("coerce_2d", 0)
        .AddInput(F16, shape, x)
        .AddOutput(F16, shape, RefSoftmax(x, shape, axis, false))
        .Tolerance(1e-4, 1e-3)
        .Concurrently(3, 20)  // the inner > 1 path uses scratch: per-thread, never shared
        .Run();
}

KERNEL_TEST(Softmax_Errors) {
  auto base = [] {
    KernelTester t("Softmax");
    t.AddInput(F32, {2, 3, 4}, std::vector<double>(24)).AddOutput(F32, {2, 3, 4}, std::vector<double>(24));
    return t;
  };
  base().Attr("axis", 3).Attr("coerce_2d", 0).ExpectError(kInvalid, "attribute 'axis' = 3 is out of range for rank 3");
  base().Attr("axis", -1).Attr("coerce_2d", 0).ExpectError(kInvalid, "'axis' = -1 is out of range");
  base().Attr("axis", 1).Attr("coerce_2d", 2).ExpectError(kInvalid, "attribute 'coerce_2d' must be 0 or 1, got 2");
  base().Attr("coerce_2d", 0).ExpectError(kInvalid, "missing attribute 'axis'");
  base().Attr("axis", "one").Attr("coerce_2d", 0).ExpectError(kInvalid, "attribute 'axis' has the wrong type");
  KernelTester("Softmax")
      .Attr("axis", 0)
      .Attr("coerce_2d", 0)
      .AddInput(F64, {2}, {1, 2})
      .AddOutput(F64, {2}, {1, 2})
      .ExpectError(kUnimpl, "dtype float64");
}

// ================================================================ Concat

KERNEL_TEST(Concat_HandComputed) {
  KernelTester("Concat")
      .Attr("axis", 0)
      .AddInput(F32, {1, 2}, {1, 2})
      .AddInput(F32, {2, 2}, {3, 4, 5, 6})
      .AddOutput(F32, {3, 2}, {1, 2, 3, 4, 5, 6})
      .Run();
  KernelTester("Concat")
      .Attr("axis", 1)
      .AddInput(F32, {2, 1}, {1, 2})
      .AddInput(F32, {2, 2}, {3, 4, 5, 6})
      .AddInput(F32, {2, 0}, {})
      .AddInput(F32, {2, 3}, {7, 8, 9, 10, 11, 12})
      .AddOutput(F32, {2, 6}, {1, 3, 4, 7, 8, 9, 2, 5, 6, 10, 11, 12})
      .Run();
  KernelTester("Concat")  // the fusion example's model1: Concat(X, [[1.5, 2.0]]) in fp16
      .Attr("axis", 1)
      .AddInput(F16, {1, 1}, {0})
      .AddInput(F16, {1, 2}, {1.5, 2.0})
      .AddOutput(F16, {1, 3}, {0, 1.5, 2})
      .Run();
  KernelTester("Concat").Attr("axis", 0).AddInput(BOOL, {2}, {1, 0}).AddInput(BOOL, {1}, {1}).AddOutput(BOOL, {3}, {1, 0, 1}).Run();
  KernelTester("Concat")
      .Attr("axis", 0)
      .AddInput<int64_t>({1}, {-5000000000})
      .AddOutput<int64_t>({1}, {-5000000000})
      .Run();
}

KERNEL_TEST(Concat_EveryAxis_VsReference) {
  const std::vector<Shape> base = {{2, 3, 4, 5}, {2, 3, 4, 5}, {2, 3, 4, 5}};
  uint32_t seed = 900;
  for (DType t : {F32, U8, I64, F16})
    for (size_t axis = 0; axis < 4; ++axis) {
      std::vector<Shape> shapes = base;
      shapes[0][axis] = 1;
      shapes[2][axis] = 3;
      std::vector<std::vector<double>> xs;
      KernelTester c("Concat");
      c.Attr("axis", axis);
      for (const Shape& s : shapes) {
        xs.push_back(RandomInts(NumElements(s), 0, 200, seed++));
        c.AddInput(t, s, xs.back());
      }
      Shape out;
      const auto y = RefConcat(xs, shapes, axis, &out);
      c.AddOutput(t, out, y).Run();
    }
}

// Larger outputs under concurrent runs: empty inputs, a single outer slab (a batch-1 blocked
// concat along channels) and several outer slabs split over the pool.
KERNEL_TEST(Concat_Large_VsReference) {
  uint32_t seed = 950;
  for (DType t : {F32, F16, U8})
    for (const std::vector<Shape>& shapes :
         {std::vector<Shape>{{1, 40, 13, 17, 8}, {1, 0, 13, 17, 8}, {1, 4, 13, 17, 8}, {1, 57, 13, 17, 8}},
          std::vector<Shape>{{3, 5, 999}, {3, 1, 999}, {3, 11, 999}}}) {
      std::vector<std::vector<double>> xs;
      KernelTester c("Concat");
      c.Attr("axis", 1);
      for (const Shape& s : shapes) {
        xs.push_back(RandomInts(NumElements(s), 0, 200, seed++));
        c.AddInput(t, s, xs.back());
      }
      Shape out;
      const auto y = RefConcat(xs, shapes, 1, &out);
      c.AddOutput(t, out, y).Concurrently(2, 2).Run();
    }
}

// A batch-1 concat whose inputs the memory plan placed at their slices of the output (their
// producers wrote them there): every subset of inputs in place, the others copied; the bytes
// in place stay as written and the result equals the concatenation.
KERNEL_TEST(Concat_InputsAlreadyInTheirSlices) {
  const std::vector<Shape> shapes = {{1, 3, 7, 9, 8}, {1, 0, 7, 9, 8}, {1, 130, 7, 9, 8}, {1, 1, 7, 9, 8}};
  for (DType t : {F32, F16}) {
    const size_t item = DTypeSize(t);
    std::vector<size_t> bytes, offsets;
    size_t total = 0;
    for (const Shape& s : shapes) {
      offsets.push_back(total);
      bytes.push_back(static_cast<size_t>(NumElements(s)) * item);
      total += bytes.back();
    }
    std::mt19937 rng(77);
    std::vector<std::vector<uint8_t>> values;
    std::vector<uint8_t> expected;
    for (size_t b : bytes) {
      values.emplace_back(b);
      for (uint8_t& v : values.back()) v = static_cast<uint8_t>(rng());
      expected.insert(expected.end(), values.back().begin(), values.back().end());
    }
    Shape out_shape = shapes[0];
    out_shape[1] = 0;
    for (const Shape& s : shapes) out_shape[1] += s[1];
    const nlohmann::json attrs = {{"axis", 1}};  // Attrs keeps a reference
    KernelSpec spec{"Concat", "concat_in_place", {}, {TensorDesc{t, out_shape}},
                    tfpopef::Attrs(attrs, "op 'Concat' (node 'concat_in_place')")};
    for (const Shape& s : shapes) spec.inputs.push_back(TensorDesc{t, s});
    const std::unique_ptr<Kernel> kernel = KernelRegistry::Get().Create(spec);
    for (unsigned mask = 0; mask < (1u << shapes.size()); ++mask) {
      std::vector<uint8_t> out(total, 0xAB);
      std::vector<std::vector<uint8_t>> apart = values;
      std::vector<const void*> in_ptrs;
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (mask & (1u << i)) {
          std::memcpy(out.data() + offsets[i], values[i].data(), bytes[i]);
          in_ptrs.push_back(out.data() + offsets[i]);
        } else {
          in_ptrs.push_back(apart[i].data());
        }
      }
      void* out_ptr = out.data();
      kernel->Run(KernelContext{in_ptrs.data(), &out_ptr, nullptr});
      EXPECT_TRUE(out == expected);
      EXPECT_TRUE(apart == values);  // inputs are never written
    }
  }
}

KERNEL_TEST(Concat_Errors) {
  KernelTester("Concat")
      .Attr("axis", 0)
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddInput(F32, {2}, std::vector<double>(2))
      .AddOutput(F32, {4, 2}, std::vector<double>(8))
      .ExpectError(kInvalid, "input 1 has shape [2], incompatible with input 0 [2, 2]");
  KernelTester("Concat")
      .Attr("axis", 0)
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddInput(F32, {2, 3}, std::vector<double>(6))
      .AddOutput(F32, {4, 2}, std::vector<double>(8))
      .ExpectError(kInvalid, "incompatible with input 0 [2, 2] for concat along axis 0");
  KernelTester("Concat")
      .Attr("axis", 0)
      .AddInput(F32, {2}, {1, 2})
      .AddInput(I32, {2}, {1, 2})
      .AddOutput(F32, {4}, std::vector<double>(4))
      .ExpectError(kInvalid, "input 1 has dtype int32 but input 0 has float32");
  KernelTester("Concat")
      .Attr("axis", 2)
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddOutput(F32, {2, 2}, std::vector<double>(4))
      .ExpectError(kInvalid, "attribute 'axis' = 2 is out of range for rank 2");
  KernelTester("Concat")
      .Attr("axis", 1)
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddInput(F32, {2, 2}, std::vector<double>(4))
      .AddOutput(F32, {4, 2}, std::vector<double>(8))
      .ExpectError(kInvalid, "output 0 has shape [4, 2] but the inputs imply [2, 4]");
  KernelTester("Concat").Attr("axis", 0).AddOutput(F32, {0}, {}).ExpectError(kInvalid, "expects at least 1 inputs, got 0");
}

// ================================================================ Transpose

std::vector<Shape> AllPermutations(size_t rank) {
  Shape p(rank);
  for (size_t i = 0; i < rank; ++i) p[i] = static_cast<int64_t>(i);
  std::vector<Shape> all;
  do all.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return all;
}

void CheckTranspose(DType t, const Shape& shape, const Shape& perm, uint32_t seed) {
  const auto x = RandomInts(NumElements(shape), 0, 100, seed);  // exact in every dtype
  Shape out;
  const auto y = RefTranspose(x, shape, perm, &out);
  KernelTester("Transpose").Attr("perm", perm).AddInput(t, shape, x).AddOutput(t, out, y).Run();
}

KERNEL_TEST(Transpose_HandComputed) {
  KernelTester("Transpose")
      .Attr("perm", {1, 0})
      .AddInput(F32, {2, 3}, {1, 2, 3, 4, 5, 6})
      .AddOutput(F32, {3, 2}, {1, 4, 2, 5, 3, 6})
      .Run();
  KernelTester("Transpose")  // size-1 dims only move: a plain copy
      .Attr("perm", {2, 1, 0})
      .AddInput(BOOL, {1, 3, 1}, {1, 0, 1})
      .AddOutput(BOOL, {1, 3, 1}, {1, 0, 1})
      .Run();
  KernelTester("Transpose").Attr("perm", nlohmann::json::array()).AddInput(F32, {}, {4}).AddOutput(F32, {}, {4}).Run();
}

KERNEL_TEST(Transpose_AllPerms_4D_EveryElementSize) {
  uint32_t seed = 1000;
  for (DType t : {F32, U8, F16, I64, BOOL})
    for (const Shape& perm : AllPermutations(4)) CheckTranspose(t, {2, 3, 4, 5}, perm, seed++);
}

KERNEL_TEST(Transpose_AllPerms_6D) {
  uint32_t seed = 2000;
  for (const Shape& perm : AllPermutations(6)) CheckTranspose(F32, {2, 3, 1, 2, 4, 3}, perm, seed++);
  for (const Shape& perm : AllPermutations(6))
    if (seed++ % 7 == 0) CheckTranspose(I64, {3, 2, 2, 1, 3, 2}, perm, seed);
}

KERNEL_TEST(Transpose_LargeTiles_And_Layouts) {
  CheckTranspose(U8, {37, 70}, {1, 0}, 1);     // not a multiple of the tile size
  CheckTranspose(I64, {65, 33}, {1, 0}, 2);
  CheckTranspose(F32, {2, 3, 5, 7}, {0, 2, 3, 1}, 3);  // NCHW -> NHWC
  CheckTranspose(F32, {2, 5, 7, 3}, {0, 3, 1, 2}, 4);  // NHWC -> NCHW
  CheckTranspose(F32, {4, 1, 33, 40}, {0, 1, 3, 2}, 5);
  CheckTranspose(F16, {3, 4, 5}, {0, 1, 2}, 6);      // identity
  CheckTranspose(F32, {0, 3}, {1, 0}, 7);            // empty
  CheckTranspose(F32, {2, 3, 4, 5, 6, 7, 2}, {6, 0, 5, 1, 4, 2, 3}, 8);  // rank 7
}

// Fewer than 32 output rows: work items are spans of 4096 columns, de-interleaved where the
// input is the rows interleaved (2, 3 or 4 of them), strided otherwise.
KERNEL_TEST(Transpose_FewRows_ColumnSpans) {
  CheckTranspose(F32, {2, 97, 89, 3}, {0, 3, 1, 2}, 1);  // NHWC image -> NCHW: 8633 columns, 3 spans
  CheckTranspose(F16, {2, 97, 89, 3}, {0, 3, 1, 2}, 2);
  CheckTranspose(U8, {9000, 2}, {1, 0}, 3);
  CheckTranspose(I64, {4097, 4}, {1, 0}, 4);
  CheckTranspose(F32, {8193, 5}, {1, 0}, 5);             // 5 rows: the strided loop
  CheckTranspose(F32, {3, 5000, 2}, {2, 1, 0}, 6);       // rows 2, input stride 15000: strided
}

KERNEL_TEST(Transpose_Errors) {
  auto t = [](nlohmann::json perm) {
    KernelTester k("Transpose");
    k.Attr("perm", std::move(perm)).AddInput(F32, {2, 3, 4}, std::vector<double>(24))
        .AddOutput(F32, {4, 3, 2}, std::vector<double>(24));
    return k;
  };
  t({0, 0, 1}).ExpectError(kInvalid, "attribute 'perm' = [0, 0, 1] is not a permutation of 0..2");
  t({0, 1}).ExpectError(kInvalid, "is not a permutation of 0..2 for input shape [2, 3, 4]");
  t({0, 1, 3}).ExpectError(kInvalid, "is not a permutation");
  t({-1, 1, 0}).ExpectError(kInvalid, "is not a permutation");
  t({0, 2, 1}).ExpectError(kInvalid, "output 0 has shape [4, 3, 2] but the inputs imply [2, 4, 3]");
  KernelTester("Transpose")
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(F32, {2}, {1, 2})
      .ExpectError(kInvalid, "missing attribute 'perm'");
  KernelTester("Transpose")
      .Attr("perm", {0})
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(I32, {2}, {1, 2})
      .ExpectError(kInvalid, "output dtype int32 differs from input dtype float32");
}

// ================================================================ Cast

KERNEL_TEST(Cast_Matrix_AllPairs) {
  // Values exact in every dtype; bool maps nonzero to 1 and gives back 0/1.
  const std::vector<double> values = {0, 1, 2, 7, 100, 127, 0};
  int pairs = 0;
  for (DType from : AllDTypes())
    for (DType to : AllDTypes()) {
      std::vector<double> in = values;
      if (from == BOOL)
        for (double& v : in) v = v != 0;
      std::vector<double> out = in;
      if (to == BOOL)
        for (double& v : out) v = v != 0;
      KernelTester("Cast").Attr("to", DTypeName(to)).AddInput(from, {7}, in).AddOutput(to, {7}, out).Run();
      ++pairs;
    }
  EXPECT_TRUE(pairs == 144);
}

KERNEL_TEST(Cast_FloatToInt_TruncatesAndSaturates) {
  KernelTester("Cast")
      .Attr("to", "int32")
      .AddInput(F32, {8}, {-2.7, -0.5, 0.5, 2.7, 1e10, -1e10, kNaN, 2147483520})
      .AddOutput<int32_t>({8}, {-2, 0, 0, 2, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                                0, 2147483520})
      .Run();
  KernelTester("Cast")
      .Attr("to", "uint8")
      .AddInput(F32, {5}, {-1.5, 255.9, 300, 3.9, -kInf})
      .AddOutput<uint8_t>({5}, {0, 255, 255, 3, 0})
      .Run();
  KernelTester("Cast")
      .Attr("to", "int64")
      .AddInput(F64, {4}, {9.3e18, -9.3e18, -9007199254740992.0, 4.5})
      .AddOutput<int64_t>({4}, {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                -9007199254740992, 4})
      .Run();
  KernelTester("Cast")
      .Attr("to", "uint64")
      .AddInput(F64, {3}, {1.8446744073709552e19, -3, 12345.9})
      .AddOutput<uint64_t>({3}, {std::numeric_limits<uint64_t>::max(), 0, 12345})
      .Run();
}

KERNEL_TEST(Cast_Bool) {
  KernelTester("Cast")
      .Attr("to", "bool")
      .AddInput(F32, {6}, {0, -0.0, 0.5, kNaN, kInf, -1})
      .AddOutput<bool>({6}, {false, false, true, true, true, true})
      .Run();
  KernelTester("Cast")
      .Attr("to", "bool")
      .AddInput<uint16_t>({2}, {0, 256})  // 256: low byte 0, still true
      .AddOutput<bool>({2}, {false, true})
      .Run();
  KernelTester("Cast").Attr("to", "bool").AddInput(F16, {4}, {0, -0.0, 0.0001, kNaN}).AddOutput(BOOL, {4}, {0, 0, 1, 1}).Run();
  KernelTester("Cast").Attr("to", "float32").AddInput<bool>({2}, {false, true}).AddOutput(F32, {2}, {0, 1}).Run();
  KernelTester("Cast").Attr("to", "float16").AddInput<bool>({2}, {true, false}).AddOutput(F16, {2}, {1, 0}).Run();
  KernelTester("Cast").Attr("to", "int64").AddInput<bool>({2}, {true, false}).AddOutput<int64_t>({2}, {1, 0}).Run();
}

KERNEL_TEST(Cast_Float16_RoundingAndWidening) {
  KernelTester("Cast")
      .Attr("to", "float16")
      .AddInput(F32, {7}, {2049, 2051, 65504, 65520, 1e-8, -3.14159, 6e-8})
      .AddOutput(F16, {7}, {2048, 2052, 65504, kInf, 0, -3.140625, 5.9604644775390625e-08})
      .Run();
  KernelTester("Cast")
      .Attr("to", "float32")
      .AddInput(F16, {4}, {0.333251953125, 65504, -kInf, 5.9604644775390625e-08})
      .AddOutput(F32, {4}, {0.333251953125, 65504, -kInf, 5.9604644775390625e-08})
      .Run();
  KernelTester("Cast")
      .Attr("to", "int32")
      .AddInput(F16, {5}, {-2.5, 3.75, 65504, -65504, kNaN})
      .AddOutput<int32_t>({5}, {-2, 3, 65504, -65504, 0})
      .Run();
  KernelTester("Cast").Attr("to", "uint8").AddInput(F16, {2}, {300, -3}).AddOutput<uint8_t>({2}, {255, 0}).Run();
  KernelTester("Cast")
      .Attr("to", "float16")
      .AddInput<int64_t>({4}, {70000, 2049, -65504, 16777217})
      .AddOutput(F16, {4}, {kInf, 2048, -65504, kInf})
      .Run();
  // float64 -> float16 rounds once: 1 + 2^-11 + 2^-40 is just above the tie between 1 and
  // 1 + 2^-10, so it rounds up; rounding to float32 first would land on the tie and go to 1.
  const double tie = 1.0 + std::ldexp(1.0, -11);
  KernelTester("Cast")
      .Attr("to", "float16")
      .AddInput<double>({3}, {tie + std::ldexp(1.0, -40), tie, tie - std::ldexp(1.0, -40)})
      .AddOutput(F16, {3}, {1.0 + std::ldexp(1.0, -10), 1, 1})
      .Run();
}

KERNEL_TEST(Cast_IntToInt_Wraps_And_IntToFloat_Rounds) {
  KernelTester("Cast")
      .Attr("to", "int8")
      .AddInput<int64_t>({4}, {300, -129, 127, -128})
      .AddOutput<int8_t>({4}, {44, 127, 127, -128})
      .Run();
  KernelTester("Cast").Attr("to", "uint32").AddInput<int32_t>({2}, {-1, 5}).AddOutput<uint32_t>({2}, {4294967295u, 5}).Run();
  KernelTester("Cast")
      .Attr("to", "int32")
      .AddInput<uint64_t>({2}, {std::numeric_limits<uint64_t>::max(), 4294967296u + 7})
      .AddOutput<int32_t>({2}, {-1, 7})
      .Run();
  KernelTester("Cast")
      .Attr("to", "float64")
      .AddInput<uint64_t>({1}, {std::numeric_limits<uint64_t>::max()})
      .AddOutput<double>({1}, {18446744073709551616.0})
      .Run();
  KernelTester("Cast").Attr("to", "float32").AddInput<int64_t>({2}, {16777217, -16777219}).AddOutput<float>({2}, {16777216, -16777220}).Run();
  KernelTester("Cast").Attr("to", "float32").AddInput(F32, {2}, {1.5, kNaN}).AddOutput(F32, {2}, {1.5, kNaN}).Run();
}

KERNEL_TEST(Cast_Errors) {
  KernelTester("Cast")
      .Attr("to", "float8")
      .AddInput(F32, {1}, {1})
      .AddOutput(F32, {1}, {1})
      .ExpectError(kUnimpl, "attribute 'to' = 'float8' is not a supported dtype");
  KernelTester("Cast")
      .Attr("to", "int32")
      .AddInput(F32, {1}, {1})
      .AddOutput(I64, {1}, {1})
      .ExpectError(kInvalid, "output dtype int64 differs from attribute 'to' = int32");
  KernelTester("Cast")
      .Attr("to", "int32")
      .AddInput(F32, {2}, {1, 2})
      .AddOutput(I32, {1, 2}, {1, 2})
      .ExpectError(kInvalid, "output 0 has shape [1, 2] but the inputs imply [2]");
  KernelTester("Cast").AddInput(F32, {1}, {1}).AddOutput(F32, {1}, {1}).ExpectError(kInvalid, "missing attribute 'to'");
}

// ================================================================ registry / shared checks

KERNEL_TEST(Registry_HasEveryContractOp) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Relu", "Sigmoid", "Tanh", "Softmax", "Reshape",
                         "Concat", "Transpose", "Cast"})
    if (!KernelRegistry::Get().Has(op)) Fail(std::string("no kernel registered for ") + op);
}

KERNEL_TEST(Registry_UnknownOp) {
  // An op no kernel will ever implement, so new kernels do not change this test.
  KernelTester("NoSuchOp")
      .AddInput(F32, {1}, {1})
      .AddOutput(F32, {1}, {1})
      .ExpectError(kUnimpl, "no emulator kernel for this op (supported: ");
}

KERNEL_TEST(Spec_NegativeDimRejected) {
  KernelTester("Relu").AddInput(F32, {-1}, {}).AddOutput(F32, {-1}, {}).ExpectError(kInvalid, "input 0 has a negative dimension");
}

KERNEL_TEST(Float16Adapter_ConcurrentRuns) {
  const auto a = AsFloat16(RandomValues(60, -3, 3, 11));
  const auto b = AsFloat16(RandomValues(5, -3, 3, 12));
  KernelTester("Sub")
      .AddInput(F16, {3, 4, 5}, a)
      .AddInput(F16, {5}, b)
      .AddOutput(F16, {3, 4, 5}, RefBinary(a, {3, 4, 5}, b, {5}, [](double x, double y) { return x - y; }))
      .Tolerance(0, 1e-3)
      .Concurrently(4, 100)
      .Run();
}

// ================================================================ bulk float16 conversion

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

KERNEL_TEST(Fp16Convert_Widen_AllHalfValues_MatchHalfH) {
  std::printf("         (F16C path in use: %s)\n", kernels::HalfConversionUsesF16C() ? "yes" : "no");
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(all.size() + 1, -7.0f);
  kernels::WidenHalfToFloat(all.data(), got.data(), static_cast<int64_t>(all.size()));
  EXPECT_TRUE(got.back() == -7.0f);  // nothing written past n
  int bad = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint32_t want = FloatBits(HalfToFloat(all[i])), have = FloatBits(got[i]);
    const bool signaling_nan = (i & 0x7C00u) == 0x7C00u && (i & 0x3FFu) != 0 && (i & 0x200u) == 0;
    // A signaling NaN may come out quiet (F16C); everything else must be bit-identical.
    const bool ok = have == want || (signaling_nan && have == (want | 0x00400000u));
    if (!ok && bad++ < 5) Fail("half bits " + std::to_string(i) + ": got float bits " + std::to_string(have) +
                          ", half.h gives " + std::to_string(want));
  }
  EXPECT_TRUE(bad == 0);
}

KERNEL_TEST(Fp16Convert_Narrow_MatchesHalfH) {
  // Rounding depends on the 13 low mantissa bits (more for subnormal results): every
  // sign/exponent/top-10-mantissa pattern with the interesting low parts (exact, just above,
  // just below and exactly at the tie, max), plus random bit patterns and every tail length.
  std::vector<float> in;
  const uint32_t lows[] = {0x0u, 0x1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu};
  for (uint32_t high = 0; high < (1u << 19); ++high)
    for (uint32_t low : lows) {
      const uint32_t bits = (high << 13) | low;
      float f;
      std::memcpy(&f, &bits, 4);
      in.push_back(f);
    }
  std::mt19937 rng(123);
  for (int i = 0; i < (1 << 20); ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    in.push_back(f);
  }
  std::vector<uint16_t> got(in.size() + 1, 0xBEEF);
  kernels::NarrowFloatToHalf(in.data(), got.data(), static_cast<int64_t>(in.size()));
  EXPECT_TRUE(got.back() == 0xBEEF);
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (got[i] != FloatToHalf(in[i]) && bad++ < 5)
      Fail("float bits " + std::to_string(FloatBits(in[i])) + ": got half " + std::to_string(got[i]) +
           ", half.h gives " + std::to_string(FloatToHalf(in[i])));
  EXPECT_TRUE(bad == 0);
  for (int64_t n = 0; n <= 17; ++n) {  // tails: exactly n elements written
    std::vector<float> src(n, 1.5f);
    std::vector<uint16_t> dst(n + 8, 0xBEEF);
    kernels::NarrowFloatToHalf(src.data(), dst.data(), n);
    for (int64_t i = 0; i < n + 8; ++i) EXPECT_TRUE(dst[i] == (i < n ? 0x3E00 : 0xBEEF));
    std::vector<float> back(n + 8, -7.0f);
    kernels::WidenHalfToFloat(dst.data(), back.data(), n);
    for (int64_t i = 0; i < n + 8; ++i) EXPECT_TRUE(back[i] == (i < n ? 1.5f : -7.0f));
  }
}

}  // namespace
}  // namespace test
}  // namespace tfpopef

int main(int argc, char** argv) { return tfpopef::test::RunAllTests(argc, argv); }
