// Generic numpy-broadcast elementwise kernels for ops whose operand and result types differ
// (comparisons -> bool, Pow with an integer exponent, Where's bool condition). Add/Sub/Mul/
// Div keep their specialized loops in binary_elementwise.cc. `Op` is a functor with a const
// operator() taking the operands by value.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {

template <typename A, typename B, typename R, typename Op>
class BroadcastBinaryKernel final : public Kernel {
 public:
  BroadcastBinaryKernel(BroadcastPlan<2> plan, Op op) : plan_(std::move(plan)), op_(op) {}

  void Run(const KernelContext& ctx) const override {
    const A* a = static_cast<const A*>(ctx.inputs[0]);
    const B* b = static_cast<const B*>(ctx.inputs[1]);
    R* r = static_cast<R*>(ctx.outputs[0]);
    const int64_t sa = plan_.run_stride(0), sb = plan_.run_stride(1);
    ParallelFor(plan_.num_runs * plan_.run_length(), kStreamingGrain, [&](int64_t begin, int64_t end) {
      ForEachRunInRange(plan_, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
        const A* pa = a + off[0];
        const B* pb = b + off[1];
        R* pr = r + o;
        for (int64_t i = 0; i < n; ++i) pr[i] = op_(pa[i * sa], pb[i * sb]);
      });
    });
  }

 private:
  const BroadcastPlan<2> plan_;
  const Op op_;
};

template <typename C, typename T, typename Op>
class BroadcastTernaryKernel final : public Kernel {
 public:
  BroadcastTernaryKernel(BroadcastPlan<3> plan, Op op) : plan_(std::move(plan)), op_(op) {}

  void Run(const KernelContext& ctx) const override {
    const C* c = static_cast<const C*>(ctx.inputs[0]);
    const T* x = static_cast<const T*>(ctx.inputs[1]);
    const T* y = static_cast<const T*>(ctx.inputs[2]);
    T* r = static_cast<T*>(ctx.outputs[0]);
    const int64_t sc = plan_.run_stride(0), sx = plan_.run_stride(1), sy = plan_.run_stride(2);
    ParallelFor(plan_.num_runs * plan_.run_length(), kStreamingGrain, [&](int64_t begin, int64_t end) {
      ForEachRunInRange(plan_, begin, end, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n) {
        for (int64_t i = 0; i < n; ++i) r[o + i] = op_(c[off[0] + i * sc], x[off[1] + i * sx], y[off[2] + i * sy]);
      });
    });
  }

 private:
  const BroadcastPlan<3> plan_;
  const Op op_;
};

// The broadcast output shape of the step's inputs, checked against its output 0.
inline std::vector<int64_t> CheckedBroadcastOutput(const KernelSpec& spec) {
  std::vector<int64_t> out = spec.inputs.at(0).shape;
  for (size_t i = 1; i < spec.inputs.size(); ++i) {
    std::vector<int64_t> next;
    if (!BroadcastShapes(out, spec.inputs[i].shape, &next))
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input shapes are not broadcastable (input " +
                                                   std::to_string(i) + " " + ShapeToString(spec.inputs[i].shape) +
                                                   " against " + ShapeToString(out) + ")");
    out = next;
  }
  CheckOutputShape(spec, 0, out);
  return out;
}

// Calls fn(T{}) with the C++ type of a numeric or bool dtype (bool as uint8_t storage holding
// 0/1; float16 is not handled here: kernels route it through the float16 adapter first).
template <typename Fn>
auto DispatchNumeric(const KernelSpec& spec, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kInt16: return fn(int16_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kUInt16: return fn(uint16_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    case DType::kBool: return fn(bool{});
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(dtype));
}

}  // namespace kernels
}  // namespace tfpopef
