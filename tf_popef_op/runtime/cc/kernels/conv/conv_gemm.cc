// See conv_gemm.h.
#include "tf_popef_op/runtime/cc/kernels/conv/conv_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Block sizes, from single-threaded OpenBLAS timings of ResNet50 / MobileNetV2 layer shapes
// (docs/benchmarks.md "GEMM convolutions"):
// - Small weights (MobileNetV2 1x1, ResNet50 stage 2): blocks of kColumns output columns keep
//   the im2col panel and the output block in L2 for the GEMM and the epilogue: 144x24x3136 runs
//   at 97-99 GFLOP/s in blocks of 128-256 columns against 77 in one call.
// - Large weights: every SGEMM call packs its rows of the weights again, and blocks of 256
//   columns lost 7-14 % (2048x512x392: 75 against 87.5 GFLOP/s in one call), so the block
//   widens by kColumns per kWeightStep floats of weights (up to 64 kColumns); the
//   threads then still get a block each (PlanConvGemm balances the count).
// - kMinFlopsPerTask: below this a hand-off to a pool thread costs more than it saves.
constexpr int64_t kColumns = 256;
constexpr int64_t kWeightStep = int64_t{1} << 16;
constexpr int64_t kAlign = 16;
constexpr int64_t kMinFlopsPerTask = int64_t{1} << 18;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Splits `total` into `blocks` nearly equal blocks, rounded up to whole SIMD panels when that
// keeps the block count; returns the block length.
int64_t BlockLength(int64_t total, int64_t blocks) {
  const int64_t len = CeilDiv(total, blocks);
  const int64_t aligned = CeilDiv(len, kAlign) * kAlign;
  return CeilDiv(total, aligned) == blocks ? aligned : len;
}

// Rows (channel, kd, kh, kw) of the im2col matrix of one image and group, for the output
// positions [p0, p1) (flattened od, oh, ow), into panel rows of stride `ldp` (zero padding).
// Per window column kw the output columns whose input column is inside the image form one
// range [ow_lo, ow_hi), so each output row's segment is zeros + a copy (a memcpy for stride
// 1, a strided gather otherwise) + zeros, with no per-element bounds checks.
void Im2ColPanel(const SpatialGeometry& g, const float* x, int64_t channels, int64_t p0, int64_t p1, float* panel,
                 int64_t ldp) {
  const int64_t in_size = g.in_size(), ow_n = g.out[2], sw = g.stride[2], plane = g.out[1] * g.out[2];
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = x + c * in_size;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw, panel += ldp) {
          const int64_t shift = kw * g.dilation[2] - g.pad_begin[2];  // iw = ow·stride + shift
          const int64_t ow_lo = std::min(ow_n, shift >= 0 ? int64_t{0} : (-shift + sw - 1) / sw);
          const int64_t ow_hi =
              std::max(ow_lo, std::min(ow_n, g.in[2] - shift <= 0 ? int64_t{0} : (g.in[2] - shift + sw - 1) / sw));
          float* col = panel;
          int64_t od = p0 / plane, oh = (p0 % plane) / ow_n, ow = p0 % ow_n;
          for (int64_t p = p0; p < p1;) {
            const int64_t end = std::min(ow_n, ow + (p1 - p));  // this output row's segment [ow, end)
            const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
            const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(col, col + (end - ow), 0.0f);
            } else {
              const float* row = xc + (id * g.in[1] + ih) * g.in[2] + shift;
              const int64_t lo = std::max(ow, std::min(end, ow_lo)), hi = std::max(lo, std::min(end, ow_hi));
              std::fill(col, col + (lo - ow), 0.0f);
              if (sw == 1) {
                std::memcpy(col + (lo - ow), row + lo, static_cast<size_t>(hi - lo) * sizeof(float));
              } else {
                for (int64_t i = lo; i < hi; ++i) col[i - ow] = row[i * sw];
              }
              std::fill(col + (hi - ow), col + (end - ow), 0.0f);
            }
            col += end - ow;
            p += end - ow;
            ow = 0;
            if (++oh == g.out[1]) {
              oh = 0;
              ++od;
            }
          }
        }
  }
}

}  // namespace

