// The inner loops of ChannelsLastDepthwiseConv (channels_last_depthwise.cc): a depthwise
// convolution on channels-last activations [N, H, W, C] (C a multiple of 8) with the blocked
// depthwise weights of NchwcConv [C/8, KH, KW, 8], bias, and optionally LayerNormalization over
// C as its epilogue.
//
// A work item is a band of output rows of one image (one row, or several on wide planes with
// several images: channels_last_depthwise.cc). For each 8-channel block in turn it runs the
// band's rows, a tile of up to kChannelsLastTilePixels pixels at a time: the window tile (the
// row's KW weight vectors in registers, each input vector of the tile's span loaded once and
// added into every pixel whose window covers it, as the blocked depthwise tiles), so the
// block's window rows stay in L1 from one output row of the band to the next; the sums go to a
// float32 buffer [rows, OW, C]. Once every block is done, each pixel is finished there: bias
// only, or mean, variance and normalize · gamma + beta, so the convolution's output never
// crosses memory un-normalized.
//
// Activations are float or float16 bits (widened in registers as they are loaded; Y rounded
// once to nearest even as it is stored); weights, bias, gamma and beta are float32.
//
// The code is compiled three times (channels_last_depthwise_tiles.inc): AVX-512 (the 8-float
// loops with 32 vector registers), AVX2+FMA, and portable (GCC vector types);
// ChannelsLastDepthwiseTiles() picks one from vector_math.h's run-time path (TF_POPEF_SIMD).
#pragma once

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"

namespace tfpopef {
namespace kernels {

// Output pixels per tile: 7 divides the 56/28/14/7-wide planes of ConvNeXt; the tile's
// accumulators, KW weights and one input vector fit AVX2's 16 registers at KW = 7.
constexpr int64_t kChannelsLastTilePixels = 7;
// Output rows per work item at most (the kernel picks a band that shares out evenly).
constexpr int64_t kChannelsLastBandRows = 8;

// What a row function reads besides X: the weights [C/8, KH, KW, 8], and per channel [C] the
// bias (or null), LayerNormalization's gamma and beta (null without the normalization; beta
// may be null with it).
struct ChannelsLastDepthwiseParams {
  const float* w = nullptr;
  const float* bias = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  bool layer_norm = false;
  float epsilon = 0.0f;
};

// Output rows [oy0, oy1) of image n. g: the window as NchwcConv's (in_blocks = C/8, h, w, oh,
// ow, kh ... pad_left); buffer: (oy1 − oy0) · OW · C floats of the caller's.
template <typename AT>
using ChannelsLastDepthwiseRowFn = void (*)(const NchwcGeometry& g, const AT* x, const ChannelsLastDepthwiseParams& p,
                                            AT* y, float* buffer, int64_t n, int64_t oy0, int64_t oy1);

struct ChannelsLastDepthwiseTileFns {
  ChannelsLastDepthwiseRowFn<float> row;
  ChannelsLastDepthwiseRowFn<uint16_t> row_half;
};

// The build for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
const ChannelsLastDepthwiseTileFns& ChannelsLastDepthwiseTiles();

extern const ChannelsLastDepthwiseTileFns kChannelsLastDepthwisePortableTiles;
// Defined only on x86-64 builds; use only when CpuHasAvx2Fma() / CpuHasAvx512().
extern const ChannelsLastDepthwiseTileFns kChannelsLastDepthwiseAvx2Tiles;
extern const ChannelsLastDepthwiseTileFns kChannelsLastDepthwiseAvx512Tiles;

}  // namespace kernels
}  // namespace tfpopef
