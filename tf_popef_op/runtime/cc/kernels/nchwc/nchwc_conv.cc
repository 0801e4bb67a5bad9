// NchwcConv: a 2-D convolution on the blocked NCHW8c layout (docs/popef.md, "Blocked layout"),
// Y = act(conv(X·S, W) + B + Sum), float32 or float16. The compiler
// (to_nchwc_layout) writes it for chains of convolutions, with W already in the blocked order,
// so this kernel does no repacking and the weights stay mapped from the PopEF. Inputs X, W,
// then B when has_bias = 1, then Sum when has_sum = 1, then S when has_input_scale = 1 (a
// regular convolution on a blocked X: X's scale per image and input channel [N, C/8, 1, 1, 8],
// squeeze-and-excite's excitation, which fold_channel_scale_into_nchwc_conv moves here from a
// Mul; each work item scales its copy of the weights, NchwcEpilogue::input_scale, or in float16 on
// fewer pixels than outputs X's widened rows, NchwcEpilogue::scale_input_rows). Variants, by
// X's rank and `group`:
//   regular, blocked input   X [N, C/8, H, W, 8], W [M/8G, C/8, KH, KW, 8(c), 8G(m)]
//   regular, plain input     X [N, C, H, W] (any C), W [M/8G, C, KH, KW, 8G(m)]
//   regular, channels last   X [N, H, W, C] (C = 1 or 3, channels_last = 1), W [M/8G, KH, KW, C, 8G(m)]
//   depthwise (group == C)   X [N, C/8, H, W, 8], W [C/8, KH, KW, 8]
// The channels-last variant is the RGB stem reading the network's NHWC input itself (the
// compiler folds the input Transpose into it): the tiles see one input block of C interleaved
// lanes, so a window row's KW·C values are contiguous and the C lanes unroll in the tile.
// Y and Sum are [N, M/8, OH, OW, 8], B is [M]. G (1, or 2 when M/8 is even) is the number of
// output blocks per weight group: a pair of blocks is one 16-float vector of the AVX-512 tiles.
//
// Work items are output row segments × groups of output blocks, spread over the intra-op pool;
// the tile loops are in nchwc_tiles.inc. A 1x1 stride-1 unpadded convolution is a matrix
// product over pixels: its H·W pixels are one long row, cut into segments (more of them when
// the layer has few items for the pool's threads). A strided one on narrow rows runs on a copy
// of the pixels it reads, as a stride-1 one.
//
// Float16: the tiles read W, X and Sum as they are (W widened in registers, or on long rows a
// work item's pass at a time into a float32 scratch; a W that is a weight is read as a float32
// copy widened once, on the first run) and write Y rounded once (to nearest
// even) when the activation is one they apply in registers (none, Relu, Clip, Sigmoid, Swish,
// HardSigmoid, HardSwish), or, depthwise, any activation (applied to each finished float32 row
// piece in L1): a float16 CNN's activations then cross memory at half the bytes of float32,
// with no widened copies. Other activations, and the small bias and depthwise weights, go
// through fp16_adapter.h.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_channel_affine.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/constant_copies.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Output pixels per row segment when a row is long (pointwise rows are H·W pixels): a multiple
// of the tile widths (6 and 8) that keeps one segment's input blocks in L1/L2.
constexpr int64_t kSegmentPixels = 192;
// Output blocks per work item of the regular convolution: one AVX-512 tile of 4 pairs, two of
// 4 blocks, four AVX2 tiles (which reuse the input window in L1). Even, so items start at whole pairs.
constexpr int64_t kItemBlocks = 8;
// Weight bytes of one work item's pass over the input channels (kItemBlocks output blocks):
// they stay in L2 while the item's pixel tiles use them, and the pass's input window in L1.
constexpr int64_t kPassWeightBytes = 128 * 1024;
// A float16 W that is not a weight (a weight takes the float32 copy below) is widened into a float32 scratch
// once per work item and pass when its row segment has at least this many pixels (16 tiles
// share the copy; ResNet50's 1x1 layers at
// 56x56 to 14x14), else converted in registers by each tile (short rows: 3x3 rows of 7 to 28
// pixels, 1x1 at 7x7, whose few tiles would not repay the copy).
constexpr int64_t kWidenWeightsMinPixels = 96;
// A float16 W that is a weight (KernelSpec::constant_inputs) of a regular convolution is read
// instead as a float32 copy of all of W, widened once, on the first run (ConstantCopies), so the
// tiles run the float32-weight loop with no conversion per run, on short rows and long: exact
// (float16 -> float32 is lossless), at twice W's bytes of memory. Tile level
// (benchmarks/cc/nchwc_precision_timing.cc, fp16/fp32, 1 thread): short rows 1.01-1.07 ->
// 0.95-1.02 (DenseNet121's 3x3 128->32 at 14x14 1.40 -> 1.15), long rows 0.98-1.07 with the
// per-item copy -> 0.91-1.03; docs/benchmarks.md.
// Output rows at most this wide read a zero-padded copy of the input when the convolution pads
// its columns: at a border pixel the window is cut, so it takes a 1-pixel tile (a few times
// slower per pixel than the 6-pixel ones); on a 7-wide row that is 2 pixels of 7.
constexpr int64_t kPadCopyMaxWidth = 32;
// A strided unpadded 1x1 convolution whose output rows are at most this wide runs as a
// stride-1 one on a copy of the pixels it reads: one long row instead of rows of a few narrow
// tiles that each reload the weights (ResNet50's 1x1/2 layers, one thread: rows of 7 1.4-1.6x
// faster in float32, 1.1x in float16; rows of 14 even in float32, 1.09x in float16; rows of
// 28 no gain in float32; docs/benchmarks.md).
constexpr int64_t kSubsampleCopyMaxWidth = 16;
// A float32 Y at least this big that has a residual Sum is written with streaming stores
// (NchwcGeometry::stream_output): an ordinary store first reads each line it writes, and with
// the Sum's read stream beside it that costs ResNet50's expanding 1x1 layers at batch 8 5-9 %
// (tile level, 2 threads). Without a Sum, and for float16 Y (16-byte halves, lines often
// written in parts), streaming did not pay (docs/benchmarks.md, "1x1 convolutions").
constexpr int64_t kStreamOutputBytes = int64_t{4} << 20;
// Work items per pool thread below which a layer's items are shared out one per chunk (the
// pool hands out up to 4 chunks per thread, one at a time), so their count and sizes decide
// how evenly the threads finish.
constexpr int64_t kItemsPerThread = 4;
// The shortest row segment a row is cut into for that: 4 tiles of 6 pixels.
constexpr int64_t kMinSegmentPixels = 24;
// Multiply-adds a chunk of items must carry before it is worth handing to a pool worker.
constexpr int64_t kChunkMacs = int64_t{1} << 18;
// Scratch regions start at KernelContext::scratch's alignment.
constexpr size_t kScratchAlign = 64;

