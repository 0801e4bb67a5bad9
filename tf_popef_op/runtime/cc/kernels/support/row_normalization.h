// A row's mean and variance, and the row normalized with them: LayerNormalization's kernel
// (reduction/normalization.cc) and the packed GEMM's normalized-A prologue (packed_gemm.h).
//
// Statistics are computed in double (two passes: the mean, then the squared deviations from
// it); the row is normalized in float as ((x − m_hi) − m_lo) · inv_std, m_hi + m_lo the double
// mean split into two floats: x − m_hi is exact where x is near the mean (Sterbenz), so a large
// mean with a small spread keeps its deviations as the double subtraction did. `simd` (vector
// _math.h's UsesAvx2 of the active path) runs 8 floats at a time; otherwise the same formulas
// in scalar code.
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {

// A row's mean and (population) variance, in double.
struct RowStats {
  double mean, var;
};

// What normalizing a row takes: y = ((x − mean_hi) − mean_lo) · inv_std.
struct RowAffine {
  float mean_hi, mean_lo, inv_std;
};

RowAffine MakeRowAffine(const RowStats& s, float epsilon);

// Σ x[i] and Σ (x[i] − mean)², in double, over n floats.
double RowSum(bool simd, const float* x, int64_t n);
double RowSquaredDeviations(bool simd, const float* x, int64_t n, double mean);

RowStats RowStatistics(bool simd, const float* x, int64_t n);
// The same for a float16 row, widened a piece at a time.
RowStats RowStatistics(bool simd, const uint16_t* x, int64_t n);

// y[i] = ((x[i] − mean_hi) − mean_lo) · inv_std · scale[i] + bias[i].
void NormalizeRow(bool simd, const float* x, float* y, int64_t n, const RowAffine& a, const float* scale,
                  const float* bias);
// y[i] = ((x[i] − mean_hi) − mean_lo) · inv_std (y may be x).
void StandardizeRow(bool simd, const float* x, float* y, int64_t n, const RowAffine& a);

}  // namespace kernels
}  // namespace tfpopef
