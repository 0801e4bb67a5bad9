// The functions of vector_math.h's AVX-512 path that gain from 16 lanes and AVX-512's
// instructions (the rest of that path is the AVX2 code): Gelu, whose coefficient tables are
// one vpermt2ps / vpermps per 16 lanes and whose exponent scaling (vscalefps rounds denormal
// results once) and sign blend are each one instruction here, Exp and the softmax's
// ExpShiftedSum (the same 2^(j/16) table), and Sigmoid and Swish (vector_math_avx512.inc: the
// AVX2 path's bits, ~0.7 of its time). Compiled for AVX-512F and
// AVX-512VL whatever the build's -march (target_pragma.h); entered only through vector_math.cc
// after the CPU check.
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_paths.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "tf_popef_op/runtime/cc/kernels/support/avx512_intrinsics.h"

TFPOPEF_TARGET_BEGIN("avx2,fma,avx512f,avx512vl")

namespace tfpopef {
namespace kernels {
namespace vmath {
namespace {

namespace avx512_math {
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_m256.inc"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_avx512.inc"
}  // namespace avx512_math

inline __m512 Set(float v) { return _mm512_set1_ps(v); }

// R(t) = Φ(−t)·e^(t²/2) on t ∈ [0, 14.5]: row j holds the coefficient of s^j of a degree-5
// polynomial in s = t − k/2 on each interval [k/2 − 1/4, k/2 + 1/4], k = 0..29 (columns 30 and
// 31 repeat 29), so one vpermt2ps picks a coefficient for 16 lanes. Fitted by
// benchmarks/cc/gelu_mills_fit.py (relative error, float32 coefficients): 1.55 ulp of R at worst.
alignas(64) constexpr float kGeluMillsTable[6][32] = {
    {5.000000000e-01f, 3.496188521e-01f, 2.615782917e-01f, 2.057806700e-01f, 1.681019962e-01f, 1.413313299e-01f,
     1.215139478e-01f, 1.063451543e-01f, 9.441064298e-02f, 8.480339497e-02f, 7.691930234e-02f, 7.034269720e-02f,
     6.477931142e-02f, 6.001567468e-02f, 5.589348078e-02f, 5.229309574e-02f, 4.912254587e-02f, 4.631004483e-02f,
     4.379878938e-02f, 4.154329002e-02f, 3.950669244e-02f, 3.765885904e-02f, 3.597488999e-02f, 3.443405777e-02f,
     3.301897272e-02f, 3.171492741e-02f, 3.050941415e-02f, 2.939173207e-02f, 2.835266106e-02f, 2.738422528e-02f,
     2.738422528e-02f, 2.738422528e-02f},
    {-3.989419937e-01f, -2.241328210e-01f, -1.373639703e-01f, -9.027127922e-02f, -6.273827702e-02f, -4.561395198e-02f,
     -3.440043703e-02f, -2.673424222e-02f, -2.129971609e-02f, -1.732701622e-02f, -1.434575580e-02f, -1.205746364e-02f,
     -1.026639435e-02f, -8.840390481e-03f, -7.687903475e-03f, -6.744051818e-03f, -5.961910821e-03f, -5.306913983e-03f,
     -4.753180780e-03f, -4.281039815e-03f, -3.875339404e-03f, -3.524263855e-03f, -3.218494589e-03f, -2.950606635e-03f,
     -2.714627422e-03f, -2.505710814e-03f, -2.319891937e-03f, -2.153903479e-03f, -2.005032962e-03f, -1.871015178e-03f,
     -1.871015178e-03f, -1.871015178e-03f},
    {2.499866933e-01f, 1.187694147e-01f, 6.210491434e-02f, 3.518605977e-02f, 2.131240070e-02f, 1.364808809e-02f,
     9.156258777e-03f, 6.387621630e-03f, 4.605874419e-03f, 3.415901912e-03f, 2.595258877e-03f, 2.013320336e-03f,
     1.590472180e-03f, 1.276566996e-03f, 1.039078925e-03f, 8.563530864e-04f, 7.136299973e-04f, 6.006359472e-04f,
     5.100817652e-04f, 4.367058864e-04f, 3.766500449e-04f, 3.270440793e-04f, 2.857246436e-04f, 2.510412596e-04f,
     2.217206638e-04f, 1.967704011e-04f, 1.754094701e-04f, 1.570178429e-04f, 1.410991244e-04f, 1.272529335e-04f,
     1.272529335e-04f, 1.272529335e-04f},
    {-1.327531785e-01f, -5.491626263e-02f, -2.508586645e-02f, -1.249703672e-02f, -6.704284344e-03f, -3.831128823e-03f,
     -2.310489304e-03f, -1.459152554e-03f, -9.587174864e-04f, -6.518063019e-04f, -4.564788542e-04f, -3.280620731e-04f,
     -2.411838213e-04f, -1.808995294e-04f, -1.381153270e-04f, -1.071335646e-04f, -8.428942965e-05f, -6.716902135e-05f,
     -5.414781845e-05f, -4.411092232e-05f, -3.627941624e-05f, -3.010014916e-05f, -2.517435678e-05f, -2.121058424e-05f,
     -1.799306665e-05f, -1.536018499e-05f, -1.318954128e-05f, -1.138749394e-05f, -9.881717233e-06f, -8.615929801e-06f,
     -8.615929801e-06f, -8.615929801e-06f},
    {6.071389467e-02f, 2.311980724e-02f, 9.350949898e-03f, 4.145029001e-03f, 1.989763929e-03f, 1.023462857e-03f,
     5.588928470e-04f, 3.214555909e-04f, 1.934214088e-04f, 1.210533301e-04f, 7.841777551e-05f, 5.236199286e-05f,
     3.591283894e-05f, 2.522372415e-05f, 1.809577043e-05f, 1.323101787e-05f, 9.840782695e-06f, 7.433076462e-06f,
     5.693582352e-06f, 4.417075615e-06f, 3.466866474e-06f, 2.750236945e-06f, 2.203231134e-06f, 1.781045171e-06f,
     1.451839694e-06f, 1.192686682e-06f, 9.868706456e-07f, 8.220646350e-07f, 6.890807640e-07f, 5.801858265e-07f,
     5.801858265e-07f, 5.801858265e-07f},
    {-1.992923580e-02f, -8.750242181e-03f, -3.183032153e-03f, -1.272404101e-03f, -5.527848261e-04f, -2.583857568e-04f,
     -1.287882624e-04f, -6.791505439e-05f, -3.763295172e-05f, -2.178286377e-05f, -1.310366952e-05f, -8.156378499e-06f,
     -5.233454431e-06f, -3.450265012e-06f, -2.330600410e-06f, -1.609074275e-06f, -1.133070896e-06f, -8.122843269e-07f,
     -5.918699344e-07f, -4.377175742e-07f, -3.281456316e-07f, -2.490932047e-07f, -1.912720649e-07f, -1.484409324e-07f,
     -1.163394430e-07f, -9.201637141e-08f, -7.339927066e-08f, -5.901448930e-08f, -4.780132201e-08f, -4.098860984e-08f,
     -4.098860984e-08f, -4.098860984e-08f},
};
// 2^(i/16), i = 0..15.
alignas(64) constexpr float kPow2Sixteenths[16] = {
    1.0f,         1.04427378f, 1.09050773f, 1.13878863f, 1.18920712f, 1.24185781f, 1.29683955f, 1.35425555f,
    1.41421356f,  1.47682615f, 1.54221083f, 1.61049033f, 1.68179283f, 1.75625216f, 1.83400809f, 1.91520656f};

// a = j·ln2 + r with j the nearest sixteenth to a·log2 e (adding 1.5·2^19 rounds to sixteenths;
// j·ln2's high part is exact) and |r| <= ln2/32; p2 = 2^frac(j) from kPow2Sixteenths (the low 4
// mantissa bits of the rounded sum are j's sixteenths, two's complement, as vscalefps's
// floor(j) needs). Gelu16's and Exp16's exponentials share it.
struct Sixteenths {
  __m512 j, r, p2;
};
inline Sixteenths ReduceToSixteenths(__m512 a) {
  const __m512 magic16 = Set(786432.0f);  // 1.5·2^19
  const __m512 j16 = _mm512_fmadd_ps(a, Set(1.44269504088896341f), magic16);
  const __m512 j = _mm512_sub_ps(j16, magic16);
  __m512 r = _mm512_fnmadd_ps(j, Set(0.693359375f), a);
  r = _mm512_fnmadd_ps(j, Set(-2.12194440e-4f), r);
  return {j, r, _mm512_permutexvar_ps(_mm512_castps_si512(j16), _mm512_load_ps(kPow2Sixteenths))};
}

// x·Φ(x) with x clamped to ±14.5 and t = |xc|: v = xc·Φ(−t) for either sign, and x > 0 takes
// x − v (for x > 14.5, v < 2^−149·15 rounds away: x, inf included). Φ(−t) = R(t)·e^(−t²/2),
// R from kGeluMillsTable and the exponential as 2^(j/16)·e^r (j/16 the nearest sixteenth to
// −t²/2·log2 e, a 16-entry table, a degree-3 polynomial for |r| ≤ ln2/32), with t² split exactly
// into a + b so r keeps its accuracy up to t = 14.5. Compared with the AVX2 path's form (a
// division and a degree-9 polynomial in 1/(1 + 0.3t), with corrections for the division's
// roundings, and a degree-6 exponential) it is 19 instead of 33 multiplies and FMAs and 7
// permutes, 0.70-0.79 of the time per element on Zen 4; worst error 3.90 ulp on every 2^-13 of
// [−16, 16] and 2^20 random floats (the AVX2 form 4.91), 4.04 over 10^7 wide random inputs.
inline __m512 Gelu16(__m512 x) {
  // NaN stays NaN (max and min return their 2nd operand when it is NaN)
  const __m512 xc = _mm512_min_ps(Set(14.5f), _mm512_max_ps(Set(-14.5f), x));
  const __m512 t = _mm512_abs_ps(xc);
  // Adding 1.5·2^23 rounds 2t to the integer k, which is then the float's low mantissa bits.
  const __m512 magic = Set(12582912.0f);
  const __m512 k2 = _mm512_fmadd_ps(t, Set(2.0f), magic);
  const __m512i k = _mm512_castps_si512(k2);
  const __m512 s = _mm512_fnmadd_ps(_mm512_sub_ps(k2, magic), Set(0.5f), t);  // exact
  const auto c = [k](int j) {
    return _mm512_permutex2var_ps(_mm512_load_ps(kGeluMillsTable[j]), k, _mm512_load_ps(kGeluMillsTable[j] + 16));
  };
  __m512 r_t = _mm512_fmadd_ps(c(5), s, c(4));
  r_t = _mm512_fmadd_ps(r_t, s, c(3));
  r_t = _mm512_fmadd_ps(r_t, s, c(2));
  r_t = _mm512_fmadd_ps(r_t, s, c(1));
  r_t = _mm512_fmadd_ps(r_t, s, c(0));
  // −t²/2 = a + b exactly (t·−0.5 is exact).
  const __m512 minus_half_t = _mm512_mul_ps(t, Set(-0.5f));
  const __m512 a = _mm512_mul_ps(minus_half_t, t);
  const __m512 b = _mm512_fmsub_ps(minus_half_t, t, a);
  const auto [j, r_a, p2] = ReduceToSixteenths(a);
  const __m512 r = _mm512_add_ps(r_a, b);
  // 2^frac(j)·e^r = p2 + p2·r·(1 + r/2 + r²/6)
  const __m512 e_r = _mm512_fmadd_ps(_mm512_fmadd_ps(r, Set(1.0f / 6.0f), Set(0.5f)), r, Set(1.0f));
  const __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(p2, r), e_r, p2);
  const __m512 u = _mm512_mul_ps(e, r_t);                       // Φ(−t) / 2^floor(j)
  const __m512 v = _mm512_scalef_ps(_mm512_mul_ps(xc, u), j);  // xc·Φ(−t), rounded once
  return _mm512_mask_sub_ps(v, _mm512_cmp_ps_mask(x, Set(0.0f), _CMP_GT_OQ), x, v);
}

// e^x = 2^j·e^r with j the nearest sixteenth to x·log2 e (ReduceToSixteenths, as
// in Gelu16), 2^frac(j) from kPow2Sixteenths and a degree-4 polynomial for |r| <= ln2/32: 0.98
// ulp at worst (Exp8's degree-6 form 1.24). Exp 0.16 against 0.42 ns per element for the AVX2
// loop; in ExpShiftedSum level with Exp8's form on 16 lanes (~0.2 ns, its FP pipes the bound).
// x is clamped to [-104, 89], where e^x rounds to 0 and to inf; vscalefps rounds denormal
// results once. NaN needs no blend: max and min return their second operand, x, when it is NaN,
// and the arithmetic keeps it.
inline __m512 Exp16(__m512 x) {
  const __m512 xc = _mm512_min_ps(Set(89.0f), _mm512_max_ps(Set(-104.0f), x));
  const auto [j, r, p2] = ReduceToSixteenths(xc);
  __m512 e_r = _mm512_fmadd_ps(r, Set(1.0f / 24.0f), Set(1.0f / 6.0f));
  e_r = _mm512_fmadd_ps(e_r, r, Set(0.5f));
  e_r = _mm512_fmadd_ps(e_r, r, Set(1.0f));  // (e^r − 1)/r
  return _mm512_scalef_ps(_mm512_fmadd_ps(_mm512_mul_ps(p2, r), e_r, p2), j);
}

// y = f(x) 16 lanes at a time.
template <typename F>
inline void Map16(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    // Masked loads read nothing beyond the array (no fault); the dropped lanes hold 0.
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, mask, f(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

}  // namespace

void Avx512Gelu(const float* x, float* y, int64_t n) {
  Map16(x, y, n, [](__m512 v) { return Gelu16(v); });
}
void Avx512Exp(const float* x, float* y, int64_t n) {
  Map16(x, y, n, [](__m512 v) { return Exp16(v); });
}
// The softmax's exponentials and their sum (vmath::ExpShiftedSum): Exp16, so the values are
// Avx512Exp's bit for bit.
float Avx512ExpShiftedSum(const float* x, float* y, int64_t n, float shift) {
  const __m512 s = Set(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + i), s));
    _mm512_mask_storeu_ps(y + i, mask, e);
    acc = _mm512_mask_add_ps(acc, mask, acc, e);  // the dropped lanes add nothing
  }
  return _mm512_reduce_add_ps(acc);
}
void Avx512Sigmoid(const float* x, float* y, int64_t n) {
  Map16(x, y, n, [](__m512 v) { return avx512_math::Sigmoid16(v); });
}
void Avx512Swish(const float* x, float* y, int64_t n) {
  Map16(x, y, n, [](__m512 v) { return _mm512_mul_ps(v, avx512_math::Sigmoid16(v)); });
}

}  // namespace vmath
}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
