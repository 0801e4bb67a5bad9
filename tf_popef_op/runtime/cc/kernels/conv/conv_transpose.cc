// ConvTranspose (1-, 2- and 3-D, strides, dilations, explicit pads, output_padding, groups) on
// float32; float16 via the float32 kernel. X [N, C, in...], W [C, M/group, k...], optional
// B [M], Y [N, M, out...]. Per image and group, one SGEMM computes col = W_gᵀ · X_g
// ([M/group·k, in] in scratch), then col2im scatters-adds each column into the output window it
// came from (the adjoint of Conv's im2col). The compiler resolves auto_pad and output_shape
// into explicit pads, so the output shape here is always
//   stride·(in−1) + output_padding + dilation·(k−1) + 1 − pad_begin − pad_end.
#include <algorithm>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/spatial_geometry.h"

namespace tfpopef {
namespace kernels {
namespace {

struct ConvTransposeParams {
  SpatialGeometry g;
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool has_bias = false;
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
};

// y[channel][out] += col[channel·k + kpos][in] for every in-bounds output position.
void Col2Im(const SpatialGeometry& g, const float* col, int64_t channels, float* y) {
  const int64_t out_size = g.out_size();
  for (int64_t c = 0; c < channels; ++c) {
    float* yc = y + c * out_size;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw)
          for (int64_t id = 0; id < g.in[0]; ++id) {
            const int64_t od = id * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
            for (int64_t ih = 0; ih < g.in[1]; ++ih, col += g.in[2]) {
              const int64_t oh = ih * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
              if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1]) continue;
              float* row = yc + (od * g.out[1] + oh) * g.out[2];
              for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                const int64_t ow = iw * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
                if (ow >= 0 && ow < g.out[2]) row[ow] += col[iw];
              }
            }
          }
  }
}

class ConvTransposeKernel final : public Kernel {
 public:
  explicit ConvTransposeKernel(const ConvTransposeParams& p) : p_(p) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(p_.mg() * p_.g.kernel_size() * p_.g.in_size()) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    const float* w = static_cast<const float*>(ctx.inputs[1]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    float* col = static_cast<float*>(ctx.scratch);
    const SpatialGeometry& g = p_.g;
    const int64_t in_size = g.in_size(), out_size = g.out_size(), k = g.kernel_size();
    const int64_t cg = p_.cg(), mg = p_.mg(), rows = mg * k;
    for (int64_t n = 0; n < p_.n; ++n) {
      float* yn = y + n * p_.m * out_size;
      for (int64_t m = 0; m < p_.m; ++m)
        std::fill(yn + m * out_size, yn + (m + 1) * out_size,
                  p_.has_bias ? static_cast<const float*>(ctx.inputs[2])[m] : 0.0f);
      if (rows == 0 || in_size == 0 || cg == 0) continue;
      for (int64_t grp = 0; grp < p_.group; ++grp) {
        const float* xg = x + (n * p_.c + grp * cg) * in_size;
        Sgemm(true, false, rows, in_size, cg, 1.0f, w + grp * cg * rows, rows, xg, in_size, 0.0f, col, in_size);
        Col2Im(g, col, mg, yn + grp * mg * out_size);
      }
    }
  }

 private:
  const ConvTransposeParams p_;
};

std::unique_ptr<Kernel> CreateFloat32ConvTranspose(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  const auto& w = spec.inputs[1].shape;
  const auto& y = spec.outputs[0].shape;
  CheckConvWeightsRank(spec, x, w);
  ConvTransposeParams p;
  p.g = ReadSpatialGeometry(spec, x, y, std::vector<int64_t>(w.begin() + 2, w.end()));
  p.n = x[0];
  p.c = x[1];
  p.group = spec.attrs.Int("group");
  if (p.group < 1 || p.c % p.group != 0 || w[0] != p.c)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": group " + std::to_string(p.group) +
                                                 " does not fit input channels " + std::to_string(p.c) +
                                                 " and weights " + ShapeToString(w) +
                                                 " (need W[0] == C, C divisible by group)");
  p.m = w[1] * p.group;
  const auto output_padding = spec.attrs.Ints("output_padding");
  if (output_padding.size() != x.size() - 2)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": 'output_padding' needs one value per spatial dim");
  std::vector<int64_t> expected = {p.n, p.m};
  for (size_t i = 0; i + 2 < x.size(); ++i) {
    const size_t d = kMaxSpatialRank - (x.size() - 2) + i;
    expected.push_back(p.g.stride[d] * (p.g.in[d] - 1) + output_padding[i] + p.g.dilation[d] * (p.g.kernel[d] - 1) +
                       1 - p.g.pad_begin[d] - p.g.pad_end[d]);
  }
  CheckOutputShape(spec, 0, expected);
  p.has_bias = HasConvBias(spec, p.m);
  CheckBlasDim(spec, "the col2im size", p.mg() * p.g.kernel_size() * p.g.in_size());
  return std::make_unique<ConvTransposeKernel>(p);
}

std::unique_ptr<Kernel> CreateConvTranspose(const KernelSpec& spec) {
  CheckArity(spec, 2, 3, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32ConvTranspose);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("ConvTranspose", CreateConvTranspose);

}  // namespace kernels
}  // namespace tfpopef
