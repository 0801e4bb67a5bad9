// Attention (internal op, docs/popef.md "Internal ops"): softmax(scale · Q·Kᵀ) · V per head,
// reading Q, K and V in the projections' own layout and writing Y in the layout the output
// projection reads, so the head transposes and the score tensor never reach memory:
//   Q [B, Sq, H·d], K [B, Sk, H·d], V [B, Sk, H·dv]  ->  Y [B, Sq, H·dv]
// (head h of row s is the contiguous slice [h·d, (h+1)·d) of that row). Self-attention may
// instead pass one tensor QKV [B, S, H·d + H·d + H·dv] (attribute qkv_widths = the three widths)
// whose column ranges are Q, K and V: the output of one projection GEMM over the three weights
// side by side, so each operand is read with its own row stride and column base.
//
// Work items are (batch, head, block of query rows), threaded on the intra-op pool, so batch 1
// keeps every core busy. Each chunk of items packs Kᵀ and V of its current (batch, head) into
// the packed-GEMM panel layout (support/packed_gemm_tiles.h) once, in its scratch (L2-sized:
// 2·S·d floats); a block's scores [rows, Sk] stay in scratch (L1/L2), the softmax runs on them
// with vector_math's Max/ExpShiftedSum, and P·V goes through the same register tiles straight
// into Y, the 1/Σ normalization applied in the tiles' store to the dv outputs of a row instead of
// its Sk probabilities. float32 V whose head slice is whole vectors is read in place (the tiles
// take its row stride) rather than packed. float16 Q/K/V are widened while packing (on the AVX2
// and AVX-512 paths K in registers within the pack's transposes) and Y is narrowed in the tiles'
// store, so everything in between is float32.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/home_ranges.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

#if defined(__SSE2__)
#include <immintrin.h>
#define TFPOPEF_ATTENTION_SSE 1
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFPOPEF_ATTENTION_F16C 1
#endif

namespace tfpopef {
namespace kernels {

#ifdef TFPOPEF_ATTENTION_F16C
// float16 converted in registers on the AVX2 and AVX-512 paths (those CPUs have F16C), where the
// portable path widens and narrows through float32 row buffers.
TFPOPEF_TARGET_BEGIN("avx,f16c")
namespace {

inline __m128 LoadHalf4(const uint16_t* x) {
  return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x)));
}

// scale · keys k0[i·ldk + p] (4 keys i, d dims p) into the Kᵀ panel (row stride width): the
// float32 pack's 4×4 register transposes on keys widened as they are loaded.
void PackFourHalfKeys(const uint16_t* k0, int64_t ldk, int64_t d, float scale, float* panel, int64_t width) {
  const __m128 s = _mm_set1_ps(scale);
  int64_t p = 0;
  for (; p + 4 <= d; p += 4) {
    __m128 r0 = LoadHalf4(k0 + p), r1 = LoadHalf4(k0 + ldk + p);
    __m128 r2 = LoadHalf4(k0 + 2 * ldk + p), r3 = LoadHalf4(k0 + 3 * ldk + p);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(panel + p * width, _mm_mul_ps(s, r0));
    _mm_storeu_ps(panel + (p + 1) * width, _mm_mul_ps(s, r1));
    _mm_storeu_ps(panel + (p + 2) * width, _mm_mul_ps(s, r2));
    _mm_storeu_ps(panel + (p + 3) * width, _mm_mul_ps(s, r3));
  }
  for (; p < d; ++p)
    for (int64_t i = 0; i < 4; ++i) panel[p * width + i] = scale * HalfToFloat(k0[i * ldk + p]);
}

}  // namespace
TFPOPEF_TARGET_END()
#endif

