#include "tf_popef_op/runtime/cc/kernels/matmul/packed_gemm.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/home_ranges.h"

namespace tfpopef {
namespace kernels {
namespace {

constexpr int64_t kMaxTileRows = 8;  // the most rows of any build's tile (stack buffers)

// Where a strip's float32 rows are computed: C itself, or for float16 C a buffer.
inline float* FloatRows(float* c, float*) { return c; }
inline float* FloatRows(uint16_t*, float* buffer) { return buffer; }

inline float ToFloat(float v) { return v; }
inline float ToFloat(uint16_t v) { return HalfToFloat(v); }

}  // namespace

PackedLayout PackedLayoutFor(const PackedGemmTileFns& tiles, int64_t k, int64_t n) {
  PackedLayout layout;
  layout.k = k;
  layout.n = n;
  layout.panel_width = tiles.panel_width;
  layout.lanes = tiles.lanes;
  return layout;
}

template <typename T>
void PackB(const PackedLayout& layout, const T* b, int64_t ldb, bool trans_b, float alpha, float* out) {
  const int64_t k = layout.k, n = layout.n;
  for (int64_t j0 = 0; j0 < n; j0 += layout.panel_width) {
    const int64_t width = layout.stored_width(j0), cols = std::min(width, n - j0);
    float* panel = out + j0 * k;
    for (int64_t p = 0; p < k; ++p) {
      float* row = panel + p * width;
      if (trans_b) {
        for (int64_t j = 0; j < cols; ++j) row[j] = alpha * ToFloat(b[(j0 + j) * ldb + p]);
      } else {
        const T* src = b + p * ldb + j0;
        for (int64_t j = 0; j < cols; ++j) row[j] = alpha * ToFloat(src[j]);
      }
      std::fill(row + cols, row + width, 0.0f);
    }
  }
}

template void PackB<float>(const PackedLayout&, const float*, int64_t, bool, float, float*);
template void PackB<uint16_t>(const PackedLayout&, const uint16_t*, int64_t, bool, float, float*);

template <typename T>
void RunPackedGemm(const PackedGemmTileFns& tiles, const PackedGemmArgs<T>& args, ThreadPool& pool) {
  constexpr bool kHalf = std::is_same_v<T, uint16_t>;
  const PackedLayout& b = args.b;
  const int64_t m = args.m, n = b.n, k = b.k, rows = tiles.rows;
  const int64_t strips = (m + rows - 1) / rows;
  const int64_t blocks = (n + kPackedGemmBlockColumns - 1) / kPackedGemmBlockColumns;
  // Rows are finished (activation, and float16's sum and narrowing around it) only after an
  // activation the tiles do not apply: otherwise the tiles add bias and sum (and the Gelu, where
  // they take it) as they store the last K block, and narrow float16 C there (half_store).
  const bool tile_gelu = tiles.gelu && args.epilogue.activation == Activation::kGeluErf;
  const bool finish_rows = !args.epilogue.is_identity() && !tile_gelu;
  const bool half_store = kHalf && !finish_rows;
  // A thread's buffers, reused over the units it runs.
  struct Buffers {
    alignas(64) float a_strip[kHalf ? kMaxTileRows * kPackedGemmBlockDepth : 1];  // float16 A, widened
    // float16 C of a group of strips
    alignas(64) float c_group[kHalf ? kPackedGemmGroupStrips * kMaxTileRows * kPackedGemmBlockColumns : 1];
    alignas(64) float bias_block[kPackedGemmBlockColumns];
    alignas(64) float sum_row[kHalf ? kPackedGemmBlockColumns : 1];
    int64_t bias_block_at = -1;
  };

  // Strips [s0, s1) (at most kPackedGemmGroupStrips) of column block `block` of product `batch`:
  // each K block of the column block's packed B meets every strip of the group while it is in
  // L2, C accumulating over the K blocks; a strip's epilogue runs right after its last K block,
  // while the strip is in L1.
  auto run_group = [&](int64_t batch, int64_t block, int64_t s0, int64_t s1, Buffers& buf) {
    const int64_t c0 = block * kPackedGemmBlockColumns, cols = std::min(kPackedGemmBlockColumns, n - c0);
    const float* panels = args.b_data + batch * b.floats();
    const T* a_batch = args.a + batch * args.a_batch_stride;
    // of C's and sum's first element of strip s, and where the strip's float rows are
    auto c_at = [&](int64_t s) { return batch * args.c_batch_stride + s * rows * args.ldc + c0; };
    auto dst_of = [&](int64_t s) {
      return FloatRows(args.c + c_at(s), buf.c_group + (s - s0) * rows * kPackedGemmBlockColumns);
    };
    const int64_t ldd = kHalf ? kPackedGemmBlockColumns : args.ldc;
    const float* bias = nullptr;
    if constexpr (!kHalf)
      if (args.bias != nullptr && args.bias_scale == 1.0f) bias = args.bias + c0;
    if (args.bias != nullptr && bias == nullptr) {  // widened or scaled once per column block
      if (buf.bias_block_at != c0)
        for (int64_t j = 0; j < cols; ++j) buf.bias_block[j] = args.bias_scale * ToFloat(args.bias[c0 + j]);
      buf.bias_block_at = c0;
      bias = buf.bias_block;
    }
    // The tiles add bias and (float32) sum as they store the last K block; what is left of the
    // epilogue, per row of strip s once that block is in: float16's sum (widened a row at a
    // time), the activation, float16's narrowing.
    auto finish_strip = [&](int64_t s, int64_t nr) {
      if (!finish_rows) return;
      for (int64_t r = 0; r < nr; ++r) {
        float* row = dst_of(s) + r * ldd;
        const int64_t at = c_at(s) + r * args.ldc;
        const float* sum = nullptr;
        if constexpr (kHalf) {
          if (args.sum != nullptr) {
            WidenHalfToFloat(args.sum + at, buf.sum_row, cols);
            sum = buf.sum_row;
          }
        }
        args.epilogue.Apply(row, cols, 0.0f, nullptr, sum);
        if constexpr (kHalf) NarrowFloatToHalf(row, args.c + at, cols);
      }
    };
    for (int64_t p0 = 0; p0 < k; p0 += kPackedGemmBlockDepth) {
      const int64_t depth = std::min(kPackedGemmBlockDepth, k - p0);
      const bool last = p0 + depth == k;
      for (int64_t s = s0; s < s1; ++s) {
        const int64_t nr = std::min(rows, m - s * rows);
        const T* a_rows = a_batch + s * rows * args.lda;
        const float* a;
        int64_t lda;
        if constexpr (kHalf) {
          for (int64_t r = 0; r < nr; ++r)
            WidenHalfToFloat(a_rows + r * args.lda + p0, buf.a_strip + r * kPackedGemmBlockDepth, depth);
          a = buf.a_strip;
          lda = kPackedGemmBlockDepth;
        } else {
          a = a_rows + p0;
          lda = args.lda;
        }
        float* dst = dst_of(s);
        PackedGemmTileAdd add;
        if (last) {
          add.bias = bias;
          if constexpr (kHalf) {
            if (half_store) {
              add.half_c = args.c + c_at(s);
              if (args.sum != nullptr) add.half_sum = args.sum + c_at(s);
              add.ldhalf = args.ldc;
            }
          } else {
            if (args.sum != nullptr) add.sum = args.sum + c_at(s);
          }
          add.ldsum = args.ldc;
          add.gelu = tile_gelu;
        }
        const bool adds = add.bias != nullptr || add.sum != nullptr || add.half_c != nullptr || add.gelu;
        for (int64_t j0 = c0; j0 < c0 + cols; j0 += b.panel_width) {
          const int64_t width = b.stored_width(j0);
          PackedGemmTileAdd panel_add = add;
          if (add.bias != nullptr) panel_add.bias += j0 - c0;
          if (add.sum != nullptr) panel_add.sum += j0 - c0;
          if (add.half_sum != nullptr) panel_add.half_sum += j0 - c0;
          if (add.half_c != nullptr) panel_add.half_c += j0 - c0;
          tiles.tile(nr, std::min(width, n - j0), depth, a, lda, panels + j0 * k + p0 * width, width,
                     dst + (j0 - c0), ldd, p0 > 0, adds ? &panel_add : nullptr);
        }
        if (last) finish_strip(s, nr);
      }
    }
  };

  // Unit u: product u / (blocks·strips), then column block, then row strip. Strips [s0, s1) of
  // one column block run as a group (run_group).
  auto run_range = [&](int64_t u0, int64_t u1, Buffers& buf) {
    for (int64_t u = u0; u < u1;) {
      const int64_t batch = u / (blocks * strips), in_batch = u % (blocks * strips);
      const int64_t block = in_batch / strips, s0 = in_batch % strips;
      const int64_t s1 = std::min({strips, s0 + kPackedGemmGroupStrips, s0 + (u1 - u)});
      run_group(batch, block, s0, s1, buf);
      u += s1 - s0;
    }
  };
  const int64_t units = args.batches * blocks * strips;
  // A unit is 2·rows·K·min(N, 256) flops (less at the edges); chunks of at least 2^18 are
  // worth handing to another thread (thread_pool.h).
  constexpr int64_t kMinFlopsPerChunk = int64_t{1} << 18;
  const int64_t unit_flops = 2 * rows * k * std::min(n, kPackedGemmBlockColumns);
  const int64_t grain = std::max<int64_t>(1, kMinFlopsPerChunk / unit_flops);
  const int64_t homes = units >> 32 ? 1 : std::min<int64_t>({pool.num_threads(), kMaxHomeRanges, units / grain});
  if (homes <= 1) {
    Buffers buf;
    run_range(0, units, buf);
    return;
  }
  // Each thread's home range is its share of the units in order (so a core gets the same rows
  // of C from step to step, which the next step then reads from its L2), claimed from the front
  // in groups of strips; then units from the back of the others' ranges (home_ranges.h). Groups
  // stay within a column block and shrink as a range runs out: at most half of what is left from
  // the front, a quarter from the back, down to one strip.
  HomeRanges ranges(units, homes);
  auto from_front = [&](int64_t f, int64_t b) {
    return std::min({kPackedGemmGroupStrips, (b - f + 1) / 2, strips - f % strips});
  };
  auto from_back = [&](int64_t f, int64_t b) {
    return std::min({kPackedGemmGroupStrips, std::max<int64_t>(1, (b - f) / 4), (b - 1) % strips + 1});
  };
  auto run_home = [&](int64_t home, int64_t, int64_t) {
    Buffers buf;
    ranges.RunHome(home, from_front, from_back, [&](int64_t u0, int64_t got) { run_range(u0, u0 + got, buf); });
  };
  pool.ParallelForChunks(homes, 1, std::function<void(int64_t, int64_t, int64_t)>(std::ref(run_home)));
}

template void RunPackedGemm<float>(const PackedGemmTileFns&, const PackedGemmArgs<float>&, ThreadPool&);
template void RunPackedGemm<uint16_t>(const PackedGemmTileFns&, const PackedGemmArgs<uint16_t>&, ThreadPool&);

}  // namespace kernels
}  // namespace tfpopef
