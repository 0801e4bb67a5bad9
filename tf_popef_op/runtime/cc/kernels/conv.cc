// Conv (1-, 2- and 3-D, strides, dilations, explicit pads, groups) on float32; float16 via
// the float32 kernel. X [N, C, in...], W [M, C/group, k...], optional B [M], Y [N, M, out...].
// Also the internal op FusedConv (docs/popef.md, internal ops): the same convolution whose
// bias, optional residual `sum` [N, M, out...] and activation are applied by the epilogue
// (epilogue.h) to each output block right after it is computed. Inputs X, W, then B when
// attr has_bias = 1, then Sum when has_sum = 1.
// Three paths chosen at prepare:
// - pointwise (1x1 window, stride 1, no pad): Y_g = W_g · X_g is one SGEMM per image and group;
// - depthwise (group == C == M): a direct loop per channel (an im2col would be k× the data for
//   a matrix-vector product), the channels of all images spread over the intra-op pool;
// - otherwise im2col into scratch ([C/group·k, out] per group, channels unrolled in parallel)
//   then one SGEMM per group.
// The GEMM paths run the epilogue on each SGEMM block of C on the thread that computed it
// (blas_gemm.h's block_done); the depthwise path on each channel after its window sum.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/depthwise_conv.h"
#include "tf_popef_op/runtime/cc/kernels/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/spatial_geometry.h"

namespace tfpopef {
namespace kernels {
namespace {

enum class ConvPath { kPointwise, kDepthwise, kIm2col };

struct ConvParams {
  SpatialGeometry g;
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool has_bias = false, has_sum = false;
  Epilogue epilogue;
  ConvPath path = ConvPath::kIm2col;
  DepthwiseFn depthwise = nullptr;
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
};

// Unrolls channels [c0, c1) of one image x into col [channels·k, out] (zero padding); the
// rows of channel c start at col + c·k·out, so disjoint channel ranges can run in parallel.
// Per window column kw the output columns whose input column is inside the image form one
// range [ow_lo, ow_hi), computed once, so each row is zeros + a copy (a memcpy for stride 1,
// a strided gather otherwise) + zeros with no per-element bounds checks.
void Im2Col(const SpatialGeometry& g, const float* x, int64_t c0, int64_t c1, float* col) {
  const int64_t in_size = g.in_size(), ow_n = g.out[2], sw = g.stride[2];
  col += c0 * g.kernel_size() * g.out_size();
  for (int64_t c = c0; c < c1; ++c) {
    const float* xc = x + c * in_size;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t shift = kw * g.dilation[2] - g.pad_begin[2];  // iw = ow·stride + shift
          const int64_t ow_lo = std::min(ow_n, shift >= 0 ? int64_t{0} : (-shift + sw - 1) / sw);
          const int64_t ow_hi =
              std::max(ow_lo, std::min(ow_n, g.in[2] - shift <= 0 ? int64_t{0} : (g.in[2] - shift + sw - 1) / sw));
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh, col += ow_n) {
              const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                std::fill(col, col + ow_n, 0.0f);
                continue;
              }
              const float* row = xc + (id * g.in[1] + ih) * g.in[2] + shift;
              std::fill(col, col + ow_lo, 0.0f);
              if (sw == 1) {
                std::memcpy(col + ow_lo, row + ow_lo, static_cast<size_t>(ow_hi - ow_lo) * sizeof(float));
              } else {
                for (int64_t ow = ow_lo; ow < ow_hi; ++ow) col[ow] = row[ow * sw];
              }
              std::fill(col + ow_hi, col + ow_n, 0.0f);
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
    const float* bias = p_.has_bias ? static_cast<const float*>(ctx.inputs[2]) : nullptr;
    const float* sum = p_.has_sum ? static_cast<const float*>(ctx.inputs[p_.has_bias ? 3 : 2]) : nullptr;
    float* y = static_cast<float*>(ctx.outputs[0]);
    const SpatialGeometry& g = p_.g;
    const int64_t in_size = g.in_size(), out_size = g.out_size(), k = g.kernel_size();
    const int64_t cg = p_.cg(), mg = p_.mg(), depth = cg * k;
    if (out_size == 0 || p_.n == 0 || p_.m == 0) return;
    const bool epilogue = bias != nullptr || sum != nullptr || !p_.epilogue.is_identity();
    // Output channel `m` of image `n`, columns [c0, c1): bias, sum and activation.
    auto finish = [&](int64_t n, int64_t m, int64_t c0, int64_t c1) {
      const int64_t off = (n * p_.m + m) * out_size;
      p_.epilogue.Apply(y + off + c0, c1 - c0, bias != nullptr ? bias[m] : 0.0f, nullptr,
                        sum != nullptr ? sum + off + c0 : nullptr);
    };
    if (p_.path == ConvPath::kDepthwise) {
      // Every (image, channel) pair is independent: one work item each.
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, out_size * k));
      ParallelFor(p_.n * p_.c, grain, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t c = i % p_.c;
          p_.depthwise(g, x + i * in_size, w + c * k, y + i * out_size);
          if (epilogue) finish(i / p_.c, c, 0, out_size);
        }
      });
      return;
    }
    for (int64_t n = 0; n < p_.n; ++n) {
      const float* xn = x + n * p_.c * in_size;
      float* yn = y + n * p_.m * out_size;
      for (int64_t grp = 0; grp < p_.group; ++grp) {
        float* yg = yn + grp * mg * out_size;
        if (depth == 0) {
          std::fill(yg, yg + mg * out_size, 0.0f);
          if (epilogue)
            for (int64_t m = 0; m < mg; ++m) finish(n, grp * mg + m, 0, out_size);
          continue;
        }
        const float* col = xn + grp * cg * in_size;
        if (p_.path == ConvPath::kIm2col) {
          float* scratch = static_cast<float*>(ctx.scratch);
          const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, k * out_size));
          ParallelFor(cg, grain, [&](int64_t c0, int64_t c1) { Im2Col(g, col, c0, c1, scratch); });
          col = scratch;
        }
        const GemmBlockFn block_done = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
          for (int64_t r = r0; r < r1; ++r) finish(n, grp * mg + r, c0, c1);
        };
        Sgemm(false, false, mg, out_size, depth, 1.0f, w + grp * mg * depth, depth, col, out_size, 0.0f, yg,
              out_size, epilogue ? &block_done : nullptr);
      }
    }
  }

 private:
  const ConvParams p_;
};

