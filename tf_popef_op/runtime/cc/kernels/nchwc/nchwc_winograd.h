// The transforms of NchwcWinogradConv (nchwc_winograd_conv.cc): a 3x3, stride-1 convolution on
// the blocked NCHW8c layout as Winograd's F(m x m, 3x3) (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015), m = 2 or 4, whose a x a tiles (a = m + 2) of
// the input overlap by 2 pixels:
//   Y_tile = A^T [ U ⊙ (B^T d B) ] A,   U = G g G^T (the weights, transformed by the compiler)
// so an m x m output tile takes a² multiply-adds per input and output channel instead of 9m²
// (F(4x4): 36 instead of 144; F(2x2): 16 instead of 36). Per a chunk of tiles, the kernel
// transforms the input (InputTiles), runs a² matrix products over the channels with the NchwcConv
// tiles (a 1x1 convolution whose pixels are the chunk's tiles), and transforms back
// (OutputTiles), applying the epilogue while the output is in registers.
//
// Compiled three times like the NchwcConv tiles (nchwc_winograd_transforms.inc: portable,
// AVX2+FMA, AVX-512), picked at run time from vector_math.h's path (TF_POPEF_SIMD).
#pragma once

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"

namespace tfpopef {
namespace kernels {

// The geometry of one Winograd convolution, fixed at prepare. Tiles are numbered over
// (image, tile row, tile column): tile i covers output rows [m·ty, m·ty + m) and columns
// [m·tx, m·tx + m) (clipped to the output) of image i / (tiles_h·tiles_w).
struct WinogradGeometry {
  int64_t m = 4;                   // output tile side (2 or 4); a = m + 2 input pixels per side
  int64_t in_blocks = 0, out_blocks = 0;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t pad_top = 0, pad_left = 0;
  int64_t tiles_h = 0, tiles_w = 0;

  int64_t a() const { return m + 2; }
  int64_t points() const { return a() * a(); }  // the a² products per tile
};

// Activations (X, Sum, Y) are of type AT: float, or float16 bits (uint16_t), widened as X is
// read and rounded to nearest even once, as Y is written; v and p are float32 either way.

// The `count` tiles [tile0, tile0 + count) of input x [N, C/8, H, W, 8] transformed (B^T d B, pads
// and pixels past the input read as 0) into v [a², C/8, count, 8]: point t's input channels of
// the chunk, laid out as a blocked 1 x count image.
template <typename AT>
using WinogradInputFn = void (*)(const WinogradGeometry& g, const AT* x, int64_t tile0, int64_t count, float* v);
// Output blocks [ob0, ob0 + obn) of the chunk's products p [a², M/8, count, 8] transformed back
// (A^T p A) into y [N, M/8, OH, OW, 8] with bias, the residual sum and Relu/Clip applied in
// registers and e.post afterwards (on the float32 row, before a float16 Y is rounded); pixels
// past the output are dropped.
template <typename AT>
using WinogradOutputFn = void (*)(const WinogradGeometry& g, const float* p, int64_t tile0, int64_t count,
                                  int64_t ob0, int64_t obn, const NchwcEpilogue& e, AT* y);

template <typename AT>
struct WinogradTransformsOf {
  WinogradInputFn<AT> input_f2, input_f4;
  WinogradOutputFn<AT> output_f2, output_f4;

  WinogradInputFn<AT> input(int64_t m) const { return m == 2 ? input_f2 : input_f4; }
  WinogradOutputFn<AT> output(int64_t m) const { return m == 2 ? output_f2 : output_f4; }
};

struct WinogradTransformFns {
  WinogradTransformsOf<float> f32;
  WinogradTransformsOf<uint16_t> f16;  // float16 activations
};

// The build for this host's SIMD path.
const WinogradTransformFns& WinogradTransforms();

extern const WinogradTransformFns kWinogradPortableTransforms;
// Defined only on x86-64 builds; use only when CpuHasAvx2Fma() / CpuHasAvx512().
extern const WinogradTransformFns kWinogradAvx2Transforms;
extern const WinogradTransformFns kWinogradAvx512Transforms;

}  // namespace kernels
}  // namespace tfpopef
