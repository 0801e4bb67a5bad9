#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"

#include <cstring>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TFPOPEF_HAVE_F16C_PATH 1
#endif

namespace tfpopef {
namespace kernels {
namespace {

#ifdef TFPOPEF_HAVE_F16C_PATH
// Compiled for AVX+F16C regardless of the build's -march; only called after the CPU check.
// Tails go through a padded 8-element block so every element takes the same instruction.
__attribute__((target("avx,f16c"))) void WidenF16C(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  if (i < n) {
    uint16_t in[8] = {};
    float out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
    _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(float));
  }
}

__attribute__((target("avx,f16c"))) void NarrowF16C(const float* src, uint16_t* dst, int64_t n) {
  // Rounding is given in the immediate (nearest even), so MXCSR's mode does not matter.
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound));
  if (i < n) {
    float in[8] = {};
    uint16_t out[8];
    std::memcpy(in, src + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(in), kRound));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

bool CpuHasF16C() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx") && CpuidHasF16c();
}
#else
bool CpuHasF16C() { return false; }
#endif

bool UseF16C() {
  static const bool use = CpuHasF16C();  // thread-safe one-time check
  return use;
}

}  // namespace

void WidenHalfToFloat(const uint16_t* src, float* dst, int64_t n) {
#ifdef TFPOPEF_HAVE_F16C_PATH
  if (UseF16C()) return WidenF16C(src, dst, n);
#endif
  HalfToFloatN(src, dst, n);
}

void NarrowFloatToHalf(const float* src, uint16_t* dst, int64_t n) {
#ifdef TFPOPEF_HAVE_F16C_PATH
  if (UseF16C()) return NarrowF16C(src, dst, n);
#endif
  FloatToHalfN(src, dst, n);
}

bool HalfConversionUsesF16C() { return UseF16C(); }

}  // namespace kernels
}  // namespace tfpopef
