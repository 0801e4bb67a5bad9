// The AVX2+FMA build of the NCHW8c tile loops (nchwc_tiles_m256.inc). Compiled for AVX2+FMA
// through a target pragma whatever the build's -march, so it is entered only through
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

// 2 output blocks × 6 pixels: 12 accumulators of the 16 vector registers.
constexpr int kConvTileBlocks = 2;

#include "tf_popef_op/runtime/cc/kernels/nchwc_tiles_m256.inc"

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
