// Conv (1-, 2- and 3-D, strides, dilations, explicit pads, groups) on float32; float16 via
// the float32 kernel. X [N, C, in...], W [M, C/group, k...], optional B [M], Y [N, M, out...].
// Also the internal op FusedConv (docs/popef.md, internal ops): the same convolution whose
// bias, optional residual `sum` [N, M, out...] and activation are applied by the epilogue
// (epilogue.h) to each output block right after it is computed. Inputs X, W, then B when
// attr has_bias = 1, then Sum when has_sum = 1.
// Three paths chosen at prepare:
// - pointwise (1x1 window, stride 1, no pad): Y_g = W_g · X_g as SGEMMs (conv_gemm.h);
// - depthwise (group == C == M): direct loops per channel (an im2col would be k× the data for
//   a matrix-vector product), the channels of all images spread over the intra-op pool;
//   3x3 / 5x5 at stride 1 or 2 on the AVX2 path take the register-blocked kernel, the rest
//   the generic per-tap one (depthwise_conv.h);
// - otherwise im2col + SGEMM in blocks of output columns, each block's im2col panel built
//   right before its SGEMM on the same thread (conv_gemm.h).
// The GEMM paths run the epilogue on each SGEMM block of Y on the thread that computed it;
// the depthwise path on each channel after its window sum (the direct kernel: bias and
// Relu/Clip in registers before the store, the rest per strip of output rows).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/conv/conv_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/conv/depthwise_conv.h"
#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/spatial_geometry.h"

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
  ConvGemmPlan gemm;  // the pointwise and im2col paths (conv_gemm.h)
  DepthwiseDirectPlan depthwise_direct;  // usable: the registers-blocked 3x3/5x5 kernel
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
};

class ConvKernel final : public Kernel {
 public:
  explicit ConvKernel(const ConvParams& p) : p_(p) {}

  size_t scratch_bytes() const override {
    if (p_.path == ConvPath::kDepthwise && p_.depthwise_direct.usable)  // one strip buffer per pool thread
      return static_cast<size_t>(ThreadPool::Global().num_threads()) * p_.depthwise_direct.scratch_floats() *
             sizeof(float);
    if (p_.path == ConvPath::kDepthwise) return 0;
    return p_.gemm.scratch_bytes();
  }

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    const float* w = static_cast<const float*>(ctx.inputs[1]);
    const float* bias = p_.has_bias ? static_cast<const float*>(ctx.inputs[2]) : nullptr;
    const float* sum = p_.has_sum ? static_cast<const float*>(ctx.inputs[p_.has_bias ? 3 : 2]) : nullptr;
    float* y = static_cast<float*>(ctx.outputs[0]);
    const SpatialGeometry& g = p_.g;
    const int64_t in_size = g.in_size(), out_size = g.out_size(), k = g.kernel_size();
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
      if (p_.depthwise_direct.usable) {
        // The direct kernel does a multiply-add in ~0.05-0.2 ns, so a chunk needs ~2^17 of them
        // to carry the 10-20 µs that pay for handing it to a worker (thread_pool.h).
        const int64_t direct_grain = ItemsPerChunk(out_size * k, int64_t{1} << 17);
        float* scratch = static_cast<float*>(ctx.scratch);
        const size_t per_thread = p_.depthwise_direct.scratch_floats();
        ParallelForChunks(p_.n * p_.c, direct_grain, [&](int64_t chunk, int64_t i0, int64_t i1) {
          RunDepthwiseDirect(p_.depthwise_direct, g, x, w, p_.c, i0, i1, bias, p_.epilogue, sum, y,
                             scratch + static_cast<size_t>(chunk) * per_thread);
        });
        return;
      }
      ParallelFor(p_.n * p_.c, grain, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t c = i % p_.c;
          p_.depthwise(g, x + i * in_size, w + c * k, y + i * out_size);
          if (epilogue) finish(i / p_.c, c, 0, out_size);
        }
      });
      return;
    }
    ConvEpilogue gemm_epilogue;
    gemm_epilogue.epilogue = &p_.epilogue;
    gemm_epilogue.bias = bias;
    gemm_epilogue.sum = sum;
    RunConvGemm(p_.gemm, x, w, y, static_cast<float*>(ctx.scratch), gemm_epilogue);
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
    const EpilogueInputs in = ReadEpilogueInputs(spec);
    p.has_bias = in.has_bias;
    p.has_sum = in.has_sum;
    if (p.has_bias && spec.inputs[2].shape != std::vector<int64_t>{p.m})
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": bias has shape " +
                                                   ShapeToString(spec.inputs[2].shape) + ", expected [" +
                                                   std::to_string(p.m) + "]");
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
  if (p.path == ConvPath::kDepthwise) p.depthwise_direct = PlanDepthwiseDirect(g);
  if (p.path != ConvPath::kDepthwise) {
    CheckBlasDim(spec, "the GEMM depth C/group·kernel", p.cg() * g.kernel_size());
    CheckBlasDim(spec, "the output size", g.out_size());
    p.gemm = PlanConvGemm(g, p.n, p.c, p.m, p.group, p.path == ConvPath::kPointwise);
  }
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
