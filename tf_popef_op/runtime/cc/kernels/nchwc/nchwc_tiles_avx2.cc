// The AVX2+FMA build of the NCHW8c tile loops (nchwc_tiles_m256.inc), compiled for that target
// whatever the build's -march (target_pragma.h), so it is entered only through NchwcTiles()
// after the CPU check.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {
namespace {

// 2 output blocks × 6 pixels: 12 accumulators of the 16 vector registers.
constexpr int kConvTileBlocks = 2;

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles_m256.inc"

}  // namespace

const NchwcTileFns kNchwcAvx2Tiles = {ConvRow<float, float>, ConvRow<float, uint16_t>, ConvRow<uint16_t, uint16_t>,
                                      ConvRow<uint16_t, float>, DepthwiseRow<float>, DepthwiseRow<uint16_t>,
                                      MaxPoolRow<float>, MaxPoolRow<uint16_t>, AveragePoolRow<float>,
                                      AveragePoolRow<uint16_t>, PointwiseRowMixed<uint16_t, float>,
                                      PointwiseRowMixed<float, uint16_t>, DepthwiseRow<float, uint16_t>};

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