namespace {

struct AttentionShape {
  int64_t batch, q_len, kv_len, heads, head_size, value_size;
};

// Where Q, K and V (operands 0, 1, 2) live: input tensor, elements per token row, first column.
struct OperandLayout {
  int input[3];
  int64_t row_stride[3], column[3];
};

// Query rows per work item: about 32 (a block's packs of Kᵀ and V cost 1/rows of its GEMMs),
// rounded to whole register tiles.
constexpr int64_t kTargetRowBlock = 32;

// Where float16 keys are not widened in registers (the portable path), keys up to this head
// size are widened 4 rows at a time (a stack buffer) for the register transposes of the Kᵀ pack.
constexpr int64_t kMaxWidenedKeyDims = 256;

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(const AttentionShape& s, const OperandLayout& layout, float scale, bool half)
      : s_(s), layout_(layout), scale_(scale), half_(half), f16c_(half && vmath::UsesAvx2(vmath::ActivePath())),
        tiles_(PackedGemmTiles()),
        row_block_(std::min(RoundUp(kTargetRowBlock, tiles_.rows), RoundUp(std::max<int64_t>(s.q_len, 1), tiles_.rows))),
        blocks_per_head_((s.q_len + row_block_ - 1) / row_block_),
        items_(s.batch * s.heads * blocks_per_head_),
        kv_ld_(RoundUp(s.kv_len, tiles_.lanes)),
        v_ld_(RoundUp(s.value_size, tiles_.lanes)),
        v_in_place_(!half && s.value_size % tiles_.lanes == 0),
        chunk_floats_(s.head_size * kv_ld_ + (v_in_place_ ? 0 : s.kv_len * v_ld_) + row_block_ * kv_ld_ + row_block_ +
                      (half ? row_block_ * s.head_size : 0)),
        chunks_(ThreadPool::Global().NumChunks(items_, 1)) {}

  size_t scratch_bytes() const override {
    return static_cast<size_t>(RoundUp(chunk_floats_, 16) * chunks_) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    if (items_ == 0 || s_.value_size == 0) return;
    // Chunk c (its own scratch) runs home range c of the items one at a time, then items from the
    // back of the others' ranges (home_ranges.h): where each chunk ran a fixed share, a thread
    // that started late (a worker woken from sleep) made the step wait for its whole share.
    const int64_t homes = std::min(chunks_, kMaxHomeRanges);
    HomeRanges ranges(items_, homes);
    const auto one = [](int64_t, int64_t) { return int64_t{1}; };
    ParallelForChunks(homes, 1, [&](int64_t chunk, int64_t, int64_t) {
      float* kt = static_cast<float*>(ctx.scratch) + RoundUp(chunk_floats_, 16) * chunk;
      float* v = kt + s_.head_size * kv_ld_;  // unused where V is read in place
      float* scores = v + (v_in_place_ ? 0 : s_.kv_len * v_ld_);
      float* inv_sum = scores + row_block_ * kv_ld_;
      float* q_rows = inv_sum + row_block_;  // float16 only
      int64_t packed = -1;
      auto run = [&](int64_t item) {
        const int64_t bh = item / blocks_per_head_, block = item % blocks_per_head_;
        if (bh != packed) {
          PackKeysAndValues(ctx, bh, kt, v);
          packed = bh;
        }
        PrefetchNext(ctx, bh, block);
        RowBlock(ctx, bh, block, kt, v, scores, inv_sum, q_rows);
      };
      ranges.RunHome(chunk, one, one, [&](int64_t item, int64_t) { run(item); });
    });
  }

 private:
  // Element offset of operand op's (batch b, row s, head h), the operand being H·width columns
  // of a [B, S, row stride] tensor.
  int64_t Offset(int op, int64_t b, int64_t len, int64_t s, int64_t h, int64_t width) const {
    return (b * len + s) * layout_.row_stride[op] + layout_.column[op] + h * width;
  }
  // Y [B, Sq, H·dv].
  int64_t OutOffset(int64_t b, int64_t s, int64_t h) const {
    return ((b * s_.q_len + s) * s_.heads + h) * s_.value_size;
  }

