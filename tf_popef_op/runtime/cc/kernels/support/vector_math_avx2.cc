// The AVX2+FMA path of vector_math.h: 8 floats per instruction.
//
// This file is compiled for AVX2+FMA whatever the build's -march (target_pragma.h), so it must
// only be entered through vector_math.cc after the CPU check.
//
// The polynomials follow Cephes (expf, logf, tanhf; also used by Eigen and sse_mathfun);
// erf's were fitted for this file (weighted least squares on [0, 1] for erf(x)/x in x², and
// on [1, 4] for erfc(x)·e^(x²) in 1/x), and so was Gelu's (Lawson's iteratively reweighted
// least squares, minimax in relative error, for Φ(−t)·e^(t²/2)/w in w = 1/(1 + 0.3t) on
// t in [0, 14.5]), then checked in float arithmetic. vector_math.h lists the measured errors.
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_paths.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma")

namespace tfpopef {
namespace kernels {
namespace vmath {
namespace {

#include "tf_popef_op/runtime/cc/kernels/support/vector_math_m256.inc"

// e^x − 1, accurate for small |x| too: a Taylor polynomial for |x| < 0.5 (its error there is
// below 1e-8 relative), e^x − 1 beyond.
inline __m256 Expm18(__m256 x) {
  __m256 p = Set(1.0f / 40320);
  p = _mm256_fmadd_ps(p, x, Set(1.0f / 5040));
  p = _mm256_fmadd_ps(p, x, Set(1.0f / 720));
  p = _mm256_fmadd_ps(p, x, Set(1.0f / 120));
  p = _mm256_fmadd_ps(p, x, Set(1.0f / 24));
  p = _mm256_fmadd_ps(p, x, Set(1.0f / 6));
  p = _mm256_fmadd_ps(p, x, Set(0.5f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x), x, x);
  const __m256 large = _mm256_sub_ps(Exp8(x), Set(1.0f));
  const __m256 abs = _mm256_andnot_ps(Set(-0.0f), x);
  return KeepNaN(x, _mm256_blendv_ps(large, small, _mm256_cmp_ps(abs, Set(0.5f), _CMP_LT_OQ)));
}

// log(x) = e·ln2 + log(m) with m in [√½, √2): log(1 + f) by Cephes' degree-8 polynomial.
// Denormal inputs are first scaled by 2^23 (exactly) so the exponent field is meaningful.
inline __m256 Log8(__m256 x) {
  const __m256 denormal = _mm256_cmp_ps(x, Set(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, Set(8388608.0f)), denormal);
  const __m256 e_bias = _mm256_blendv_ps(Set(0.0f), Set(-23.0f), denormal);
  const __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  e = _mm256_add_ps(e, e_bias);
  // m in [0.5, 1)
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)),
                                                 _mm256_set1_epi32(0x3F000000)));
  const __m256 below = _mm256_cmp_ps(m, Set(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm256_sub_ps(e, _mm256_and_ps(below, Set(1.0f)));
  const __m256 f = _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(below, m)), Set(1.0f));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = Set(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, Set(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, Set(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, Set(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, Set(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, Set(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, Set(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(e, Set(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(z, Set(0.5f), y);
  __m256 r = _mm256_add_ps(f, y);
  r = _mm256_fmadd_ps(e, Set(0.693359375f), r);
  // log(0) = -inf, log(negative) = NaN, log(+inf) = +inf.
  r = _mm256_blendv_ps(r, Set(-__builtin_inff()), _mm256_cmp_ps(x, Set(0.0f), _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, Set(__builtin_nanf("")), _mm256_cmp_ps(x, Set(0.0f), _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, Set(__builtin_inff()), _CMP_EQ_OQ));
  return KeepNaN(x, r);
}

inline __m256 CopySign(__m256 magnitude, __m256 sign_of) {
  const __m256 sign = Set(-0.0f);
  return _mm256_or_ps(_mm256_andnot_ps(sign, magnitude), _mm256_and_ps(sign, sign_of));
}

// Cephes tanhf: an odd polynomial for |x| < 0.625, 1 − 2/(e^(2|x|) + 1) beyond.
inline __m256 Tanh8(__m256 x) {
  const __m256 ax = _mm256_andnot_ps(Set(-0.0f), x);
  const __m256 s = _mm256_mul_ps(x, x);
  __m256 p = Set(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, s, Set(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, s, Set(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, s, Set(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, s, Set(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, s), x, x);
  const __m256 e = Exp8(_mm256_add_ps(ax, ax));
  const __m256 large = CopySign(_mm256_sub_ps(Set(1.0f), _mm256_div_ps(Set(2.0f), _mm256_add_ps(e, Set(1.0f)))), x);
  __m256 r = _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, Set(0.625f), _CMP_LT_OQ));
  r = _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, Set(0.0f), _CMP_EQ_OQ));  // tanh(±0) = ±0
  return KeepNaN(x, r);
}

// erf: x·P(x²) for |x| < 1; 1 − e^(−x²)·Q(1/|x|) for 1 ≤ |x| ≤ 4 (erf(4) rounds to 1).
inline __m256 Erf8(__m256 x) {
  const __m256 ax = _mm256_andnot_ps(Set(-0.0f), x);
  const __m256 s = _mm256_mul_ps(x, x);
  __m256 p = Set(8.0069502445197625e-05f);
  p = _mm256_fmadd_ps(p, s, Set(-8.0537710176208674e-04f));
  p = _mm256_fmadd_ps(p, s, Set(5.1929597867610942e-03f));
  p = _mm256_fmadd_ps(p, s, Set(-2.6856070402782258e-02f));
  p = _mm256_fmadd_ps(p, s, Set(1.1283634650121895e-01f));
  p = _mm256_fmadd_ps(p, s, Set(-3.7612629768097816e-01f));
  p = _mm256_fmadd_ps(p, s, Set(1.1283791662326965e+00f));
  const __m256 small = _mm256_mul_ps(p, x);
  const __m256 a = _mm256_min_ps(ax, Set(4.0f));
  const __m256 t = _mm256_div_ps(Set(1.0f), a);
  __m256 q = Set(3.0000937811672512e-02f);
  q = _mm256_fmadd_ps(q, t, Set(-1.7509905634820683e-01f));
  q = _mm256_fmadd_ps(q, t, Set(4.2549358729988723e-01f));
  q = _mm256_fmadd_ps(q, t, Set(-5.1717175067676047e-01f));
  q = _mm256_fmadd_ps(q, t, Set(2.1932413605795073e-01f));
  q = _mm256_fmadd_ps(q, t, Set(2.4213865636689097e-01f));
  q = _mm256_fmadd_ps(q, t, Set(-3.8052566549821903e-01f));
  q = _mm256_fmadd_ps(q, t, Set(2.1683003021211070e-02f));
  q = _mm256_fmadd_ps(q, t, Set(5.6160925743197665e-01f));
  q = _mm256_fmadd_ps(q, t, Set(1.3048727253039507e-04f));
  const __m256 erfc = _mm256_mul_ps(Exp8(_mm256_sub_ps(Set(0.0f), _mm256_mul_ps(a, a))), q);
  const __m256 large = CopySign(_mm256_sub_ps(Set(1.0f), erfc), x);
  return KeepNaN(x, _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, Set(1.0f), _CMP_LT_OQ)));
}

// Gelu(x) = x·Φ(x) from Φ(−t) = e^(−t²/2)·w·P(w), t = |x|, w = 1/(1 + 0.3t) (P of degree 9,
// fitted for this file: relative error 3.5e-9 for t in [0, 14.5]); Φ(x) = 1 − Φ(−x) for
// x > 0. One exp and no 1 + erf, so the result keeps its relative accuracy for x << 0 too.
// w·P(w) magnifies w's relative error up to 2.7 times (near t = 0), so the rounding errors
// of 1 + 0.3t and of the division are computed (FMA) and applied to first order, with
// d ln(w·P)/d ln w ≈ 0.9 + 1.76w. t² = a + b exactly (FMA) and −a/2 − n·ln2_hi is exact, so
// e^(−t²/2) is as accurate at t = 14 as at t = 1. Results below 2^−126 are scaled in two
// steps (2^(n/2) twice) after the multiplication by x, so they round once;
// |x·Φ(x)| < 2^−150 for x < −14.4, hence the clamp. vector_math_avx512.cc has the same steps
// (but x > 0 as x − x·Φ(−t) there).
inline __m256 Gelu8(__m256 x) {
  const __m256 xc = _mm256_max_ps(Set(-14.5f), x);  // NaN stays NaN (max returns its 2nd operand)
  const __m256 t = _mm256_min_ps(_mm256_andnot_ps(Set(-0.0f), xc), Set(14.5f));
  const __m256 d = _mm256_fmadd_ps(t, Set(0.3f), Set(1.0f));
  const __m256 d_error = _mm256_fmadd_ps(t, Set(0.3f), _mm256_sub_ps(Set(1.0f), d));
  const __m256 w = _mm256_div_ps(Set(1.0f), d);
  const __m256 w_error = _mm256_fnmadd_ps(w, d_error, _mm256_fnmadd_ps(w, d, Set(1.0f)));  // relative
  __m256 p = Set(kGeluPhiPoly[0]);
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[1]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[2]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[3]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[4]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[5]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[6]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[7]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[8]));
  p = _mm256_fmadd_ps(p, w, Set(kGeluPhiPoly[9]));
  __m256 q = _mm256_mul_ps(w, p);
  q = _mm256_fmadd_ps(_mm256_mul_ps(q, w_error), _mm256_fmadd_ps(w, Set(1.76f), Set(0.9f)), q);
  const __m256 a = _mm256_mul_ps(t, t);
  const __m256 b = _mm256_fmsub_ps(t, t, a);
  const __m256 half_a = _mm256_mul_ps(a, Set(-0.5f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(half_a, Set(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, Set(0.693359375f), half_a);
  r = _mm256_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  r = _mm256_fnmadd_ps(b, Set(0.5f), r);
  const __m256 e = ExpReduced8(r);
  const __m256 u = _mm256_mul_ps(e, q);  // Φ(−t) / 2^n
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half_n = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = Pow2(half_n), s2 = Pow2(_mm256_sub_epi32(ni, half_n));
  const __m256 negative = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(xc, u), s1), s2);
  const __m256 positive = _mm256_mul_ps(x, _mm256_fnmadd_ps(u, _mm256_mul_ps(s1, s2), Set(1.0f)));
  return _mm256_blendv_ps(negative, positive, _mm256_cmp_ps(x, Set(0.0f), _CMP_GT_OQ));
}

// ------------------------------------------------------------------ array loops

// Lanes [0, rest) of a tail: masked loads read nothing beyond the array (no fault).
inline __m256i TailMask(int64_t rest) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)), lanes);
}

template <typename F>
inline void Map8(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = TailMask(n - i);
    _mm256_maskstore_ps(y + i, mask, f(_mm256_maskload_ps(x + i, mask)));
  }
}

struct ExpF {
  __m256 operator()(__m256 v) const { return Exp8(v); }
};
struct LogF {
  __m256 operator()(__m256 v) const { return Log8(v); }
};
struct TanhF {
  __m256 operator()(__m256 v) const { return Tanh8(v); }
};
struct ErfF {
  __m256 operator()(__m256 v) const { return Erf8(v); }
};
struct SigmoidF {
  __m256 operator()(__m256 v) const { return Sigmoid8(v); }
};
struct SwishF {
  __m256 operator()(__m256 v) const { return _mm256_mul_ps(v, Sigmoid8(v)); }
};
struct GeluF {
  __m256 operator()(__m256 v) const { return Gelu8(v); }
};
struct GeluTanhF {
  __m256 operator()(__m256 v) const {
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    const __m256 u = _mm256_mul_ps(Set(0.7978845608028654f), _mm256_fmadd_ps(Set(0.044715f), cube, v));
    return _mm256_mul_ps(_mm256_mul_ps(Set(0.5f), v), _mm256_add_ps(Set(1.0f), Tanh8(u)));
  }
};
struct EluF {
  __m256 alpha, scale;
  __m256 operator()(__m256 v) const {
    const __m256 negative = _mm256_mul_ps(alpha, Expm18(v));
    const __m256 r = _mm256_blendv_ps(v, negative, _mm256_cmp_ps(v, Set(0.0f), _CMP_LT_OQ));
    return _mm256_mul_ps(scale, r);
  }
};

void Avx2Exp(const float* x, float* y, int64_t n) { Map8(x, y, n, ExpF()); }
void Avx2Log(const float* x, float* y, int64_t n) { Map8(x, y, n, LogF()); }
void Avx2Tanh(const float* x, float* y, int64_t n) { Map8(x, y, n, TanhF()); }
void Avx2Erf(const float* x, float* y, int64_t n) { Map8(x, y, n, ErfF()); }
void Avx2Sigmoid(const float* x, float* y, int64_t n) { Map8(x, y, n, SigmoidF()); }
void Avx2Swish(const float* x, float* y, int64_t n) { Map8(x, y, n, SwishF()); }
void Avx2Gelu(const float* x, float* y, int64_t n) { Map8(x, y, n, GeluF()); }
void Avx2GeluTanh(const float* x, float* y, int64_t n) { Map8(x, y, n, GeluTanhF()); }
void Avx2Elu(const float* x, float* y, int64_t n, float alpha, float scale) {
  Map8(x, y, n, EluF{Set(alpha), Set(scale)});
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

float Avx2Max(const float* x, int64_t n) {
  // max(v, acc) returns acc when v is NaN, so NaNs are skipped as in the portable loop.
  __m256 acc = Set(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x + i), acc);
  float m = HorizontalMax(acc);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float Avx2ExpShiftedSum(const float* x, float* y, int64_t n, float shift) {
  const __m256 s = Set(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(y + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  if (i < n) {
    const __m256i mask = TailMask(n - i);
    // Masked-off lanes load 0; exp(0 − shift) there is dropped by the mask before summing.
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), s));
    _mm256_maskstore_ps(y + i, mask, e);
    acc = _mm256_add_ps(acc, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
  }
  return HorizontalSum(acc);
}

}  // namespace

const PathTable kAvx2Table = {Avx2Exp,     Avx2Log,   Avx2Tanh,     Avx2Erf,
                              Avx2Sigmoid, Avx2Swish, Avx2Gelu,     Avx2GeluTanh,
                              Avx2Elu,     Avx2Max,   Avx2ExpShiftedSum};

}  // namespace vmath
}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
