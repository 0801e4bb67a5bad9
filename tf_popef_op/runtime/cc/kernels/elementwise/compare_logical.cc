// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual: numeric or bool operands of
// one dtype, bool result), logical ops (And, Or, Xor: bool; Not: bool), Where (bool condition,
// any value dtype) and Pow (float or integer base and exponent of possibly different dtypes,
// computed in double and converted to the base's dtype, as onnxruntime does). All broadcast
// like numpy; float16 operands are widened to float32 by the float16 adapter.
#include <cmath>
#include <cstdint>
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

namespace tfpopef {
namespace kernels {
namespace {

const std::initializer_list<DType> kComparable = {
    DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,   DType::kInt16,  DType::kInt32,
    DType::kInt64,   DType::kUInt8,   DType::kUInt16,  DType::kUInt32, DType::kUInt64, DType::kBool};

struct EqualOp { template <typename T> bool operator()(T a, T b) const { return a == b; } };
struct LessOp { template <typename T> bool operator()(T a, T b) const { return a < b; } };
struct GreaterOp { template <typename T> bool operator()(T a, T b) const { return a > b; } };
struct LessOrEqualOp { template <typename T> bool operator()(T a, T b) const { return a <= b; } };
struct GreaterOrEqualOp { template <typename T> bool operator()(T a, T b) const { return a >= b; } };
struct AndOp { bool operator()(bool a, bool b) const { return a && b; } };
struct OrOp { bool operator()(bool a, bool b) const { return a || b; } };
struct XorOp { bool operator()(bool a, bool b) const { return a != b; } };

template <typename Op>
std::unique_ptr<Kernel> CreateFloat32Comparison(const KernelSpec& spec) {
  const std::vector<int64_t> out = CheckedBroadcastOutput(spec);
  BroadcastPlan<2> plan = MakeBroadcastPlan<2>(out, {spec.inputs[0].shape, spec.inputs[1].shape}, spec.Where());
  return DispatchNumeric(spec, spec.inputs[0].dtype, [&](auto t) -> std::unique_ptr<Kernel> {
    using T = decltype(t);
    return std::make_unique<BroadcastBinaryKernel<T, T, bool, Op>>(std::move(plan), Op{});
  });
}

template <typename Op>
std::unique_ptr<Kernel> CreateComparison(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckDType(spec, "input 0", spec.inputs[0].dtype, kComparable);
  if (spec.inputs[1].dtype != spec.inputs[0].dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": operands have dtypes " +
                                                 DTypeName(spec.inputs[0].dtype) + " and " +
                                                 DTypeName(spec.inputs[1].dtype) + "; they must be the same");
  CheckDType(spec, "output 0", spec.outputs[0].dtype, {DType::kBool});
  return WithFloat16Support(spec, CreateFloat32Comparison<Op>);
}

template <typename Op>
std::unique_ptr<Kernel> CreateLogical(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckSameDType(spec, {DType::kBool});
  const std::vector<int64_t> out = CheckedBroadcastOutput(spec);
  return std::make_unique<BroadcastBinaryKernel<bool, bool, bool, Op>>(
      MakeBroadcastPlan<2>(out, {spec.inputs[0].shape, spec.inputs[1].shape}, spec.Where()), Op{});
}

class NotKernel final : public Kernel {
 public:
  explicit NotKernel(int64_t n) : n_(n) {}
  void Run(const KernelContext& ctx) const override {
    const bool* x = static_cast<const bool*>(ctx.inputs[0]);
    bool* y = static_cast<bool*>(ctx.outputs[0]);
    for (int64_t i = 0; i < n_; ++i) y[i] = !x[i];
  }

