// NchwcWinogradConv: a 3x3, stride-1, dilation-1, group-1 convolution on the blocked NCHW8c
// layout as Winograd's F(m x m, 3x3) (nchwc_winograd.h), Y = act(conv(X, U) + B + Sum).
// The compiler (compiler/kernel_fusion/passes/to_winograd_conv.py) writes it in place of an
// NchwcConv where it measured faster, with the weights already transformed, so the kernel does
// no weight work at load or run time. Inputs X, U, then B when has_bias = 1, then Sum when
// has_sum = 1:
//   X [N, C/8, H, W, 8]           U [a², M/G, C/8, 8(c), G(m)]   (a = m + 2: 16 -> F(2x2), 36 -> F(4x4))
//   B [M]                         Sum, Y [N, M/8, OH, OW, 8], OH = H + pad_top + pad_bottom - 2
// U's point t = a·i + j is (G g G^T)[i][j] in NchwcConv's blocked weight layout with a 1x1 window,
// G (8, or 16 when M/8 is even) output channels per weight group.
//
// X, Sum and Y are float32 or float16 (one dtype), read and written as they are: the transforms
// widen float16 in registers and round Y once, to nearest even, after the whole epilogue (any
// activation), so a float16 CNN's Winograd layers move half the activation bytes. The transformed
// domain is float32 throughout: U is float32 (the compiler writes it so for float16 models too:
// rounded to float16, U adds about 7x the error of rounding Y; docs/benchmarks.md "float16
// activations"), or float16 widened once by the float16 adapter, as is a float16 bias.
//
// Work items are chunks of output tiles (nchwc_winograd.h numbers them), spread over the intra-op
// pool, each in its worker's slice of scratch: the chunk's transformed input and its products stay
// in L2 between the three steps. The products run on the NchwcConv tiles (NchwcTiles()). A layer
// whose tiles fit one chunk and that has many output blocks (ResNet50's 14x14 and 7x7 layers at
// batch 1, F(2x2)) splits its output channels instead: each item transforms all the tiles' input
// (estimated at about 1 % of the layer's work; not timed apart) and runs the products and the
// output transform for its share of the output blocks, so each thread streams its share of U
// once, and every weight it loads feeds all the tiles, instead of every thread streaming all of
// U for part of the tiles.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_winograd.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Bytes of one chunk's transformed input plus products: they stay in L2 (1 MiB per core on the
// Zen 4 machines) next to the weights the products stream.
constexpr int64_t kChunkBytes = 384 * 1024;
// Tiles per chunk: at least one 6-pixel NchwcConv tile, so the products run on full tiles.
constexpr int64_t kMinChunkTiles = 6, kMaxChunkTiles = 96;
// Tiles per chunk when the layer has that many per thread: each chunk streams all of U (a²·C·M
// floats) through the products, one multiply-add per weight and tile, so big-channel layers need
// chunks this long to do more arithmetic than weight reading; one point's slices of the chunk stay
// in L2 even when the whole chunk does not.
constexpr int64_t kWeightReuseTiles = 48;
// Weight bytes of one pass of the products over the input channels (all output blocks): they stay
// in L2 while the chunk's tiles use them (as NchwcConv's kPassWeightBytes).
constexpr int64_t kPassWeightBytes = 128 * 1024;
constexpr size_t kScratchAlign = 64;
// Channel-split layers of at most this many tiles prefetch U, kPrefetchWeightBlocks input blocks
// ahead of the products' tiles (ResNet50's 512->512 at 7x7, batch 1: 16 tiles; its 14x14 layers,
// 49 tiles, were 4-7 % slower with the prefetch; docs/benchmarks.md).
constexpr int64_t kPrefetchMaxTiles = 24, kPrefetchWeightBlocks = 16;

