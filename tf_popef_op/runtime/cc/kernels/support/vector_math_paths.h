// The function table each SIMD path of vector_math.h provides (internal to vector_math*.cc).
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {
namespace vmath {

// P of Φ(−t) = e^(−t²/2)·w·P(w), highest degree first: the Gelu of vector_math_avx2.cc (which
// explains its steps) and of vector_math_avx512.cc.
inline constexpr float kGeluPhiPoly[10] = {
    -2.062346928e-02f, 1.124356143e-01f,  -2.282136023e-01f, 1.917845377e-01f, -7.942349356e-02f,
    9.615683386e-02f,  7.838964906e-02f,  1.102354249e-01f,  1.195718139e-01f, 1.196866898e-01f};

struct PathTable {
  void (*exp)(const float*, float*, int64_t);
  void (*log)(const float*, float*, int64_t);
  void (*tanh)(const float*, float*, int64_t);
  void (*erf)(const float*, float*, int64_t);
  void (*sigmoid)(const float*, float*, int64_t);
  void (*swish)(const float*, float*, int64_t);
  void (*gelu)(const float*, float*, int64_t);
  void (*gelu_tanh)(const float*, float*, int64_t);
  void (*elu)(const float*, float*, int64_t, float, float);
  float (*max)(const float*, int64_t);
  float (*exp_shifted_sum)(const float*, float*, int64_t, float);
};

extern const PathTable kPortableTable;
// Defined only on x86-64 builds (vector_math_avx2.cc); call only when CpuHasAvx2Fma().
extern const PathTable kAvx2Table;
// The AVX-512 path: kAvx2Table but for what vector_math_avx512.cc defines (x86-64 builds only;
// call only when CpuHasAvx512()).
void Avx512Gelu(const float* x, float* y, int64_t n);
void Avx512Exp(const float* x, float* y, int64_t n);
void Avx512Sigmoid(const float* x, float* y, int64_t n);
void Avx512Swish(const float* x, float* y, int64_t n);
float Avx512ExpShiftedSum(const float* x, float* y, int64_t n, float shift);

}  // namespace vmath
}  // namespace kernels
}  // namespace tfpopef