size_t AlignUp(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

struct NchwcConvParams {
  NchwcGeometry g;
  int64_t n = 0;
  bool depthwise = false;
  bool has_bias = false, has_sum = false, has_input_scale = false;
  bool half_weights = false;   // W is float16, widened by the tiles (NchwcGeometry::widen_weights)
  bool wide_weights = false;   // float16 W, a weight: read as its float32 copy, widened on the first run
  int64_t weight_count = 0;    // W's values
  bool half_activations = false;  // X, Sum and Y are float16 (then W too, unless depthwise)
  bool weights_outer = false;  // items ordered block-group first (big weights; depthwise)
  bool pad_copy = false;       // run on a zero-padded copy of X (in scratch) with geometry `padded`
  NchwcGeometry padded;
  // Run (geometry g, stride 1) on a copy of the pixels a strided 1x1 convolution reads, in
  // scratch; `strided` is X's geometry.
  bool subsample_copy = false;
  NchwcGeometry strided;
  int64_t pad_bottom = 0;
  // Float16 Y over several passes on the input channels: the partial sums' float32 buffer, in
  // scratch after the input copy (padded or subsampled).
  bool partial_buffer = false;
  size_t partial_offset = 0, scratch_bytes = 0;
  int64_t segments = 1, segment = 0;  // per output row
  int64_t block_groups = 0;           // regular: ceil(M/8 / kItemBlocks); depthwise: M/8
  NchwcEpilogue epilogue;             // bias/sum pointers filled per run
  NchwcTileFns tiles;
  // A per-channel affine (1x1 stride-1 unpadded depthwise, no Sum, activation none/Relu/Clip)
  // streams its block planes in one loop instead of the window tiles (nchwc_channel_affine.h);
  // null when this host's path has no such loop.
  ChannelAffinePlanesFn<float> affine_planes = nullptr;
  ChannelAffinePlanesFn<uint16_t> affine_planes_half = nullptr;
};

class NchwcConvKernel final : public Kernel {
 public:
  explicit NchwcConvKernel(const NchwcConvParams& p)
      : p_(p), wide_weights_(p.wide_weights ? std::make_unique<ConstantCopies>() : nullptr) {}

  size_t scratch_bytes() const override { return p_.scratch_bytes; }

  void Run(const KernelContext& ctx) const override {
    if (p_.half_activations) RunOn<uint16_t>(ctx);
    else RunOn<float>(ctx);
  }

 private:
  // AT: the activations' type (float, or float16 bits).
  template <typename AT>
  void RunOn(const KernelContext& ctx) const {
    char* scratch = static_cast<char*>(ctx.scratch);
    const AT* x = static_cast<const AT*>(ctx.inputs[0]);
    if (p_.pad_copy) x = PadCopy(x, reinterpret_cast<AT*>(scratch));
    else if (p_.subsample_copy) x = SubsampleCopy(x, reinterpret_cast<AT*>(scratch));
    AT* y = static_cast<AT*>(ctx.outputs[0]);
    NchwcGeometry geometry = p_.pad_copy ? p_.padded : p_.g;
    // (Streaming stores need whole aligned vectors: an arena tensor is 64-byte aligned.)
    if (reinterpret_cast<uintptr_t>(y) % 32 != 0) geometry.stream_output = false;
    NchwcEpilogue e = p_.epilogue;
    e.bias = p_.has_bias ? static_cast<const float*>(ctx.inputs[2]) : nullptr;
    e.sum = p_.has_sum ? ctx.inputs[p_.has_bias ? 3 : 2] : nullptr;
    if (e.sum == y) {  // an in-place Sum (KernelSpec::in_place_input)
      // Each tile reads its Sum pixels before it stores them, so the lines Y writes are already
      // in cache: streaming would not save their reads.
      geometry.stream_output = false;
      // A float32 Y holds the partial sums between passes: they would overwrite the Sum first.
      e.sum_first = std::is_same_v<AT, float> && !p_.depthwise && geometry.in_blocks > geometry.in_blocks_per_pass;
    }
    const NchwcGeometry& g = geometry;
    const float* w = static_cast<const float*>(ctx.inputs[1]);
    const uint16_t* w_half = static_cast<const uint16_t*>(ctx.inputs[1]);
    ConstantCopies::Copy wide;  // float16 W's float32 copy, kept alive for this run
    if (wide_weights_ != nullptr) {
      wide = WidenedConstant(*wide_weights_, w_half, p_.weight_count);
      w = wide->data();
    }
    float* partial = nullptr;
    if constexpr (std::is_same_v<AT, float>) partial = y;
    else if (p_.partial_buffer) partial = reinterpret_cast<float*>(scratch + p_.partial_offset);
    const int scale_input = 2 + (p_.has_bias ? 1 : 0) + (p_.has_sum ? 1 : 0);
    e.input_scale = p_.has_input_scale ? static_cast<const float*>(ctx.inputs[scale_input]) : nullptr;
    const int64_t rows = p_.n * g.oh * p_.segments;  // (image, output row, segment)
    const int64_t items = rows * p_.block_groups;
    if (items == 0) return;
    if (RunChannelAffine(x, w, e, y)) return;
    const int64_t taps = g.kh * g.kw * (p_.depthwise ? 1 : g.in_blocks * g.in_lanes);
    const int64_t item_macs = p_.segment * kNchwcBlock * taps * (p_.depthwise ? 1 : kItemBlocks);
    auto run = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t row = p_.weights_outer ? i % rows : i / p_.block_groups;
        const int64_t group = p_.weights_outer ? i / rows : i % p_.block_groups;
        const int64_t seg = row % p_.segments, oy = (row / p_.segments) % g.oh, n = row / (p_.segments * g.oh);
        const int64_t ox0 = seg * p_.segment, ox1 = std::min(g.ow, ox0 + p_.segment);
        const int64_t ob0 = group * kItemBlocks, obn = std::min(kItemBlocks, g.out_blocks - ob0);
        if constexpr (std::is_same_v<AT, float>) {
          if (p_.depthwise) p_.tiles.depthwise_row(g, x, w, e, y, n, group, oy, ox0, ox1);
          else if (p_.half_weights && !p_.wide_weights)
            p_.tiles.conv_row_half_weights(g, x, w_half, e, partial, y, n, ob0, obn, oy, ox0, ox1);
          else p_.tiles.conv_row(g, x, w, e, partial, y, n, ob0, obn, oy, ox0, ox1);
        } else {
          if (p_.depthwise) p_.tiles.depthwise_row_half(g, x, w, e, y, n, group, oy, ox0, ox1);
          else if (p_.wide_weights)
            p_.tiles.conv_row_half_wide_weights(g, x, w, e, partial, y, n, ob0, obn, oy, ox0, ox1);
          else p_.tiles.conv_row_half(g, x, w_half, e, partial, y, n, ob0, obn, oy, ox0, ox1);
        }
      }
      if (g.stream_output) StreamFence();
    };
    int64_t items_per_chunk = ItemsPerChunk(item_macs, kChunkMacs);
    // A depthwise item streams as many values as it multiplies: a 1x1 one (DenseNet's
    // per-channel affines) carries so few multiply-adds that a chunk of them would hold a
    // whole layer, which then runs on one thread. Cap its chunks at a streaming loop's grain.
    if (p_.depthwise)
      items_per_chunk = std::min(items_per_chunk, ItemsPerChunk(p_.segment * kNchwcBlock, kStreamingGrain));
    ParallelFor(items, items_per_chunk, run);
  }

  // The per-channel affine's block planes, when this host has the loop (false: it has not).
  template <typename AT>
  bool RunChannelAffine(const AT* x, const float* w, const NchwcEpilogue& e, AT* y) const {
    const NchwcGeometry& g = p_.g;
    const int64_t planes = p_.n * g.in_blocks, values = g.ow * kNchwcBlock;
    auto run = [&](auto fn) {
      ParallelFor(planes, ItemsPerChunk(values, kStreamingGrain), [&](int64_t p0, int64_t p1) {
        fn(x, w, e, y, g.in_blocks, g.ow, p0, p1);
      });
    };
    if constexpr (std::is_same_v<AT, float>) {
      if (p_.affine_planes == nullptr) return false;
      run(p_.affine_planes);
    } else {
      if (p_.affine_planes_half == nullptr) return false;
      run(p_.affine_planes_half);
    }
    return true;
  }

  // X with its pads written as zeros, one (image, block) plane per work item; returns the copy.
  template <typename AT>
  const AT* PadCopy(const AT* x, AT* out) const {
    const NchwcGeometry& g = p_.g;
    const NchwcGeometry& pg = p_.padded;
    const int64_t row = g.w * kNchwcBlock, prow = pg.w * kNchwcBlock;
    const int64_t left = g.pad_left * kNchwcBlock;
    ParallelFor(p_.n * g.in_blocks, ItemsPerChunk(pg.in_block_stride(), kStreamingGrain), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const AT* src = x + b * g.in_block_stride();
        AT* dst = out + b * pg.in_block_stride();
        const AT zero{};  // +0 in either type
        std::fill(dst, dst + g.pad_top * prow, zero);
        dst += g.pad_top * prow;
        for (int64_t r = 0; r < g.h; ++r, dst += prow, src += row) {
          std::fill(dst, dst + left, zero);
          std::copy(src, src + row, dst + left);
          std::fill(dst + left + row, dst + prow, zero);
        }
        std::fill(dst, dst + p_.pad_bottom * prow, zero);
      }
    });
    return out;
  }

  // The pixels (oy·sh, ox·sw) of X, in the blocked layout of an oh x ow input; returns the copy.
  template <typename AT>
  const AT* SubsampleCopy(const AT* x, AT* out) const {
    const NchwcGeometry& s = p_.strided;
    const int64_t plane = s.oh * s.ow * kNchwcBlock;
    ParallelFor(p_.n * s.in_blocks, ItemsPerChunk(plane, kStreamingGrain), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        AT* dst = out + b * plane;
        for (int64_t oy = 0; oy < s.oh; ++oy) {
          const AT* src = x + b * s.in_block_stride() + oy * s.sh * s.w * kNchwcBlock;
          for (int64_t ox = 0; ox < s.ow; ++ox, dst += kNchwcBlock)
            std::copy(src + ox * s.sw * kNchwcBlock, src + (ox * s.sw + 1) * kNchwcBlock, dst);
        }
      }
    });
    return out;
  }

  const NchwcConvParams p_;
  const std::unique_ptr<ConstantCopies> wide_weights_;  // null unless p_.wide_weights; thread-safe
};

