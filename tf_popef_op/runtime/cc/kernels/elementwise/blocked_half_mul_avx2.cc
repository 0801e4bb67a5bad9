// MulBlockedHalfRunsAvx2 (blocked_half_mul.h), compiled for AVX2 + F16C whatever the build's
// -march (target_pragma.h), so it is entered only through BlockedHalfRunsMultiplier() after the
// CPU check; and that picker.
#include "tf_popef_op/runtime/cc/kernels/elementwise/blocked_half_mul.h"

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {

namespace {

// Functions of the target region, not lambdas (a lambda's own function could fall outside the
// AVX2 target's ABI with some compilers).
inline __m256 LoadRun(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline void StoreRun(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace

void MulBlockedHalfRunsAvx2(const uint16_t* x, const uint16_t* s, uint16_t* y, int64_t runs) {
  const __m256 scale = LoadRun(s);
  int64_t j = 0;
  for (; j + 4 <= runs; j += 4) {  // four runs in flight: the conversions' latency overlaps
    const __m256 v0 = LoadRun(x + j * 8), v1 = LoadRun(x + j * 8 + 8);
    const __m256 v2 = LoadRun(x + j * 8 + 16), v3 = LoadRun(x + j * 8 + 24);
    StoreRun(y + j * 8, _mm256_mul_ps(v0, scale));
    StoreRun(y + j * 8 + 8, _mm256_mul_ps(v1, scale));
    StoreRun(y + j * 8 + 16, _mm256_mul_ps(v2, scale));
    StoreRun(y + j * 8 + 24, _mm256_mul_ps(v3, scale));
  }
  for (; j < runs; ++j) StoreRun(y + j * 8, _mm256_mul_ps(LoadRun(x + j * 8), scale));
}

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64

namespace tfpopef {
namespace kernels {

MulBlockedHalfRunsFn BlockedHalfRunsMultiplier() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return MulBlockedHalfRunsAvx2;
#endif
  return nullptr;
}

}  // namespace kernels
}  // namespace tfpopef
