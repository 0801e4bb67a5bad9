// The portable build of the NCHW8c tile loops (nchwc_tiles.inc with V a GCC vector of 8 floats,
// which the compiler lowers to whatever the build's target has: two SSE registers on a baseline
// x86-64), plus NchwcTiles(), which picks this, the AVX2+FMA or the AVX-512 build at run time.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

// The vector type is internal to this file, so the ABI note about passing it without AVX does
// not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tfpopef {
namespace kernels {
namespace {

#include "tf_popef_op/runtime/cc/kernels/support/vector8_portable.inc"

inline V VLoadWeights(const float* p) { return VLoad(p); }
inline V VLoadWeights(const uint16_t* p) { return VLoad(p); }
inline V VBroadcast(const float* p) { return V{} + *p; }
inline V VBroadcast(const uint16_t* p) { return V{} + HalfToFloat(*p); }
inline V VAdd(V a, V b) { return a + b; }
inline V VMul(V a, V b) { return a * b; }
// The scalar sigmoid per lane, as vector_math's portable path.
inline V VSigmoid(V v) {
  for (int i = 0; i < 8; ++i) v[i] = activation::Sigmoid(v[i]);
  return v;
}
inline V VDiv(V a, V b) { return a / b; }
inline V VMax(V a, V b) { return a > b ? a : b; }
inline V VMin(V a, V b) { return a < b ? a : b; }

// 2 output blocks × 6 pixels, as the AVX2 build (a baseline x86-64 spills them anyway).
constexpr int kConvTileBlocks = 2;

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.inc"

}  // namespace

const NchwcTileFns kNchwcPortableTiles = {ConvRow<float, float>, ConvRow<float, uint16_t>, ConvRow<uint16_t, uint16_t>,
                                          ConvRow<uint16_t, float>, DepthwiseRow<float>, DepthwiseRow<uint16_t>,
                                          MaxPoolRow<float>, MaxPoolRow<uint16_t>, AveragePoolRow<float>,
                                          AveragePoolRow<uint16_t>, PointwiseRowMixed<uint16_t, float>,
                                          PointwiseRowMixed<float, uint16_t>, DepthwiseRow<float, uint16_t>};

const NchwcTileFns& NchwcTiles() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  switch (vmath::ActivePath()) {
    case vmath::SimdPath::kAvx512: return kNchwcAvx512Tiles;
    case vmath::SimdPath::kAvx2: return kNchwcAvx2Tiles;
    case vmath::SimdPath::kPortable: break;
  }
#endif
  return kNchwcPortableTiles;
}

}  // namespace kernels
}  // namespace tfpopef
