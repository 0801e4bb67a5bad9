// The AVX2+FMA build of the packed-GEMM tiles (packed_gemm_tiles.inc): 6 rows × 2 vectors of 8
// floats, 12 accumulators of the 16 registers. Entered only through PackedGemmTiles() after
// the CPU check.
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {
namespace {

using V = __m256;
constexpr int64_t kLanes = 8;
constexpr int kTileRows = 6;
constexpr int kPanelVectors = 2;
constexpr bool kTileGelu = false;
inline V VGelu(V v) { return v; }
inline V VZero() { return _mm256_setzero_ps(); }
inline V VLoad(const float* p) { return _mm256_loadu_ps(p); }
inline void VStore(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V VBroadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline V VFma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V VAdd(V a, V b) { return _mm256_add_ps(a, b); }
inline V VMul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V VLoadHalf(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline void VStoreHalf(uint16_t* p, V v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.inc"

}  // namespace

const PackedGemmTileFns kPackedGemmAvx2Tiles = kFns;

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
