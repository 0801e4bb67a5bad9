// Kernels that run float16 themselves (widening pieces, rows or blocks into float32 in cache
// and rounding once at the store, instead of whole-tensor copies through fp16_adapter.h): each
// must give exactly the bits of its float32 kernel on the same values, rounded once to nearest
// even, which is what the adapter gives. Every broadcast form, piece and chunk boundary the
// kernels have, on every SIMD path. Run by the kernel_tests.cc binary (tests/cc/test_kernels_cc.py).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/reference_ops.h"
#include "tests/cc/simd_paths.h"

namespace tfpopef {
namespace test {
namespace {

struct Float16Case {
  std::string op;
  nlohmann::json attrs;
  std::vector<Shape> inputs;
  Shape output;
  double lo = -3, hi = 3;  // input values, rounded to float16
  std::vector<size_t> constant_inputs = {};  // announced as weights to the float16 kernel
};

// The float16 kernel against the float32 kernel on the same (float16-valued) inputs, its
// output rounded once: bit-identical, inputs untouched, no write outside the output.
void ExpectBitIdenticalToFloat32RoundedOnce(const Float16Case& c, uint32_t seed) {
  KernelTester f32(c.op), f16(c.op);
  f32.Attrs(c.attrs);
  f16.Attrs(c.attrs);
  for (const Shape& shape : c.inputs) {
    const auto values = AsFloat16(RandomValues(NumElements(shape), c.lo, c.hi, seed++));
    f32.AddInput(F32, shape, values);
    f16.AddInput(F16, shape, values);
  }
  // Both announce the weights, so both take the same float32 kernel (a weight B picks the
  // packed GEMM, packed_gemm_kernel.h).
  for (size_t i : c.constant_inputs) {
    f32.ConstantInput(i);
    f16.ConstantInput(i);
  }
  const auto count = static_cast<size_t>(NumElements(c.output));
  const std::vector<double> y32 = f32.AddOutput(F32, c.output, std::vector<double>(count)).RunAndGetOutput(0);
  const size_t failures = CurrentFailures().size();
  // Several threads, each with its own buffers (so its own weight addresses), several runs each.
  if (!c.constant_inputs.empty()) f16.Concurrently(3, 4);
  f16.AddOutput(F16, c.output, AsFloat16(y32)).Tolerance(0, 0).Run();
  for (size_t i = failures; i < CurrentFailures().size(); ++i)
    CurrentFailures()[i] = "vs float32 rounded once: " + CurrentFailures()[i];
}

// numpy broadcasting of two shapes (the cases are broadcastable).
Shape Broadcast(Shape a, Shape b) {
  if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), 1);
  if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), 1);
  for (size_t d = 0; d < a.size(); ++d) a[d] = a[d] == 1 ? b[d] : a[d];
  return a;
}

void ExpectAll(const std::vector<Float16Case>& cases, uint32_t seed) {
  ForEachSimdPath([&] {
    uint32_t s = seed;
    for (const Float16Case& c : cases) ExpectBitIdenticalToFloat32RoundedOnce(c, s += 8);
  });
}

KERNEL_TEST(Float16_Binary_EveryBroadcastForm_BitIdenticalToFloat32RoundedOnce) {
  std::vector<Float16Case> cases;
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 1000}, {3, 1000}},                    // same shape: pieces of 512 and a tail
        {{2, 40000}, {2, 40000}},                  // over the pool
        {{2, 40000}, {1}},                         // a scalar
        {{1}, {3, 700}},                           // a scalar first
        {{5, 1, 33}, {1, 7, 33}},                  // both broadcast: both widened whole
        {{1, 4, 7, 9, 8}, {1, 4, 1, 1, 8}},        // blocked per-channel: short runs walked as rows
        {{1, 4, 1, 1, 8}, {2, 4, 7, 9, 8}},        // the per-channel operand first
        {{2, 16, 28, 28, 8}, {1, 16, 1, 1, 8}},    // rows over several pieces and the pool
        {{3, 6, 50}, {3, 6, 1}},                   // a per-row value
    };
    for (const auto& [a, b] : shapes) cases.push_back({op, nlohmann::json::object(), {a, b}, Broadcast(a, b)});
  }
  ExpectAll(cases, 30000);
}

