// NchwcInvertedResidual: MobileNetV2's inverted-residual block on the blocked NCHW8c layout
// (docs/popef.md, "Internal ops") as one step, float32 or float16:
//   E = act_e(conv1x1(X, We) + Be)                 expand     [N, Cexp/8, H, W, 8]
//   D = act_d(depthwise(E, Wd) + Bd)               depthwise  [N, Cexp/8, OH, OW, 8]
//   Y = act_p(conv1x1(D, Wp) + Bp [+ X])           project    [N, Cout/8, OH, OW, 8]
// Inputs X, We, Be, Wd, Bd, Wp, Bp in NchwcConv's layouts; `residual` = 1 adds X (stride 1,
// Cout == Cin). Without Wp and Bp (5 inputs) there is no project stage and Y is D: EfficientNet's
// MBConv, whose squeeze-and-excite needs the whole of D before its project. The activations are
// none, Relu, Clip or of the sigmoid family (Sigmoid, Swish, HardSigmoid, HardSwish), all applied
// in registers.
//
// Why one step: as three NchwcConvs, E and D (6x the block's channels) each cross DRAM twice.
// Here each work item (an image, or a run of its output rows when there are fewer images than
// threads; without a project stage, a run of its expanded channels instead) walks its rows in
// bands: it expands the band's input rows (band + window halo) into a buffer of its slice of
// scratch, runs the depthwise convolution on them into a second buffer, and projects that into
// Y (without a project stage the depthwise writes Y's rows itself). The buffers are sized to
// stay in L2 (kBandBytes), so only X and Y touch memory. Consecutive bands share the window's
// halo rows: they move to the front of the buffer instead of being expanded again. Without the
// project stage nothing needs all expanded channels of a pixel at once, so fewer images than
// threads are cut into runs of channel blocks, not of rows: no item expands the window's halo
// rows of another. (E's buffer keeps a plane slot for every expanded block; an item touches its
// run's slots only, which the L2 budget counts.)
//
// Where cutting fewer images than threads into runs of rows would expand more than a fifth of the
// plane's rows twice (7x7 planes: 9 rows for 7 on two threads), a block runs in two phases
// instead: runs of expanded channels write D whole into scratch (small at such planes), then runs
// of the project's output groups (or of pixels, where the groups do not divide among the
// threads) project it into Y. No item expands another's halo rows, and each reads only its part
// of We, Wd and Wp (at 7x7 160->960->160: 1.2 MB of weights for a 31 KB Y). Larger planes keep
// the rows: their runs barely overlap, and a whole D would cross between the cores
// (docs/benchmarks.md, "Batch 1 against OpenVINO, block by block").
//
// The three stages call the NchwcConv tile rows (nchwc_tiles.h) on geometries that describe the
// band buffers. A 1x1 stage runs as NchwcConv runs it, on its rows as one long row of pixels;
// where its source or destination rows are a band of a larger plane (X's, Y's), the geometry
// carries that plane's stride (NchwcGeometry::in_plane / out_plane) and the band's first row
// is folded into the pointers. Every pixel sums its products in the same order as NchwcConv, so
// the result is bit-identical to the three separate steps
// (tests/cc/nchwc_inverted_residual_kernel_tests.cc). Float16 X, E, D and Y are read and written
// as float16 (widened in registers, rounded once as stored); float16 1x1 weights that are weights
// are read as float32 copies widened once, on the first run, as NchwcConv reads its own (exact:
// the tiles then run the float32-weight loop with no conversion per tile). A float16 block in two
// phases with those copies keeps E and D in float32 instead (D whole, read by every project item,
// without a conversion per broadcast), and so does a float16 pair (E, read 3 or 5 times by the
// depthwise, without a conversion per loaded vector): the result is the float32 steps' on the same
// values, rounded once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_inverted_residual.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/constant_copies.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Bytes of one item's two band buffers: half of a Zen 4 / Ice Lake core's 1 MiB (1.25 MiB) L2,
// the rest for the weights and the streamed X and Y rows.
constexpr int64_t kBandBytes = 512 * 1024;
// As NchwcConv's: output blocks per tile-row call, and the weight bytes of one pass over the
// input channels (float32; float16 runs every 1x1 stage in one pass, so needs no partial sums).
constexpr int64_t kItemBlocks = 8;
constexpr int64_t kPassWeightBytes = 128 * 1024;
constexpr size_t kScratchAlign = 64;
// Distance between the slices of scratch of runs of rows, whatever a block's buffers take (at
// most kBandBytes when cut into bands): every kernel's scratch starts at the same address, so with a
// fixed stride thread t writes its band buffers into the lines it wrote in the block before,
// which are in its own L2. Slices of each block's own size would put the worker's slice over
// lines the caller wrote last (and the other way round), each block's first band then pulling
// them from the other core (docs/benchmarks.md, "Batch 1 against OpenVINO, block by block").
constexpr size_t kSliceStride = kBandBytes + 2 * kScratchAlign;

