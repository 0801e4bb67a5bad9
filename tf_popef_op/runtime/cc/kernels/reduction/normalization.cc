// Inference normalizations on float32 (float16 via the float32 kernel, except LayerNormalization
// with Y alone, which widens each X row as it sums it and rounds Y once as it stores it):
// - BatchNormalization: X [N, C, ...], per-channel scale, B, mean, var [C]:
//   y = (x − mean) / sqrt(var + epsilon) · scale + B, folded per channel into y = a·x + b.
// - LayerNormalization: normalizes over the trailing dims [axis:] of X (viewed as
//   [outer, inner]); Scale and optional B broadcast to those dims (the compiler checks they
//   are full [inner] tensors or broadcastable; the kernel takes them unidirectionally
//   broadcast to [inner] with a BroadcastPlan). Optional outputs Mean and InvStdDev have X's
//   shape with the normalized dims set to 1 (attrs `mean_output` / `inv_std_dev_output` say
//   which of them the step writes, in that order after Y). Statistics are computed in float
//   in two passes: m_hi = Σx / n, then with d = x − m_hi the sums Σd and Σd², m_lo = Σd / n and
//   var = Σd² / n − m_lo² (the second pass corrects the first's rounding: x − m_hi is exact where
//   x is near the mean (Sterbenz), so a large mean with a small spread keeps its deviations);
//   y = ((x − m_hi) − m_lo) · inv_std · scale + bias. Each row's passes run 8 floats at a time
//   in four accumulators on the AVX2 and AVX-512 paths (vector_math.h's SimdPath), the same
//   formulas in scalar code on the portable path. A float16 row is widened into an L1 row as
//   its sum is taken (vcvtph2ps) and Y narrowed in the normalization's store (vcvtps2ph), the
//   rest as float32, so its Y is float32's rounded once.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/home_ranges.h"
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

// The row's mean as m_hi + m_lo (m_hi the first pass's, m_lo the second's correction) and
// its population variance.
struct RowStats {
  float mean_hi, mean_lo, var;
};

// The row normalized: y[i] = ((x[i] − mean_hi) − mean_lo) · inv_std · scale[i] + bias[i].
struct RowAffine {
  float mean_hi, mean_lo, inv_std;
};

RowAffine MakeRowAffine(const RowStats& s, float epsilon) {
  return {s.mean_hi, s.mean_lo, static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.var) + epsilon))};
}

// From the first pass's Σx and the second's Σd, Σd² (d = x − Σx / n). The variance is clamped
// at 0: for a constant row both terms are the same tiny square.
RowStats FinishRowStats(float mean_hi, float sum_d, float sum_d2, int64_t n) {
  const float inv_n = 1.0f / static_cast<float>(n);
  const float mean_lo = sum_d * inv_n;
  return {mean_hi, mean_lo, std::max(0.0f, sum_d2 * inv_n - mean_lo * mean_lo)};
}

// Y as float32, or narrowed to float16 (nearest even) as it is stored.
inline void SetElement(float* y, int64_t i, float v) { y[i] = v; }
inline void SetElement(uint16_t* y, int64_t i, float v) { y[i] = FloatToHalf(v); }

// Portable: the two passes with four independent accumulators, so the additions overlap
// instead of each waiting for the previous one.
RowStats PortableRowStats(const float* x, int64_t n) {
  if (n == 0) return {0.0f, 0.0f, 0.0f};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += x[i + k];
  for (; i < n; ++i) acc[0] += x[i];
  const float mean_hi = ((acc[0] + acc[1]) + (acc[2] + acc[3])) / static_cast<float>(n);
  float sq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (float& a : acc) a = 0.0f;
  for (i = 0; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) {
      const float d = x[i + k] - mean_hi;
      acc[k] += d;
      sq[k] += d * d;
    }
  for (; i < n; ++i) {
    const float d = x[i] - mean_hi;
    acc[0] += d;
    sq[0] += d * d;
  }
  return FinishRowStats(mean_hi, (acc[0] + acc[1]) + (acc[2] + acc[3]), (sq[0] + sq[1]) + (sq[2] + sq[3]), n);
}