// The blocked per-channel Mul that MulBlockedHalfRuns runs on the AVX2 and AVX-512 paths (the
// piecewise path on the portable one): row lengths around its 4-run step, a per-image operand,
// products that overflow to infinity and products in float16's subnormal range.
KERNEL_TEST(Float16_Mul_BlockedPerChannel_EveryRowLength_BitIdenticalToFloat32RoundedOnce) {
  std::vector<Float16Case> cases;
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{1, 144, 7, 7, 8}, {1, 144, 1, 1, 8}},  // EfficientNetB0's 7x7 excitation: rows of 4·12 + 1 runs
      {{2, 3, 5, 3, 8}, {2, 3, 1, 1, 8}},      // rows of 15 runs, one scale run per image
      {{2, 5, 1, 3, 8}, {2, 5, 1, 1, 8}},      // rows shorter than 4 runs
      {{1, 2, 1, 1, 8}, {1, 2, 1, 1, 8}},      // same shape, one run per row
      {{3, 1, 1, 1, 8}, {3, 40, 9, 9, 8}},     // the per-channel operand first, over the pool
  };
  for (const auto& [a, b] : shapes) {
    for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{{-3, 3}, {-400, 400}, {-0.02, 0.02}}) {
      Float16Case c{"Mul", nlohmann::json::object(), {a, b}, Broadcast(a, b)};
      c.lo = lo;
      c.hi = hi;
      cases.push_back(c);
    }
  }
  ExpectAll(cases, 30500);
}

KERNEL_TEST(Float16_Unary_BitIdenticalToFloat32RoundedOnce) {
  const Shape shape = {70001};  // several chunks and pieces and a tail
  std::vector<Float16Case> cases;
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Erf", "Reciprocal", "Softplus",
                         "Softsign", "HardSwish", "Neg", "Abs"})
    cases.push_back({op, nlohmann::json::object(), {shape}, shape, -6, 6});
  cases.push_back({"LeakyRelu", {{"alpha", 0.1}}, {shape}, shape, -6, 6});
  cases.push_back({"Elu", {{"alpha", 1.0}}, {shape}, shape, -6, 6});
  cases.push_back({"HardSigmoid", {{"alpha", 0.2}, {"beta", 0.5}}, {shape}, shape, -6, 6});
  cases.push_back({"Gelu", {{"approximate", "none"}}, {shape}, shape, -6, 6});
  cases.push_back({"Gelu", {{"approximate", "tanh"}}, {{3, 5}}, {3, 5}, -6, 6});
  ExpectAll(cases, 31000);
}

KERNEL_TEST(Float16_FusedElementwise_EveryBlockLayout_BitIdenticalToFloat32RoundedOnce) {
  // Every input kind (x0, x3 full, x1 per last axis, x2 scalar), and a program whose result
  // is one instruction.
  const char* program =
      "mul x0 x1; add t0 x2; sigmoid t1; mul x0 t2; clip t3 -0.5 2.5; sub t4 x3; tanh t5; div t6 x1";
  std::vector<Float16Case> cases;
  for (const Shape& shape : std::vector<Shape>{{2, 3, 37}, {4, 700, 37}, {3, 2500}, {1, 1024}, {7}}) {
    const Shape row = {shape.back()};
    cases.push_back({"FusedElementwise", {{"program", program}}, {shape, row, {1}, shape}, shape});
    cases.push_back({"FusedElementwise", {{"program", "erf x0"}}, {shape}, shape});
  }
  ExpectAll(cases, 32000);
}

