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
// bands of output rows of an image; each finishes whole pixels, all C channels, in a buffer,
// where the normalization runs before Y is written (channels_last_depthwise_tiles.h).
//
// Float16: X and Y are read and written as they are (widened in registers, Y rounded once);
// the small W, B, gamma and beta are widened by the float16 adapter (kept for later runs).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/channels_last_depthwise_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Multiply-adds a chunk of rows must carry before it is worth handing to a pool worker.
constexpr int64_t kChunkMacs = int64_t{1} << 18;

// Bands of rows pay on wide planes with several images: ConvNeXtTiny b8, per step against one row
// per item, 56x56: 2.2-2.4 ms against 2.8-2.9, 28x28: 1.10-1.15 against 1.23-1.48, 14x14 even,
// 7x7: 0.32-0.37 against 0.26-0.27 (the band's buffer [rows, OW, C] in L2 instead of L1); at
// batch 1 rows measured as fast or faster (docs/benchmarks.md).
constexpr int64_t kBandMinWidth = 28;

// Output rows per work item: one, except on planes at least kBandMinWidth wide with several
// images, the tallest band of at most kChannelsLastBandRows rows that cuts the rows into whole
// bands the threads can share equally (else one row).
int64_t BandRows(int64_t n, int64_t oh, int64_t ow, int64_t threads) {
  if (n < 2 || ow < kBandMinWidth) return 1;
  for (int64_t band = std::min(kChannelsLastBandRows, oh); band > 1; --band)
    if (oh % band == 0 && n * (oh / band) % threads == 0) return band;
  return 1;
}

struct ChannelsLastDepthwiseSetup {
  NchwcGeometry g;
  int64_t n = 0;
  bool has_bias = false, layer_norm = false, has_beta = false, half = false;
  float epsilon = 0.0f;
  int64_t band = 1, grain = 1, chunks = 1;  // output rows per work item; items per chunk; chunks
  ChannelsLastDepthwiseTileFns tiles;
};

class ChannelsLastDepthwiseKernel final : public Kernel {
 public:
  explicit ChannelsLastDepthwiseKernel(const ChannelsLastDepthwiseSetup& s) : s_(s) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(s_.chunks * BufferFloats()) * sizeof(float);
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
    const int64_t bands = (g.oh + s_.band - 1) / s_.band;
    float* scratch = static_cast<float*>(ctx.scratch);
    ParallelForChunks(s_.n * bands, s_.grain, [&](int64_t chunk, int64_t i0, int64_t i1) {
      float* buffer = scratch + chunk * BufferFloats();
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t n = i / bands, oy0 = i % bands * s_.band, oy1 = std::min(g.oh, oy0 + s_.band);
        if constexpr (std::is_same_v<AT, float>) s_.tiles.row(g, x, p, y, buffer, n, oy0, oy1);
        else s_.tiles.row_half(g, x, p, y, buffer, n, oy0, oy1);
      }
    });
  }

  int64_t BufferFloats() const { return s_.band * s_.g.ow * s_.g.in_blocks * kNchwcBlock; }

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
  s.band = BandRows(s.n, g.oh, g.ow, ThreadPool::Global().num_threads());
  const int64_t band_macs = s.band * g.ow * c * g.kh * g.kw;
  s.grain = ItemsPerChunk(band_macs, kChunkMacs);
  s.chunks = std::max<int64_t>(1, ThreadPool::Global().NumChunks(s.n * ((g.oh + s.band - 1) / s.band), s.grain));
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
