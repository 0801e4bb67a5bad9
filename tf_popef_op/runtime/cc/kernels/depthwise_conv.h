// Depthwise convolution kernels: one (image, channel) plane at a time, NCHW.
#pragma once

#include "tf_popef_op/runtime/cc/kernels/spatial_geometry.h"

namespace tfpopef {
namespace kernels {

// y[out plane] = the window sums of one input plane x with one channel's weights w [k...].
using DepthwiseFn = void (*)(const SpatialGeometry& g, const float* x, const float* w, float* y);

// The build for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
DepthwiseFn SelectDepthwiseChannel();

}  // namespace kernels
}  // namespace tfpopef
