// The portable build of the channels-last depthwise loops (channels_last_depthwise_tiles.inc with
// V a GCC vector of 8 floats, lowered to whatever the build's target has), plus
// ChannelsLastDepthwiseTiles(), which picks this, the AVX2+FMA or the AVX-512 build at run time.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/channels_last_depthwise_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

// The vector type is internal to this file, so the ABI note about passing it without AVX does
// not concern any caller.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tfpopef {
namespace kernels {
namespace {

#include "tf_popef_op/runtime/cc/kernels/support/vector8_portable.inc"

#include "tf_popef_op/runtime/cc/kernels/nchwc/channels_last_depthwise_tiles.inc"

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
