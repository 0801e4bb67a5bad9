// Conv (1-, 2- and 3-D, strides, dilations, explicit pads, groups) on float32; float16 via
// the float32 kernel. X [N, C, in...], W [M, C/group, k...], optional B [M], Y [N, M, out...].
// Three paths chosen at prepare:
// - pointwise (1x1 window, stride 1, no pad): Y_g = W_g · X_g is one SGEMM per image and group;
// - depthwise (group == C == M): a direct loop per channel (an im2col would be k× the data for
//   a matrix-vector product);
// - otherwise im2col into scratch ([C/group·k, out] per group) then one SGEMM per group.
// Bias is added afterwards, per output channel.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/spatial_geometry.h"

namespace tfpopef {
namespace kernels {
namespace {

enum class ConvPath { kPointwise, kDepthwise, kIm2col };

struct ConvParams {
  SpatialGeometry g;
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool has_bias = false;
  ConvPath path = ConvPath::kIm2col;
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
};

// Unrolls one image's channels [c0, c0 + channels) into col [channels·k, out] (zero padding).
void Im2Col(const SpatialGeometry& g, const float* x, int64_t channels, float* col) {
  const int64_t in_size = g.in_size();
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = x + c * in_size;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh, col += g.out[2]) {
              const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                std::fill(col, col + g.out[2], 0.0f);
                continue;
              }
              const float* row = xc + (id * g.in[1] + ih) * g.in[2];
              for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                const int64_t iw = ow * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                col[ow] = iw >= 0 && iw < g.in[2] ? row[iw] : 0.0f;
              }
            }
          }
        }
  }
}

// One channel of a depthwise conv: y[out] = sum over the window of w[k] · x[in], accumulated
// one window tap at a time over whole output rows, so the inner loop has no bounds checks
// (the valid output range of a row is computed per tap) and is contiguous for stride 1.
void DepthwiseChannel(const SpatialGeometry& g, const float* x, const float* w, float* y) {
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

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(const ConvParams& p) : p_(p) {}

  size_t scratch_bytes() const override {
    if (p_.path != ConvPath::kIm2col) return 0;
    return static_cast<size_t>(p_.cg() * p_.g.kernel_size() * p_.g.out_size()) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    const float* w = static_cast<const float*>(ctx.inputs[1]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    const SpatialGeometry& g = p_.g;
    const int64_t in_size = g.in_size(), out_size = g.out_size(), k = g.kernel_size();
    const int64_t cg = p_.cg(), mg = p_.mg(), depth = cg * k;
    if (out_size == 0 || p_.n == 0 || p_.m == 0) return;
    for (int64_t n = 0; n < p_.n; ++n) {
      const float* xn = x + n * p_.c * in_size;
      float* yn = y + n * p_.m * out_size;
      if (p_.path == ConvPath::kDepthwise) {
        for (int64_t c = 0; c < p_.c; ++c) DepthwiseChannel(g, xn + c * in_size, w + c * k, yn + c * out_size);
      } else {
        for (int64_t grp = 0; grp < p_.group; ++grp) {
          float* yg = yn + grp * mg * out_size;
          if (depth == 0) {
            std::fill(yg, yg + mg * out_size, 0.0f);
            continue;
          }
          const float* col = xn + grp * cg * in_size;
          if (p_.path == ConvPath::kIm2col) {
            Im2Col(g, col, cg, static_cast<float*>(ctx.scratch));
            col = static_cast<const float*>(ctx.scratch);
          }
          Sgemm(false, false, mg, out_size, depth, 1.0f, w + grp * mg * depth, depth, col, out_size, 0.0f, yg,
                out_size);
        }
      }
      if (p_.has_bias) {
        const float* b = static_cast<const float*>(ctx.inputs[2]);
        for (int64_t m = 0; m < p_.m; ++m)
          for (int64_t i = 0; i < out_size; ++i) yn[m * out_size + i] += b[m];
      }
    }
  }

 private:
  const ConvParams p_;
};

std::unique_ptr<Kernel> CreateFloat32Conv(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  const auto& w = spec.inputs[1].shape;
  const auto& y = spec.outputs[0].shape;
  CheckConvWeightsRank(spec, x, w);
  ConvParams p;
  p.g = ReadSpatialGeometry(spec, x, y, std::vector<int64_t>(w.begin() + 2, w.end()));
  p.n = x[0];
  p.c = x[1];
  p.m = w[0];
  p.group = spec.attrs.Int("group");
  if (p.group < 1 || p.c % p.group != 0 || p.m % p.group != 0 || w[1] != p.c / p.group)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": group " + std::to_string(p.group) + " does not fit input channels " +
                    std::to_string(p.c) + ", weights " + ShapeToString(w) +
                    " (need C and M divisible by group and W[1] == C / group)");
  std::vector<int64_t> expected = {p.n, p.m};
  for (size_t i = 0; i + 2 < x.size(); ++i) {
    const size_t d = kMaxSpatialRank - (x.size() - 2) + i;
    const int64_t span = p.g.dilation[d] * (p.g.kernel[d] - 1) + 1;
    expected.push_back((p.g.in[d] + p.g.pad_begin[d] + p.g.pad_end[d] - span) / p.g.stride[d] + 1);
  }
  CheckOutputShape(spec, 0, expected);
  p.has_bias = HasConvBias(spec, p.m);
  const SpatialGeometry& g = p.g;
  const bool unit_window = g.kernel_size() == 1 && g.stride == std::array<int64_t, 3>{1, 1, 1} &&
                           g.pad_begin == std::array<int64_t, 3>{0, 0, 0} && g.in == g.out;
  if (unit_window) p.path = ConvPath::kPointwise;
  else if (p.group == p.c && p.m == p.c) p.path = ConvPath::kDepthwise;
  CheckBlasDim(spec, "the im2col size", p.cg() * g.kernel_size() * g.out_size());
  return std::make_unique<ConvKernel>(p);
}

std::unique_ptr<Kernel> CreateConv(const KernelSpec& spec) {
  CheckArity(spec, 2, 3, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32Conv);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Conv", CreateConv);

}  // namespace kernels
}  // namespace tfpopef