// Output-block groups of a layer whose tiles fit one chunk: the pool's threads, and at least 2 so
// that a one-thread pool runs the same items (the results do not depend on the split: each output
// block sums its products in the same order).
int64_t ChannelGroups(int64_t threads) { return std::max<int64_t>(2, threads); }
// Output blocks per group at least: two AVX-512 products tiles of 4 pairs. Smaller groups lost
// (ResNet50's 128->128 at 28x28, F(4x4), batch 1, 2 groups of 8 blocks: 0.85 ms against 0.80 in
// chunks of tiles; its U is 2.4 MB, which both threads stream from L3 at little cost), and
// narrower ones would narrow the tiles (DenseNet's 32-output, InceptionV3's 96-output layers).
constexpr int64_t kMinGroupBlocks = 16;

size_t AlignUp(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

struct WinogradParams {
  WinogradGeometry g;
  NchwcGeometry products;  // one point's product as a 1x1 convolution over a 1 x (chunk) image
  int64_t tiles = 0, chunk_tiles = 0, chunks = 0;
  // Items are (chunk, output-block group): group_blocks output blocks per group (a multiple of
  // the weight group G), channel_groups of them; 1 group of all blocks unless the tiles fit one chunk.
  int64_t channel_groups = 1, group_blocks = 0;
  size_t input_floats = 0, slice_bytes = 0, scratch_bytes = 0;  // per chunk of chunk_tiles
  bool has_bias = false, has_sum = false;
  bool half_activations = false;  // X, Sum and Y are float16
  NchwcEpilogue epilogue;
  WinogradTransformsOf<float> transforms;  // this SIMD path's
  WinogradTransformsOf<uint16_t> transforms_half;
  NchwcConvRowFn<float, float> products_row;
};

class NchwcWinogradConvKernel final : public Kernel {
 public:
  explicit NchwcWinogradConvKernel(const WinogradParams& p) : p_(p) {}

  size_t scratch_bytes() const override { return p_.scratch_bytes; }

  void Run(const KernelContext& ctx) const override {
    if (p_.half_activations) RunOn<uint16_t>(ctx, p_.transforms_half);
    else RunOn<float>(ctx, p_.transforms);
  }

 private:
  // AT: the activations' type (float, or float16 bits); fns: its transforms.
  template <typename AT>
  void RunOn(const KernelContext& ctx, const WinogradTransformsOf<AT>& fns) const {
    const WinogradGeometry& g = p_.g;
    const AT* x = static_cast<const AT*>(ctx.inputs[0]);
    const float* u = static_cast<const float*>(ctx.inputs[1]);
    AT* y = static_cast<AT*>(ctx.outputs[0]);
    NchwcEpilogue e = p_.epilogue;
    e.bias = p_.has_bias ? static_cast<const float*>(ctx.inputs[2]) : nullptr;
    e.sum = p_.has_sum ? ctx.inputs[p_.has_bias ? 3 : 2] : nullptr;
    const NchwcEpilogue none;
    const WinogradInputFn<AT> input = fns.input(g.m);
    const WinogradOutputFn<AT> output = fns.output(g.m);
    if (p_.chunks == 0) return;
    const int64_t points = g.points(), c = g.in_blocks * kNchwcBlock, m = g.out_blocks * kNchwcBlock;
    ParallelForChunks(p_.chunks * p_.channel_groups, 1, [&](int64_t slice, int64_t i0, int64_t i1) {
      float* v = reinterpret_cast<float*>(static_cast<char*>(ctx.scratch) + slice * p_.slice_bytes);
      float* products = v + p_.input_floats;
      int64_t transformed = -1;  // the chunk whose input v holds
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t chunk = i / p_.channel_groups, ob0 = i % p_.channel_groups * p_.group_blocks;
        const int64_t obn = std::min(p_.group_blocks, g.out_blocks - ob0);
        const int64_t tile0 = chunk * p_.chunk_tiles, count = std::min(p_.chunk_tiles, p_.tiles - tile0);
        if (chunk != transformed) input(g, x, tile0, count, v);
        transformed = chunk;
        NchwcGeometry pg = p_.products;
        pg.w = pg.ow = count;
        for (int64_t t = 0; t < points; ++t) {
          float* out = products + t * g.out_blocks * count * kNchwcBlock;
          p_.products_row(pg, v + t * g.in_blocks * count * kNchwcBlock, u + t * c * m, none, out, out, 0, ob0, obn,
                          0, 0, count);
        }
        output(g, products, tile0, count, ob0, obn, e, y);
      }
    });
  }

  const WinogradParams p_;
};

