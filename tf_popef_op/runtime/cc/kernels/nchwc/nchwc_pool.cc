// NchwcMaxPool: 2-D max pooling on the blocked NCHW8c layout (docs/popef.md, "Blocked
// layout"): X [N, C/8, H, W, 8] -> Y [N, C/8, OH, OW, 8], float32 or float16 (compared as
// float32 in registers: exact).
// Attributes kernel_shape, strides, dilations, pads [top, left, bottom, right], zero_pads. Windows are clipped to the
// input, so padding never wins and ceil_mode needs only Y's larger shape (OH/OW may exceed the
// floor formula by one); with zero_pads = 1 (a zero Pad the compiler folded in, ceil_mode 0)
// the pads hold zeros instead, so a window reaching into them includes 0. Rows of (image,
// block) planes are spread over the intra-op pool.
#include <memory>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

class NchwcMaxPoolKernel final : public Kernel {
 public:
  NchwcMaxPoolKernel(const NchwcGeometry& g, bool zero_pads, int64_t n, bool half)
      : g_(g), zero_pads_(zero_pads), n_(n), half_(half), tiles_(NchwcTiles()) {}

  void Run(const KernelContext& ctx) const override {
    if (half_) RunOn(tiles_.max_pool_row_half, ctx);
    else RunOn(tiles_.max_pool_row, ctx);
  }

 private:
  template <typename AT>
  void RunOn(NchwcMaxPoolRowFn<AT> row_fn, const KernelContext& ctx) const {
    const AT* x = static_cast<const AT*>(ctx.inputs[0]);
    AT* y = static_cast<AT*>(ctx.outputs[0]);
    const int64_t rows = n_ * g_.out_blocks * g_.oh;
    const int64_t row_elements = g_.ow * g_.kh * g_.kw * kNchwcBlock;
    ParallelFor(rows, ItemsPerChunk(row_elements, kStreamingGrain), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t plane = r / g_.oh;
        row_fn(g_, zero_pads_, x, y, plane / g_.out_blocks, plane % g_.out_blocks, r % g_.oh);
      }
    });
  }

  const NchwcGeometry g_;
  const bool zero_pads_;
  const int64_t n_;
  const bool half_;  // X and Y are float16
  const NchwcTileFns tiles_;
};

std::unique_ptr<Kernel> CreateNchwcMaxPool(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  const auto& x = spec.inputs[0].shape;
  const auto& y = spec.outputs[0].shape;
  CheckBlocked(spec, "input X", x);
  CheckBlocked(spec, "output Y", y);
  NchwcGeometry g;
  g.in_blocks = g.out_blocks = x[1];
  g.h = x[2];
  g.w = x[3];
  ReadNchwcWindow(spec, &g);
  const int64_t zero_pads = spec.attrs.Int("zero_pads", 0);
  if (zero_pads != 0 && zero_pads != 1)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": attribute 'zero_pads' is " + std::to_string(zero_pads) + ", expected 0 or 1");
  // ceil_mode: one more output row/column whose window starts inside the input or its pads.
  if (y[0] != x[0] || y[1] != x[1] || (y[2] != g.oh && y[2] != g.oh + 1) || (y[3] != g.ow && y[3] != g.ow + 1))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output Y has shape " + ShapeToString(y) +
                                                 " but the input " + ShapeToString(x) + " and window imply [" +
                                                 std::to_string(x[0]) + ", " + std::to_string(x[1]) + ", " +
                                                 std::to_string(g.oh) + ", " + std::to_string(g.ow) +
                                                 ", 8] (or one more row/column with ceil_mode)");
  if (zero_pads == 1 && (y[2] != g.oh || y[3] != g.ow))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output Y has shape " + ShapeToString(y) +
                                                 " but zero_pads = 1 takes the floor formula's [" + std::to_string(x[0]) +
                                                 ", " + std::to_string(x[1]) + ", " + std::to_string(g.oh) + ", " +
                                                 std::to_string(g.ow) + ", 8] (no ceil_mode)");
  g.oh = y[2];
  g.ow = y[3];
  return std::make_unique<NchwcMaxPoolKernel>(g, zero_pads == 1, x[0], spec.inputs[0].dtype == DType::kFloat16);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("NchwcMaxPool", CreateNchwcMaxPool);

}  // namespace kernels
}  // namespace tfpopef
