// The portable build of the packed-GEMM tiles (packed_gemm_tiles.inc with V a GCC vector of 8
// floats, lowered to whatever the build's target has), plus PackedGemmTiles(), which picks
// this, the AVX2+FMA or the AVX-512 build at run time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

// The vector type is internal to this file, so the ABI note about passing it without AVX does
// not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tfpopef {
namespace kernels {
namespace {

typedef float V __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;
// 4 rows × 2 vectors: 8 accumulators, 16 SSE registers on a baseline x86-64.
constexpr int kTileRows = 4;
constexpr int kPanelVectors = 2;
constexpr bool kTileGelu = false;
inline V VGelu(V v) { return v; }
inline V VZero() { return V{}; }
inline V VLoad(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(v));  // unaligned
  return v;
}
inline void VStore(float* p, V v) { __builtin_memcpy(p, &v, sizeof(v)); }
inline V VBroadcast(const float* p) { return V{} + *p; }
inline V VFma(V a, V b, V c) { return a * b + c; }
inline V VAdd(V a, V b) { return a + b; }
inline V VMul(V a, V b) { return a * b; }
inline V VLoadHalf(const uint16_t* p) {
  V v;
  for (int i = 0; i < kLanes; ++i) v[i] = HalfToFloat(p[i]);
  return v;
}
inline void VStoreHalf(uint16_t* p, V v) {
  for (int i = 0; i < kLanes; ++i) p[i] = FloatToHalf(v[i]);
}

#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.inc"

}  // namespace

const PackedGemmTileFns kPackedGemmPortableTiles = kFns;

const PackedGemmTileFns& PackedGemmTiles() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  switch (vmath::ActivePath()) {
    case vmath::SimdPath::kAvx512: return kPackedGemmAvx512Tiles;
    case vmath::SimdPath::kAvx2: return kPackedGemmAvx2Tiles;
    case vmath::SimdPath::kPortable: break;
  }
#endif
  return kPackedGemmPortableTiles;
}

}  // namespace kernels
}  // namespace tfpopef
