// The portable build of the channels-last depthwise loops (channels_last_depthwise_tiles.inc with
// V a GCC vector of 8 floats, lowered to whatever the build's target has), plus
// ChannelsLastDepthwiseTiles(), which picks this, the AVX2+FMA or the AVX-512 build at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/conv/channels_last_depthwise_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

// The vector type is internal to this file, so the ABI note about passing it without AVX does
// not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tfpopef {
namespace kernels {
namespace {

typedef float V __attribute__((vector_size(32)));
inline V VZero() { return V{}; }
inline V VSet(float v) { return V{} + v; }
inline V VLoad(const float* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(v));  // unaligned
  return v;
}
inline V VLoad(const uint16_t* p) {
  V v;
  for (int i = 0; i < 8; ++i) v[i] = HalfToFloat(p[i]);
  return v;
}
inline void VStore(float* p, V v) { __builtin_memcpy(p, &v, sizeof(v)); }
inline void VStore(uint16_t* p, V v) {  // rounded to nearest even
  for (int i = 0; i < 8; ++i) p[i] = FloatToHalf(v[i]);
}
inline V VFma(V a, V b, V c) { return a * b + c; }

#include "tf_popef_op/runtime/cc/kernels/conv/channels_last_depthwise_tiles.inc"

}  // namespace

const ChannelsLastDepthwiseTileFns kChannelsLastDepthwisePortableTiles = {ChannelsLastDepthwiseRows<float>,
                                                                          ChannelsLastDepthwiseRows<uint16_t>};

const ChannelsLastDepthwiseTileFns& ChannelsLastDepthwiseTiles() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  switch (vmath::ActivePath()) {
    case vmath::SimdPath::kAvx512: return kChannelsLastDepthwiseAvx512Tiles;
    case vmath::SimdPath::kAvx2: return kChannelsLastDepthwiseAvx2Tiles;
    case vmath::SimdPath::kPortable: break;
  }
#endif
  return kChannelsLastDepthwisePortableTiles;
}

}  // namespace kernels
}  // namespace tfpopef
