// NchwcMaxPool and NchwcAveragePool: 2-D pooling on the blocked NCHW8c layout (docs/popef.md,
// "Blocked layout"): X [N, C/8, H, W, 8] -> Y [N, C/8, OH, OW, 8], float32 or float16 (widened
// in registers: max pooling compares float16 as float32, exact; average pooling averages in
// float32 and rounds once). Attributes kernel_shape, strides, dilations, pads [top, left,
// bottom, right].
// Windows are clipped to the input, so ceil_mode needs only Y's larger shape (OH/OW may exceed
// the floor formula by one).
// - NchwcMaxPool: padding never wins; with zero_pads = 1 (a zero Pad the compiler folded in,
//   ceil_mode 0) the pads hold zeros instead, so a window reaching into them includes 0.
// - NchwcAveragePool: the sum over the taps inside the input divided by their count, or with
//   count_include_pad = 1 by the count of taps inside the padded input (as AveragePool).
// Rows of (image, block) planes are spread over the intra-op pool.
#include <algorithm>
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// A 1x1 window without pads whose every output pixel reads an input pixel (ceil_mode's extra
// column or row would read none).
bool IsSubsample(const NchwcGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.pad_top == 0 && g.pad_left == 0 && g.pad_bottom == 0 && g.pad_right == 0 &&
         (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w;
}

// AT: the element type of X and Y (float, or uint16_t for float16); RowFn: NchwcMaxPoolRowFn<AT>
// (flag: zero_pads) or NchwcAveragePoolRowFn<AT> (flag: count_include_pad).
template <typename AT, typename RowFn>
class NchwcPoolKernel final : public Kernel {
 public:
  NchwcPoolKernel(const NchwcGeometry& g, bool flag, int64_t n, RowFn row_fn)
      : g_(g),
        flag_(flag),
        n_(n),
        strip_rows_(StripRows(g, n)),
        strips_((g.oh + strip_rows_ - 1) / strip_rows_),
        row_fn_(row_fn) {}

  void Run(const KernelContext& ctx) const override {
    const AT* x = static_cast<const AT*>(ctx.inputs[0]);
    AT* y = static_cast<AT*>(ctx.outputs[0]);
    const int64_t rows = n_ * g_.out_blocks * g_.oh;
    if (IsSubsample(g_)) {
      // A 1x1 window: each output pixel is one input pixel, copied as it is (the maximum or the
      // average of one value is that value). The compiler's share_strided_subsample writes such a
      // pool for strided 1x1 convolutions sharing an X.
      ParallelFor(rows, ItemsPerChunk(g_.ow * kNchwcBlock, kStreamingGrain), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t plane = RowPlane(r), oy = Row(r);
          const AT* src = x + plane * g_.in_block_stride() + oy * g_.sh * g_.w * kNchwcBlock;
          AT* dst = y + (plane * g_.oh + oy) * g_.ow * kNchwcBlock;
          for (int64_t ox = 0; ox < g_.ow; ++ox, dst += kNchwcBlock)
            std::copy(src + ox * g_.sw * kNchwcBlock, src + (ox * g_.sw + 1) * kNchwcBlock, dst);
        }
      });
      return;
    }
    const int64_t strip_elements = strip_rows_ * g_.ow * g_.kh * g_.kw * kNchwcBlock;
    ParallelFor(n_ * g_.out_blocks * strips_, ItemsPerChunk(strip_elements, kStreamingGrain),
                [&](int64_t s0, int64_t s1) {
                  for (int64_t s = s0; s < s1; ++s) {
                    const int64_t plane = Plane(s), oy0 = Strip(s) * strip_rows_;
                    for (int64_t oy = oy0; oy < std::min(g_.oh, oy0 + strip_rows_); ++oy)
                      row_fn_(g_, flag_, x, y, plane / g_.out_blocks, plane % g_.out_blocks, oy);
                  }
                });
  }

 private:
  // Output rows per work item: whole planes, cut into strips only where there are fewer than
  // kMinItems planes (so both threads still share a narrow tensor). A plane's rows share window
  // rows, which the next row then reads from L1, and its input is read in order; one row per
  // item (the other blocks' rows in between) cost 1.3-2.5x on InceptionV3's shapes.
  static constexpr int64_t kMinItems = 32;
  static int64_t StripRows(const NchwcGeometry& g, int64_t n) {
    const int64_t planes = std::max<int64_t>(1, n * g.out_blocks);
    const int64_t strips = std::clamp<int64_t>((kMinItems + planes - 1) / planes, 1, std::max<int64_t>(1, g.oh));
    return std::max<int64_t>(1, (g.oh + strips - 1) / strips);
  }

  // Work item s is strip Strip(s) of the (image, block) plane Plane(s), ordered image, strip,
  // block: where planes are cut, a thread's contiguous share of the items (thread_pool.h, home
  // ranges) is a band of rows across all blocks, the pixels the convolutions around give it.
  int64_t Plane(int64_t s) const { return s / (strips_ * g_.out_blocks) * g_.out_blocks + s % g_.out_blocks; }
  int64_t Strip(int64_t s) const { return s / g_.out_blocks % strips_; }
  // The subsample copy's items: single rows, ordered image, row, block.
  int64_t RowPlane(int64_t r) const { return r / (g_.oh * g_.out_blocks) * g_.out_blocks + r % g_.out_blocks; }
  int64_t Row(int64_t r) const { return r / g_.out_blocks % g_.oh; }

  const NchwcGeometry g_;
  const bool flag_;
  const int64_t n_;
  const int64_t strip_rows_, strips_;  // output rows per work item; strips per plane (the last may be shorter)
  const RowFn row_fn_;
};

