// The float16 Mul of a blocked tensor by a per-channel operand (squeeze-and-excite's excitation:
// [N, C/8, H, W, 8] times [N, C/8, 1, 1, 8]), a row of runs of 8 channels times one run of 8
// scales. The AVX2 build (also the AVX-512 path's: a run is 8 values) widens each run with one
// vcvtph2ps, multiplies and narrows with one vcvtps2ph (round to nearest even) in registers:
// the bits of the float32 product rounded once, as the piecewise path (binary_elementwise.cc)
// computes them through L1 buffers. The portable path keeps that piecewise path.
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {

// y[j·8 + i] = half(float(x[j·8 + i]) · float(s[i])) for j < runs, i < 8 (IEEE binary16 bits).
using MulBlockedHalfRunsFn = void (*)(const uint16_t* x, const uint16_t* s, uint16_t* y, int64_t runs);

// The AVX2 build on the AVX2 and AVX-512 paths (vector_math.h's ActivePath), else nullptr.
MulBlockedHalfRunsFn BlockedHalfRunsMultiplier();

// Defined only on x86-64 builds; use only when CpuHasAvx2Fma().
void MulBlockedHalfRunsAvx2(const uint16_t* x, const uint16_t* s, uint16_t* y, int64_t runs);

}  // namespace kernels
}  // namespace tfpopef