// The kernel on the spec as WithFloat16Support hands it over: X, Sum and Y as they are, U and B
// float32.
std::unique_ptr<Kernel> PrepareNchwcWinogradConv(const KernelSpec& spec) {
  WinogradParams p;
  const EpilogueInputs in = ReadEpilogueInputs(spec);
  p.has_bias = in.has_bias;
  p.has_sum = in.has_sum;
  const auto& x = spec.inputs[0].shape;
  const auto& u = spec.inputs[1].shape;
  CheckBlocked(spec, "input X", x);
  WinogradGeometry& g = p.g;
  g.in_blocks = x[1];
  g.h = x[2];
  g.w = x[3];
  if (u.size() != 5 || (u[0] != 16 && u[0] != 36) || (u[4] != kNchwcBlock && u[4] != 2 * kNchwcBlock))
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": transformed weights U have shape " + ShapeToString(u) +
                    ", expected [a², M/G, C/8, 8, G] with a² = 16 (F(2x2,3x3)) or 36 (F(4x4,3x3)) and G = 8 or 16");
  g.m = u[0] == 16 ? 2 : 4;
  const int64_t group = u[4] / kNchwcBlock;
  g.out_blocks = u[1] * group;
  CheckShape(spec, "transformed weights U", u, {u[0], u[1], g.in_blocks, kNchwcBlock, u[4]});
  const std::vector<int64_t> pads = spec.attrs.Ints("pads");
  if (pads.size() != 4 || *std::min_element(pads.begin(), pads.end()) < 0)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute 'pads' has " + std::to_string(pads.size()) +
                                                 " values, expected 4 [top, left, bottom, right], all >= 0");
  g.pad_top = pads[0];
  g.pad_left = pads[1];
  g.oh = g.h + pads[0] + pads[2] - 2;
  g.ow = g.w + pads[1] + pads[3] - 2;
  if (g.oh < 1 || g.ow < 1)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": the 3x3 window is larger than the padded input " +
                                                 std::to_string(g.oh + 2) + "x" + std::to_string(g.ow + 2));
  const int64_t n = x[0];
  CheckOutputShape(spec, 0, {n, g.out_blocks, g.oh, g.ow, kNchwcBlock});
  if (p.has_bias) CheckShape(spec, "bias B", spec.inputs[2].shape, {g.out_blocks * kNchwcBlock});
  p.epilogue = ReadNchwcEpilogue(spec);
  g.tiles_h = (g.oh + g.m - 1) / g.m;
  g.tiles_w = (g.ow + g.m - 1) / g.m;
  p.tiles = n * g.tiles_h * g.tiles_w;

  // Tiles that fit one chunk, of a layer with enough output blocks to share: one chunk, its output
  // blocks in groups (whole weight groups). Else chunks: as many tiles as fit kChunkBytes, at
  // least kMinChunkTiles, and kWeightReuseTiles where each thread has that many; with few chunks,
  // a multiple of the thread count, so no thread waits for another's last chunk.
  const int64_t tile_bytes = g.points() * (g.in_blocks + g.out_blocks) * kNchwcBlock * int64_t{sizeof(float)};
  const int64_t threads = ThreadPool::Global().num_threads();
  const int64_t fit = std::max(std::clamp<int64_t>(kChunkBytes / tile_bytes, kMinChunkTiles, kMaxChunkTiles),
                               std::min(kWeightReuseTiles, (p.tiles + threads - 1) / threads));
  p.group_blocks = g.out_blocks;
  if (p.tiles <= kMaxChunkTiles && g.out_blocks >= kMinGroupBlocks * ChannelGroups(threads)) {
    p.chunks = p.tiles > 0 ? 1 : 0;
    p.channel_groups = ChannelGroups(threads);
    p.group_blocks = ((g.out_blocks + p.channel_groups - 1) / p.channel_groups + group - 1) / group * group;
    p.channel_groups = (g.out_blocks + p.group_blocks - 1) / p.group_blocks;
  } else {
    p.chunks = (p.tiles + fit - 1) / fit;
    if (p.chunks < 4 * threads) p.chunks = (p.chunks + threads - 1) / threads * threads;
    p.chunks = std::min(p.chunks, (p.tiles + kMinChunkTiles - 1) / kMinChunkTiles);
  }
  if (p.chunks > 0) {  // (none for an empty batch)
    p.chunk_tiles = (p.tiles + p.chunks - 1) / p.chunks;
    p.chunks = (p.tiles + p.chunk_tiles - 1) / p.chunk_tiles;
  }
  auto chunk_bytes = [&](int64_t blocks) {  // one chunk's a² x blocks x tiles vectors, aligned
    return AlignUp(static_cast<size_t>(g.points() * blocks * p.chunk_tiles * kNchwcBlock) * sizeof(float));
  };
  p.input_floats = chunk_bytes(g.in_blocks) / sizeof(float);
  p.slice_bytes = chunk_bytes(g.in_blocks) + chunk_bytes(g.out_blocks);
  p.scratch_bytes = static_cast<size_t>(std::min(threads, p.chunks * p.channel_groups)) * p.slice_bytes;

  NchwcGeometry& pg = p.products;
  pg.in_blocks = g.in_blocks;
  pg.out_blocks = g.out_blocks;
  pg.out_group = group;
  pg.h = pg.oh = 1;
  // Split by output channels over so few tiles that each weight feeds at most kPrefetchMaxTiles of
  // them (a 7x7 plane: 16), the products wait on U's stream from memory: each thread's tiles ask
  // for U's lines a pass of input blocks ahead (prefetcht2), so those misses overlap the products.
  if (p.channel_groups > 1 && p.tiles <= kPrefetchMaxTiles) pg.prefetch_weight_blocks = kPrefetchWeightBlocks;
  pg.in_blocks_per_pass =
      std::max<int64_t>(1, kPassWeightBytes / (kNchwcBlock * p.group_blocks * kNchwcBlock * int64_t{sizeof(float)}));
  p.products_row = NchwcTiles().conv_row;
  p.half_activations = spec.inputs[0].dtype == DType::kFloat16;
  p.transforms = WinogradTransforms().f32;
  p.transforms_half = WinogradTransforms().f16;
  return std::make_unique<NchwcWinogradConvKernel>(p);
}

