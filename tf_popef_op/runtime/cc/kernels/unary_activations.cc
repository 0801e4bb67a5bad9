// Elementwise activations: Relu (float32, float16, int32, int64), Sigmoid and Tanh (float32,
// float16). float16 goes through the float32 kernels (fp16_adapter.h).
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "tf_popef_op/runtime/cc/kernels/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"

namespace tfpopef {
namespace kernels {
namespace {

struct ReluOp {
  // `x < 0 ? 0 : x` rather than max(): NaN stays NaN, as in numpy.maximum(x, 0).
  template <typename T>
  T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

struct SigmoidOp {
  // exp of a non-positive argument only, so neither branch overflows: 1/(1+e^-x) for x >= 0,
  // e^x/(1+e^x) for x < 0 (saturates to 0 for very negative x instead of 1/inf tricks).
  float operator()(float x) const {
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
};

struct TanhOp {
  float operator()(float x) const { return std::tanh(x); }
};

template <typename T, typename Op>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(int64_t numel) : numel_(numel) {}

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    const Op op;
    for (int64_t i = 0; i < numel_; ++i) y[i] = op(x[i]);
  }

 private:
  const int64_t numel_;
};

// Builds the kernel once float16 has been mapped to float32 by the adapter.
template <typename Op>
std::unique_ptr<Kernel> CreateUnaryNoFloat16(const KernelSpec& spec) {
  CheckOutputShape(spec, 0, spec.inputs[0].shape);
  const int64_t n = spec.inputs[0].numel();
  switch (spec.inputs[0].dtype) {
    case DType::kFloat32: return std::make_unique<UnaryKernel<float, Op>>(n);
    case DType::kInt32:
      if constexpr (std::is_same_v<Op, ReluOp>) return std::make_unique<UnaryKernel<int32_t, Op>>(n);
      break;
    case DType::kInt64:
      if constexpr (std::is_same_v<Op, ReluOp>) return std::make_unique<UnaryKernel<int64_t, Op>>(n);
      break;
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

std::unique_ptr<Kernel> CreateRelu(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kInt32, DType::kInt64});
  return WithFloat16Support(spec, CreateUnaryNoFloat16<ReluOp>);
}

template <typename Op>
std::unique_ptr<Kernel> CreateFloatUnary(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateUnaryNoFloat16<Op>);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Relu", CreateRelu);
TFPOPEF_REGISTER_KERNEL("Sigmoid", CreateFloatUnary<SigmoidOp>);
TFPOPEF_REGISTER_KERNEL("Tanh", CreateFloatUnary<TanhOp>);

}  // namespace kernels
}  // namespace tfpopef