KERNEL_TEST(Float16_SoftmaxAndLayerNorm_BitIdenticalToFloat32RoundedOnce) {
  std::vector<Float16Case> cases;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    cases.push_back({op, {{"axis", 2}, {"coerce_2d", 0}}, {{3, 5, 77}}, {3, 5, 77}, -8, 8});
    cases.push_back({op, {{"axis", 1}, {"coerce_2d", 1}}, {{3, 5, 77}}, {3, 5, 77}, -8, 8});
    cases.push_back({op, {{"axis", 1}, {"coerce_2d", 0}}, {{3, 5, 77}}, {3, 5, 77}, -8, 8});  // strided
    cases.push_back({op, {{"axis", 1}, {"coerce_2d", 0}}, {{64, 197}}, {64, 197}, -8, 8});
  }
  const nlohmann::json ln = {{"axis", 2}, {"epsilon", 1e-5}, {"mean_output", 0}, {"inv_std_dev_output", 0}};
  cases.push_back({"LayerNormalization", ln, {{4, 33, 96}, {96}, {96}}, {4, 33, 96}});
  nlohmann::json ln2 = ln;
  ln2["axis"] = 1;
  cases.push_back({"LayerNormalization", ln2, {{200, 256}, {256}}, {200, 256}});  // no bias, over the pool
  cases.push_back({"LayerNormalization", ln2, {{4, 33, 96}, {1, 96}, {33, 1}}, {4, 33, 96}});  // broadcast params
  ExpectAll(cases, 33000);
}

// The float16 LayerNorm widens each row as it sums it (16 elements a step, then 4, then one at a
// time) and narrows Y in the normalization's store (8 a step, then one at a time): row lengths
// around every step, rows whose mean is large against their spread, and a row length past one
// chunk's grain, so rows go over the pool.
KERNEL_TEST(Float16_LayerNorm_EveryRowLength_BitIdenticalToFloat32RoundedOnce) {
  const nlohmann::json ln = {{"axis", 1}, {"epsilon", 1e-5}, {"mean_output", 0}, {"inv_std_dev_output", 0}};
  std::vector<Float16Case> cases;
  for (const int64_t inner : {1, 3, 4, 7, 8, 15, 16, 17, 20, 36, 96, 192, 769}) {
    cases.push_back({"LayerNormalization", ln, {{9, inner}, {inner}, {inner}}, {9, inner}});
    cases.push_back({"LayerNormalization", ln, {{5, inner}, {inner}, {inner}}, {5, inner}, 990, 1010});
  }
  cases.push_back({"LayerNormalization", ln, {{3136, 96}, {96}, {96}}, {3136, 96}});
  ExpectAll(cases, 33500);
}

KERNEL_TEST(Float16_Reduce_EveryWalk_BitIdenticalToFloat32RoundedOnce) {
  std::vector<Float16Case> cases;
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare"}) {
    cases.push_back({op, {{"axes", {2}}}, {{6, 7, 1100}}, {6, 7, 1}});          // long runs: pieces and a tail
    cases.push_back({op, {{"axes", {2, 3}}}, {{2, 4, 7, 9, 8}}, {2, 4, 1, 1, 8}});  // blocked: rows of short runs
    cases.push_back({op, {{"axes", {2, 3}}}, {{1, 2, 40, 30, 8}}, {1, 2, 1, 1, 8}});  // rows over several pieces
    // rows of 1073 runs: 16 batches of 64 and a tail of 49, no multiple of 4 (AddBlockedHalfRuns)
    cases.push_back({op, {{"axes", {2, 3}}}, {{2, 3, 37, 29, 8}}, {2, 3, 1, 1, 8}});
    cases.push_back({op, {{"axes", {0}}}, {{5, 3, 700}}, {1, 3, 700}});          // strided into many outputs
    cases.push_back({op, {{"axes", {1}}}, {{64, 50, 40}}, {64, 1, 40}});         // over the pool
    // EfficientNetB0's 7x7 squeeze mean: 1152 outputs narrowed in pieces of 512 and a tail, per
    // chunk of the pool; results past float16's range and in its subnormal range
    cases.push_back({op, {{"axes", {2, 3}}}, {{1, 144, 7, 7, 8}}, {1, 144, 1, 1, 8}});
    cases.push_back({op, {{"axes", {2, 3}}}, {{1, 144, 7, 7, 8}}, {1, 144, 1, 1, 8}, 1000, 60000});
    cases.push_back({op, {{"axes", {2, 3}}}, {{1, 144, 7, 7, 8}}, {1, 144, 1, 1, 8}, -2e-4, 2e-4});
  }
  ExpectAll(cases, 36000);
}

