#include "tf_popef_op/runtime/cc/kernels/support/row_normalization.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TFPOPEF_ROW_NORMALIZATION_AVX2 1
#endif

namespace tfpopef {
namespace kernels {
namespace {

// Portable: sums in double with four independent accumulators, so the additions overlap
// instead of each waiting for the previous one.
double PortableRowSum(const float* x, int64_t n) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += x[i + k];
  for (; i < n; ++i) acc[0] += x[i];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

double PortableRowSquaredDeviations(const float* x, int64_t n, double mean) {
  double acc[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) acc[k] += (x[i + k] - mean) * (x[i + k] - mean);
  for (; i < n; ++i) acc[0] += (x[i] - mean) * (x[i] - mean);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

void PortableNormalizeRow(const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                          const float* bias) {
  for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std * scale[i] + bias[i];
}

void PortableStandardizeRow(const float* x, float* y, int64_t n, const RowAffine& a) {
  for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std;
}

}  // namespace

#ifdef TFPOPEF_ROW_NORMALIZATION_AVX2
TFPOPEF_TARGET_BEGIN("avx2,fma")
namespace {

inline __m256d Widen(__m128 v) { return _mm256_cvtps_pd(v); }

inline double Lanes(__m256d s0, __m256d s1, __m256d s2, __m256d s3) {
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// 16 floats per step into four double accumulators, then the scalar tail.
double Avx2RowSum(const float* x, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_pd(s0, Widen(_mm_loadu_ps(x + i)));
    s1 = _mm256_add_pd(s1, Widen(_mm_loadu_ps(x + i + 4)));
    s2 = _mm256_add_pd(s2, Widen(_mm_loadu_ps(x + i + 8)));
    s3 = _mm256_add_pd(s3, Widen(_mm_loadu_ps(x + i + 12)));
  }
  for (; i + 4 <= n; i += 4) s0 = _mm256_add_pd(s0, Widen(_mm_loadu_ps(x + i)));
  double sum = Lanes(s0, s1, s2, s3);
  for (; i < n; ++i) sum += x[i];
  return sum;
}

double Avx2RowSquaredDeviations(const float* x, int64_t n, double mean) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), s2 = _mm256_setzero_pd(), s3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
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
  double ssd = Lanes(s0, s1, s2, s3);
  for (; i < n; ++i) ssd += (x[i] - mean) * (x[i] - mean);
  return ssd;
}

void Avx2NormalizeRow(const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                      const float* bias) {
  const __m256 hi = _mm256_set1_ps(a.mean_hi), lo = _mm256_set1_ps(a.mean_lo), r = _mm256_set1_ps(a.inv_std);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), hi), lo);
    _mm256_storeu_ps(y + i,
                     _mm256_fmadd_ps(_mm256_mul_ps(d, r), _mm256_loadu_ps(scale + i), _mm256_loadu_ps(bias + i)));
  }
  // Same operations one at a time (fused multiply-add included), so the tail matches the vector body.
  for (; i < n; ++i) y[i] = std::fma(((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std, scale[i], bias[i]);
}

void Avx2StandardizeRow(const float* x, float* y, int64_t n, const RowAffine& a) {
  const __m256 hi = _mm256_set1_ps(a.mean_hi), lo = _mm256_set1_ps(a.mean_lo), r = _mm256_set1_ps(a.inv_std);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), hi), lo), r));
  for (; i < n; ++i) y[i] = ((x[i] - a.mean_hi) - a.mean_lo) * a.inv_std;
}

}  // namespace
TFPOPEF_TARGET_END()
#endif

RowAffine MakeRowAffine(const RowStats& s, float epsilon) {
  const float hi = static_cast<float>(s.mean);
  return {hi, static_cast<float>(s.mean - hi), static_cast<float>(1.0 / std::sqrt(s.var + epsilon))};
}

double RowSum(bool simd, const float* x, int64_t n) {
#ifdef TFPOPEF_ROW_NORMALIZATION_AVX2
  if (simd) return Avx2RowSum(x, n);
#endif
  (void)simd;
  return PortableRowSum(x, n);
}

double RowSquaredDeviations(bool simd, const float* x, int64_t n, double mean) {
#ifdef TFPOPEF_ROW_NORMALIZATION_AVX2
  if (simd) return Avx2RowSquaredDeviations(x, n, mean);
#endif
  (void)simd;
  return PortableRowSquaredDeviations(x, n, mean);
}

RowStats RowStatistics(bool simd, const float* x, int64_t n) {
  if (n == 0) return {0.0, 0.0};
  const double mean = RowSum(simd, x, n) / static_cast<double>(n);
  return {mean, RowSquaredDeviations(simd, x, n, mean) / static_cast<double>(n)};
}

RowStats RowStatistics(bool simd, const uint16_t* x, int64_t n) {
  if (n == 0) return {0.0, 0.0};
  constexpr int64_t kPiece = 256;
  alignas(64) float piece[kPiece];
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += kPiece) {
    const int64_t count = std::min(kPiece, n - i);
    WidenHalfToFloat(x + i, piece, count);
    sum += RowSum(simd, piece, count);
  }
  const double mean = sum / static_cast<double>(n);
  double ssd = 0.0;
  for (int64_t i = 0; i < n; i += kPiece) {
    const int64_t count = std::min(kPiece, n - i);
    WidenHalfToFloat(x + i, piece, count);
    ssd += RowSquaredDeviations(simd, piece, count, mean);
  }
  return {mean, ssd / static_cast<double>(n)};
}

void NormalizeRow(bool simd, const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                  const float* bias) {
#ifdef TFPOPEF_ROW_NORMALIZATION_AVX2
  if (simd) return Avx2NormalizeRow(x, y, n, a, scale, bias);
#endif
  (void)simd;
  PortableNormalizeRow(x, y, n, a, scale, bias);
}

void StandardizeRow(bool simd, const float* x, float* y, int64_t n, const RowAffine& a) {
#ifdef TFPOPEF_ROW_NORMALIZATION_AVX2
  if (simd) return Avx2StandardizeRow(x, y, n, a);
#endif
  (void)simd;
  PortableStandardizeRow(x, y, n, a);
}

}  // namespace kernels
}  // namespace tfpopef