  // Rows [r0, r1) of operand op's head h of batch b (`width` elements each) towards the cache:
  // into L1 (locality 3) or L2 (2).
  template <int kLocality>
  void PrefetchRows(const KernelContext& ctx, int op, int64_t b, int64_t len, int64_t r0, int64_t r1, int64_t h,
                    int64_t width) const {
    const char* base = static_cast<const char*>(ctx.inputs[layout_.input[op]]);
    const int64_t bytes = width * (half_ ? 2 : 4);
    for (int64_t r = r0; r < r1; ++r) {
      const char* row = base + Offset(op, b, len, r, h, width) * (half_ ? 2 : 4);
      for (int64_t x = 0; x < bytes; x += 64) __builtin_prefetch(row + x, 0, kLocality);
      __builtin_prefetch(row + bytes - 1, 0, kLocality);
    }
  }

  // While block `block` of head bh runs: the next block's query rows into L1, and a
  // 1/blocks_per_head share of the next head's keys and values into L2 for its packs. Q, K and V
  // are the projections' outputs, larger than L2 at batch 8 (3 MiB for BERT), and the packs'
  // strided rows (a head's slice of each token row) otherwise wait on L3 line by line.
  void PrefetchNext(const KernelContext& ctx, int64_t bh, int64_t block) const {
    const int64_t next_block = block + 1 < blocks_per_head_ ? block + 1 : 0;
    const int64_t next_bh = block + 1 < blocks_per_head_ ? bh : bh + 1;
    if (next_bh < s_.batch * s_.heads) {
      const int64_t r0 = next_block * row_block_, r1 = std::min(r0 + row_block_, s_.q_len);
      PrefetchRows<3>(ctx, 0, next_bh / s_.heads, s_.q_len, r0, r1, next_bh % s_.heads, s_.head_size);
    }
    if (bh + 1 < s_.batch * s_.heads) {
      const int64_t share = (s_.kv_len + blocks_per_head_ - 1) / blocks_per_head_;
      const int64_t j0 = std::min(block * share, s_.kv_len), j1 = std::min(j0 + share, s_.kv_len);
      const int64_t b = (bh + 1) / s_.heads, h = (bh + 1) % s_.heads;
      PrefetchRows<2>(ctx, 1, b, s_.kv_len, j0, j1, h, s_.head_size);
      PrefetchRows<2>(ctx, 2, b, s_.kv_len, j0, j1, h, s_.value_size);
    }
  }

  // `width` elements of input `i` from `offset` as float32: in place, or widened into `buf`.
  const float* InputRow(const KernelContext& ctx, int op, int64_t offset, int64_t width, float* buf) const {
    const void* in = ctx.inputs[layout_.input[op]];
    if (!half_) return static_cast<const float*>(in) + offset;
    WidenHalfToFloat(static_cast<const uint16_t*>(in) + offset, buf, width);
    return buf;
  }