size_t AlignUp(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

struct InvertedResidualParams {
  int64_t n = 0;
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t in_blocks = 0, mid_blocks = 0, out_blocks = 0;
  int64_t sh = 1, pad_top = 0, kh = 1;
  bool residual = false, half = false;
  // Float16 1x1 weights that are weights (KernelSpec::constant_inputs): read as float32 copies
  // widened once, on the first run, as NchwcConv reads its own (docs/architecture.md, "Derived
  // weight copies"), so the tiles run the float32-weight loop; `*_weight_count` values each.
  bool wide_expand = false, wide_project = false;
  int64_t expand_weight_count = 0, project_weight_count = 0;
  bool project_stage = true;  // false: Y is D (5 inputs)
  // Float16 X and Y with float32 E and D (two phases, or a pair without a project stage): no
  // conversion of E or D, and one rounding fewer than the separate steps (the float32 steps'
  // result on the same values, rounded once). Blocks on larger planes keep float16 buffers: float32
  // ones halve their bands (docs/benchmarks.md).
  bool float_bands = false;
  // Items: images x chunks of at most `chunk_rows` output rows x runs of `run_blocks` expanded channel
  // blocks (without a project stage only; else one run of all); each item in bands of `band_rows`.
  int64_t chunks_per_image = 1, chunk_rows = 0, band_rows = 0;
  int64_t runs_per_image = 1, run_blocks = 0;
  int64_t buffer_rows = 0;  // rows of E's planes (a band's window rows; a whole image's when it is one band)
  // Two phases (a project stage and fewer images than threads, small planes): items of the first
  // are runs of expanded channels that write D whole into scratch (at d_full_offset, one image's
  // D per image); the second projects D into Y, its items runs of `project_run` output blocks, or
  // of `project_run` pixels when `project_by_pixels`.
  bool two_phase = false, project_by_pixels = false;
  int64_t project_items = 0, project_run = 0;
  NchwcGeometry project_full;  // D -> Y on whole planes (two phases)
  size_t d_full_offset = 0;
  // Tile-row geometries: expand (X's band -> E) and project (D -> Y's band) as one long row of
  // pixels each; depthwise on E's band (pad_top set per band).
  NchwcGeometry expand, depthwise, project;
  NchwcEpilogue expand_epilogue, depthwise_epilogue, project_epilogue;
  size_t d_offset = 0, slice_bytes = 0, slice_stride = 0, scratch_bytes = 0;
  int64_t slices = 0;
  NchwcTileFns tiles;
};

class NchwcInvertedResidualKernel final : public Kernel {
 public:
  explicit NchwcInvertedResidualKernel(const InvertedResidualParams& p)
      : p_(p),
        wide_expand_(p.wide_expand ? std::make_unique<ConstantCopies>() : nullptr),
        wide_project_(p.wide_project ? std::make_unique<ConstantCopies>() : nullptr) {}

  size_t scratch_bytes() const override { return p_.scratch_bytes; }

  void Run(const KernelContext& ctx) const override {
    if (p_.half && p_.float_bands) RunOn<uint16_t, float>(ctx);
    else if (p_.half) RunOn<uint16_t, uint16_t>(ctx);
    else RunOn<float, float>(ctx);
  }

 private:
  // One run's tensors and epilogues; AT is the type of the activations and the 1x1 weights
  // (we_wide / wp_wide: a float16 We / Wp's float32 copy, else null).
  template <typename AT>
  struct Tensors {
    const AT *x, *we, *wp;
    const float *we_wide = nullptr, *wp_wide = nullptr;
    const float* wd;
    AT* y;
    NchwcEpilogue expand, depthwise, project;
  };

  template <typename AT, typename BT>
  void RunOn(const KernelContext& ctx) const {
    Tensors<AT> t;
    t.x = static_cast<const AT*>(ctx.inputs[0]);
    t.we = static_cast<const AT*>(ctx.inputs[1]);
    t.wd = static_cast<const float*>(ctx.inputs[3]);
    t.wp = p_.project_stage ? static_cast<const AT*>(ctx.inputs[5]) : nullptr;
    t.y = static_cast<AT*>(ctx.outputs[0]);
    t.expand = p_.expand_epilogue;
    t.expand.bias = static_cast<const float*>(ctx.inputs[2]);
    t.depthwise = p_.depthwise_epilogue;
    t.depthwise.bias = static_cast<const float*>(ctx.inputs[4]);
    t.project = p_.project_epilogue;
    t.project.bias = p_.project_stage ? static_cast<const float*>(ctx.inputs[6]) : nullptr;
    ConstantCopies::Copy we_wide, wp_wide;  // kept alive for this run
    if constexpr (std::is_same_v<AT, uint16_t>) {
      if (wide_expand_ != nullptr)
        t.we_wide = (we_wide = WidenedConstant(*wide_expand_, t.we, p_.expand_weight_count))->data();
      if (wide_project_ != nullptr)
        t.wp_wide = (wp_wide = WidenedConstant(*wide_project_, t.wp, p_.project_weight_count))->data();
    }
    const int64_t per_image = p_.chunks_per_image * p_.runs_per_image;
    const int64_t items = p_.n * per_image;
    if (items == 0) return;
    BT* d_full = reinterpret_cast<BT*>(static_cast<char*>(ctx.scratch) + p_.d_full_offset);
    ParallelForChunks(items, 1, [&](int64_t slice, int64_t i0, int64_t i1) {
      char* base = static_cast<char*>(ctx.scratch) + slice * p_.slice_stride;
      BT* e_buf = reinterpret_cast<BT*>(base);
      BT* d_buf = reinterpret_cast<BT*>(base + p_.d_offset);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t image = i / per_image, chunk = i % per_image / p_.runs_per_image;
        const int64_t run = i % p_.runs_per_image;
        // Near-equal runs of rows, the shorter ones first (at most chunk_rows each): with a
        // stride-2 window padded at the bottom only (TF's SAME on an even plane) the bottom rows
        // expand fewer input rows, so 7 rows cut 3 + 4 expand 7 and 8 input rows, 4 + 3 9 and 6.
        const int64_t oy_begin = p_.oh * chunk / p_.chunks_per_image;
        const int64_t oy_end = p_.oh * (chunk + 1) / p_.chunks_per_image;
        const int64_t cb0 = run * p_.run_blocks, cb1 = std::min(p_.mid_blocks, cb0 + p_.run_blocks);
        RunChunk(t, image, oy_begin, oy_end, cb0, cb1, e_buf, d_buf, d_full);
      }
    });
    if (!p_.two_phase) return;
    const int64_t plane = p_.oh * p_.ow;
    ParallelForChunks(p_.n * p_.project_items, 1, [&](int64_t, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t image = i / p_.project_items, item = i % p_.project_items;
        const AT* x_img = t.x + image * p_.in_blocks * p_.h * p_.w * kNchwcBlock;
        const BT* d_img = d_full + image * p_.mid_blocks * plane * kNchwcBlock;
        AT* y_img = t.y + image * p_.out_blocks * plane * kNchwcBlock;
        NchwcEpilogue e = t.project;
        e.sum = p_.residual ? x_img : nullptr;  // X has Y's planes (stride 1, Cin == Cout)
        int64_t ob0 = 0, ob1 = p_.out_blocks, px0 = 0, px1 = plane;
        if (p_.project_by_pixels) {
          px0 = item * p_.project_run;
          px1 = std::min(plane, px0 + p_.project_run);
        } else {
          ob0 = item * p_.project_run;
          ob1 = std::min(p_.out_blocks, ob0 + p_.project_run);
        }
        for (int64_t b = ob0; b < ob1; b += kItemBlocks)
          ConvRow(p_.project_full, d_img, t.wp, t.wp_wide, e, Partial(y_img), y_img, b, std::min(kItemBlocks, ob1 - b),
                  px0, px1);
      }
    });
  }

  // Output rows [oy_begin, oy_end) of one image, band by band, expanded channel blocks [cb0, cb1)
  // (all of them when the project runs band by band). E's planes are the blocks' own ones in e_buf.
  template <typename AT, typename BT>
  void RunChunk(const Tensors<AT>& t, int64_t image, int64_t oy_begin, int64_t oy_end, int64_t cb0, int64_t cb1,
                BT* e_buf, BT* d_buf, BT* d_full) const {
    const AT* x_img = t.x + image * p_.in_blocks * p_.h * p_.w * kNchwcBlock;
    AT* y_img = t.y + image * p_.out_blocks * p_.oh * p_.ow * kNchwcBlock;
    const bool project_bands = p_.project_stage && !p_.two_phase;
    // Where D's planes go when no band projects them: D's scratch (two phases) or Y.
    BT* d_planes = d_full + image * p_.mid_blocks * p_.oh * p_.ow * kNchwcBlock;
    const int64_t e_row = p_.w * kNchwcBlock, e_plane = p_.buffer_rows * e_row;
    int64_t have_lo = 0, have_hi = 0;  // input rows in E: [have_lo, have_hi), row have_lo in slot 0
    for (int64_t oy0 = oy_begin; oy0 < oy_end; oy0 += p_.band_rows) {
      const int64_t rows = std::min(oy_end - oy0, p_.band_rows);
      const int64_t first = oy0 * p_.sh - p_.pad_top;          // the band's first window row (< 0: pad)
      const int64_t last = (oy0 + rows - 1) * p_.sh - p_.pad_top + p_.kh;  // one past its last
      const int64_t lo = std::max<int64_t>(0, first), hi = std::min(p_.h, last);
      int64_t kept = 0;
      if (have_lo <= lo && lo < have_hi) {
        kept = have_hi - lo;
        for (int64_t cb = cb0; cb < cb1; ++cb)
          std::memmove(e_buf + cb * e_plane, e_buf + cb * e_plane + (lo - have_lo) * e_row,
                       static_cast<size_t>(kept * e_row) * sizeof(BT));
      }
      Expand(t, x_img, lo, kept, hi - lo, cb0, cb1, e_buf);
      // Window rows past the input's bottom that fall inside E's planes read as the zero pads.
      const int64_t zero_to = std::min(p_.buffer_rows, last - lo);
      if (zero_to > hi - lo)
        for (int64_t cb = cb0; cb < cb1; ++cb)
          std::fill(e_buf + cb * e_plane + (hi - lo) * e_row, e_buf + cb * e_plane + zero_to * e_row, BT{});
      have_lo = lo;
      have_hi = hi;
      NchwcGeometry gd = p_.depthwise;
      gd.pad_top = lo - first;  // local row j's window starts at slot j·sh - pad_top
      // Unless the band is projected here, D's rows go to whole planes (gd.out_plane) from row oy0.
      auto depthwise = [&](auto* d_rows) {
        for (int64_t cb = cb0; cb < cb1; ++cb)
          for (int64_t j = 0; j < rows; ++j) DepthwiseRow(gd, e_buf, t, d_rows, cb, j);
      };
      const int64_t at = oy0 * p_.ow * kNchwcBlock;
      if (project_bands) {
        depthwise(d_buf);
        Project(t, x_img, y_img, oy0, rows, d_buf);
      } else if (p_.two_phase) {
        depthwise(d_planes + at);
      } else {
        depthwise(y_img + at);
      }
    }
  }

  // E's slots [from, to) of blocks [cb0, cb1) from input rows lo + slot: pixels [from·W, to·W) of
  // the band's long row.
  template <typename AT, typename BT>
  void Expand(const Tensors<AT>& t, const AT* x_img, int64_t lo, int64_t from, int64_t to, int64_t cb0, int64_t cb1,
              BT* e_buf) const {
    if (from >= to) return;
    const AT* x_band = x_img + lo * p_.w * kNchwcBlock;
    for (int64_t ob0 = cb0; ob0 < cb1; ob0 += kItemBlocks)
      ConvRow(p_.expand, x_band, t.we, t.we_wide, t.expand, Partial(e_buf), e_buf, ob0,
              std::min(kItemBlocks, cb1 - ob0), from * p_.w, to * p_.w);
  }

  // Y's rows [oy0, oy0 + rows) from D's slots [0, rows).
  template <typename AT, typename BT>
  void Project(const Tensors<AT>& t, const AT* x_img, AT* y_img, int64_t oy0, int64_t rows, const BT* d_buf) const {
    const int64_t at = oy0 * p_.ow * kNchwcBlock;
    AT* y_band = y_img + at;
    NchwcEpilogue e = t.project;
    e.sum = p_.residual ? x_img + at : nullptr;  // X has Y's planes (stride 1, Cin == Cout)
    for (int64_t ob0 = 0; ob0 < p_.out_blocks; ob0 += kItemBlocks)
      ConvRow(p_.project, d_buf, t.wp, t.wp_wide, e, Partial(y_band), y_band, ob0,
              std::min(kItemBlocks, p_.out_blocks - ob0), 0, rows * p_.ow);
  }

  // Where a float32 1x1 stage keeps its partial sums between passes: its output itself. A float16
  // one takes all input channels in one pass.
  template <typename AT>
  static float* Partial(AT* out) {
    if constexpr (std::is_same_v<AT, float>) return out;
    else return nullptr;
  }

  // A 1x1 stage's tile row; w_wide: a float16 w's float32 copy, or null.
  void ConvRow(const NchwcGeometry& g, const float* x, const float* w, const float*, const NchwcEpilogue& e,
               float* partial, float* y, int64_t ob0, int64_t obn, int64_t ox0, int64_t ox1) const {
    p_.tiles.conv_row(g, x, w, e, partial, y, 0, ob0, obn, 0, ox0, ox1);
  }
  void ConvRow(const NchwcGeometry& g, const uint16_t* x, const uint16_t* w, const float* w_wide,
               const NchwcEpilogue& e, float* partial, uint16_t* y, int64_t ob0, int64_t obn, int64_t ox0,
               int64_t ox1) const {
    if (w_wide != nullptr) p_.tiles.conv_row_half_wide_weights(g, x, w_wide, e, partial, y, 0, ob0, obn, 0, ox0, ox1);
    else p_.tiles.conv_row_half(g, x, w, e, partial, y, 0, ob0, obn, 0, ox0, ox1);
  }
  // Float32 band buffers (float_bands: the weights' float32 copies): the expand from float16 X,
  // the project into float16 Y.
  void ConvRow(const NchwcGeometry& g, const uint16_t* x, const uint16_t*, const float* w_wide, const NchwcEpilogue& e,
               float*, float* y, int64_t ob0, int64_t obn, int64_t ox0, int64_t ox1) const {
    p_.tiles.pointwise_row_half_in(g, x, w_wide, e, nullptr, y, 0, ob0, obn, 0, ox0, ox1);
  }
  void ConvRow(const NchwcGeometry& g, const float* x, const uint16_t*, const float* w_wide, const NchwcEpilogue& e,
               float*, uint16_t* y, int64_t ob0, int64_t obn, int64_t ox0, int64_t ox1) const {
    p_.tiles.pointwise_row_half_out(g, x, w_wide, e, nullptr, y, 0, ob0, obn, 0, ox0, ox1);
  }

  // The depthwise row from E's band into D (DT: BT, or the float16 Y of float32 band buffers).
  template <typename AT, typename BT, typename DT>
  void DepthwiseRow(const NchwcGeometry& g, const BT* e_buf, const Tensors<AT>& t, DT* d, int64_t cb,
                    int64_t j) const {
    if constexpr (std::is_same_v<BT, DT>) {
      if constexpr (std::is_same_v<BT, float>) p_.tiles.depthwise_row(g, e_buf, t.wd, t.depthwise, d, 0, cb, j, 0, p_.ow);
      else p_.tiles.depthwise_row_half(g, e_buf, t.wd, t.depthwise, d, 0, cb, j, 0, p_.ow);
    } else {
      static_assert(std::is_same_v<BT, float> && std::is_same_v<DT, uint16_t>, "float32 E into float16 D only");
      p_.tiles.depthwise_row_half_out(g, e_buf, t.wd, t.depthwise, d, 0, cb, j, 0, p_.ow);
    }
  }

  const InvertedResidualParams p_;
  const std::unique_ptr<ConstantCopies> wide_expand_, wide_project_;  // null unless p_.wide_*; thread-safe
};