ConvGemmPlan PlanConvGemm(const SpatialGeometry& g, int64_t n, int64_t c, int64_t m, int64_t group, bool pointwise) {
  ConvGemmPlan p;
  p.g = g;
  p.n = n;
  p.c = c;
  p.m = m;
  p.group = group;
  p.pointwise = pointwise;
  ThreadPool& pool = ThreadPool::Global();
  const int64_t threads = pool.num_threads();
  const int64_t out = g.out_size(), mg = p.mg(), depth = std::max<int64_t>(1, p.depth());
  if (out == 0 || n == 0 || mg == 0) return p;
  const int64_t target = kColumns * std::min<int64_t>(64, CeilDiv(mg * depth, kWeightStep));
  // Merging pays for planes of a few dozen positions (7x7: 1x1 convs 1.48 -> 1.08x onnxruntime
  // single-threaded at batch 8) but not at 14x14 = 196, where OpenBLAS is already efficient per
  // image and the gather/scatter copies cost more than they save.
  p.merge_images = n > 1 && out < kColumns / 2;
  const int64_t columns = p.merge_images ? n * out : out;  // per column space
  const int64_t spaces = group * (p.merge_images ? 1 : n);
  int64_t blocks = CeilDiv(columns, target);
  // Make the task count a multiple of the thread count where a few more blocks can, so no
  // thread idles through the last round (13 blocks on 2 threads: 7 + 6); not below half a
  // block of columns (then the rows are split instead, below).
  for (int64_t tries = 0; tries < threads && (spaces * blocks) % threads != 0 && (blocks + 1) * kColumns <= 2 * columns;
       ++tries)
    ++blocks;
  p.col_block = BlockLength(columns, blocks);
  p.col_blocks = CeilDiv(columns, p.col_block);
  const int64_t col_tasks = spaces * p.col_blocks;
  // Rows: split when the columns alone leave threads idle (batch 1 on a 7x7 plane: one
  // column block), each block at least one SIMD panel of rows.
  int64_t row_blocks = 1;
  const int64_t max_row_blocks = std::max<int64_t>(1, mg / kAlign);
  for (int64_t tries = 0; tries < threads && row_blocks < max_row_blocks && (col_tasks * row_blocks) % threads != 0;
       ++tries)
    ++row_blocks;
  p.row_block = BlockLength(mg, row_blocks);
  p.row_blocks = CeilDiv(mg, p.row_block);
  p.grain = std::max<int64_t>(1, kMinFlopsPerTask / std::max<int64_t>(1, 2 * p.row_block * depth * p.col_block));
  p.chunks = pool.NumChunks(p.tasks(), p.grain);
  p.chunk_floats = (p.needs_panel() ? p.depth() * p.col_block : 0) + (p.merge_images ? p.row_block * p.col_block : 0);
  return p;
}

