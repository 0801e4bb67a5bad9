// The one place that calls BLAS: row-major SGEMM through scipy_openblas32 (symbols prefixed
// scipy_, 32-bit integer sizes). MatMul and Gemm check sizes at prepare with CheckBlasDim.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <limits>
#include <string>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace tfpopef {
namespace kernels {

// BLAS sizes and leading dimensions are 32-bit in this build.
inline void CheckBlasDim(const KernelSpec& spec, const std::string& what, int64_t value) {
  if (value > std::numeric_limits<blasint>::max())
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": " + what + " = " + std::to_string(value) +
                                               " exceeds the BLAS 32-bit size limit (" +
                                               std::to_string(std::numeric_limits<blasint>::max()) + ")");
}

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all row-major; lda/ldb/ldc are the row
// lengths of A, B and C as stored. Callers handle m, n or k == 0 themselves (BLAS rejects
// leading dimensions of 0, and the k == 0 result is defined by the op, not by BLAS).
inline void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  scipy_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                    static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

}  // namespace kernels
}  // namespace tfpopef
