// The GEMM paths of Conv / FusedConv (conv.cc): pointwise (1x1 window, stride 1, no pad:
// Y_g = W_g · X_g) and im2col (any other window, groups, strides, dilations, pads).
//
// Work is cut into tasks of (group, block of output columns, block of output rows), run on the
// intra-op pool; each task is one single-threaded SGEMM (blas_gemm.h's SgemmOnOneThread)
// followed by the epilogue on the block it just wrote, on the same thread, while it is hot:
// - the im2col panel [C/group·k, block columns] is built right before its GEMM in the thread's
//   own scratch (in L2 for the small-weight layers, whose blocks are narrow), instead of
//   unrolling the whole image first and streaming it from memory again (pointwise blocks
//   inside one image read X directly: no panel);
// - small planes at batch > 1 (under 128 positions: 7x7 = 49 per image) are merged: the column
//   space is all images' output positions [N·out], so B is wide and the weights are packed
//   once per block rather than once per image; such a block's output goes to scratch and is
//   scattered back to NCHW (with the epilogue) by the task;
// - a product with few columns (batch 1, small plane) is split by rows instead.
// docs/benchmarks.md "GEMM convolutions" has the measurements behind the block sizes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/spatial_geometry.h"

namespace tfpopef {
namespace kernels {

struct ConvGemmPlan {
  SpatialGeometry g;
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool pointwise = false;    // B is X itself (no im2col)
  bool merge_images = false;  // column blocks run over [N·out] (else over one image's out)
  int64_t col_block = 0;      // output columns per block (the last one of an image/all may be shorter)
  int64_t col_blocks = 0;     // per image (merge_images: in all)
  int64_t row_block = 0;      // output rows (of one group) per block
  int64_t row_blocks = 0;
  int64_t grain = 1;          // at least this many tasks per pool thread
  int64_t chunks = 1;         // pool threads taking part (each owns a scratch slice)
  int64_t chunk_floats = 0;   // scratch per chunk: im2col panel + merged output block
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
  int64_t depth() const { return cg() * g.kernel_size(); }
  int64_t tasks() const { return group * (merge_images ? col_blocks : n * col_blocks) * row_blocks; }
  bool needs_panel() const { return !pointwise || merge_images; }
  size_t scratch_bytes() const { return static_cast<size_t>(chunks * chunk_floats) * sizeof(float); }
};

// Bias [M] (or null), residual sum shaped like Y (or null) and activation, applied to each
// output block after its GEMM (epilogue.h).
struct ConvEpilogue {
  const Epilogue* epilogue = nullptr;
  const float* bias = nullptr;
  const float* sum = nullptr;
  bool active() const { return bias != nullptr || sum != nullptr || !epilogue->is_identity(); }
};

// Chooses the blocks for X [n, c, in...], W [m, c/group, k...] on the intra-op pool.
ConvGemmPlan PlanConvGemm(const SpatialGeometry& g, int64_t n, int64_t c, int64_t m, int64_t group, bool pointwise);

// Y = conv(X, W) with the epilogue; `scratch` holds plan.scratch_bytes().
void RunConvGemm(const ConvGemmPlan& plan, const float* x, const float* w, float* y, float* scratch,
                 const ConvEpilogue& epilogue);

}  // namespace kernels
}  // namespace tfpopef
