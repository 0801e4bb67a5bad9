// The functions of vector_math.h's AVX-512 path that gain from 16 lanes and AVX-512's
// instructions (the rest of that path is the AVX2 code): Gelu, whose coefficient tables are
// one vpermt2ps / vpermps per 16 lanes and whose exponent scaling (vscalefps rounds denormal
// results once) and sign blend are each one instruction here (vector_math_gelu16.inc, shared
// with the AVX-512 packed-GEMM tiles), Exp and the softmax's
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

#include "tf_popef_op/runtime/cc/kernels/support/vector_math_gelu16.inc"

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