// has_input_scale: 1 when S follows X, W, B and Sum (then the last input).
bool HasInputScale(const KernelSpec& spec) {
  return spec.attrs.Has("has_input_scale") && CheckedFlag(spec, "has_input_scale");
}

// The spec without S, as the epilogue's input checks expect it.
KernelSpec WithoutInputScale(const KernelSpec& spec) {
  KernelSpec rest = spec;
  if (HasInputScale(spec) && !rest.inputs.empty()) rest.inputs.pop_back();
  return rest;
}

// The kernel on the spec as WithFloat16Support hands it over: float16 where the tiles convert
// in registers (CreateNchwcConv), float32 elsewhere.
std::unique_ptr<Kernel> PrepareNchwcConv(const KernelSpec& spec) {
  NchwcConvParams p;
  const EpilogueInputs in = ReadEpilogueInputs(WithoutInputScale(spec));
  p.has_input_scale = HasInputScale(spec);
  p.has_bias = in.has_bias;
  p.has_sum = in.has_sum;
  const auto& x = spec.inputs[0].shape;
  const auto& w = spec.inputs[1].shape;
  NchwcGeometry& g = p.g;
  const int64_t group = spec.attrs.Int("group");
  const bool blocked_input = x.size() == 5;
  const bool channels_last = spec.attrs.Has("channels_last") && CheckedFlag(spec, "channels_last");
  if (blocked_input) CheckBlocked(spec, "input X", x);
  else if (x.size() != 4)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input X has shape " + ShapeToString(x) +
                                                 ", expected blocked [N, C/8, H, W, 8] or plain [N, C, H, W]");
  if (channels_last && (blocked_input || group != 1 || !ChannelsLastLanesSupported(x[3])))
    throw Error(ErrorCode::kUnimplemented,
                spec.Where() + ": channels_last = 1 with input X " + ShapeToString(x) + " and group " +
                    std::to_string(group) + " (supported: group 1, X [N, H, W, C] with C = 1 or 3)");
  p.n = x[0];
  if (channels_last) {  // one input block of C interleaved lanes
    g.in_lanes = x[3];
    g.in_blocks = 1;
    g.h = x[1];
    g.w = x[2];
  } else {
    g.in_lanes = blocked_input ? kNchwcBlock : 1;
    g.in_blocks = x[1];
    g.h = x[2];
    g.w = x[3];
  }
  const int64_t c = g.in_blocks * g.in_lanes, x_pixels = g.h * g.w;
  ReadNchwcWindow(spec, &g);
  if (group == 1) {
    if (w.empty()) throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": weights have no dims");
    g.out_group = w.back() == 2 * kNchwcBlock ? 2 : 1;
    g.out_blocks = w[0] * g.out_group;
    const int64_t groups = w[0], lanes = g.out_group * kNchwcBlock;
    CheckShape(spec, "weights W", w,
               blocked_input   ? std::vector<int64_t>{groups, g.in_blocks, g.kh, g.kw, kNchwcBlock, lanes}
               : channels_last ? std::vector<int64_t>{groups, g.kh, g.kw, c, lanes}
                               : std::vector<int64_t>{groups, c, g.kh, g.kw, lanes});
  } else if (group == c && blocked_input) {
    p.depthwise = true;
    g.out_blocks = g.in_blocks;
    CheckShape(spec, "depthwise weights W", w, {g.in_blocks, g.kh, g.kw, kNchwcBlock});
  } else {
    throw Error(ErrorCode::kUnimplemented,
                spec.Where() + ": group " + std::to_string(group) + " with input " + ShapeToString(x) +
                    " (supported: group 1, or group == C with a blocked input: depthwise)");
  }
  CheckOutputShape(spec, 0, {p.n, g.out_blocks, g.oh, g.ow, kNchwcBlock});
  p.half_weights = spec.inputs[1].dtype == DType::kFloat16;
  p.half_activations = spec.inputs[0].dtype == DType::kFloat16;
  if (p.half_weights && p.depthwise)  // CreateNchwcConv widens depthwise weights (they are small)
    throw Error(ErrorCode::kInternal, spec.Where() + ": float16 depthwise weights reached the tiles");
  if (p.has_bias) CheckShape(spec, "bias B", spec.inputs[2].shape, {g.out_blocks * kNchwcBlock});
  if (p.has_input_scale) {
    if (p.depthwise || !blocked_input)
      throw Error(ErrorCode::kUnimplemented, spec.Where() + ": has_input_scale = 1 on a " +
                                                 (p.depthwise ? "depthwise" : "plain-input") +
                                                 " convolution (supported: group 1 with a blocked X)");
    CheckShape(spec, "input scale S", spec.inputs.back().shape, {p.n, g.in_blocks, 1, 1, kNchwcBlock});
  }
  p.epilogue = ReadNchwcEpilogue(spec, /*sigmoids_in_registers=*/true);
  // Y may take the Sum's bytes: every tile reads its Sum pixels before it stores them (and, with
  // partial sums in a float32 Y, at the first pass: NchwcEpilogue::sum_first). Not depthwise.
  if (spec.in_place_input >= 0 && (p.depthwise || !p.has_sum || spec.in_place_input != (p.has_bias ? 3 : 2)))
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": in_place_input " + std::to_string(spec.in_place_input) +
                    " (Y may take only the residual Sum's bytes, of a regular convolution with has_sum = 1: input " +
                    std::to_string(p.has_bias ? 3 : 2) + ")");
  if (p.half_activations && !p.depthwise && (!p.half_weights || !p.epilogue.post.is_identity()))
    throw Error(ErrorCode::kInternal, spec.Where() + ": float16 activations reached the tiles with float32 weights "
                                                     "or an activation they do not apply in registers");
  p.tiles = NchwcTiles();
  p.subsample_copy = !p.depthwise && blocked_input && g.kh == 1 && g.kw == 1 && (g.sh > 1 || g.sw > 1) &&
                     g.pad_top == 0 && g.pad_left == 0 && g.pad_bottom == 0 && g.pad_right == 0 &&
                     g.ow <= kSubsampleCopyMaxWidth;
  if (p.subsample_copy) {
    p.strided = g;
    g.h = g.oh;
    g.w = g.ow;
    g.sh = g.sw = 1;
  }
  // A 1x1 stride-1 unpadded convolution reads pixel i for output pixel i: one long row.
  if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.oh == g.h && g.ow == g.w) {
    g.w = g.ow = g.h * g.w;
    g.h = g.oh = 1;
  }
  using InRegister = NchwcEpilogue::InRegister;
  if (p.depthwise && g.kh == 1 && g.kw == 1 && g.h == 1 && g.oh == 1 && g.ow == g.w && !p.has_sum &&
      p.epilogue.post.is_identity() &&
      (p.epilogue.in_register == InRegister::kNone || p.epilogue.in_register == InRegister::kRelu ||
       p.epilogue.in_register == InRegister::kClip)) {
    p.affine_planes = ChannelAffinePlanes();
    p.affine_planes_half = ChannelAffinePlanesHalf();
  }
  p.segments = g.ow > 2 * kSegmentPixels ? (g.ow + kSegmentPixels - 1) / kSegmentPixels : 1;
  p.block_groups = p.depthwise ? g.out_blocks : (g.out_blocks + kItemBlocks - 1) / kItemBlocks;
  // Few items (at most one chunk each) that the pool's threads cannot share equally: a count
  // they do not divide (a 14x14 pointwise layer with 64 outputs is one item at batch 1,
  // InceptionV3's 768->192 at 17x17 three), or a last block group narrower than the others
  // (96 outputs: items of 8 and 4 blocks). Cut the rows into more segments until they can.
  const int64_t threads = ThreadPool::Global().num_threads();
  if (!p.depthwise && threads > 1) {
    const bool unequal_groups = g.out_blocks % kItemBlocks != 0;
    auto items = [&] { return p.n * g.oh * p.segments * p.block_groups; };
    while (items() < kItemsPerThread * threads && (items() % threads != 0 || unequal_groups) &&
           g.ow / (p.segments + 1) >= kMinSegmentPixels)
      ++p.segments;
  }
  p.segment = (g.ow + p.segments - 1) / p.segments;
  const bool constant_weights = spec.constant_inputs.size() > 1 && spec.constant_inputs[1];
  p.wide_weights = p.half_weights && !p.depthwise && constant_weights;
  // Float16 with an input scale on fewer pixels than outputs: X's widened rows take the scale
  // (float32's arithmetic there: its Mul before the convolution) instead of each item's weights.
  p.epilogue.scale_input_rows = p.half_activations && p.wide_weights && p.has_input_scale &&
                                x_pixels < g.out_blocks * kNchwcBlock;
  g.widen_weights = p.half_weights && !p.wide_weights && p.segment >= kWidenWeightsMinPixels;
  p.weight_count = Product(w);
  const size_t weight_bytes = p.half_weights && !g.widen_weights && !p.wide_weights ? sizeof(uint16_t) : sizeof(float);
  const int64_t block_weight_bytes = kItemBlocks * g.kh * g.kw * g.in_lanes * kNchwcBlock * weight_bytes;
  g.in_blocks_per_pass = std::max<int64_t>(1, kPassWeightBytes / block_weight_bytes);
  // Weights bigger than one image's input (late ResNet layers): walk the rows inside each
  // block group, so a group's weights are read from memory once and its rows hit the cache.
  // Depthwise: a plane's consecutive rows share all but sh of their window's input rows, which
  // are then still in L1.
  p.weights_outer = p.depthwise || Product(w) > g.in_image_stride();
  const std::vector<int64_t> pads = spec.attrs.Ints("pads");
  p.pad_bottom = pads[2];
  const int64_t pad_right = pads[3];
  p.pad_copy = !p.depthwise && blocked_input && g.ow <= kPadCopyMaxWidth && (g.pad_left > 0 || pad_right > 0);
  const size_t activation_bytes = p.half_activations ? sizeof(uint16_t) : sizeof(float);
  g.stream_output = !p.depthwise && p.has_sum && !p.half_activations &&
                    p.n * g.out_image_stride() * static_cast<int64_t>(sizeof(float)) >= kStreamOutputBytes;
  if (p.subsample_copy) p.scratch_bytes = AlignUp(static_cast<size_t>(p.n * g.in_image_stride()) * activation_bytes);
  if (p.pad_copy) {
    p.padded = g;
    p.padded.h = g.h + g.pad_top + p.pad_bottom;
    p.padded.w = g.w + g.pad_left + pad_right;
    p.padded.pad_top = p.padded.pad_left = 0;
    p.scratch_bytes = AlignUp(static_cast<size_t>(p.n * p.padded.in_image_stride()) * activation_bytes);
  }
  p.partial_buffer = p.half_activations && !p.depthwise && g.in_blocks > g.in_blocks_per_pass;
  if (p.partial_buffer) {
    p.partial_offset = p.scratch_bytes;
    p.scratch_bytes += static_cast<size_t>(p.n * g.out_image_stride()) * sizeof(float);
  }
  return std::make_unique<NchwcConvKernel>(p);
}

