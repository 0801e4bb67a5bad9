// Inference normalizations on float32 (float16 via the float32 kernel, except LayerNormalization
// with Y alone, which widens each row in scratch and rounds Y once):
// - BatchNormalization: X [N, C, ...], per-channel scale, B, mean, var [C]:
//   y = (x − mean) / sqrt(var + epsilon) · scale + B, folded per channel into y = a·x + b.
// - LayerNormalization: normalizes over the trailing dims [axis:] of X (viewed as
//   [outer, inner]); Scale and optional B broadcast to those dims (the compiler checks they
//   are full [inner] tensors or broadcastable; the kernel takes them unidirectionally
//   broadcast to [inner] with a BroadcastPlan). Optional outputs Mean and InvStdDev have X's
//   shape with the normalized dims set to 1 (attrs `mean_output` / `inv_std_dev_output` say
//   which of them the step writes, in that order after Y). Statistics are computed in double;
//   y = ((x − m_hi) − m_lo) · inv_std · scale + bias in float, m_hi + m_lo the double mean split
//   into two floats: x − m_hi is exact where x is near the mean (Sterbenz), so a large mean
//   with a small spread keeps its deviations as the double subtraction did. Each row's
//   statistics and normalization run 8 floats at a time on the AVX2 and AVX-512 paths
//   (vector_math.h's SimdPath), the same formulas in scalar code on the portable path.
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TFPOPEF_LAYERNORM_AVX2 1
#endif

namespace tfpopef {
namespace kernels {
namespace {

// A row's mean and (population) variance, in double.
struct RowStats {
  double mean, var;
};

// The row normalized: y[i] = ((x[i] − mean_hi) − mean_lo) · inv_std · scale[i] + bias[i].
struct RowAffine {
  float mean_hi, mean_lo, inv_std;
};

RowAffine MakeRowAffine(const RowStats& s, float epsilon) {
  const float hi = static_cast<float>(s.mean);
  return {hi, static_cast<float>(s.mean - hi), static_cast<float>(1.0 / std::sqrt(s.var + epsilon))};
}

// Portable: sums in double with four independent accumulators, so the additions overlap
// instead of each waiting for the previous one.
RowStats PortableRowStats(const float* x, int64_t n) {
  if (n == 0) return {0.0, 0.0};
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += x[i + k];
  for (; i < n; ++i) acc[0] += x[i];
  const double mean = ((acc[0] + acc[1]) + (acc[2] + acc[3])) / static_cast<double>(n);
  for (double& a : acc) a = 0.0;
  for (i = 0; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += (x[i + k] - mean) * (x[i + k] - mean);
  for (; i < n; ++i) acc[0] += (x[i] - mean) * (x[i] - mean);
  return {mean, ((acc[0] + acc[1]) + (acc[2] + acc[3])) / static_cast<double>(n)};
}

void PortableNormalizeRow(const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                          const float* bias) {
  for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std * scale[i] + bias[i];
}

}  // namespace

#ifdef TFPOPEF_LAYERNORM_AVX2
TFPOPEF_TARGET_BEGIN("avx2,fma")
namespace {

inline __m256d Widen(__m128 v) { return _mm256_cvtps_pd(v); }

// 8 floats per step into four double accumulators (two per half), then the scalar tail.
RowStats Avx2RowStats(const float* x, int64_t n) {
  if (n == 0) return {0.0, 0.0};
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_pd(s0, Widen(_mm_loadu_ps(x + i)));
    s1 = _mm256_add_pd(s1, Widen(_mm_loadu_ps(x + i + 4)));
    s2 = _mm256_add_pd(s2, Widen(_mm_loadu_ps(x + i + 8)));
    s3 = _mm256_add_pd(s3, Widen(_mm_loadu_ps(x + i + 12)));
  }
  for (; i + 4 <= n; i += 4) s0 = _mm256_add_pd(s0, Widen(_mm_loadu_ps(x + i)));
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  const __m256d m = _mm256_set1_pd(mean);
  s0 = s1 = s2 = s3 = _mm256_setzero_pd();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m256d d0 = _mm256_sub_pd(Widen(_mm_loadu_ps(x + i)), m);
    const __m256d d1 = _mm256_sub_pd(Widen(_mm_loadu_ps(x + i + 4)), m);
    const __m256d d2 = _mm256_sub_pd(Widen(_mm_loadu_ps(x + i + 8)), m);
    const __m256d d3 = _mm256_sub_pd(Widen(_mm_loadu_ps(x + i + 12)), m);
    s0 = _mm256_fmadd_pd(d0, d0, s0);
    s1 = _mm256_fmadd_pd(d1, d1, s1);
    s2 = _mm256_fmadd_pd(d2, d2, s2);
    s3 = _mm256_fmadd_pd(d3, d3, s3);
  }
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_sub_pd(Widen(_mm_loadu_ps(x + i)), m);
    s0 = _mm256_fmadd_pd(d, d, s0);
  }
  _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  double ssd = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) ssd += (x[i] - mean) * (x[i] - mean);
  return {mean, ssd / static_cast<double>(n)};
}

