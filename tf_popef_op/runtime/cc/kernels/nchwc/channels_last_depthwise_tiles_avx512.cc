// The AVX-512 build of the channels-last depthwise loops (channels_last_depthwise_tiles.inc),
// the same 8-float loops compiled with AVX-512VL (32 vector registers) whatever the build's
// -march (target_pragma.h), so it is entered only through ChannelsLastDepthwiseTiles() after the
// CPU check.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/nchwc/channels_last_depthwise_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "tf_popef_op/runtime/cc/kernels/support/avx512_intrinsics.h"

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512vl")

namespace tfpopef {
namespace kernels {
namespace {

#include "tf_popef_op/runtime/cc/kernels/nchwc/channels_last_depthwise_m256.inc"

}  // namespace

const ChannelsLastDepthwiseTileFns kChannelsLastDepthwiseAvx512Tiles = {ChannelsLastDepthwiseRows<float>,
                                                                      ChannelsLastDepthwiseRows<uint16_t>};

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