// A stage's epilogue from attributes `<stage>_activation` / `<stage>_activation_params`: none,
// Relu, Clip or the sigmoid family (the tiles apply them in registers, in float32 and float16
// alike, so E and D are rounded once as NchwcConv rounds them).
NchwcEpilogue ReadStageEpilogue(const KernelSpec& spec, const std::string& stage) {
  const std::string name = spec.attrs.String(stage + "_activation", "");
  const std::vector<float> params = spec.attrs.Has(stage + "_activation_params")
                                        ? spec.attrs.Floats(stage + "_activation_params")
                                        : std::vector<float>{};
  const ActivationFunction f = ParseActivation(spec, name, params);
  NchwcEpilogue e;
  switch (f.activation) {
    case Activation::kNone: break;
    case Activation::kRelu: e.in_register = NchwcEpilogue::InRegister::kRelu; break;
    case Activation::kClip: e.in_register = NchwcEpilogue::InRegister::kClip; break;
    case Activation::kSigmoid: e.in_register = NchwcEpilogue::InRegister::kSigmoid; break;
    case Activation::kSwish: e.in_register = NchwcEpilogue::InRegister::kSwish; break;
    case Activation::kHardSigmoid: e.in_register = NchwcEpilogue::InRegister::kHardSigmoid; break;
    case Activation::kHardSwish: e.in_register = NchwcEpilogue::InRegister::kHardSwish; break;
    default:
      throw Error(ErrorCode::kUnimplemented,
                  spec.Where() + ": " + stage + "_activation '" + name +
                      "' (supported: none, Relu, Clip, Sigmoid, Swish, HardSigmoid, HardSwish)");
  }
  e.lo = f.p0;  // Clip's bounds; Swish's alpha; HardSigmoid's alpha and beta (NchwcEpilogue)
  e.hi = f.p1;
  return e;
}

