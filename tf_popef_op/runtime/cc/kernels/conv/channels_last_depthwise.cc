// ChannelsLastDepthwiseConv: a depthwise 2-D convolution on channels-last activations, with
// LayerNormalization over the channels as an optional epilogue (docs/popef.md, "Internal ops"):
//
//   Y = conv_depthwise(X, W) + B                               layer_norm = 0
//   Y = LayerNormalization_C(conv_depthwise(X, W) + B; gamma, beta, epsilon)   layer_norm = 1
//
// X [N, H, W, C] (C a multiple of 8), W the blocked depthwise weights of NchwcConv
// [C/8, KH, KW, 8], then B [C] when has_bias = 1, then with layer_norm = 1 gamma [C] and
// optionally beta [C]; Y [N, OH, OW, C]. Attributes: kernel_shape, strides, dilations, pads
// [top, left, bottom, right] (ONNX's output formula), has_bias, layer_norm, epsilon.
//
// The compiler writes it (fuse_channels_last_depthwise) for ConvNeXt's blocks, whose residual
// stream is channels last: the blocked depthwise between two reorders and a separate
// LayerNormalization pass become one step that reads the stream as it is. Work items are
// output rows (image, row); each finishes whole pixels, all C channels, in an L1 buffer, where
// the normalization runs before Y is written (channels_last_depthwise_tiles.h).
//
// Float16: X and Y are read and written as they are (widened in registers, Y rounded once);
// the small W, B, gamma and beta are widened by the float16 adapter (kept for later runs).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/conv/channels_last_depthwise_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Multiply-adds a chunk of rows must carry before it is worth handing to a pool worker.
constexpr int64_t kChunkMacs = int64_t{1} << 18;

struct ChannelsLastDepthwiseSetup {
  NchwcGeometry g;
  int64_t n = 0;
  bool has_bias = false, layer_norm = false, has_beta = false, half = false;
  float epsilon = 0.0f;
  int64_t grain = 1, chunks = 1;
  ChannelsLastDepthwiseTileFns tiles;
};

class ChannelsLastDepthwiseKernel final : public Kernel {
 public:
  explicit ChannelsLastDepthwiseKernel(const ChannelsLastDepthwiseSetup& s) : s_(s) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(s_.chunks * kChannelsLastTilePixels * s_.g.in_blocks * kNchwcBlock) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    if (s_.half) RunOn<uint16_t>(ctx);
    else RunOn<float>(ctx);
  }

 private:
  template <typename AT>
  void RunOn(const KernelContext& ctx) const {
    ChannelsLastDepthwiseParams p;
    size_t next = 1;
    p.w = static_cast<const float*>(ctx.inputs[next++]);
    if (s_.has_bias) p.bias = static_cast<const float*>(ctx.inputs[next++]);
    p.layer_norm = s_.layer_norm;
    p.epsilon = s_.epsilon;
    if (s_.layer_norm) p.gamma = static_cast<const float*>(ctx.inputs[next++]);
    if (s_.has_beta) p.beta = static_cast<const float*>(ctx.inputs[next++]);
    const AT* x = static_cast<const AT*>(ctx.inputs[0]);
    AT* y = static_cast<AT*>(ctx.outputs[0]);
    const NchwcGeometry& g = s_.g;
    const int64_t rows = s_.n * g.oh;
    const int64_t buffer_floats = kChannelsLastTilePixels * g.in_blocks * kNchwcBlock;
    float* scratch = static_cast<float*>(ctx.scratch);
    ParallelForChunks(rows, s_.grain, [&](int64_t chunk, int64_t r0, int64_t r1) {
      float* buffer = scratch + chunk * buffer_floats;
      for (int64_t r = r0; r < r1; ++r) {
        if constexpr (std::is_same_v<AT, float>) s_.tiles.row(g, x, p, y, buffer, r / g.oh, r % g.oh, 0, g.ow);
        else s_.tiles.row_half(g, x, p, y, buffer, r / g.oh, r % g.oh, 0, g.ow);
      }
    });
  }

  const ChannelsLastDepthwiseSetup s_;
};

// The kernel on the spec as WithFloat16Support hands it over (X and Y float16 natively).
std::unique_ptr<Kernel> PrepareChannelsLastDepthwise(const KernelSpec& spec) {
  ChannelsLastDepthwiseSetup s;
  s.has_bias = spec.attrs.Has("has_bias") && CheckedFlag(spec, "has_bias");
  s.layer_norm = spec.attrs.Has("layer_norm") && CheckedFlag(spec, "layer_norm");
  const size_t fixed = 2 + (s.has_bias ? 1 : 0);
  const size_t min_inputs = fixed + (s.layer_norm ? 1 : 0), max_inputs = fixed + (s.layer_norm ? 2 : 0);
  if (spec.inputs.size() < min_inputs || spec.inputs.size() > max_inputs)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": expects " + std::to_string(min_inputs) +
                    (max_inputs > min_inputs ? ".." + std::to_string(max_inputs) : "") +
                    " inputs (X, W" + (s.has_bias ? ", B" : "") + (s.layer_norm ? ", gamma[, beta]" : "") +
                    " for has_bias = " + std::to_string(s.has_bias) + ", layer_norm = " +
                    std::to_string(s.layer_norm) + "), got " + std::to_string(spec.inputs.size()));
  s.has_beta = s.layer_norm && spec.inputs.size() == max_inputs;
  const auto& x = spec.inputs[0].shape;
  if (x.size() != 4 || x[3] % kNchwcBlock != 0 || x[3] == 0)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input X has shape " + ShapeToString(x) +
                                                 ", expected channels last [N, H, W, C] with C a multiple of 8");
  NchwcGeometry& g = s.g;
  s.n = x[0];
  g.h = x[1];
  g.w = x[2];
  g.in_blocks = g.out_blocks = x[3] / kNchwcBlock;
  ReadNchwcWindow(spec, &g);
  const int64_t c = x[3];
  CheckShape(spec, "depthwise weights W", spec.inputs[1].shape, {g.in_blocks, g.kh, g.kw, kNchwcBlock});
  size_t next = 2;
  if (s.has_bias) CheckShape(spec, "bias B", spec.inputs[next++].shape, {c});
  if (s.layer_norm) CheckShape(spec, "LayerNormalization scale gamma", spec.inputs[next++].shape, {c});
  if (s.has_beta) CheckShape(spec, "LayerNormalization bias beta", spec.inputs[next++].shape, {c});
  s.epsilon = spec.attrs.Float("epsilon", 1e-5f);
  if (s.layer_norm && !(s.epsilon >= 0.0f))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": epsilon " + std::to_string(s.epsilon) + " is negative");
  CheckOutputShape(spec, 0, {s.n, g.oh, g.ow, c});
  s.half = spec.inputs[0].dtype == DType::kFloat16;
  const int64_t row_macs = g.ow * c * g.kh * g.kw;
  s.grain = ItemsPerChunk(row_macs, kChunkMacs);
  s.chunks = std::max<int64_t>(1, ThreadPool::Global().NumChunks(s.n * g.oh, s.grain));
  s.tiles = ChannelsLastDepthwiseTiles();
  return std::make_unique<ChannelsLastDepthwiseKernel>(s);
}

std::unique_ptr<Kernel> CreateChannelsLastDepthwise(const KernelSpec& spec) {
  CheckArity(spec, 2, 5, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, PrepareChannelsLastDepthwise, {0}, {0});
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("ChannelsLastDepthwiseConv", CreateChannelsLastDepthwise);

}  // namespace kernels
}  // namespace tfpopef