void Avx2NormalizeRow(const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                      const float* bias) {
  const __m256 hi = _mm256_set1_ps(a.mean_hi), lo = _mm256_set1_ps(a.mean_lo), r = _mm256_set1_ps(a.inv_std);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), hi), lo);
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_mul_ps(d, r), _mm256_loadu_ps(scale + i), _mm256_loadu_ps(bias + i)));
  }
  // Same operations one at a time (fused multiply-add included), so the tail matches the vector body.
  for (; i < n; ++i) y[i] = std::fma(((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std, scale[i], bias[i]);
}

}  // namespace
TFPOPEF_TARGET_END()
#endif

namespace {

RowStats RowStatistics(bool simd, const float* x, int64_t n) {
#ifdef TFPOPEF_LAYERNORM_AVX2
  if (simd) return Avx2RowStats(x, n);
#endif
  (void)simd;
  return PortableRowStats(x, n);
}

void NormalizeRow(bool simd, const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                  const float* bias) {
#ifdef TFPOPEF_LAYERNORM_AVX2
  if (simd) return Avx2NormalizeRow(x, y, n, a, scale, bias);
#endif
  (void)simd;
  PortableNormalizeRow(x, y, n, a, scale, bias);
}

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(int64_t n, int64_t c, int64_t inner, float epsilon) : n_(n), c_(c), inner_(inner), eps_(epsilon) {}

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    const float* scale = static_cast<const float*>(ctx.inputs[1]);
    const float* bias = static_cast<const float*>(ctx.inputs[2]);
    const float* mean = static_cast<const float*>(ctx.inputs[3]);
    const float* var = static_cast<const float*>(ctx.inputs[4]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    // One plane (image × channel) per item, in memory order.
    ParallelFor(n_ * c_, ItemsPerChunk(inner_, kStreamingGrain), [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const int64_t c = plane % c_;
        const float a = scale[c] / std::sqrt(var[c] + eps_);
        const float b = bias[c] - mean[c] * a;
        const float* xp = x + plane * inner_;
        float* yp = y + plane * inner_;
        for (int64_t i = 0; i < inner_; ++i) yp[i] = a * xp[i] + b;
      }
    });
  }

 private:
  const int64_t n_, c_, inner_;
  const float eps_;
};

std::unique_ptr<Kernel> CreateFloat32BatchNorm(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  if (x.size() < 2)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + ShapeToString(x) + " must be [N, C, ...]");
  CheckOutputShape(spec, 0, x);
  for (size_t i = 1; i < 5; ++i)
    if (spec.inputs[i].shape != std::vector<int64_t>{x[1]})
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + std::to_string(i) + " has shape " +
                                                   ShapeToString(spec.inputs[i].shape) + ", expected [" +
                                                   std::to_string(x[1]) + "] (one value per channel)");
  return std::make_unique<BatchNormKernel>(x[0], x[1], Product(x, 2, x.size()), spec.attrs.Float("epsilon"));
}

std::unique_ptr<Kernel> CreateBatchNorm(const KernelSpec& spec) {
  CheckArity(spec, 5, 5, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32BatchNorm);
}

