// A 1x1 stride-1 unpadded depthwise NchwcConv is a per-channel affine, y = act(x·s + b) (the
// pre-activation BatchNorms per_channel_affine_to_depthwise_conv turns into one): each block
// plane is one contiguous run of pixels that a single streaming loop covers. The depthwise
// window tiles run such a plane at 20-25 GB/s on one thread; this loop at 78-99 GB/s
// (benchmarks/cc/nchwc_affine_timing.cc, DenseNet121's shapes).
#pragma once

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"

namespace tfpopef {
namespace kernels {

// Block planes [p0, p1) of X (each `pixels` · 8 values; plane p has channel block p % blocks)
// into Y: Y = act(X·scale + bias), the product rounded before the bias is added, as the
// depthwise tiles do, and a float16 Y rounded once to nearest even. act: e.in_register kNone,
// kRelu or kClip (e.post the identity, no Sum). Null when this host has no AVX2+FMA+F16C path
// (then the depthwise tiles run it).
template <typename AT>
using ChannelAffinePlanesFn = void (*)(const AT* x, const float* scale, const NchwcEpilogue& e, AT* y, int64_t blocks,
                                       int64_t pixels, int64_t p0, int64_t p1);

ChannelAffinePlanesFn<float> ChannelAffinePlanes();
ChannelAffinePlanesFn<uint16_t> ChannelAffinePlanesHalf();

}  // namespace kernels
}  // namespace tfpopef