template <typename T>
void PortableNormalizeRow(const float* x, T* y, int64_t n, const RowAffine& a, const float* scale, const float* bias) {
  for (int64_t i = 0; i < n; ++i) SetElement(y, i, ((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std * scale[i] + bias[i]);
}

}  // namespace

#ifdef TFPOPEF_LAYERNORM_AVX2
TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")
namespace {

// 8 float16 as float32 (vcvtph2ps), also stored to `row`.
inline __m256 WidenEight(const uint16_t* x, float* row) {
  const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  _mm256_storeu_ps(row, f);
  return f;
}

// Element i.. of x as float32 (float16 also stored to row[i..]).
inline __m256 Load8(const float* x, float*, int64_t i) { return _mm256_loadu_ps(x + i); }
inline __m256 Load8(const uint16_t* x, float* row, int64_t i) { return WidenEight(x + i, row + i); }
inline float Load1(const float* x, float*, int64_t i) { return x[i]; }
inline float Load1(const uint16_t* x, float* row, int64_t i) { return row[i] = HalfToFloat(x[i]); }

float HorizontalSum(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 h = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

// Σx: 32 elements per step into four accumulators (elements 8k..8k+7 of the step into the
// k-th), then 8 at a time into the first, then the scalar tail. float16 x is widened into
// `row` on the way (one vcvtph2ps per 8 elements), so the second pass and the normalization
// read float32 from L1: the same sums in the same order as float32's.
template <typename T>
float Avx2Sum(const T* x, float* row, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, Load8(x, row, i));
    s1 = _mm256_add_ps(s1, Load8(x, row, i + 8));
    s2 = _mm256_add_ps(s2, Load8(x, row, i + 16));
    s3 = _mm256_add_ps(s3, Load8(x, row, i + 24));
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_add_ps(s0, Load8(x, row, i));
  float sum = HorizontalSum(s0, s1, s2, s3);
  for (; i < n; ++i) sum += Load1(x, row, i);
  return sum;
}

// The second pass over float32 x: Σd and Σd² for d = x − mean_hi, accumulated as Avx2Sum's.
RowStats Avx2SecondPass(const float* x, int64_t n, float mean_hi) {
  const __m256 m = _mm256_set1_ps(mean_hi);
  __m256 d0s = _mm256_setzero_ps(), d1s = _mm256_setzero_ps(), d2s = _mm256_setzero_ps(), d3s = _mm256_setzero_ps();
  __m256 q0 = _mm256_setzero_ps(), q1 = _mm256_setzero_ps(), q2 = _mm256_setzero_ps(), q3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m);
    const __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 16), m);
    const __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 24), m);
    d0s = _mm256_add_ps(d0s, d0);
    d1s = _mm256_add_ps(d1s, d1);
    d2s = _mm256_add_ps(d2s, d2);
    d3s = _mm256_add_ps(d3s, d3);
    q0 = _mm256_fmadd_ps(d0, d0, q0);
    q1 = _mm256_fmadd_ps(d1, d1, q1);
    q2 = _mm256_fmadd_ps(d2, d2, q2);
    q3 = _mm256_fmadd_ps(d3, d3, q3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
    d0s = _mm256_add_ps(d0s, d);
    q0 = _mm256_fmadd_ps(d, d, q0);
  }
  float sum_d = HorizontalSum(d0s, d1s, d2s, d3s), sum_d2 = HorizontalSum(q0, q1, q2, q3);
  for (; i < n; ++i) {
    const float d = x[i] - mean_hi;
    sum_d += d;
    sum_d2 = std::fma(d, d, sum_d2);
  }
  return FinishRowStats(mean_hi, sum_d, sum_d2, n);
}

inline void Store8(float* y, __m256 v) { _mm256_storeu_ps(y, v); }
inline void Store8(uint16_t* y, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

template <typename T>
void Avx2NormalizeRow(const float* x, T* y, int64_t n, const RowAffine& a, const float* scale, const float* bias) {
  const __m256 hi = _mm256_set1_ps(a.mean_hi), lo = _mm256_set1_ps(a.mean_lo), r = _mm256_set1_ps(a.inv_std);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), hi), lo);
    Store8(y + i, _mm256_fmadd_ps(_mm256_mul_ps(d, r), _mm256_loadu_ps(scale + i), _mm256_loadu_ps(bias + i)));
  }
  // Same operations one at a time (fused multiply-add included), so the tail matches the vector body.
  for (; i < n; ++i) SetElement(y, i, std::fma(((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std, scale[i], bias[i]));
}

}  // namespace
TFPOPEF_TARGET_END()
#endif