class LayerNormKernel final : public Kernel {
 public:
  // half: float16 X, scale, bias and Y (no mean / inv_std outputs), computed in float32 a row at
  // a time in the chunk's scratch and rounded once.
  LayerNormKernel(int64_t outer, int64_t inner, float epsilon, BroadcastPlan<2> params, bool has_bias,
                  bool mean_output, bool inv_std_output, bool half)
      : outer_(outer), inner_(inner), eps_(epsilon), params_(std::move(params)), has_bias_(has_bias),
        mean_output_(mean_output), inv_std_output_(inv_std_output), half_(half),
        grain_(ItemsPerChunk(inner_, kStreamingGrain / 4)), chunks_(ThreadPool::Global().NumChunks(outer_, grain_)) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(2 + (half_ ? 2 * chunks_ : 0)) * static_cast<size_t>(inner_) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    // Scale and bias broadcast to [inner] once per run into scratch.
    float* scale = static_cast<float*>(ctx.scratch);
    float* bias = scale + inner_;
    const auto param = [&](size_t input, int64_t at) -> float {
      if (half_) return HalfToFloat(static_cast<const uint16_t*>(ctx.inputs[input])[at]);
      return static_cast<const float*>(ctx.inputs[input])[at];
    };
    ForEachRun(params_, [&](int64_t o, const std::array<int64_t, 2>& off) {
      for (int64_t i = 0; i < params_.run_length(); ++i) {
        scale[o + i] = param(1, off[0] + i * params_.run_stride(0));
        bias[o + i] = has_bias_ ? param(2, off[1] + i * params_.run_stride(1)) : 0.0f;
      }
    });
    size_t next = 1;
    float* mean_out = mean_output_ ? static_cast<float*>(ctx.outputs[next++]) : nullptr;
    float* inv_std_out = inv_std_output_ ? static_cast<float*>(ctx.outputs[next++]) : nullptr;
    const bool simd = vmath::UsesAvx2(vmath::ActivePath());
    ParallelForChunks(outer_, grain_, [&](int64_t chunk, int64_t begin, int64_t end) {
      float* rows = bias + inner_ + 2 * inner_ * chunk;  // float16: this chunk's X and Y row
      for (int64_t o = begin; o < end; ++o) {
        const float* xr = static_cast<const float*>(ctx.inputs[0]) + o * inner_;
        float* yr = static_cast<float*>(ctx.outputs[0]) + o * inner_;
        if (half_) {
          WidenHalfToFloat(static_cast<const uint16_t*>(ctx.inputs[0]) + o * inner_, rows, inner_);
          xr = rows;
          yr = rows + inner_;
        }
        const RowStats stats = RowStatistics(simd, xr, inner_);
        const RowAffine affine = MakeRowAffine(stats, eps_);
        NormalizeRow(simd, xr, yr, inner_, affine, scale, bias);
        if (mean_out) mean_out[o] = static_cast<float>(stats.mean);
        if (inv_std_out) inv_std_out[o] = affine.inv_std;
        if (half_) NarrowFloatToHalf(yr, static_cast<uint16_t*>(ctx.outputs[0]) + o * inner_, inner_);
      }
    });
  }

 private:
  const int64_t outer_, inner_;
  const float eps_;
  const BroadcastPlan<2> params_;
  const bool has_bias_, mean_output_, inv_std_output_, half_;
  const int64_t grain_, chunks_;
};

std::unique_ptr<Kernel> CreateLayerNormKernel(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  const size_t axis = static_cast<size_t>(CheckedAxis(spec, "axis", x.size()));
  const bool mean_output = CheckedFlag(spec, "mean_output"), inv_std_output = CheckedFlag(spec, "inv_std_dev_output");
  const size_t expected_outputs = 1 + mean_output + inv_std_output;
  if (spec.outputs.size() != expected_outputs)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expects " + std::to_string(expected_outputs) +
                                                 " outputs (mean_output/inv_std_dev_output), got " +
                                                 std::to_string(spec.outputs.size()));
  CheckOutputShape(spec, 0, x);
  std::vector<int64_t> stats_shape = x;
  for (size_t d = axis; d < x.size(); ++d) stats_shape[d] = 1;
  for (size_t i = 1; i < spec.outputs.size(); ++i) CheckOutputShape(spec, i, stats_shape);
  const std::vector<int64_t> normalized(x.begin() + static_cast<std::ptrdiff_t>(axis), x.end());
  const bool has_bias = spec.inputs.size() == 3;
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    if (!BroadcastsTo(spec.inputs[i].shape, normalized))
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + std::to_string(i) + " has shape " +
                                                   ShapeToString(spec.inputs[i].shape) +
                                                   ", which does not broadcast to the normalized dims " +
                                                   ShapeToString(normalized));
  BroadcastPlan<2> params = MakeBroadcastPlan<2>(
      normalized, {spec.inputs[1].shape, has_bias ? spec.inputs[2].shape : std::vector<int64_t>{}}, spec.Where());
  return std::make_unique<LayerNormKernel>(Product(x, 0, axis), Product(x, axis, x.size()),
                                           spec.attrs.Float("epsilon"), std::move(params), has_bias, mean_output,
                                           inv_std_output, spec.inputs[0].dtype == DType::kFloat16);
}

std::unique_ptr<Kernel> CreateLayerNorm(const KernelSpec& spec) {
  if (spec.inputs.size() < 2 || spec.inputs.size() > 3 || spec.outputs.empty() || spec.outputs.size() > 3)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expects 2..3 inputs and 1..3 outputs, got " +
                                                 std::to_string(spec.inputs.size()) + " and " +
                                                 std::to_string(spec.outputs.size()));
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  // float16 natively when Y is the only output (the statistics outputs go through the adapter).
  if (spec.inputs[0].dtype == DType::kFloat16 && spec.outputs.size() == 1) return CreateLayerNormKernel(spec);
  return WithFloat16Support(spec, CreateLayerNormKernel);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("BatchNormalization", CreateBatchNorm);
TFPOPEF_REGISTER_KERNEL("LayerNormalization", CreateLayerNorm);

}  // namespace kernels
}  // namespace tfpopef