std::unique_ptr<Kernel> CreateNchwcWinogradConv(const KernelSpec& spec) {
  CheckArity(spec, 2, 4, 1);
  const EpilogueInputs in = ReadEpilogueInputs(spec);
  const DType dtype = spec.inputs[0].dtype;
  CheckDType(spec, "input X", dtype, {DType::kFloat32, DType::kFloat16});
  CheckDType(spec, "transformed weights U", spec.inputs[1].dtype, {DType::kFloat32, DType::kFloat16});
  if (in.has_bias) CheckDType(spec, "bias B", spec.inputs[2].dtype, {DType::kFloat32, DType::kFloat16});
  auto same_as_x = [&](DType t, const std::string& what) {
    if (t != dtype)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has dtype " + DTypeName(t) +
                                                   " but input X has " + DTypeName(dtype) +
                                                   "; X, Sum and Y must have the same dtype");
  };
  if (in.has_sum) same_as_x(spec.inputs.back().dtype, "sum");
  same_as_x(spec.outputs[0].dtype, "output Y");
  std::vector<size_t> native_inputs, native_outputs;
  if (dtype == DType::kFloat16) {
    native_inputs = {0};
    if (in.has_sum) native_inputs.push_back(spec.inputs.size() - 1);
    native_outputs = {0};
  }
  return WithFloat16Support(spec, PrepareNchwcWinogradConv, native_inputs, native_outputs);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("NchwcWinogradConv", CreateNchwcWinogradConv);

}  // namespace kernels
}  // namespace tfpopef