void RunConvGemm(const ConvGemmPlan& p, const float* x, const float* w, float* y, float* scratch,
                 const ConvEpilogue& ep) {
  const SpatialGeometry& g = p.g;
  const int64_t in = g.in_size(), out = g.out_size(), cg = p.cg(), mg = p.mg(), depth = p.depth();
  if (out == 0 || p.n == 0 || p.m == 0) return;
  const bool epilogue = ep.active();
  // Output channel `ch` of image `img`, positions [p0, p1): bias, sum and activation.
  auto finish = [&](int64_t img, int64_t ch, int64_t p0, int64_t p1) {
    const int64_t off = (img * p.m + ch) * out;
    ep.epilogue->Apply(y + off + p0, p1 - p0, ep.bias != nullptr ? ep.bias[ch] : 0.0f, nullptr,
                       ep.sum != nullptr ? ep.sum + off + p0 : nullptr);
  };
  if (depth == 0) {  // no input channels: Y = epilogue(0)
    std::fill(y, y + p.n * p.m * out, 0.0f);
    if (epilogue)
      for (int64_t img = 0; img < p.n; ++img)
        for (int64_t ch = 0; ch < p.m; ++ch) finish(img, ch, 0, out);
    return;
  }
  const int64_t col_units = p.merge_images ? p.col_blocks : p.n * p.col_blocks;  // column blocks per group
  const int64_t panel_floats = p.needs_panel() ? depth * p.col_block : 0;
  // Each pool chunk claims tasks one at a time rather than taking a fixed range: on a busy
  // machine a pool thread that loses its core for a scheduler slice (~4 ms) then holds up
  // only its current task, not half the convolution.
  std::atomic<int64_t> next_task{0};
  ParallelForChunks(p.chunks, 1, [&](int64_t chunk, int64_t, int64_t) {
    float* panel = scratch + chunk * p.chunk_floats;
    float* merged = panel + panel_floats;  // [rows, width] output block of a merged task
    int64_t panel_of = -1;                 // column task whose panel is built
    for (int64_t t; (t = next_task.fetch_add(1, std::memory_order_relaxed)) < p.tasks();) {
      const int64_t rb = t % p.row_blocks, col_task = t / p.row_blocks;
      const int64_t grp = col_task / col_units, unit = col_task % col_units;
      const int64_t r0 = rb * p.row_block, r1 = std::min(mg, r0 + p.row_block);
      if (r0 >= r1) continue;
      // Columns [j0, j1) of the column space: all images' positions when merged, else image img's.
      const int64_t img = p.merge_images ? 0 : unit / p.col_blocks;
      const int64_t j0 = (p.merge_images ? unit : unit % p.col_blocks) * p.col_block;
      const int64_t j1 = std::min(p.merge_images ? p.n * out : out, j0 + p.col_block), width = j1 - j0;
      const float* b = x + (img * p.c + grp * cg) * in + j0;  // pointwise: X itself, rows of `in`
      int64_t ldb = in;
      if (p.needs_panel()) {
        if (panel_of != col_task) {
          // Each image's segment of the block: [j, end) = image i's positions [j - i·out, ...).
          for (int64_t j = j0; j < j1;) {
            const int64_t i = p.merge_images ? j / out : img, q = p.merge_images ? j % out : j;
            const int64_t len = std::min(j1 - j, out - q);
            const float* xi = x + (i * p.c + grp * cg) * in;
            if (p.pointwise) {
              for (int64_t ch = 0; ch < cg; ++ch)
                std::memcpy(panel + ch * width + (j - j0), xi + ch * in + q, static_cast<size_t>(len) * sizeof(float));
            } else {
              Im2ColPanel(g, xi, cg, q, q + len, panel + (j - j0), width);
            }
            j += len;
          }
          panel_of = col_task;
        }
        b = panel;
        ldb = width;
      }
      const float* a = w + (grp * mg + r0) * depth;
      if (!p.merge_images) {
        float* c = y + (img * p.m + grp * mg + r0) * out + j0;
        SgemmOnOneThread(false, false, r1 - r0, width, depth, 1.0f, a, depth, b, ldb, 0.0f, c, out);
        if (epilogue)
          for (int64_t r = r0; r < r1; ++r) finish(img, grp * mg + r, j0, j1);
        continue;
      }
      SgemmOnOneThread(false, false, r1 - r0, width, depth, 1.0f, a, depth, b, ldb, 0.0f, merged, width);
      for (int64_t j = j0; j < j1;) {  // scatter back to NCHW, image by image
        const int64_t i = j / out, q = j % out, len = std::min(j1 - j, out - q);
        for (int64_t r = r0; r < r1; ++r) {
          std::memcpy(y + (i * p.m + grp * mg + r) * out + q, merged + (r - r0) * width + (j - j0),
                      static_cast<size_t>(len) * sizeof(float));
          if (epilogue) finish(i, grp * mg + r, q, q + len);
        }
        j += len;
      }
    }
  });
}

}  // namespace kernels
}  // namespace tfpopef
