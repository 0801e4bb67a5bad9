// The AVX-512 build of the packed-GEMM tiles (packed_gemm_tiles.inc): 6 rows × 4 vectors of 16
// floats, 24 accumulators of the 32 registers; each step of k does 4 panel loads and 6
// broadcasts (folded into the multiply-adds) for 24 multiply-adds; a Gelu epilogue is
// vector_math_avx512.cc's Gelu16, applied in registers. Entered only through
// PackedGemmTiles() after the CPU check.
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "tf_popef_op/runtime/cc/kernels/support/avx512_intrinsics.h"

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512vl")

namespace tfpopef {
namespace kernels {
namespace {

using V = __m512;
constexpr int64_t kLanes = 16;
constexpr int kTileRows = 6;
constexpr int kPanelVectors = 4;
inline V VZero() { return _mm512_setzero_ps(); }
inline V VLoad(const float* p) { return _mm512_loadu_ps(p); }
inline void VStore(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V VBroadcast(const float* p) { return _mm512_set1_ps(*p); }
inline V VFma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V VAdd(V a, V b) { return _mm512_add_ps(a, b); }
inline V VMul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V VLoadHalf(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline void VStoreHalf(uint16_t* p, V v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

#include "tf_popef_op/runtime/cc/kernels/support/vector_math_gelu16.inc"
constexpr bool kTileGelu = true;
inline V VGelu(V v) { return Gelu16(v); }

#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.inc"

}  // namespace

const PackedGemmTileFns kPackedGemmAvx512Tiles = kFns;

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