  // scale·Kᵀ as panels [d, panel width] of the Sk columns (the scale folded in here costs nothing,
  // where scaling the scores would be a pass over them; a power of two, 1/√d for d = 4^i,
  // gives the same scores bit for bit); V as panels [Sk, panel width] of the dv columns.
  void PackKeysAndValues(const KernelContext& ctx, int64_t bh, float* kt, float* v) const {
    const int64_t b = bh / s_.heads, h = bh % s_.heads, d = s_.head_size, dv = s_.value_size;
    const int64_t pw = tiles_.panel_width;
    alignas(64) float row_buf[512];
    int64_t j = 0;
#if TFPOPEF_ATTENTION_SSE
    if (!half_ || f16c_ || d <= kMaxWidenedKeyDims) {
      // Groups of 4 keys × 4 dims as 4×4 transposes in registers: a quarter of the loads and stores
      // of the element-by-element transpose (2.4 µs per BERT head of 128 keys × 64 dims, ~10 % of
      // the head's non-GEMM time). float16 keys are widened 4 rows at a time first.
      alignas(64) float four_keys[4 * kMaxWidenedKeyDims];
      const __m128 scale = _mm_set1_ps(scale_);
      for (; j + 4 <= s_.kv_len && (j % pw) + 4 <= pw; j += 4) {
        const int64_t c0 = j / pw * pw, width = std::min(pw, kv_ld_ - c0);
        float* panel = kt + d * c0 + (j - c0);
        const float* k0;
        int64_t ldk;
        if (half_) {
          const uint16_t* k = static_cast<const uint16_t*>(ctx.inputs[layout_.input[1]]);
          if (f16c_) {
            PackFourHalfKeys(k + Offset(1, b, s_.kv_len, j, h, d), layout_.row_stride[1], d, scale_, panel, width);
            continue;
          }
          for (int64_t i = 0; i < 4; ++i)
            WidenHalfToFloat(k + Offset(1, b, s_.kv_len, j + i, h, d), four_keys + i * d, d);
          k0 = four_keys;
          ldk = d;
        } else {
          k0 = static_cast<const float*>(ctx.inputs[layout_.input[1]]) + Offset(1, b, s_.kv_len, j, h, d);
          ldk = layout_.row_stride[1];
        }
        int64_t p = 0;
        for (; p + 4 <= d; p += 4) {
          __m128 r0 = _mm_loadu_ps(k0 + p), r1 = _mm_loadu_ps(k0 + ldk + p);
          __m128 r2 = _mm_loadu_ps(k0 + 2 * ldk + p), r3 = _mm_loadu_ps(k0 + 3 * ldk + p);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          _mm_storeu_ps(panel + p * width, _mm_mul_ps(scale, r0));
          _mm_storeu_ps(panel + (p + 1) * width, _mm_mul_ps(scale, r1));
          _mm_storeu_ps(panel + (p + 2) * width, _mm_mul_ps(scale, r2));
          _mm_storeu_ps(panel + (p + 3) * width, _mm_mul_ps(scale, r3));
        }
        for (; p < d; ++p)
          for (int64_t i = 0; i < 4; ++i) panel[p * width + i] = scale_ * k0[i * ldk + p];
      }
    }
#endif
    for (; j < s_.kv_len; ++j) {
      const int64_t c0 = j / pw * pw, width = std::min(pw, kv_ld_ - c0);
      float* panel = kt + d * c0;
      for (int64_t p0 = 0; p0 < d; p0 += 512) {
        const int64_t n = std::min<int64_t>(512, d - p0);
        const float* k = InputRow(ctx, 1, Offset(1, b, s_.kv_len, j, h, d) + p0, n, row_buf);
        for (int64_t p = 0; p < n; ++p) panel[(p0 + p) * width + (j - c0)] = scale_ * k[p];
      }
    }
    for (int64_t j = s_.kv_len; j < kv_ld_; ++j) {  // the last panel's padding columns
      const int64_t c0 = j / pw * pw, width = std::min(pw, kv_ld_ - c0);
      for (int64_t p = 0; p < d; ++p) kt[d * c0 + p * width + (j - c0)] = 0.0f;
    }
    if (v_in_place_) return;
    for (int64_t j = 0; j < s_.kv_len; ++j) {
      for (int64_t c0 = 0; c0 < v_ld_; c0 += pw) {
        const int64_t width = std::min(pw, v_ld_ - c0), cols = std::min(width, dv - c0);
        float* dst = v + s_.kv_len * c0 + j * width;
        const int64_t at = Offset(2, b, s_.kv_len, j, h, dv) + c0;
        if (half_)
          WidenHalfToFloat(static_cast<const uint16_t*>(ctx.inputs[layout_.input[2]]) + at, dst, cols);
        else
          std::copy_n(static_cast<const float*>(ctx.inputs[layout_.input[2]]) + at, cols, dst);
        std::fill(dst + cols, dst + width, 0.0f);
      }
    }
  }

