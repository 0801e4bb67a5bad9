// Depthwise convolution (group == C == M): a direct loop per channel, since an im2col would be
// k× the data for what is a matrix-vector product per channel. Used by conv.cc's depthwise path.
#include "tf_popef_op/runtime/cc/kernels/depthwise_conv.h"

#include <algorithm>

#include "tf_popef_op/runtime/cc/kernels/vector_math.h"

namespace tfpopef {
namespace kernels {

namespace {

// One channel of a depthwise conv: y[out] = sum over the window of w[k] · x[in], accumulated
// one window tap at a time over whole output rows, so the inner loop has no bounds checks
// (the valid output range of a row is computed per tap) and is contiguous for stride 1.
inline __attribute__((always_inline)) void DepthwiseChannelBody(const SpatialGeometry& g, const float* x,
                                                                 const float* w, float* y) {
  std::fill(y, y + g.out_size(), 0.0f);
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const float wk = w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        // Output columns whose input column iw = ow·stride − pad + kw·dilation is inside [0, in).
        const int64_t shift = kw * g.dilation[2] - g.pad_begin[2];
        int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.stride[2] - 1) / g.stride[2];
        int64_t ow_hi = g.in[2] - shift <= 0 ? 0 : (g.in[2] - shift + g.stride[2] - 1) / g.stride[2];
        ow_hi = std::min(ow_hi, g.out[2]);
        if (ow_lo >= ow_hi) continue;
        for (int64_t od = 0; od < g.out[0]; ++od) {
          const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const float* row = x + (id * g.in[1] + ih) * g.in[2] + shift;
            float* yr = y + (od * g.out[1] + oh) * g.out[2];
            if (g.stride[2] == 1) {
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wk * row[ow];
            } else {
              for (int64_t ow = ow_lo; ow < ow_hi; ++ow) yr[ow] += wk * row[ow * g.stride[2]];
            }
          }
        }
      }
}

// The same loops compiled for the baseline x86-64 and for AVX2+FMA; SelectDepthwiseChannel
// picks one from vector_math.h's run-time path (TF_POPEF_SIMD), so one build runs anywhere.
void DepthwiseChannelPortable(const SpatialGeometry& g, const float* x, const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void DepthwiseChannelAvx2(const SpatialGeometry& g, const float* x,
                                                              const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#else
void DepthwiseChannelAvx2(const SpatialGeometry& g, const float* x, const float* w, float* y) {
  DepthwiseChannelBody(g, x, w, y);
}
#endif

}  // namespace

DepthwiseFn SelectDepthwiseChannel() {
  return vmath::ActivePath() == vmath::SimdPath::kAvx2 ? DepthwiseChannelAvx2 : DepthwiseChannelPortable;
}

}  // namespace kernels
}  // namespace tfpopef