// X and Y checked blocked, the window read, and Y's spatial size checked against it: the floor
// formula's, or one more row/column with ceil_mode unless `exact`.
NchwcGeometry ReadPoolGeometry(const KernelSpec& spec, bool exact) {
  const auto& x = spec.inputs[0].shape;
  const auto& y = spec.outputs[0].shape;
  CheckBlocked(spec, "input X", x);
  CheckBlocked(spec, "output Y", y);
  NchwcGeometry g;
  g.in_blocks = g.out_blocks = x[1];
  g.h = x[2];
  g.w = x[3];
  ReadNchwcWindow(spec, &g);
  // ceil_mode: one more output row/column whose window starts inside the input or its pads.
  if (y[0] != x[0] || y[1] != x[1] || (y[2] != g.oh && y[2] != g.oh + 1) || (y[3] != g.ow && y[3] != g.ow + 1))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output Y has shape " + ShapeToString(y) +
                                                 " but the input " + ShapeToString(x) + " and window imply [" +
                                                 std::to_string(x[0]) + ", " + std::to_string(x[1]) + ", " +
                                                 std::to_string(g.oh) + ", " + std::to_string(g.ow) +
                                                 ", 8] (or one more row/column with ceil_mode)");
  if (exact && (y[2] != g.oh || y[3] != g.ow))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output Y has shape " + ShapeToString(y) +
                                                 " but zero_pads = 1 takes the floor formula's [" + std::to_string(x[0]) +
                                                 ", " + std::to_string(x[1]) + ", " + std::to_string(g.oh) + ", " +
                                                 std::to_string(g.ow) + ", 8] (no ceil_mode)");
  g.oh = y[2];
  g.ow = y[3];
  return g;
}

// A 0/1 attribute.
bool ReadFlag(const KernelSpec& spec, const char* name) {
  const int64_t v = spec.attrs.Int(name, 0);
  if (v != 0 && v != 1)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": attribute '" + name + "' is " + std::to_string(v) + ", expected 0 or 1");
  return v == 1;
}

// The pool kernel for X's dtype, from one pooling's float32 and float16 rows.
template <typename FloatRow, typename HalfRow>
std::unique_ptr<Kernel> MakePoolKernel(const KernelSpec& spec, const NchwcGeometry& g, bool flag, FloatRow row,
                                       HalfRow row_half) {
  const int64_t n = spec.inputs[0].shape[0];
  if (spec.inputs[0].dtype == DType::kFloat16)
    return std::make_unique<NchwcPoolKernel<uint16_t, HalfRow>>(g, flag, n, row_half);
  return std::make_unique<NchwcPoolKernel<float, FloatRow>>(g, flag, n, row);
}

std::unique_ptr<Kernel> CreateNchwcMaxPool(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  const bool zero_pads = ReadFlag(spec, "zero_pads");
  const NchwcTileFns& tiles = NchwcTiles();
  return MakePoolKernel(spec, ReadPoolGeometry(spec, zero_pads), zero_pads, tiles.max_pool_row,
                        tiles.max_pool_row_half);
}

std::unique_ptr<Kernel> CreateNchwcAveragePool(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  const bool count_include_pad = ReadFlag(spec, "count_include_pad");
  const NchwcTileFns& tiles = NchwcTiles();
  return MakePoolKernel(spec, ReadPoolGeometry(spec, false), count_include_pad, tiles.average_pool_row,
                        tiles.average_pool_row_half);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("NchwcMaxPool", CreateNchwcMaxPool);
TFPOPEF_REGISTER_KERNEL("NchwcAveragePool", CreateNchwcAveragePool);

}  // namespace kernels
}  // namespace tfpopef
