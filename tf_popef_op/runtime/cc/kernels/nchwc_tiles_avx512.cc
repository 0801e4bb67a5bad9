// The AVX-512 build of the NCHW8c tile loops (nchwc_tiles_m256.inc): the same 8-float vectors
// as the AVX2 build, compiled with AVX-512VL so the convolution tile can keep 24 accumulators
// in the 32 vector registers. Entered only through NchwcTiles() after the CPU check (target
// pragma as in nchwc_tiles_avx2.cc).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "tf_popef_op/runtime/cc/kernels/nchwc_tiles.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512vl"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl")
#endif

namespace tfpopef {
namespace kernels {
namespace {

// 4 output blocks × 6 pixels: 24 accumulators of AVX-512VL's 32 vector registers, so each
// broadcast input value feeds 4 multiply-adds instead of 2 (ResNet50's convolutions ran
// 10-25 % faster per thread than with the AVX2 tile; docs/benchmarks.md).
constexpr int kConvTileBlocks = 4;

#include "tf_popef_op/runtime/cc/kernels/nchwc_tiles_m256.inc"

}  // namespace

const NchwcTileFns kNchwcAvx512Tiles = {ConvRow, DepthwiseRow, MaxPoolRow};

}  // namespace kernels
}  // namespace tfpopef

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // x86-64
