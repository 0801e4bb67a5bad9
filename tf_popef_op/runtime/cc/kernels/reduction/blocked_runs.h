// The blocked layout's per-channel sums: [N, C/8, H, W, 8] reduced over H and W (the
// squeeze-and-excite means) is, per (image, block), a row of H·W runs of 8 floats into the same
// 8 outputs. AddBlockedRuns is reduce.cc's loop for those rows, compiled twice
// (blocked_runs.inc): portable (the build's baseline, SSE on x86-64: two 16-byte loads per run)
// and AVX2 (one 32-byte load per run; about 1.5x the portable build's rate on data in L2, the
// squeeze-and-excite means' case). The AVX-512 path takes the AVX2 build: a run is 8 floats, so
// wider registers add nothing (measured equal).
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {

// acc[0..8) += the sums of lanes 0..7 over `runs` consecutive runs of 8 floats at x (unaligned).
// Batches of at most kBlockedRunsFloatBatch runs are summed in float32, their totals in double;
// every build adds in the same order, so all give the same bits.
using AddBlockedRunsFn = void (*)(const float* x, int64_t runs, double* acc);
constexpr int64_t kBlockedRunsFloatBatch = 64;

// The same sums of float16 runs (x: IEEE binary16 bits), each batch widened exactly and added in
// AddBlockedRunsFn's order, so the result is the bits of AddBlockedRunsFn on the widened runs. The
// AVX2 build widens each run in registers as it loads it (a float16 squeeze-and-excite mean reads
// half the bytes and writes no widened copy); the portable build widens a batch at a time into L1.
using AddBlockedHalfRunsFn = void (*)(const uint16_t* x, int64_t runs, double* acc);

// The builds for this host's SIMD path (vector_math.h's ActivePath, TF_POPEF_SIMD).
AddBlockedRunsFn BlockedRunsAdder();
AddBlockedHalfRunsFn BlockedHalfRunsAdder();

void AddBlockedRunsPortable(const float* x, int64_t runs, double* acc);
void AddBlockedHalfRunsPortable(const uint16_t* x, int64_t runs, double* acc);
// Defined only on x86-64 builds; use only when CpuHasAvx2Fma().
void AddBlockedRunsAvx2(const float* x, int64_t runs, double* acc);
void AddBlockedHalfRunsAvx2(const uint16_t* x, int64_t runs, double* acc);

}  // namespace kernels
}  // namespace tfpopef