  void RowBlock(const KernelContext& ctx, int64_t bh, int64_t block, const float* kt, const float* v, float* scores,
                float* inv_sum, float* q_rows) const {
    const int64_t b = bh / s_.heads, h = bh % s_.heads, d = s_.head_size, dv = s_.value_size;
    const int64_t r0 = block * row_block_, rows = std::min(row_block_, s_.q_len - r0);
    const int64_t pw = tiles_.panel_width;
    const float* q;
    int64_t ldq;
    if (half_) {
      const uint16_t* in = static_cast<const uint16_t*>(ctx.inputs[layout_.input[0]]);
      for (int64_t r = 0; r < rows; ++r) WidenHalfToFloat(in + Offset(0, b, s_.q_len, r0 + r, h, d), q_rows + r * d, d);
      q = q_rows;
      ldq = d;
    } else {
      q = static_cast<const float*>(ctx.inputs[layout_.input[0]]) + Offset(0, b, s_.q_len, r0, h, d);
      ldq = layout_.row_stride[0];
    }
    // scores = Q·Kᵀ, panel by panel: one panel of Kᵀ (d × panel width, 16 KiB for d = 64 on
    // AVX-512) stays in L1 while every row tile of the block meets it, where all of Kᵀ would be
    // re-read from L2 by each row tile.
    for (int64_t c0 = 0; c0 < s_.kv_len; c0 += pw) {
      const int64_t width = std::min(pw, kv_ld_ - c0), cols = std::min(width, s_.kv_len - c0);
      for (int64_t r = 0; r < rows; r += tiles_.rows) {
        const int64_t tr = std::min(tiles_.rows, rows - r);
        tiles_.tile(tr, cols, d, q + r * ldq, ldq, kt + d * c0, width, scores + r * kv_ld_ + c0, kv_ld_, false, nullptr);
      }
    }
    // exp(x − max) in place (x = Q·(scale·K)ᵀ); 1/Σ kept for the output rows
    for (int64_t r = 0; r < rows; ++r) {
      float* row = scores + r * kv_ld_;
      const float max = vmath::Max(row, s_.kv_len);
      inv_sum[r] = 1.0f / vmath::ExpShiftedSum(row, row, s_.kv_len, max);
    }
    // Y = P·V / Σ, the 1/Σ (and float16 Y's narrowing) in the tiles' store
    const int64_t ldy = s_.heads * dv;
    float* y = half_ ? nullptr : static_cast<float*>(ctx.outputs[0]) + OutOffset(b, r0, h);
    uint16_t* y_half = half_ ? static_cast<uint16_t*>(ctx.outputs[0]) + OutOffset(b, r0, h) : nullptr;
    const float* v_in = v_in_place_ ? static_cast<const float*>(ctx.inputs[layout_.input[2]]) +
                                          Offset(2, b, s_.kv_len, 0, h, dv)
                                    : nullptr;
    for (int64_t r = 0; r < rows; r += tiles_.rows) {
      const int64_t tr = std::min(tiles_.rows, rows - r);
      for (int64_t c0 = 0; c0 < dv; c0 += pw) {
        const int64_t width = std::min(pw, v_ld_ - c0), cols = std::min(width, dv - c0);
        PackedGemmTileAdd add;
        add.row_scale = inv_sum + r;
        if (half_) {
          add.half_c = y_half + r * ldy + c0;
          add.ldhalf = ldy;
        }
        const float* panel = v + s_.kv_len * c0;
        if (v_in_place_) {
          panel = v_in + c0;
          add.ldb = layout_.row_stride[2];
        }
        // float16: C is not touched (not accumulating, Y goes to half_c)
        tiles_.scaled_tile(tr, cols, s_.kv_len, scores + r * kv_ld_, kv_ld_, panel, width,
                           half_ ? inv_sum : y + r * ldy + c0, ldy, false, &add);
      }
    }
  }

