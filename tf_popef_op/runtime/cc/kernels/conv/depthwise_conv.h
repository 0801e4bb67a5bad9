// Depthwise convolution kernels: one (image, channel) plane at a time, NCHW.
//
// Two kernels:
// - the generic one (any window, stride, dilation, pads, 1- to 3-D; SelectDepthwiseChannel):
//   one pass over each output row per window tap;
// - the direct one (DepthwiseDirectPlan): 2-D 3x3 and 5x5 windows, stride 1 or 2, no
//   dilation, any pads, on the AVX2+FMA path: all taps of a vector of 8 output columns of
//   several output rows are accumulated in registers and stored once, with the epilogue's bias
//   and Relu/Clip applied in the registers (other activations and the residual sum per strip
//   of output rows right after it is stored, while it is in cache). The input rows are first
//   copied into a zero-bordered strip in scratch memory (for stride 2 split into even and odd
//   columns), so the inner loop has no border cases and only unit-stride loads. Row tails are
//   stored as whole vectors that spill onto the next row (written later), so y must not alias
//   x or the sum (the memory plan never lets a step's output share its inputs' bytes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/spatial_geometry.h"

namespace tfpopef {
namespace kernels {

// y[out plane] = the window sums of one input plane x with one channel's weights w [k...].
using DepthwiseFn = void (*)(const SpatialGeometry& g, const float* x, const float* w, float* y);

// The build for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
DepthwiseFn SelectDepthwiseChannel();

// The direct kernel's layout for one geometry, fixed at prepare.
struct DepthwiseDirectPlan {
  bool usable = false;       // the geometry fits and the AVX2+FMA path is active
  int kernel = 0;            // 3 or 5 (square window)
  int stride = 0;            // 1 or 2 (both dims)
  int64_t strip_rows = 0;    // output rows per strip
  int64_t buffer_rows = 0;   // input rows a strip needs
  int64_t row_floats = 0;    // one padded input row in the strip buffer
  // Scratch one worker needs (the kernel asks for this times the pool size).
  size_t scratch_floats() const { return static_cast<size_t>(buffer_rows * row_floats); }
};

// The plan for g; usable == false when the direct kernel does not apply (then use the generic
// one): not 2-D, another window or stride, dilation, or the portable SIMD path.
DepthwiseDirectPlan PlanDepthwiseDirect(const SpatialGeometry& g);

// Planes [i0, i1) of x [N, C, H, W] (plane i is channel i % channels) into y, each followed
// by the epilogue: y = activation(conv + bias[c] + sum) (bias and sum may be null). scratch
// holds plan.scratch_floats() floats private to the calling thread.
void RunDepthwiseDirect(const DepthwiseDirectPlan& plan, const SpatialGeometry& g, const float* x, const float* w,
                        int64_t channels, int64_t i0, int64_t i1, const float* bias, const Epilogue& epilogue,
                        const float* sum, float* y, float* scratch);

}  // namespace kernels
}  // namespace tfpopef