namespace {

// The statistics of float32 x, or of float16 x widened into `row` (which the normalization then
// reads): the widening is exact, so both are float32's statistics of the same values.
RowStats RowStatistics(bool simd, const float* x, int64_t n, float* /*row*/) {
#ifdef TFPOPEF_LAYERNORM_AVX2
  if (simd && n > 0) return Avx2SecondPass(x, n, Avx2Sum(x, static_cast<float*>(nullptr), n) / static_cast<float>(n));
#endif
  (void)simd;
  return PortableRowStats(x, n);
}

RowStats RowStatistics(bool simd, const uint16_t* x, int64_t n, float* row) {
#ifdef TFPOPEF_LAYERNORM_AVX2
  if (simd && n > 0) return Avx2SecondPass(row, n, Avx2Sum(x, row, n) / static_cast<float>(n));
#endif
  (void)simd;
  WidenHalfToFloat(x, row, n);
  return PortableRowStats(row, n);
}

template <typename T>
void NormalizeRow(bool simd, const float* x, T* y, int64_t n, const RowAffine& a, const float* scale, const float* bias) {
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
  // half: float16 X, scale, bias and Y (no mean / inv_std outputs): each X row widened into the
  // chunk's L1 row as its sum is taken, Y rounded once as it is stored.
  LayerNormKernel(int64_t outer, int64_t inner, float epsilon, BroadcastPlan<2> params, bool has_bias,
                  bool mean_output, bool inv_std_output, bool half)
      : outer_(outer), inner_(inner), eps_(epsilon), params_(std::move(params)), has_bias_(has_bias),
        mean_output_(mean_output), inv_std_output_(inv_std_output), half_(half),
        grain_(ItemsPerChunk(inner_, kStreamingGrain / 4)), chunks_(ThreadPool::Global().NumChunks(outer_, grain_)) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(2 + (half_ ? chunks_ : 0)) * static_cast<size_t>(inner_) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    // Scale and bias broadcast to [inner] once per run into scratch, as float32.
    float* scale = static_cast<float*>(ctx.scratch);
    float* bias = scale + inner_;
    const auto params = [&](size_t input, size_t operand, float* dst) {
      ForEachRun(params_, [&](int64_t o, const std::array<int64_t, 2>& off) {
        const int64_t n = params_.run_length(), stride = params_.run_stride(operand);
        if (half_) {
          const uint16_t* p = static_cast<const uint16_t*>(ctx.inputs[input]) + off[operand];
          if (stride == 1) return WidenHalfToFloat(p, dst + o, n);
          for (int64_t i = 0; i < n; ++i) dst[o + i] = HalfToFloat(p[i * stride]);
        } else {
          const float* p = static_cast<const float*>(ctx.inputs[input]) + off[operand];
          for (int64_t i = 0; i < n; ++i) dst[o + i] = p[i * stride];
        }
      });
    };
    params(1, 0, scale);
    if (has_bias_)
      params(2, 1, bias);
    else
      std::fill(bias, bias + inner_, 0.0f);
    if (half_)
      return Rows(static_cast<const uint16_t*>(ctx.inputs[0]), static_cast<uint16_t*>(ctx.outputs[0]), scale, bias,
                  bias + inner_, nullptr, nullptr);
    size_t next = 1;
    float* mean_out = mean_output_ ? static_cast<float*>(ctx.outputs[next++]) : nullptr;
    float* inv_std_out = inv_std_output_ ? static_cast<float*>(ctx.outputs[next++]) : nullptr;
    Rows(static_cast<const float*>(ctx.inputs[0]), static_cast<float*>(ctx.outputs[0]), scale, bias, nullptr, mean_out,
         inv_std_out);
  }

 private:
  // T: float, or uint16_t (float16) with `rows` one float32 row per chunk.
  template <typename T>
  void Rows(const T* x, T* y, const float* scale, const float* bias, float* rows, float* mean_out,
            float* inv_std_out) const {
    const bool simd = vmath::UsesAvx2(vmath::ActivePath());
    // Rows claimed from the chunk's home range, then from the back of the others'
    // (home_ranges.h), so a worker that starts late does not leave the step waiting for its half.
    const int64_t homes = std::min(chunks_, kMaxHomeRanges);
    HomeRanges ranges(outer_, homes);
    const int64_t most = std::max<int64_t>(1, grain_ / 4);
    const auto from_front = [&](int64_t f, int64_t b) { return std::min(most, (b - f + 1) / 2); };
    const auto from_back = [&](int64_t f, int64_t b) { return std::min(most, std::max<int64_t>(1, (b - f) / 4)); };
    ParallelForChunks(homes, 1, [&](int64_t chunk, int64_t, int64_t) {
      float* row = rows ? rows + inner_ * chunk : nullptr;
      auto run = [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          const RowStats stats = RowStatistics(simd, x + o * inner_, inner_, row);
          const RowAffine affine = MakeRowAffine(stats, eps_);
          const float* xr = std::is_same_v<T, float> ? reinterpret_cast<const float*>(x + o * inner_) : row;
          NormalizeRow(simd, xr, y + o * inner_, inner_, affine, scale, bias);
          if (mean_out) mean_out[o] = stats.mean_hi + stats.mean_lo;
          if (inv_std_out) inv_std_out[o] = affine.inv_std;
        }
      };
      ranges.RunHome(chunk, from_front, from_back, [&](int64_t o0, int64_t got) { run(o0, o0 + got); });
    });
  }

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