  const AttentionShape s_;
  const OperandLayout layout_;
  const float scale_;
  const bool half_, f16c_;  // f16c_: float16 keys widened in registers (PackFourHalfKeys)
  const PackedGemmTileFns& tiles_;
  const int64_t row_block_, blocks_per_head_, items_, kv_ld_, v_ld_;
  const bool v_in_place_;  // float32 V read by the P·V tiles in place (its head slice is whole vectors)
  const int64_t chunk_floats_, chunks_;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::unique_ptr<Kernel> CreateAttention(const KernelSpec& spec) {
  const bool packed = spec.attrs.Has("qkv_widths");
  CheckArity(spec, packed ? 1 : 3, packed ? 1 : 3, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  const int64_t heads = spec.attrs.Int("num_heads");
  const float scale = spec.attrs.Float("scale", 1.0f);
  auto fail = [&](const std::string& what) { return Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what); };
  if (heads < 1) throw fail("num_heads " + std::to_string(heads) + " must be >= 1");
  if (!(scale > 0.0f)) throw fail("scale " + std::to_string(scale) + " must be > 0");
  std::vector<int64_t> q, k, v;  // the operands' shapes [B, S, H·width]
  OperandLayout layout{};
  if (packed) {
    const auto& qkv = spec.inputs[0].shape;
    const auto widths = spec.attrs.Ints("qkv_widths");
    if (widths.size() != 3 || qkv.size() != 3 || widths[0] < 0 || widths[1] < 0 || widths[2] < 0 ||
        widths[0] + widths[1] + widths[2] != qkv[2])
      throw fail("QKV " + ShapeText(qkv) + " and qkv_widths " + ShapeText(widths) +
                 " do not make [B, S, wq + wk + wv] with three widths");
    for (int i = 0; i < 3; ++i) {
      layout.input[i] = 0;
      layout.row_stride[i] = qkv[2];
    }
    layout.column[0] = 0;
    layout.column[1] = widths[0];
    layout.column[2] = widths[0] + widths[1];
    q = {qkv[0], qkv[1], widths[0]};
    k = {qkv[0], qkv[1], widths[1]};
    v = {qkv[0], qkv[1], widths[2]};
  } else {
    q = spec.inputs[0].shape;
    k = spec.inputs[1].shape;
    v = spec.inputs[2].shape;
    if (q.size() != 3 || k.size() != 3 || v.size() != 3)
      throw fail("Q " + ShapeText(q) + ", K " + ShapeText(k) + " and V " + ShapeText(v) + " must be [B, S, heads·d]");
    for (int i = 0; i < 3; ++i) {
      layout.input[i] = i;
      layout.column[i] = 0;
    }
    layout.row_stride[0] = q[2];
    layout.row_stride[1] = k[2];
    layout.row_stride[2] = v[2];
  }
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || k[2] != q[2] || q[2] % heads != 0 || v[2] % heads != 0)
    throw fail("Q " + ShapeText(q) + ", K " + ShapeText(k) + ", V " + ShapeText(v) +
               " do not make [B, Sq, H·d], [B, Sk, H·d], [B, Sk, H·dv] with H = num_heads " + std::to_string(heads));
  const AttentionShape s{q[0], q[1], k[1], heads, q[2] / heads, v[2] / heads};
  if (s.kv_len == 0 || s.head_size == 0) throw fail("no keys (K " + ShapeText(k) + "): the softmax is undefined");
  CheckOutputShape(spec, 0, {s.batch, s.q_len, heads * s.value_size});
  vmath::ActivePath();  // a bad TF_POPEF_SIMD fails here, at prepare
  return std::make_unique<AttentionKernel>(s, layout, scale, spec.inputs[0].dtype == DType::kFloat16);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("FusedAttention", CreateAttention);

}  // namespace kernels
}  // namespace tfpopef
