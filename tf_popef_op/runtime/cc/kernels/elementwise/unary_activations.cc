// Elementwise activations: Relu (float32, float16, int32, int64), Sigmoid and Tanh (float32,
// float16). float16 runs the float32 code on pieces widened in L1 (fp16_pieces.h).
#include <cstdint>
#include <memory>
#include <type_traits>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_pieces.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace {

struct ReluOp {
  template <typename T>
  T operator()(T x) const { return activation::Relu(x); }
};

// The transcendental ops run whole arrays through vector_math.h (AVX2 when available).
struct SigmoidOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n) { vmath::Sigmoid(x, y, n); }
};

struct TanhOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n) { vmath::Tanh(x, y, n); }
};

// T = uint16_t: float16 storage, computed as float32.
template <typename T, typename Op>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(int64_t numel) : numel_(numel) {}

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    if constexpr (std::is_same_v<T, uint16_t>) {
      ParallelFor(numel_, std::is_same_v<Op, ReluOp> ? kStreamingGrain : kMathGrain, [&](int64_t begin, int64_t end) {
        MapHalfPieces(x, y, begin, end, [](const float* in, float* out, int64_t n) {
          if constexpr (std::is_same_v<Op, ReluOp>) {
            const Op op;
            for (int64_t i = 0; i < n; ++i) out[i] = op(in[i]);
          } else {
            Op::Apply(in, out, n);
          }
        });
      });
    } else if constexpr (std::is_same_v<Op, ReluOp>) {
      ParallelFor(numel_, kStreamingGrain, [&](int64_t begin, int64_t end) {
        const Op op;
        for (int64_t i = begin; i < end; ++i) y[i] = op(x[i]);
      });
    } else {
      ParallelFor(numel_, Op::kGrain, [&](int64_t begin, int64_t end) { Op::Apply(x + begin, y + begin, end - begin); });
    }
  }

 private:
  const int64_t numel_;
};

template <typename Op>
std::unique_ptr<Kernel> CreateUnaryKernel(const KernelSpec& spec) {
  CheckOutputShape(spec, 0, spec.inputs[0].shape);
  vmath::ActivePath();  // a bad TF_POPEF_SIMD fails here, at prepare
  const int64_t n = spec.inputs[0].numel();
  switch (spec.inputs[0].dtype) {
    case DType::kFloat32: return std::make_unique<UnaryKernel<float, Op>>(n);
    case DType::kFloat16: return std::make_unique<UnaryKernel<uint16_t, Op>>(n);
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
  return CreateUnaryKernel<ReluOp>(spec);
}

template <typename Op>
std::unique_ptr<Kernel> CreateFloatUnary(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateUnaryKernel<Op>(spec);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Relu", CreateRelu);
TFPOPEF_REGISTER_KERNEL("Sigmoid", CreateFloatUnary<SigmoidOp>);
TFPOPEF_REGISTER_KERNEL("Tanh", CreateFloatUnary<TanhOp>);

}  // namespace kernels
}  // namespace tfpopef