// The float16 adapter keeps float32 copies of weights: for every op it serves, with and without
// the inputs announced as weights, the bits stay those of float32 rounded once.
KERNEL_TEST(Float16_Adapter_ConstantInputs_BitIdenticalToFloat32RoundedOnce) {
  const nlohmann::json fused = {{"has_bias", 1}, {"has_sum", 0}, {"activation", "Relu"}, {"activation_params", nlohmann::json::array()}};
  std::vector<Float16Case> cases = {
      {"MatMul", nlohmann::json::object(), {{3, 40, 64}, {64, 48}}, {3, 40, 48}, -3, 3, {1}},
      {"MatMul", nlohmann::json::object(), {{3, 40, 64}, {64, 48}}, {3, 40, 48}},
      {"MatMul", nlohmann::json::object(), {{2, 2, 9, 16}, {2, 2, 16, 9}}, {2, 2, 9, 9}},  // attention-like
      {"FusedMatMul", fused, {{1, 64}, {64, 300}, {300}}, {1, 300}, -3, 3, {1, 2}},
      {"Gemm", {{"transA", 0}, {"transB", 1}, {"alpha", 0.5}, {"beta", 1.0}}, {{5, 64}, {30, 64}, {30}}, {5, 30},
       -3, 3, {1, 2}},
  };
  ExpectAll(cases, 34000);
}

// A weight's float32 copy belongs to its address: a kernel run on another device (other weight
// memory, here other bytes) widens that device's weights, and the first device's copy is still
// right afterwards.
KERNEL_TEST(Float16_Adapter_ConstantInputs_OneCopyPerAddress) {
  const Shape a_shape = {4, 32}, b_shape = {32, 24}, y_shape = {4, 24};
  const auto a = AsFloat16(RandomValues(NumElements(a_shape), -2, 2, 35000));
  std::vector<std::vector<double>> weights, expected;
  for (uint32_t device = 0; device < 6; ++device) {  // more devices than the copies kept
    weights.push_back(AsFloat16(RandomValues(NumElements(b_shape), -2, 2, 35001 + device)));
    expected.push_back(AsFloat16(KernelTester("MatMul")
                                     .AddInput(F32, a_shape, a)
                                     .AddInput(F32, b_shape, weights.back())
                                     .ConstantInput(1)
                                     .AddOutput(F32, y_shape, std::vector<double>(96))
                                     .RunAndGetOutput(0)));
  }
  const nlohmann::json no_attrs = nlohmann::json::object();
  KernelSpec spec{"MatMul", "test_node", {{F16, a_shape}, {F16, b_shape}}, {{F16, y_shape}},
                  tfpopef::Attrs(no_attrs, "op 'MatMul' (node 'test_node')")};
  spec.constant_inputs = {false, true};
  const std::unique_ptr<Kernel> kernel = KernelRegistry::Get().Create(spec);
  auto halves = [](const std::vector<double>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = FloatToHalf(static_cast<float>(v[i]));
    return h;
  };
  const std::vector<uint16_t> a16 = halves(a);
  std::vector<std::vector<uint16_t>> b16;
  for (const auto& w : weights) b16.push_back(halves(w));
  std::vector<uint8_t> scratch(kernel->scratch_bytes() + 64);
  void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  for (size_t device : {0, 1, 0, 2, 3, 4, 5, 0, 1, 5}) {
    std::vector<uint16_t> y(96);
    const void* inputs[] = {a16.data(), b16[device].data()};
    void* outputs[] = {y.data()};
    kernel->Run(KernelContext{inputs, outputs, aligned});
    for (size_t i = 0; i < y.size(); ++i)
      if (HalfToFloat(y[i]) != expected[device][i]) {
        Fail("device " + std::to_string(device) + ": output " + std::to_string(i) + " is " +
             std::to_string(HalfToFloat(y[i])) + ", expected " + std::to_string(expected[device][i]));
        break;
      }
  }
}

}  // namespace
}  // namespace test
}  // namespace tfpopef
