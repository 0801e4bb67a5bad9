// KernelRegistry::Create refuses a step carrying an attribute its kernel never read (a newer
// compiler's additive attribute, which could change the results): kInvalidArgument naming the
// op, the node and the attribute(s). Covered for a plain kernel, kernels wrapped by the float16
// adapter (whose inner kernel reads the attributes on a copy of the spec) and fused kernels, on
// every SIMD path. Run by the kernel_tests.cc binary (tests/cc/test_kernels_cc.py).
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tests/cc/simd_paths.h"

namespace tfpopef {
namespace test {
namespace {

nlohmann::json With(nlohmann::json attrs, const std::string& name, nlohmann::json value) {
  attrs[name] = std::move(value);
  return attrs;
}

const nlohmann::json kConv1x1 = {{"strides", {1, 1}}, {"dilations", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"group", 1}};
const nlohmann::json kFusedConv1x1 = With(With(kConv1x1, "has_bias", 0), "has_sum", 0);
const nlohmann::json kFusedMatMul = {{"activation", "Relu"}, {"has_bias", 0}, {"has_sum", 0}};

// A 1x1 convolution with weight 2 on [1, 1, 2, 2]: Y = 2·X (exact in float16).
KernelTester Conv1x1(const std::string& op, DType dtype, nlohmann::json attrs) {
  KernelTester t(op, "conv_node");
  t.Attrs(std::move(attrs))
      .AddInput(dtype, {1, 1, 2, 2}, {1, -2, 3, 0.5})
      .AddInput(dtype, {1, 1, 1, 1}, {2})
      .AddOutput(dtype, {1, 1, 2, 2}, {2, -4, 6, 1});
  return t;
}

// A [2, 3] x [3, 2] product of small integers (exact in float16), relu'd when fused.
KernelTester MatMul(const std::string& op, DType dtype, nlohmann::json attrs) {
  KernelTester t(op, "matmul_node");
  t.Attrs(std::move(attrs))
      .AddInput(dtype, {2, 3}, {1, 2, 3, -1, -2, -3})
      .AddInput(dtype, {3, 2}, {1, 0, 0, 1, 1, 1})
      .AddOutput(dtype, {2, 2}, op == "FusedMatMul" ? std::vector<double>{4, 5, 0, 0} : std::vector<double>{4, 5, -4, -5});
  return t;
}

}  // namespace

KERNEL_TEST(UnknownAttribute_PlainKernel_IsRefused) {
  ForEachSimdPath([] {
    KernelTester("Add", "add_node")
        .Attr("broadcast_mode", 1)
        .AddInput(F32, {2}, {1, 2})
        .AddInput(F32, {2}, {3, 4})
        .AddOutput(F32, {2}, {4, 6})
        .ExpectError(kInvalid, "unknown attribute 'broadcast_mode'");
    // MatMul reads no alpha (FusedMatMul does): a PopEF that scales a plain MatMul is refused,
    // every unread attribute named, in sorted order.
    MatMul("MatMul", F32, {{"zeta", 0}, {"alpha", 0.5}})
        .ExpectError(kInvalid, "unknown attributes 'alpha', 'zeta'");
    MatMul("MatMul", F32, nlohmann::json::object()).Run();
  });
}

KERNEL_TEST(UnknownAttribute_Float16Adapter_IsRefused) {
  ForEachSimdPath([] {
    // Conv float16 prepares its float32 kernel on a copy of the spec: the attributes that copy
    // reads count, an extra one does not.
    Conv1x1("Conv", F16, kConv1x1).Run();
    Conv1x1("Conv", F16, With(kConv1x1, "output_scale", 0.5)).ExpectError(kInvalid, "unknown attribute 'output_scale'");
    MatMul("MatMul", F16, nlohmann::json::object()).Run();
    MatMul("MatMul", F16, {{"alpha", 0.5}}).ExpectError(kInvalid, "unknown attribute 'alpha'");
  });
}

KERNEL_TEST(UnknownAttribute_FusedKernel_IsRefused) {
  ForEachSimdPath([] {
    for (DType dtype : {F32, F16}) {
      MatMul("FusedMatMul", dtype, kFusedMatMul).Run();
      MatMul("FusedMatMul", dtype, With(kFusedMatMul, "beta", 0.5)).ExpectError(kInvalid, "unknown attribute 'beta'");
      Conv1x1("FusedConv", dtype, kFusedConv1x1).Run();
      Conv1x1("FusedConv", dtype, With(kFusedConv1x1, "alpha", 0.5))
          .ExpectError(kInvalid, "unknown attribute 'alpha'");
    }
  });
}

KERNEL_TEST(UnknownAttribute_ErrorSaysWhatToDo) {
  KernelTester("Relu", "relu_node")
      .Attr("slope", 0.1)
      .AddInput(F32, {1}, {1})
      .AddOutput(F32, {1}, {1})
      .ExpectError(kInvalid, "written by a newer compiler");
}

}  // namespace test
}  // namespace tfpopef
