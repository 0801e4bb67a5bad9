// The inner loops of the NCHW8c (blocked) kernels: NchwcConv (nchwc_conv.cc), NchwcMaxPool and
// NchwcAveragePool (nchwc_pool.cc). Layout and ops: docs/popef.md, "Blocked layout".
//
// A blocked tensor [N, C/8, H, W, 8] keeps the 8 channels of one pixel in one 32-byte vector,
// so a convolution computes an output tile of OB blocks (8·OB channels) × P pixels in
// registers: per input channel and window tap it broadcasts P input values and does OB·P
// vector multiply-adds with the tap's OB weight vectors. Every output pixel is written once,
// as whole vectors, with bias, residual sum and the activation (NchwcEpilogue) applied in the
// registers; the other activations run over each finished row segment while it is in cache.
//
// Each function computes one output row segment; the kernels spread row segments over the
// intra-op pool. The code is compiled three times (nchwc_tiles.inc): for AVX-512 (tiles of 4
// pairs of blocks, a pair being one 16-float vector, nchwc_tiles_zmm.inc; 4 blocks of 8 when
// the weights are not paired), for AVX2+FMA (2 blocks in 16 registers), and portable (GCC
// vector types, whatever the build's -march); NchwcTiles() picks one from vector_math.h's
// run-time path (TF_POPEF_SIMD), so one build runs on any x86-64 host.
#pragma once

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"

namespace tfpopef {
namespace kernels {

constexpr int64_t kNchwcBlock = 8;

// Input lanes of a channels-last X [N, H, W, C] (one block of C interleaved lanes) the tiles
// are built for: each count is an instantiation of every tile, so only the RGB stem's 3 (and 1,
// which is the plain-input layout itself).
inline bool ChannelsLastLanesSupported(int64_t c) { return c == 1 || c == 3; }

// The geometry of one blocked convolution or pooling step, fixed at prepare. Input blocks
// are `in_lanes` channels wide: 8 for a blocked input, 1 for a plain NCHW input (the first
// convolution of an RGB network reads its 3 planes directly), C = 1 or 3 for
// a channels-last input (one block: the stem reading the NHWC input, a window row's KW·C
// values contiguous).
struct NchwcGeometry {
  int64_t in_blocks = 0, in_lanes = kNchwcBlock;  // C/8 blocks of 8, or C planes of 1
  int64_t out_blocks = 0;                          // M/8
  // Output blocks per weight group: W's last axis holds 8·out_group output channels, so a pair
  // of blocks (out_group 2) is one 16-float vector for the AVX-512 tiles (M/8 even), 1 otherwise.
  int64_t out_group = 1;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_top = 0, pad_left = 0;
  int64_t pad_bottom = 0, pad_right = 0;  // read by average pooling's count_include_pad only
  // Convolution: input blocks per pass over the input channels (see ConvPass in nchwc_tiles.inc).
  int64_t in_blocks_per_pass = 1;
  // Float16 weights: widened into a float32 scratch once per work item and pass (true: rows
  // long enough that many pixel tiles share it), else in registers by every tile.
  bool widen_weights = false;
  // Write the finished output with non-temporal (streaming) stores, so a line of Y is not read
  // before it is overwritten (NchwcConv sets it for big float32 Y with a residual Sum). Only the
  // AVX-512 paired tiles stream, and not with a sigmoid-family epilogue; the other tiles store as
  // usual (same values). The caller fences (StreamFence) before Y is read by another thread.
  bool stream_output = false;
  // Input blocks ahead of the current one whose weights the AVX-512 paired tiles prefetch (0: none).
  int64_t prefetch_weight_blocks = 0;
  // Elements between input / output blocks when the rows are part of larger planes (a band of
  // rows of NchwcInvertedResidual); 0: the planes are h·w / oh·ow pixels.
  int64_t in_plane = 0, out_plane = 0;