 private:
  const int64_t n_;
};

std::unique_ptr<Kernel> CreateNot(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kBool});
  CheckOutputShape(spec, 0, spec.inputs[0].shape);
  return std::make_unique<NotKernel>(spec.inputs[0].numel());
}

struct SelectOp {
  template <typename T>
  T operator()(bool c, T x, T y) const { return c ? x : y; }
};

std::unique_ptr<Kernel> CreateWhere(const KernelSpec& spec) {
  CheckArity(spec, 3, 3, 1);
  CheckDType(spec, "input 0 (condition)", spec.inputs[0].dtype, {DType::kBool});
  const DType t = spec.inputs[1].dtype;
  if (spec.inputs[2].dtype != t || spec.outputs[0].dtype != t)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": X, Y and the output must have one dtype");
  const std::vector<int64_t> out = CheckedBroadcastOutput(spec);
  BroadcastPlan<3> plan =
      MakeBroadcastPlan<3>(out, {spec.inputs[0].shape, spec.inputs[1].shape, spec.inputs[2].shape}, spec.Where());
  switch (DTypeSize(t)) {  // values are only moved, so any dtype of the same width will do
    case 1: return std::make_unique<BroadcastTernaryKernel<bool, uint8_t, SelectOp>>(std::move(plan), SelectOp{});
    case 2: return std::make_unique<BroadcastTernaryKernel<bool, uint16_t, SelectOp>>(std::move(plan), SelectOp{});
    case 4: return std::make_unique<BroadcastTernaryKernel<bool, uint32_t, SelectOp>>(std::move(plan), SelectOp{});
    default: return std::make_unique<BroadcastTernaryKernel<bool, uint64_t, SelectOp>>(std::move(plan), SelectOp{});
  }
}

template <typename R>
struct PowOp {
  template <typename A, typename B>
  R operator()(A a, B b) const { return static_cast<R>(std::pow(static_cast<double>(a), static_cast<double>(b))); }
};

const std::initializer_list<DType> kPowTypes = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32,
                                                DType::kInt64, DType::kUInt32, DType::kUInt64};

std::unique_ptr<Kernel> CreateFloat32Pow(const KernelSpec& spec) {
  const std::vector<int64_t> out = CheckedBroadcastOutput(spec);
  BroadcastPlan<2> plan = MakeBroadcastPlan<2>(out, {spec.inputs[0].shape, spec.inputs[1].shape}, spec.Where());
  return DispatchNumeric(spec, spec.inputs[0].dtype, [&](auto a) -> std::unique_ptr<Kernel> {
    using A = decltype(a);
    return DispatchNumeric(spec, spec.inputs[1].dtype, [&](auto b) -> std::unique_ptr<Kernel> {
      using B = decltype(b);
      return std::make_unique<BroadcastBinaryKernel<A, B, A, PowOp<A>>>(plan, PowOp<A>{});
    });
  });
}

std::unique_ptr<Kernel> CreatePow(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckDType(spec, "input 0 (base)", spec.inputs[0].dtype, kPowTypes);
  CheckDType(spec, "input 1 (exponent)", spec.inputs[1].dtype, kPowTypes);
  if (spec.outputs[0].dtype != spec.inputs[0].dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": the output must have the base's dtype");
  return WithFloat16Support(spec, CreateFloat32Pow);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Equal", CreateComparison<EqualOp>);
TFPOPEF_REGISTER_KERNEL("Less", CreateComparison<LessOp>);
TFPOPEF_REGISTER_KERNEL("Greater", CreateComparison<GreaterOp>);
TFPOPEF_REGISTER_KERNEL("LessOrEqual", CreateComparison<LessOrEqualOp>);
TFPOPEF_REGISTER_KERNEL("GreaterOrEqual", CreateComparison<GreaterOrEqualOp>);
TFPOPEF_REGISTER_KERNEL("And", CreateLogical<AndOp>);
TFPOPEF_REGISTER_KERNEL("Or", CreateLogical<OrOp>);
TFPOPEF_REGISTER_KERNEL("Xor", CreateLogical<XorOp>);
TFPOPEF_REGISTER_KERNEL("Not", CreateNot);
TFPOPEF_REGISTER_KERNEL("Where", CreateWhere);
TFPOPEF_REGISTER_KERNEL("Pow", CreatePow);

}  // namespace kernels
}  // namespace tfpopef
