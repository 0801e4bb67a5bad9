// The register tiles of the packed-weight GEMM (packed_gemm.h): C[rows, cols] (+)= A[rows, k] ·
// one packed panel of B, with A read in place (row-major, any row stride) and B's panel stored
// [k, panel width] contiguously, so each step of k loads the panel's vectors once and
// multiply-adds them with one broadcast value of every A row.
//
// The code is compiled three times (packed_gemm_tiles.inc): for AVX-512 (6 rows × 4 vectors of
// 16 floats: 24 accumulators of the 32 registers, panels of 64 columns), for AVX2+FMA (6 rows ×
// 2 vectors of 8: 12 of the 16 registers, panels of 16) and portable (4 rows × 2 GCC vectors
// of 8, panels of 16); PackedGemmTiles() picks one from vector_math.h's run-time path
// (TF_POPEF_SIMD), as the NCHWc tiles do.
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {

// What a tile adds to C as it stores its last K block, while C is still in registers (instead of
// a second pass over the rows): bias[j] (the tile's columns; null: none) and sum[r·ldsum + j]
// (null: none). For float16 C without an activation, half_c (non-null) takes the result instead
// of C, narrowed to nearest even in the store, plus the float16 half_sum[r·ldhalf + j] (null:
// none) widened in registers: the float32 product rounded once, with no float32 copy of C
// written and read back (C is then read only to accumulate an earlier K block).
struct PackedGemmTileAdd {
  const float* bias = nullptr;
  const float* sum = nullptr;
  int64_t ldsum = 0;
  const uint16_t* half_sum = nullptr;
  uint16_t* half_c = nullptr;
  int64_t ldhalf = 0;
  // Only where PackedGemmTileFns::gelu: Gelu (erf form, vmath::Gelu's bits) of the result, in
  // registers before the store, instead of a pass over the stored rows.
  bool gelu = false;
  // Only in scaled_tile: row r of the product (with C added if accumulating) times row_scale[r],
  // before bias and sum (null: none): attention's 1/Σ per output row, in the store instead of a
  // pass over the rows.
  const float* row_scale = nullptr;
  // Only in scaled_tile: B's row stride where B is read in place instead of packed (0: the
  // panel's width): rows of b[p·ldb + j], j < width, all readable (attention's V, whose head
  // slice is whole panels).
  int64_t ldb = 0;
};

struct PackedGemmTileFns {
  int64_t rows;         // A rows per tile (the most `tile` takes)
  int64_t lanes;        // floats per vector: panel widths are multiples of it
  int64_t panel_width;  // columns per packed panel of B (the last one may be narrower)
  bool gelu;            // whether the tiles take PackedGemmTileAdd::gelu (the AVX-512 build)
  // C[r·ldc + j] = (accumulate ? C[r·ldc + j] : 0) + Σ_p a[r·lda + p] · b[p·width + j] for
  // r < rows (1..this->rows), j < cols; width is the panel's stored width (a multiple of lanes,
  // at most panel_width) and cols <= width the columns of it that exist (the rest is padding).
  // add (or null): bias and sum added to that, C[r·ldc + j] + bias[j] + sum[r·ldsum + j], stored
  // to C or, with add->half_c, narrowed to float16 there; with add->gelu, the Gelu of that; with
  // `tile` ignores add->row_scale and add->ldb; `scaled_tile` is the same tile that also applies
  // them (the product, and C, scaled per row first; B's rows add->ldb apart), compiled apart so
  // the packed GEMM's K loop and store stay as they were.
  void (*tile)(int64_t rows, int64_t cols, int64_t k, const float* a, int64_t lda, const float* b, int64_t width,
               float* c, int64_t ldc, bool accumulate, const PackedGemmTileAdd* add);
  void (*scaled_tile)(int64_t rows, int64_t cols, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t width, float* c, int64_t ldc, bool accumulate, const PackedGemmTileAdd* add);
};

// The build for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
const PackedGemmTileFns& PackedGemmTiles();

extern const PackedGemmTileFns kPackedGemmPortableTiles;
// Defined only on x86-64 builds; use only when CpuHasAvx2Fma() / CpuHasAvx512().
extern const PackedGemmTileFns kPackedGemmAvx2Tiles;
extern const PackedGemmTileFns kPackedGemmAvx512Tiles;

}  // namespace kernels
}  // namespace tfpopef
