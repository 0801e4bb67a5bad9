// The AVX2+FMA build of the NCHW8c tile loops (nchwc_tiles.inc with V = __m256). Compiled for
// AVX2+FMA through a target pragma whatever the build's -march, so it is entered only through
// NchwcTiles() after the CPU check; every header comes before the pragma (see
// vector_math_avx2.cc for why).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "tf_popef_op/runtime/cc/kernels/nchwc_tiles.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace tfpopef {
namespace kernels {
namespace {

using V = __m256;
inline V VZero() { return _mm256_setzero_ps(); }
inline V VSet(float v) { return _mm256_set1_ps(v); }
inline V VLoad(const float* p) { return _mm256_loadu_ps(p); }
inline void VStore(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V VBroadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V VFma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V VAdd(V a, V b) { return _mm256_add_ps(a, b); }
inline V VMax(V a, V b) { return _mm256_max_ps(a, b); }
inline V VMin(V a, V b) { return _mm256_min_ps(a, b); }

#include "tf_popef_op/runtime/cc/kernels/nchwc_tiles.inc"

}  // namespace

const NchwcTileFns kNchwcAvx2Tiles = {ConvRow, DepthwiseRow, MaxPoolRow};

}  // namespace kernels
}  // namespace tfpopef

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // x86-64
