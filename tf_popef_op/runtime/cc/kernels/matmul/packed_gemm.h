// A GEMM whose B is a weight, packed once into panels for the register tiles
// (packed_gemm_tiles.h) instead of being repacked by BLAS on every call:
//
//   C[M, N] = epilogue(A[M, K] · (alpha · op(B))[K, N] + beta · bias[N] + sum[M, N])
//
// A, bias, sum and C are all float or all float16 (uint16_t bits); B is packed to float32 from
// float or float16 (so a float16 model's weights are widened once, with alpha folded in).
// float16 A rows are widened a strip at a time into an L1 buffer, and C is narrowed once, to
// nearest even, after the epilogue (without an activation, or with a Gelu the tiles apply: by
// the tiles' last store, the float16 sum widened there too), so a float16 GEMM computes in
// float32 and rounds once, as the float16 adapter would, without widening whole tensors.
//
// Work: C is cut into strips of `rows` rows × blocks of up to kPackedGemmBlockColumns columns,
// spread over the intra-op pool (a batch-1 dense layer keeps both cores busy: M = 128 rows are
// 22 strips): each thread takes its own share of them in order, then strips from the back of the
// others' shares, in groups that shrink as the shares run out (home_ranges.h). K is cut into
// blocks of kPackedGemmBlockDepth so an A strip stays in L1 while it meets every panel of the
// column block; a thread runs its consecutive strips of one column block in groups of up to
// kPackedGemmGroupStrips, K block by K block, so each K block of the column block's packed B is read from L2 by every strip of the group (with K > 512, a whole
// column block of B is 768 KiB-3 MiB and would otherwise be re-read from L3 by every strip).
// The tiles add bias and sum while the last K block's C is in registers (and the Gelu where
// the tiles take it, PackedGemmTileFns::gelu; and narrow float16 C there when no other
// activation follows); another activation (and float16's sum and narrowing around it) then
// runs on each row of the strip while it is in L1.
#pragma once

#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {

constexpr int64_t kPackedGemmBlockColumns = 256;
constexpr int64_t kPackedGemmBlockDepth = 512;
constexpr int64_t kPackedGemmGroupStrips = 8;

// B (times alpha) in the panel layout of `tiles`: panel q holds columns [q·P, q·P + w) with
// P = panel_width and w = stored_width(q·P) = min(P, N - q·P rounded up to lanes), stored
// [K, w] from float offset q·P·K; columns past N are zeros.
struct PackedLayout {
  int64_t k = 0, n = 0;
  int64_t panel_width = 0, lanes = 0;

  int64_t floats() const { return k * ((n + lanes - 1) / lanes * lanes); }
  int64_t stored_width(int64_t j0) const {
    const int64_t rest = (n - j0 + lanes - 1) / lanes * lanes;
    return rest < panel_width ? rest : panel_width;
  }
};

PackedLayout PackedLayoutFor(const PackedGemmTileFns& tiles, int64_t k, int64_t n);

// Packs op(B) [K, N] into out (layout.floats() floats, padding included): b stored [K, N] (row
// length ldb) or, with trans_b, [N, K]. T: float or uint16_t (float16 bits).
template <typename T>
void PackB(const PackedLayout& layout, const T* b, int64_t ldb, bool trans_b, float alpha, float* out);

// `batches` independent products (batched MatMul) or one: product i reads A from a + i·a_batch_stride,
// B from b_data + i·layout.floats() and writes C (and reads sum) at i·c_batch_stride.
template <typename T>
struct PackedGemmArgs {
  int64_t m = 0;  // rows of each product
  int64_t batches = 1;
  const T* a = nullptr;
  int64_t lda = 0, a_batch_stride = 0;
  PackedLayout b;
  const float* b_data = nullptr;
  const T* bias = nullptr;  // [N] or null, scaled by bias_scale
  float bias_scale = 1.0f;
  const T* sum = nullptr;  // C's layout, or null
  T* c = nullptr;
  int64_t ldc = 0, c_batch_stride = 0;
  Epilogue epilogue;  // applied to each row of C after bias and sum
};

// M, K, N > 0. Runs on `pool` (the calling thread takes part).
template <typename T>
void RunPackedGemm(const PackedGemmTileFns& tiles, const PackedGemmArgs<T>& args, ThreadPool& pool);

}  // namespace kernels
}  // namespace tfpopef
