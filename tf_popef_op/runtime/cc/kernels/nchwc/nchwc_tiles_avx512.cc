// The AVX-512 build of the NCHW8c tile loops (nchwc_tiles_m256.inc): the same 8-float vectors
// as the AVX2 build, compiled with AVX-512VL so the convolution tile can keep 24 accumulators
// in the 32 vector registers (target_pragma.h), plus the 16-float tiles for paired weights
// (nchwc_tiles_zmm.inc). Entered only through NchwcTiles() after the CPU check.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "tf_popef_op/runtime/cc/kernels/support/avx512_intrinsics.h"

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512vl")

namespace tfpopef {
namespace kernels {
namespace {

// Unpaired weights: 4 output blocks × 6 pixels, 24 accumulators of AVX-512VL's 32 vector
// registers, so each broadcast input value feeds 4 multiply-adds instead of 2 (ResNet50's
// convolutions run 4-28 % faster per layer than with the AVX2 tile; docs/benchmarks.md).
// Paired weights run the 16-float tiles of nchwc_tiles_zmm.inc.
constexpr int kConvTileBlocks = 4;
#define TFPOPEF_NCHWC_PAIR_TILES
#define TFPOPEF_NCHWC_AVX512_SIGMOID

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles_m256.inc"

#undef TFPOPEF_NCHWC_AVX512_SIGMOID
#undef TFPOPEF_NCHWC_PAIR_TILES

}  // namespace

const NchwcTileFns kNchwcAvx512Tiles = {ConvRow<float, float>, ConvRow<float, uint16_t>, ConvRow<uint16_t, uint16_t>,
                                        ConvRow<uint16_t, float>, DepthwiseRow<float>, DepthwiseRow<uint16_t>,
                                        MaxPoolRow<float>, MaxPoolRow<uint16_t>, AveragePoolRow<float>,
                                        AveragePoolRow<uint16_t>, PointwiseRowMixed<uint16_t, float>,
                                        PointwiseRowMixed<float, uint16_t>, DepthwiseRow<float, uint16_t>};

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