// A 1x1 stage's geometry: `pixels` as one long row, from planes of `in_plane` elements to planes
// of `out_plane` (0: `pixels`·8).
NchwcGeometry PointwiseGeometry(int64_t in_blocks, int64_t out_blocks, int64_t out_group, int64_t pixels,
                                int64_t in_plane, int64_t out_plane, bool half) {
  NchwcGeometry g;
  g.in_blocks = in_blocks;
  g.out_blocks = out_blocks;
  g.out_group = out_group;
  g.h = g.oh = 1;
  g.w = g.ow = pixels;
  g.in_plane = in_plane;
  g.out_plane = out_plane;
  const int64_t block_weight_bytes = kItemBlocks * kNchwcBlock * kNchwcBlock * int64_t{sizeof(float)};
  g.in_blocks_per_pass = half ? in_blocks : std::max<int64_t>(1, kPassWeightBytes / block_weight_bytes);
  return g;
}

// A blocked 1x1 weight tensor [M/G, C/8, 1, 1, 8, G] on `in_blocks` input blocks: its output
// blocks and G/8.
void ReadPointwiseWeights(const KernelSpec& spec, const std::string& what, const std::vector<int64_t>& w,
                          int64_t in_blocks, int64_t* out_blocks, int64_t* out_group) {
  if (w.size() != 6 || (w[5] != kNchwcBlock && w[5] != 2 * kNchwcBlock))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has shape " + ShapeToString(w) +
                                                 ", expected blocked 1x1 weights [M/G, C/8, 1, 1, 8, G], G = 8 or 16");
  *out_group = w[5] / kNchwcBlock;
  *out_blocks = w[0] * *out_group;
  CheckShape(spec, what, w, {w[0], in_blocks, 1, 1, kNchwcBlock, w[5]});
}

