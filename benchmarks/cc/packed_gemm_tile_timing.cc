// One core's packed-GEMM tile loop, outside the runtime: C[M, N] = A[M, K] · B (B already packed)
// through the AVX-512 register tiles of packed_gemm_tiles.inc built as ROWS rows × PV vectors of
// 16 floats, with packed_gemm.cc's blocking (column blocks of `cb`, K blocks of `kc`, groups of
// `g` strips) and strip-then-panel (order 0) or panel-then-strip (order 1) loops; no bias, sum
// or threads. epi: no epilogue (0), a bias added in the tile and then the Gelu over each strip's
// rows once its last K block is in, as packed_gemm.cc's finish_strip does (1), the bias and the
// Gelu in the tile's registers before the store (2), or only the bias (3). Best (and median) of
// 15 × 3 runs, GFLOP/s. For trying tile shapes, blockings and epilogues before touching the
// library (a 6×4 build is the library's AVX-512 tile); the Gelu pass (epi 1) is the library's
// vmath::Gelu, so the bench links the runtime library:
//
//   g++ -std=c++17 -O3 -march=native -I. -DROWS=6 -DPV=4 benchmarks/cc/packed_gemm_tile_timing.cc \
//       -L$BUILD/tf_popef_op/lib -Wl,-rpath,$BUILD/tf_popef_op/lib -ltfpopef_runtime -o tile_6x4
//   ./tile_6x4 M K N [kc=512] [cb=256] [g=8] [order=0] [epi=0]
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>
#include <algorithm>
#include <immintrin.h>
#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"
namespace tfpopef { namespace kernels { namespace {
using V = __m512;
constexpr int64_t kLanes = 16;
constexpr int kTileRows = ROWS;
constexpr int kPanelVectors = PV;
inline V VZero() { return _mm512_setzero_ps(); }
inline V VLoad(const float* p) { return _mm512_loadu_ps(p); }
inline void VStore(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V VBroadcast(const float* p) { return _mm512_set1_ps(*p); }
inline V VFma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V VAdd(V a, V b) { return _mm512_add_ps(a, b); }
inline V VMul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V VLoadHalf(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline void VStoreHalf(uint16_t* p, V v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#include "tf_popef_op/runtime/cc/kernels/support/vector_math_gelu16.inc"
constexpr bool kTileGelu = true;
inline V VGelu(V v) { return Gelu16(v); }
#include "tf_popef_op/runtime/cc/kernels/support/packed_gemm_tiles.inc"
}}}
using namespace tfpopef::kernels;
int main(int argc, char** argv) {
  int64_t m = atoll(argv[1]), k = atoll(argv[2]), n = atoll(argv[3]);
  int64_t depth_blk = argc > 4 ? atoll(argv[4]) : 512, colblk = argc > 5 ? atoll(argv[5]) : 256, group = argc > 6 ? atoll(argv[6]) : 8;
  int order = argc > 7 ? atoi(argv[7]) : 0;
  const int epi = argc > 8 ? atoi(argv[8]) : 0;
  const auto& t = kFns;
  int64_t pw = t.panel_width, rows = t.rows;
  std::vector<float> a(m * k), b(k * ((n + 15) / 16 * 16)), c(m * n);
  for (auto& x : a) x = (rand() % 100) / 100.f;
  for (auto& x : b) x = (rand() % 100) / 100.f;
  std::vector<float> bias(n);
  for (auto& x : bias) x = (rand() % 100) / 100.f - 2.0f;
  // the Gelu over rows of C, as packed_gemm.cc's finish_strip applies it
  auto gelu_rows = [&](float* c0, int64_t nr, int64_t cols) {
    for (int64_t r = 0; r < nr; ++r) vmath::Gelu(c0 + r * n, c0 + r * n, cols);
  };
  int64_t strips = (m + rows - 1) / rows, blocks = (n + colblk - 1) / colblk;
  PackedGemmTileAdd add;
  auto add_of = [&](bool last, int64_t j0) -> const PackedGemmTileAdd* {
    if (epi == 0 || !last) return nullptr;
    add.bias = bias.data() + j0;
    add.gelu = epi == 2;
    return &add;
  };
  auto run = [&]() {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      int64_t c0 = blk * colblk, cols = std::min(colblk, n - c0);
      for (int64_t s0 = 0; s0 < strips; s0 += group) {
        int64_t s1 = std::min(strips, s0 + group);
        for (int64_t p0 = 0; p0 < k; p0 += depth_blk) {
          int64_t depth = std::min(depth_blk, k - p0);
          if (order == 0) {
            for (int64_t s = s0; s < s1; ++s) {
              int64_t nr = std::min(rows, m - s * rows);
              for (int64_t j0 = c0; j0 < c0 + cols; j0 += pw) {
                int64_t width = std::min(pw, (n - j0 + 15) / 16 * 16);
                t.tile(nr, std::min(width, n - j0), depth, a.data() + s * rows * k + p0, k, b.data() + j0 * k + p0 * width, width,
                       c.data() + s * rows * n + j0, n, p0 > 0, add_of(p0 + depth == k, j0));
              }
              if (epi == 1 && p0 + depth == k) gelu_rows(c.data() + s * rows * n + c0, nr, cols);
            }
          } else {
            for (int64_t j0 = c0; j0 < c0 + cols; j0 += pw) {
              int64_t width = std::min(pw, (n - j0 + 15) / 16 * 16);
              for (int64_t s = s0; s < s1; ++s) {
                int64_t nr = std::min(rows, m - s * rows);
                t.tile(nr, std::min(width, n - j0), depth, a.data() + s * rows * k + p0, k, b.data() + j0 * k + p0 * width, width,
                       c.data() + s * rows * n + j0, n, p0 > 0, add_of(p0 + depth == k, j0));
              }
            }
            if (epi == 1 && p0 + depth == k)
              for (int64_t s = s0; s < s1; ++s) gelu_rows(c.data() + s * rows * n + c0, std::min(rows, m - s * rows), cols);
          }
        }
      }
    }
  };
  run();
  std::vector<double> times;
  for (int r = 0; r < 15; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 3);
  }
  std::sort(times.begin(), times.end());
  const double best = times[0], median = times[times.size() / 2];
  printf("R%d PV%d %ldx%ldx%ld kc=%ld cb=%ld g=%ld order=%d epi=%d: %.3f ms %.1f GFLOP/s (median of 15: %.1f)\n", ROWS, PV, m, k, n, depth_blk, colblk, group, order, epi,
         best * 1e3, 2.0 * m * k * n / best / 1e9, 2.0 * m * k * n / median / 1e9);
}
