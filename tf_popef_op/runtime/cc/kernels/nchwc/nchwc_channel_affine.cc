// The per-channel affine planes of nchwc_channel_affine.h on 8-float AVX vectors.
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_channel_affine.h"

#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {
namespace {

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void Store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void Store8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <typename AT, NchwcEpilogue::InRegister ACT>
void Planes(const AT* x, const float* scale, const NchwcEpilogue& e, AT* y, int64_t blocks, int64_t pixels,
            int64_t p0, int64_t p1) {
  const __m256 lo = ACT == NchwcEpilogue::InRegister::kRelu ? _mm256_setzero_ps() : _mm256_set1_ps(e.lo);
  const __m256 hi = _mm256_set1_ps(e.hi);
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t cb = p % blocks;
    const __m256 s = _mm256_loadu_ps(scale + cb * kNchwcBlock);
    const __m256 b = e.bias != nullptr ? _mm256_loadu_ps(e.bias + cb * kNchwcBlock) : _mm256_setzero_ps();
    const AT* xp = x + p * pixels * kNchwcBlock;
    AT* yp = y + p * pixels * kNchwcBlock;
    for (int64_t i = 0; i < pixels; ++i) {
      __m256 v = _mm256_add_ps(_mm256_mul_ps(Load8(xp + i * kNchwcBlock), s), b);
      if (ACT != NchwcEpilogue::InRegister::kNone) v = _mm256_max_ps(v, lo);
      if (ACT == NchwcEpilogue::InRegister::kClip) v = _mm256_min_ps(v, hi);
      Store8(yp + i * kNchwcBlock, v);
    }
  }
}

template <typename AT>
void Dispatch(const AT* x, const float* scale, const NchwcEpilogue& e, AT* y, int64_t blocks, int64_t pixels,
              int64_t p0, int64_t p1) {
  using R = NchwcEpilogue::InRegister;
  switch (e.in_register) {
    case R::kRelu: return Planes<AT, R::kRelu>(x, scale, e, y, blocks, pixels, p0, p1);
    case R::kClip: return Planes<AT, R::kClip>(x, scale, e, y, blocks, pixels, p0, p1);
    default: return Planes<AT, R::kNone>(x, scale, e, y, blocks, pixels, p0, p1);
  }
}

}  // namespace
}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()
#endif  // x86-64

namespace tfpopef {
namespace kernels {

namespace {

// The loop for this host's SIMD path: the AVX2 one (also on the AVX-512 path), else none.
template <typename AT>
ChannelAffinePlanesFn<AT> PlanesForActivePath() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return Dispatch<AT>;
#endif
  return nullptr;
}

}  // namespace

ChannelAffinePlanesFn<float> ChannelAffinePlanes() { return PlanesForActivePath<float>(); }
ChannelAffinePlanesFn<uint16_t> ChannelAffinePlanesHalf() { return PlanesForActivePath<uint16_t>(); }

}  // namespace kernels
}  // namespace tfpopef