// The input rows that cutting an image's output rows into `cuts` runs expands more than once:
// each run expands its window's rows, so neighbouring runs both expand the halo between them.
int64_t RowCutHaloRows(const InvertedResidualParams& p, int64_t cuts) {
  auto window_rows = [&](int64_t oy0, int64_t oy1) {
    return std::min(p.h, (oy1 - 1) * p.sh - p.pad_top + p.kh) - std::max<int64_t>(0, oy0 * p.sh - p.pad_top);
  };
  const int64_t rows = (p.oh + cuts - 1) / cuts;
  int64_t expanded = 0;
  for (int64_t oy = 0; oy < p.oh; oy += rows) expanded += std::max<int64_t>(0, window_rows(oy, std::min(p.oh, oy + rows)));
  return expanded - window_rows(0, p.oh);
}

// The block's parameters, items and bands for `spec` (the op's spec, or the float16 adapter's).
InvertedResidualParams PlanNchwcInvertedResidual(const KernelSpec& spec) {
  InvertedResidualParams p;
  const auto& x = spec.inputs[0].shape;
  CheckBlocked(spec, "input X", x);
  p.n = x[0];
  p.in_blocks = x[1];
  p.h = x[2];
  p.w = x[3];
  int64_t expand_group = 1, project_group = 1;
  ReadPointwiseWeights(spec, "expand weights We", spec.inputs[1].shape, p.in_blocks, &p.mid_blocks, &expand_group);
  CheckShape(spec, "expand bias Be", spec.inputs[2].shape, {p.mid_blocks * kNchwcBlock});
  // The depthwise window, read as NchwcConv reads it.
  NchwcGeometry& gd = p.depthwise;
  gd.h = p.h;
  gd.w = p.w;
  ReadNchwcWindow(spec, &gd);
  if (gd.dh != 1 || gd.dw != 1)
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": depthwise dilations " + std::to_string(gd.dh) + "x" +
                                               std::to_string(gd.dw) + " (supported: 1x1)");
  CheckShape(spec, "depthwise weights Wd", spec.inputs[3].shape, {p.mid_blocks, gd.kh, gd.kw, kNchwcBlock});
  CheckShape(spec, "depthwise bias Bd", spec.inputs[4].shape, {p.mid_blocks * kNchwcBlock});
  p.project_stage = spec.inputs.size() == 7;
  if (p.project_stage) {
    ReadPointwiseWeights(spec, "project weights Wp", spec.inputs[5].shape, p.mid_blocks, &p.out_blocks,
                         &project_group);
    CheckShape(spec, "project bias Bp", spec.inputs[6].shape, {p.out_blocks * kNchwcBlock});
  } else {
    p.out_blocks = p.mid_blocks;
  }
  p.oh = gd.oh;
  p.ow = gd.ow;
  p.sh = gd.sh;
  p.kh = gd.kh;
  p.pad_top = gd.pad_top;
  CheckOutputShape(spec, 0, {p.n, p.out_blocks, p.oh, p.ow, kNchwcBlock});
  const int64_t residual = spec.attrs.Int("residual", 0);
  if (residual != 0 && residual != 1)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute 'residual' is " + std::to_string(residual) +
                                                 ", expected 0 or 1");
  p.residual = residual == 1;
  if (p.residual && !p.project_stage)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": residual = 1 needs the project stage (Wp, Bp)");
  if (p.residual && (p.out_blocks != p.in_blocks || p.oh != p.h || p.ow != p.w))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": residual = 1 adds X " + ShapeToString(x) +
                                                 " to the output " + ShapeToString(spec.outputs[0].shape) +
                                                 ", which needs the same shape");
  p.expand_epilogue = ReadStageEpilogue(spec, "expand");
  p.depthwise_epilogue = ReadStageEpilogue(spec, "depthwise");
  if (p.project_stage) p.project_epilogue = ReadStageEpilogue(spec, "project");
  p.half = spec.inputs[0].dtype == DType::kFloat16;
  auto constant = [&](size_t i) { return i < spec.constant_inputs.size() && spec.constant_inputs[i]; };
  p.wide_expand = p.half && constant(1);
  p.wide_project = p.half && p.project_stage && constant(5);
  p.expand_weight_count = Product(spec.inputs[1].shape);
  if (p.project_stage) p.project_weight_count = Product(spec.inputs[5].shape);
  const int64_t band_rows = spec.attrs.Int("band_rows", 0);
  if (band_rows < 0)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute 'band_rows' is " + std::to_string(band_rows) +
                                                 ", expected 0 (by the L2 budget) or a number of output rows");

  // Items: each image, cut into runs of rows (with a project stage) when there are fewer images
  // than threads; without one, into runs of expanded channel blocks (whole groups of the expand's
  // weights) also when the images do not divide among the threads (3 on 2: 6 items, 3 each).
  const int64_t threads = ThreadPool::Global().num_threads();
  const int64_t cuts = p.n >= threads ? 1 : (threads + p.n - 1) / std::max<int64_t>(1, p.n);
  const int64_t channel_cuts = p.n % threads == 0 ? 1 : p.n < threads ? cuts : threads;
  const int64_t groups = p.mid_blocks / expand_group;
  int64_t act = p.half ? int64_t{sizeof(uint16_t)} : int64_t{sizeof(float)};
  int64_t d_image_bytes = act * p.mid_blocks * kNchwcBlock * p.oh * p.ow;
  p.two_phase = p.project_stage && cuts > 1 && d_image_bytes <= kBandBytes &&
                5 * RowCutHaloRows(p, std::clamp<int64_t>(cuts, 1, std::max<int64_t>(1, p.oh))) > p.h;
  // Float16 two-phase blocks keep E and D in float32 (float_bands) where D's float32 planes fit
  // the budget too.
  p.float_bands = p.half && p.two_phase && p.wide_expand && p.wide_project && 2 * d_image_bytes <= kBandBytes;
  if (p.float_bands) {
    act = int64_t{sizeof(float)};
    d_image_bytes *= 2;
  }
  const bool project_bands = p.project_stage && !p.two_phase;
  p.runs_per_image = project_bands ? 1 : std::clamp<int64_t>(channel_cuts, 1, std::max<int64_t>(1, groups));
  p.run_blocks = (groups + p.runs_per_image - 1) / p.runs_per_image * expand_group;
  p.runs_per_image = std::max<int64_t>(1, (p.mid_blocks + p.run_blocks - 1) / std::max<int64_t>(1, p.run_blocks));
  // Float16 pairs keep E in float32 too: the expand stores float32 E, which the depthwise reads (3
  // or 5 times) without a conversion per loaded vector and rounds once into Y; bands half as tall
  // cost less than those conversions (docs/benchmarks.md, "Float16 pairs: float32 E").
  if (p.half && !p.project_stage && p.wide_expand) {
    p.float_bands = true;
    act = int64_t{sizeof(float)};
  }
  p.chunks_per_image = project_bands ? std::clamp<int64_t>(cuts, 1, std::max<int64_t>(1, p.oh)) : 1;
  p.chunk_rows = (p.oh + p.chunks_per_image - 1) / p.chunks_per_image;
  p.chunks_per_image = std::max<int64_t>(1, (p.oh + p.chunk_rows - 1) / std::max<int64_t>(1, p.chunk_rows));
  // Bands: as many output rows as keep an item's buffers (its runs' planes) within kBandBytes,
  // near-equal in a chunk.
  const int64_t mid = p.mid_blocks * kNchwcBlock;
  const int64_t run = p.run_blocks * kNchwcBlock;
  auto band_bytes = [&](int64_t b) {
    return act * run * (((b - 1) * p.sh + p.kh) * p.w + (project_bands ? b * p.ow : 0));
  };
  int64_t fit = band_rows;
  if (fit == 0)
    for (fit = 1; fit < p.chunk_rows && band_bytes(fit + 1) <= kBandBytes;) ++fit;
  if (p.chunks_per_image == 1 && fit >= p.oh) {  // whole images
    p.band_rows = std::max<int64_t>(1, p.oh);
    p.buffer_rows = p.h;
  } else {
    const int64_t bands = (p.chunk_rows + fit - 1) / fit;
    p.band_rows = (p.chunk_rows + bands - 1) / bands;
    p.buffer_rows = (p.band_rows - 1) * p.sh + p.kh;
  }
  gd.in_blocks = gd.out_blocks = p.mid_blocks;
  gd.h = p.buffer_rows;
  gd.oh = p.band_rows;
  if (!project_bands) gd.out_plane = p.oh * p.ow * kNchwcBlock;  // the depthwise writes whole planes
  p.expand = PointwiseGeometry(p.in_blocks, p.mid_blocks, expand_group, p.buffer_rows * p.w,
                               p.h * p.w * kNchwcBlock, 0, p.half);
  if (project_bands)
    p.project = PointwiseGeometry(p.mid_blocks, p.out_blocks, project_group, p.band_rows * p.ow, 0,
                                  p.oh * p.ow * kNchwcBlock, p.half);
  if (p.two_phase) {
    // The project's items: runs of whole weight groups when they divide among an image's cuts
    // (each item reads its part of Wp only), else runs of pixels.
    p.project_full = PointwiseGeometry(p.mid_blocks, p.out_blocks, project_group, p.oh * p.ow, 0, 0, p.half);
    const int64_t out_groups = p.out_blocks / project_group;
    p.project_by_pixels = out_groups % cuts != 0;
    p.project_items = cuts;
    p.project_run = p.project_by_pixels ? (p.oh * p.ow + cuts - 1) / cuts : out_groups / cuts * project_group;
  }

  p.d_offset = AlignUp(static_cast<size_t>(mid * p.buffer_rows * p.w * act));
  p.slice_bytes = p.d_offset + (project_bands ? AlignUp(static_cast<size_t>(mid * p.band_rows * p.ow * act)) : 0);
  p.slices = std::min<int64_t>(threads, p.n * p.chunks_per_image * p.runs_per_image);
  // (Runs of rows only, where it was measured: MobileNetV2's blocks at batch 1.)
  p.slice_stride = p.chunks_per_image > 1 ? std::max(p.slice_bytes, kSliceStride) : p.slice_bytes;
  p.d_full_offset = static_cast<size_t>(p.slices) * p.slice_stride;
  p.scratch_bytes = p.d_full_offset + (p.two_phase ? static_cast<size_t>(p.n * d_image_bytes) : 0);
  return p;
}