  int64_t in_block_stride() const { return in_plane > 0 ? in_plane : h * w * in_lanes; }  // between input blocks
  int64_t in_image_stride() const { return in_blocks * in_block_stride(); }
  int64_t out_block_stride() const { return out_plane > 0 ? out_plane : oh * ow * kNchwcBlock; }
  int64_t out_image_stride() const { return out_blocks * out_block_stride(); }
  // Floats of weights per output block: [in_blocks, kh, kw, in_lanes, 8] (depthwise: [kh, kw, 8]).
  int64_t weights_per_out_block() const { return in_blocks * kh * kw * in_lanes * kNchwcBlock; }
  // Floats of weights per group of out_group blocks (regular convolution): [in_blocks, kh, kw,
  // in_lanes, 8·out_group], block b of the group being lanes [8b, 8b + 8) of the last axis.
  int64_t weights_per_group() const { return weights_per_out_block() * out_group; }
};

// What the tile code applies before storing: bias (per output channel), the residual sum
// (Y's layout) and, in registers, Relu, Clip and the activations of the CNN families' blocks
// (Sigmoid, Swish, HardSigmoid, HardSwish: the sigmoid on vector_math's exp polynomial);
// `post` (any other activation) afterwards per row.
struct NchwcEpilogue {
  const float* bias = nullptr;  // [M] or null
  const void* sum = nullptr;    // Y's shape and dtype, or null
  enum class InRegister { kNone, kRelu, kClip, kSigmoid, kSwish, kHardSigmoid, kHardSwish };
  InRegister in_register = InRegister::kNone;
  // Clip: [lo, hi]; Swish: x·σ(lo·x); HardSigmoid: clip(lo·x + hi, 0, 1).
  float lo = 0.0f, hi = 0.0f;
  Epilogue post;                // identity unless the activation is none of the above
  // Regular convolution: X's per-(image, input channel) scale [N, C] (squeeze-and-excite's
  // excitation), or null. Each work item multiplies its copy of a pass's weights by its image's
  // scales (W'[o, c] = W[o, c]·s[n, c]), so the scaled X is never written.
  const float* input_scale = nullptr;
  // The Sum starts the accumulators at the first pass over the input channels instead of being
  // added at the last: set when Y takes the Sum's bytes (an in-place Sum) and a float32 Y holds
  // the partial sums between passes, which would overwrite the Sum before the last pass reads it.
  bool sum_first = false;
  // Float16 X with a float32 copy of W (ConvRowWidenedInput): input_scale multiplies the widened
  // X rows, rounded once to float32 as float32's Mul would, instead of the item's weights. Set
  // where X has fewer pixels per image than M outputs, where float32 keeps the Mul
  // (fold_channel_scale_into_nchwc_conv): each item's copy of its weights would scale more values.
  bool scale_input_rows = false;
};

// Activations (X, Sum, Y) and weights are float or float16 (IEEE binary16 bits, uint16_t):
// float16 is widened in registers as it is loaded; a float16 Y is rounded to nearest even once,
// as it is stored, and takes in-register activations only (NchwcEpilogue::post must be the
// identity), except in the depthwise row, which applies `post` to a float32 row piece before
// rounding it.

// Output row `oy` of image `n`, columns [ox0, ox1), for output blocks [ob0, ob0 + obn).
// x, w, y: the step's whole tensors (x blocked or plain per g.in_lanes; w as the contract of
// docs/popef.md); e: the epilogue; partial: where partial sums wait between passes over the
// input channels (Y's layout in float32: y itself when Y is float32, else a buffer; unused
// when one pass takes all input channels). Regular (group 1) convolution.
template <typename AT, typename WT>
using NchwcConvRowFn = void (*)(const NchwcGeometry& g, const AT* x, const WT* w, const NchwcEpilogue& e,
                                float* partial, AT* y, int64_t n, int64_t ob0, int64_t obn, int64_t oy, int64_t ox0,
                                int64_t ox1);
// A 1x1, stride-1 convolution on blocked X with float32 W whose X and Y types differ: float16 X
// into a float32 Y, or float32 X into a float16 Sum and Y (NchwcInvertedResidual's stages between
// float16 X and Y and float32 band buffers). A float32 Y keeps its own partial sums between
// passes; a float16 Y needs one pass over all input channels.
template <typename XT, typename AT>
using NchwcConvRowMixedFn = void (*)(const NchwcGeometry& g, const XT* x, const float* w, const NchwcEpilogue& e,
                                     float* partial, AT* y, int64_t n, int64_t ob0, int64_t obn, int64_t oy,
                                     int64_t ox0, int64_t ox1);
// Depthwise (group == C == M, blocked input, float32 weights): block `cb` of image n, row oy,
// columns [ox0, ox1).
template <typename AT>
using NchwcDepthwiseRowFn = void (*)(const NchwcGeometry& g, const AT* x, const float* w, const NchwcEpilogue& e,
                                     AT* y, int64_t n, int64_t cb, int64_t oy, int64_t ox0, int64_t ox1);
// The same row from float32 X into a float16 Y, no Sum (NchwcInvertedResidual's float32 band
// buffers into the block's float16 output).
using NchwcDepthwiseRowHalfOutFn = void (*)(const NchwcGeometry& g, const float* x, const float* w,
                                            const NchwcEpilogue& e, uint16_t* y, int64_t n, int64_t cb, int64_t oy,
                                            int64_t ox0, int64_t ox1);
// Max pooling (windows clipped to the input): block `cb` of image n, row oy, all columns. With
// zero_pads the pads are zeros (a folded zero Pad): a window reaching into them includes 0.
template <typename AT>
using NchwcMaxPoolRowFn = void (*)(const NchwcGeometry& g, bool zero_pads, const AT* x, AT* y, int64_t n,
                                   int64_t cb, int64_t oy);
// Average pooling, the same row: each window's sum over its taps inside the input times the
// reciprocal of their count, or with count_include_pad of the count of its taps inside the
// padded input [-pad_top, h + pad_bottom) x [-pad_left, w + pad_right) (0 where a window has
// no taps).
template <typename AT>
using NchwcAveragePoolRowFn = void (*)(const NchwcGeometry& g, bool count_include_pad, const AT* x, AT* y, int64_t n,
                                       int64_t cb, int64_t oy);

struct NchwcTileFns {
  NchwcConvRowFn<float, float> conv_row;
  NchwcConvRowFn<float, uint16_t> conv_row_half_weights;
  NchwcConvRowFn<uint16_t, uint16_t> conv_row_half;
  // Float16 X, Sum and Y with float32 W: a float16 W that is a weight, widened once, on the
  // first run, into a copy the kernel keeps (NchwcConv), so the tiles run the float32-weight loop.
  NchwcConvRowFn<uint16_t, float> conv_row_half_wide_weights;
  NchwcDepthwiseRowFn<float> depthwise_row;
  NchwcDepthwiseRowFn<uint16_t> depthwise_row_half;
  NchwcMaxPoolRowFn<float> max_pool_row;
  NchwcMaxPoolRowFn<uint16_t> max_pool_row_half;
  NchwcAveragePoolRowFn<float> average_pool_row;
  NchwcAveragePoolRowFn<uint16_t> average_pool_row_half;
  NchwcConvRowMixedFn<uint16_t, float> pointwise_row_half_in;
  NchwcConvRowMixedFn<float, uint16_t> pointwise_row_half_out;
  NchwcDepthwiseRowHalfOutFn depthwise_row_half_out;
};

// Orders a work item's streaming stores (NchwcGeometry::stream_output) before whatever the
// thread does next, so a thread that sees the item finished also sees its output.
inline void StreamFence() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_ia32_sfence();
#endif
}

// The build for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
const NchwcTileFns& NchwcTiles();

extern const NchwcTileFns kNchwcPortableTiles;
// Defined only on x86-64 builds (nchwc_tiles_avx2.cc, nchwc_tiles_avx512.cc); use only when
// CpuHasAvx2Fma() / CpuHasAvx512() (both include F16C).
extern const NchwcTileFns kNchwcAvx2Tiles;
extern const NchwcTileFns kNchwcAvx512Tiles;

}  // namespace kernels
}  // namespace tfpopef
