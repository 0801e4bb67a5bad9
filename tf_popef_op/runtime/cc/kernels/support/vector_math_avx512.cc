// The functions of vector_math.h's AVX-512 path that gain from 16 lanes and AVX-512's
// instructions (the rest of that path is the AVX2 code): Gelu, whose division, exponent
// scaling (vscalefps rounds denormal results once) and sign blend are each one instruction
// here (on AMD Zen 4 ~0.6 of the AVX2 version's time per element), Sigmoid and Swish
// (vector_math_avx512.inc: the AVX2 path's bits, ~0.7 of its time) and the softmax's
// ExpShiftedSum (the AVX2 path's bits). Compiled for AVX-512F and
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

// vector_math_avx2.cc's Gelu8 (which explains each step) on 16 lanes, but with x clamped on both
// sides, so that v = xc·Φ(−t) is one product for either sign and x > 0 takes x − v (for
// x > 14.5, v < 2^−149·15 rounds away: x, inf included) instead of x·(1 − Φ(−t)): 0.94 of
// the time, the same worst error (4.91 ulp on every 2^-13 of [-16, 16] and 2^20 random floats).
inline __m512 Gelu16(__m512 x) {
  // NaN stays NaN (max and min return their 2nd operand when it is NaN)
  const __m512 xc = _mm512_min_ps(Set(14.5f), _mm512_max_ps(Set(-14.5f), x));
  const __m512 t = _mm512_abs_ps(xc);
  const __m512 d = _mm512_fmadd_ps(t, Set(0.3f), Set(1.0f));
  const __m512 d_error = _mm512_fmadd_ps(t, Set(0.3f), _mm512_sub_ps(Set(1.0f), d));
  const __m512 w = _mm512_div_ps(Set(1.0f), d);
  const __m512 w_error = _mm512_fnmadd_ps(w, d_error, _mm512_fnmadd_ps(w, d, Set(1.0f)));
  __m512 p = Set(kGeluPhiPoly[0]);
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[1]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[2]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[3]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[4]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[5]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[6]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[7]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[8]));
  p = _mm512_fmadd_ps(p, w, Set(kGeluPhiPoly[9]));
  __m512 q = _mm512_mul_ps(w, p);
  q = _mm512_fmadd_ps(_mm512_mul_ps(q, w_error), _mm512_fmadd_ps(w, Set(1.76f), Set(0.9f)), q);
  const __m512 a = _mm512_mul_ps(t, t);
  const __m512 b = _mm512_fmsub_ps(t, t, a);
  const __m512 half_a = _mm512_mul_ps(a, Set(-0.5f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(half_a, Set(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, Set(0.693359375f), half_a);
  r = _mm512_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  r = _mm512_fnmadd_ps(b, Set(0.5f), r);
  __m512 e = Set(1.9875691500e-4f);  // e^r: ExpReduced8's polynomial (vector_math_m256.inc)
  e = _mm512_fmadd_ps(e, r, Set(1.3981999507e-3f));
  e = _mm512_fmadd_ps(e, r, Set(8.3334519073e-3f));
  e = _mm512_fmadd_ps(e, r, Set(4.1665795894e-2f));
  e = _mm512_fmadd_ps(e, r, Set(1.6666665459e-1f));
  e = _mm512_fmadd_ps(e, r, Set(5.0000001201e-1f));
  e = _mm512_fmadd_ps(e, _mm512_mul_ps(r, r), _mm512_add_ps(r, Set(1.0f)));
  const __m512 u = _mm512_mul_ps(e, q);  // Φ(−t) / 2^n
  const __m512 v = _mm512_scalef_ps(_mm512_mul_ps(xc, u), n);  // xc·Φ(−t), rounded once
  return _mm512_mask_sub_ps(v, _mm512_cmp_ps_mask(x, Set(0.0f), _CMP_GT_OQ), x, v);
}

// e^x as vector_math_m256.inc's Exp8, bit for bit (the same clamp, reduction and polynomial),
// with its two-step scaling by 2^n replaced by one vscalefps (p·2^n rounded once, as the two
// steps round once). NaN needs no blend: max and min return their second operand, x, when it
// is NaN, and the arithmetic keeps it.
inline __m512 Exp16(__m512 x) {
  const __m512 xc = _mm512_min_ps(Set(89.0f), _mm512_max_ps(Set(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, Set(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, Set(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, Set(-2.12194440e-4f), r);
  return _mm512_scalef_ps(avx512_math::ExpReduced16(r), n);
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
// The softmax's exponentials and their sum (vmath::ExpShiftedSum): 16 lanes, 0.45 of the AVX2
// loop's time per element on Zen 4 (0.21 against 0.46 ns: its Exp8 scales in two steps and
// blends NaN back in).
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