std::unique_ptr<Kernel> CreateNchwcConv(const KernelSpec& spec) {
  CheckArity(spec, 2, 5, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  // A regular convolution's float16 weights are read as they are: a weight W is widened once,
  // on the first run, into a float32 copy the kernel keeps; any other W is widened by the
  // tiles in registers, or on long rows each work item widens its own part, a pass at a time,
  // into a float32 scratch in L2 that all its pixel tiles read (kWidenWeightsMinPixels),
  // instead of the adapter widening a copy of all of W every run.
  // Depthwise weights and the bias are few: the adapter widens them.
  // The depthwise tiles finish any activation on a float32 row piece in L1 before rounding it.
  std::vector<size_t> native_inputs, native_outputs;
  const bool depthwise = spec.attrs.Int("group") != 1;
  if (!depthwise) native_inputs.push_back(1);
  if (spec.inputs[0].dtype == DType::kFloat16 && (depthwise || ReadNchwcEpilogue(spec, true).post.is_identity())) {
    const EpilogueInputs in = ReadEpilogueInputs(WithoutInputScale(spec));
    native_inputs.push_back(0);
    if (in.has_sum) native_inputs.push_back(in.has_bias ? 3 : 2);
    native_outputs.push_back(0);
  }
  return WithFloat16Support(spec, PrepareNchwcConv, native_inputs, native_outputs);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("NchwcConv", CreateNchwcConv);

}  // namespace kernels
}  // namespace tfpopef
