// Softmax, numerically stable (the max is subtracted before exp). Two ONNX flavours, chosen
// by the compiler through `coerce_2d`:
//   coerce_2d = 0 (opset >= 13): softmax along `axis`; the tensor is viewed as
//                 [outer, axis_dim, inner].
//   coerce_2d = 1 (opset < 13):  the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])]
//                 and softmax runs over each row, i.e. the same view with inner = 1.
// With inner == 1 each row is contiguous. Otherwise the axis is strided; the kernel walks it
// row by row (rows of `inner` contiguous elements) keeping a running max and sum per inner
// position in scratch, so every pass reads memory sequentially.
// LogSoftmax is the same kernel finishing with x − max − log(sum) instead of e / sum.
// float16 with contiguous rows computes in float32 a row at a time: the row is widened into the
// chunk's scratch and the result narrowed once (nearest even); a strided float16 axis goes
// through the float32 kernel (fp16_adapter.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace {

class SoftmaxKernel final : public Kernel {
 public:
  // half: float16 X and Y (inner == 1 only).
  SoftmaxKernel(int64_t outer, int64_t axis_dim, int64_t inner, bool log, bool half)
      : outer_(outer), n_(axis_dim), inner_(inner), log_(log), half_(half),
        // Slabs (rows when inner == 1) per chunk: exp dominates, so the math grain applies.
        grain_(ItemsPerChunk(axis_dim * inner, kMathGrain)),
        chunks_(ThreadPool::Global().NumChunks(outer, grain_)) {}

  // The strided path keeps a running max and sum per inner position: one pair per chunk; the
  // float16 path a float32 row of X and of Y per chunk.
  size_t scratch_bytes() const override {
    return 2 * static_cast<size_t>((inner_ > 1 ? inner_ : (half_ ? n_ : 0)) * chunks_) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    if (n_ == 0 || inner_ == 0) return;
    if (half_) {
      const auto* xh = static_cast<const uint16_t*>(ctx.inputs[0]);
      auto* yh = static_cast<uint16_t*>(ctx.outputs[0]);
      ParallelForChunks(outer_, grain_, [&](int64_t chunk, int64_t begin, int64_t end) {
        float* xr = static_cast<float*>(ctx.scratch) + 2 * n_ * chunk;
        float* yr = xr + n_;
        for (int64_t o = begin; o < end; ++o) {
          WidenHalfToFloat(xh + o * n_, xr, n_);
          SoftmaxRow(xr, yr);
          NarrowFloatToHalf(yr, yh + o * n_, n_);
        }
      });
      return;
    }
    if (inner_ == 1) {
      ParallelFor(outer_, grain_, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) SoftmaxRow(x + o * n_, y + o * n_);
      });
      return;
    }
    ParallelForChunks(outer_, grain_, [&](int64_t chunk, int64_t begin, int64_t end) {
      float* max = static_cast<float*>(ctx.scratch) + 2 * inner_ * chunk;
      for (int64_t o = begin; o < end; ++o) StridedSlab(x + o * n_ * inner_, y + o * n_ * inner_, max, max + inner_);
    });
  }

 private:
  void StridedSlab(const float* xs, float* ys, float* max, float* sum) const {
    std::copy(xs, xs + inner_, max);
    for (int64_t k = 1; k < n_; ++k)
      for (int64_t i = 0; i < inner_; ++i) max[i] = std::max(max[i], xs[k * inner_ + i]);
    std::fill(sum, sum + inner_, 0.0f);
    for (int64_t k = 0; k < n_; ++k) {
      float* row = ys + k * inner_;
      for (int64_t i = 0; i < inner_; ++i) row[i] = xs[k * inner_ + i] - max[i];
      vmath::Exp(row, row, inner_);
      for (int64_t i = 0; i < inner_; ++i) sum[i] += row[i];
    }
    if (log_) {
      for (int64_t i = 0; i < inner_; ++i) sum[i] = max[i] + std::log(sum[i]);
      for (int64_t k = 0; k < n_; ++k)
        for (int64_t i = 0; i < inner_; ++i) ys[k * inner_ + i] = xs[k * inner_ + i] - sum[i];
      return;
    }
    for (int64_t i = 0; i < inner_; ++i) sum[i] = 1.0f / sum[i];
    for (int64_t k = 0; k < n_; ++k)
      for (int64_t i = 0; i < inner_; ++i) ys[k * inner_ + i] *= sum[i];
  }

  void SoftmaxRow(const float* x, float* y) const {
    const float max = vmath::Max(x, n_);
    const float sum = vmath::ExpShiftedSum(x, y, n_, max);
    if (log_) {
      const float shift = max + std::log(sum);
      for (int64_t i = 0; i < n_; ++i) y[i] = x[i] - shift;
      return;
    }
    const float scale = 1.0f / sum;
    for (int64_t i = 0; i < n_; ++i) y[i] *= scale;
  }

  const int64_t outer_, n_, inner_;
  const bool log_, half_;
  const int64_t grain_, chunks_;
};

// The tensor as [outer, axis_dim, inner].
std::array<int64_t, 3> SoftmaxView(const KernelSpec& spec) {
  const auto& shape = spec.inputs[0].shape;
  CheckOutputShape(spec, 0, shape);
  const bool coerce_2d = CheckedFlag(spec, "coerce_2d");
  const size_t axis = static_cast<size_t>(CheckedAxis(spec, "axis", shape.size()));
  const int64_t outer = Product(shape, 0, axis);
  if (coerce_2d) return {outer, Product(shape, axis, shape.size()), 1};
  return {outer, shape[axis], Product(shape, axis + 1, shape.size())};
}

template <bool kLog>
std::unique_ptr<Kernel> CreateSoftmaxKernel(const KernelSpec& spec) {
  const std::array<int64_t, 3> view = SoftmaxView(spec);
  vmath::ActivePath();  // a bad TF_POPEF_SIMD fails here, at prepare
  return std::make_unique<SoftmaxKernel>(view[0], view[1], view[2], kLog, spec.inputs[0].dtype == DType::kFloat16);
}

template <bool kLog>
std::unique_ptr<Kernel> CreateSoftmax(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  if (spec.inputs[0].dtype == DType::kFloat16 && SoftmaxView(spec)[2] == 1) return CreateSoftmaxKernel<kLog>(spec);
  return WithFloat16Support(spec, CreateSoftmaxKernel<kLog>);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Softmax", CreateSoftmax<false>);
TFPOPEF_REGISTER_KERNEL("LogSoftmax", CreateSoftmax<true>);

}  // namespace kernels
}  // namespace tfpopef