std::unique_ptr<Kernel> CreateFloat32Conv(const KernelSpec& spec, bool fused) {
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
  if (fused) {
    p.has_bias = CheckedFlag(spec, "has_bias");
    p.has_sum = CheckedFlag(spec, "has_sum");
    const size_t want = 2 + (p.has_bias ? 1 : 0) + (p.has_sum ? 1 : 0);
    if (spec.inputs.size() != want)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": has_bias = " + std::to_string(p.has_bias) +
                                                   " and has_sum = " + std::to_string(p.has_sum) + " need " +
                                                   std::to_string(want) + " inputs, got " +
                                                   std::to_string(spec.inputs.size()));
    if (p.has_bias && spec.inputs[2].shape != std::vector<int64_t>{p.m})
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": bias has shape " +
                                                   ShapeToString(spec.inputs[2].shape) + ", expected [" +
                                                   std::to_string(p.m) + "]");
    if (p.has_sum && spec.inputs.back().shape != y)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": sum has shape " +
                                                   ShapeToString(spec.inputs.back().shape) +
                                                   ", expected the output shape " + ShapeToString(y));
    p.epilogue = ReadEpilogue(spec);
  } else {
    p.has_bias = HasConvBias(spec, p.m);
  }
  const SpatialGeometry& g = p.g;
  const bool unit_window = g.kernel_size() == 1 && g.stride == std::array<int64_t, 3>{1, 1, 1} &&
                           g.pad_begin == std::array<int64_t, 3>{0, 0, 0} && g.in == g.out;
  if (unit_window) p.path = ConvPath::kPointwise;
  else if (p.group == p.c && p.m == p.c) p.path = ConvPath::kDepthwise;
  p.depthwise = SelectDepthwiseChannel();
  CheckBlasDim(spec, "the im2col size", p.cg() * g.kernel_size() * g.out_size());
  return std::make_unique<ConvKernel>(p);
}

std::unique_ptr<Kernel> CreateConv(const KernelSpec& spec) {
  CheckArity(spec, 2, 3, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, [](const KernelSpec& s) { return CreateFloat32Conv(s, false); });
}

std::unique_ptr<Kernel> CreateFusedConv(const KernelSpec& spec) {
  CheckArity(spec, 2, 4, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, [](const KernelSpec& s) { return CreateFloat32Conv(s, true); });
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Conv", CreateConv);
TFPOPEF_REGISTER_KERNEL("FusedConv", CreateFusedConv);

}  // namespace kernels
}  // namespace tfpopef