std::unique_ptr<Kernel> PrepareNchwcInvertedResidual(const KernelSpec& spec) {
  InvertedResidualParams p = PlanNchwcInvertedResidual(spec);
  if (spec.inputs[3].dtype != DType::kFloat32)  // (CreateNchwcInvertedResidual widens them)
    throw Error(ErrorCode::kInternal, spec.Where() + ": float16 depthwise weights reached the tiles");
  p.tiles = NchwcTiles();
  return std::make_unique<NchwcInvertedResidualKernel>(p);
}

std::unique_ptr<Kernel> CreateNchwcInvertedResidual(const KernelSpec& spec) {
  CheckArity(spec, 5, 7, 1);
  if (spec.inputs.size() == 6)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": 6 inputs; expected X, We, Be, Wd, Bd and, for the "
                                                 "project stage, both Wp and Bp (5 or 7)");
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  // X, Y and the 1x1 weights are read and written as they are (float16 X and Y widened in
  // registers; float16 1x1 weights copied widened on the first run where they are weights, else
  // widened in registers); the adapter widens the biases and depthwise weights (few) once.
  if (spec.inputs.size() == 5) return WithFloat16Support(spec, PrepareNchwcInvertedResidual, {0, 1}, {0});
  return WithFloat16Support(spec, PrepareNchwcInvertedResidual, {0, 1, 5}, {0});
}

}  // namespace

bool NchwcInvertedResidualFloatBands(const KernelSpec& spec) { return PlanNchwcInvertedResidual(spec).float_bands; }

TFPOPEF_REGISTER_KERNEL("NchwcInvertedResidual", CreateNchwcInvertedResidual);

}  // namespace kernels
}  // namespace tfpopef
