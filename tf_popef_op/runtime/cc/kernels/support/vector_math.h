// Vectorized float32 math for the elementwise kernels (and the fusion epilogues), chosen once
// per process at run time so one build runs on every x86-64 host:
//   - AVX2+FMA: 8 lanes at a time (vector_math_avx2.cc, compiled for AVX2+FMA whatever the
//     build's -march, only called after the CPU says it has both);
//   - AVX-512: the AVX2+FMA math but Gelu on 16 lanes (vector_math_avx512.cc), and kernels
//     whose register tiles need more than AVX2's 16
//     vector registers (the NCHW8c convolution) use AVX-512VL's 32 (still 8-lane vectors:
//     on AMD Zen 4, which splits 16-lane operations in two, they reach the same FLOP rate);
//   - portable: plain loops over the std:: functions (any CPU, any compiler).
// TF_POPEF_SIMD picks the path: unset/"auto" = the widest the CPU has, "portable" forces the
// std:: loops (to rule the vector code out when chasing a numerical difference), "avx2" and
// "avx512" require theirs (an error on a CPU without it). Any other value is an error.
//
// Every function takes n >= 0 elements and allows y == x (in place). NaN in gives NaN out,
// ±inf and denormal inputs give the std:: results (within the error below).
//
// Accuracy, measured against the exact (double-precision) function over ~3·10^6 inputs
// covering the whole float range: random bit patterns (every exponent, denormals, ±inf, NaN)
// plus dense samples of [-110, 110], [-6, 6] and [-1.2, 1.2] — max error in units in the last
// place (ulp) of the exact result, AVX2 path (portable path = glibc in brackets):
//   Exp      1.3 ulp (0.5)  results in the float denormal range (x in [-103.9, -87.3]) are
//                           scaled exactly (not flushed); +inf from x > 88.72
//   Log      0.8 ulp (0.8)  denormal inputs included; log(±0) = -inf, log(x < 0) = NaN
//   Tanh     1.4 ulp (2.2)  tanh(±0) = ±0
//   Erf      2.5 ulp (0.9)
//   Sigmoid  2.8 ulp (2.7)  from exp(-|x|), so it never overflows and underflows gracefully
//                           (2.73 over every 16th float bit pattern, 2.7·10^8 inputs)
//   Elu      2.1 ulp (0.8)  e^x − 1 accurate for tiny |x| too (an expm1, not exp − 1)
//   Swish    3.6 ulp (3.3)  for x ≥ -87 (below, sigmoid(x) is a denormal and x·sigmoid keeps
//                           only its bits, in both paths)
//   Gelu     4.9 ulp (0.5: erfc in double) everywhere, also on every 2^-16 of [-16, 16] (AVX2
//            and AVX-512 alike): x·Φ(x) with Φ from erfc, not 1 + erf, so x << 0 keeps its
//            relative accuracy down to the denormal results near x = -14; Gelu(-inf) = -0
//   GeluTanh 3.6 ulp (4.8) for x ≥ -1; below, 1 + tanh cancels in the formula itself
//            (~100-200 ulp near x = -3 in both paths, i.e. an absolute error < 1e-7)
// tests/cc/simd_kernel_tests.cc (VectorMath_Accuracy_BothPaths) enforces bounds of 2 ulp for
// Exp/Log, 3 for Tanh/Sigmoid/Elu, 4 for Erf/Swish, 5 for Gelu, 6 for GeluTanh, on every path.
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {
namespace vmath {

enum class SimdPath { kPortable, kAvx2, kAvx512 };

// Whether `path` runs the AVX2+FMA code (the AVX-512 path includes it).
inline bool UsesAvx2(SimdPath path) { return path == SimdPath::kAvx2 || path == SimdPath::kAvx512; }

// The path in use: TF_POPEF_SIMD, read on first use (throws kInvalidArgument for a bad value).
SimdPath ActivePath();
// The path a TF_POPEF_SIMD value selects on this CPU (nullptr or "" = auto); throws
// kInvalidArgument naming the variable for an unknown value, kUnimplemented for "avx2" on a
// CPU without AVX2/FMA/F16C.
SimdPath SimdPathFromSetting(const char* value);
const char* SimdPathName(SimdPath path);
bool CpuHasAvx2Fma();  // AVX2, FMA and F16C (every AVX2 CPU has F16C; the NCHWc tiles use it)
bool CpuHasAvx512();  // AVX-512F and VL, besides AVX2 and FMA

// Tests switch paths inside one process; returns the previous path. Throws kUnimplemented if
// the CPU lacks the path's instructions. Not for production code: kernels running at
// the same moment may see either path.
SimdPath SetPathForTesting(SimdPath path);

void Exp(const float* x, float* y, int64_t n);
void Log(const float* x, float* y, int64_t n);
void Tanh(const float* x, float* y, int64_t n);
void Erf(const float* x, float* y, int64_t n);
void Sigmoid(const float* x, float* y, int64_t n);
// x · sigmoid(x) (SiLU).
void Swish(const float* x, float* y, int64_t n);
// 0.5·x·(1 + erf(x/√2)) = x·Φ(x).
void Gelu(const float* x, float* y, int64_t n);
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
void GeluTanh(const float* x, float* y, int64_t n);
// x < 0 ? alpha·(e^x − 1) : x, all times `scale` (Elu: scale 1; Selu: alpha, gamma; Selu's
// x = 0 gives 0 either way).
void Elu(const float* x, float* y, int64_t n, float alpha, float scale);

// Softmax building blocks: the largest element (NaNs ignored; -inf for n == 0), and
// y = exp(x − shift) returning the sum of y.
float Max(const float* x, int64_t n);
float ExpShiftedSum(const float* x, float* y, int64_t n, float shift);

}  // namespace vmath
}  // namespace kernels
}  // namespace tfpopef
