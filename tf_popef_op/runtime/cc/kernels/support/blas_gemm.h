// The one place that calls BLAS: row-major SGEMM through scipy_openblas32 (symbols prefixed
// scipy_, 32-bit integer sizes). MatMul and Gemm check sizes at prepare with CheckBlasDim.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {

// BLAS sizes and leading dimensions are 32-bit in this build.
inline void CheckBlasDim(const KernelSpec& spec, const std::string& what, int64_t value) {
  if (value > std::numeric_limits<blasint>::max())
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": " + what + " = " + std::to_string(value) +
                                               " exceeds the BLAS 32-bit size limit (" +
                                               std::to_string(std::numeric_limits<blasint>::max()) + ")");
}

// One thread's SGEMM (see Sgemm). A single row or column of output (batch-1 Dense layers)
// goes to SGEMV, which OpenBLAS runs far faster than an SGEMM with m or n == 1.
inline void SgemmOnOneThread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const auto dim = [](int64_t v) { return static_cast<blasint>(v); };
  if (m == 1) {  // c[1,n] = alpha * a[1,k] . op(B) + beta * c
    const blasint inc_a = trans_a ? dim(lda) : 1;  // A stored [k,1] when transposed
    if (trans_b)  // B stored [n,k]: c = B a
      scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, dim(n), dim(k), alpha, b, dim(ldb), a, inc_a, beta, c, 1);
    else  // B stored [k,n]: c = B^T a
      scipy_cblas_sgemv(CblasRowMajor, CblasTrans, dim(k), dim(n), alpha, b, dim(ldb), a, inc_a, beta, c, 1);
    return;
  }
  if (n == 1) {  // c[m,1] = alpha * op(A) . b[k,1] + beta * c
    const blasint inc_b = trans_b ? 1 : dim(ldb);  // B stored [1,k] when transposed
    if (trans_a)  // A stored [k,m]: c = A^T b
      scipy_cblas_sgemv(CblasRowMajor, CblasTrans, dim(k), dim(m), alpha, a, dim(lda), b, inc_b, beta, c, dim(ldc));
    else  // A stored [m,k]: c = A b
      scipy_cblas_sgemv(CblasRowMajor, CblasNoTrans, dim(m), dim(k), alpha, a, dim(lda), b, inc_b, beta, c, dim(ldc));
    return;
  }
  scipy_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                    static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all row-major; lda/ldb/ldc are the row
// lengths of A, B and C as stored. Callers handle m, n or k == 0 themselves (BLAS rejects
// leading dimensions of 0, and the k == 0 result is defined by the op, not by BLAS).
// Large products are split into blocks of C columns (or rows, when C is tall) run on the
// intra-op thread pool, each an independent single-threaded BLAS call: OpenBLAS's own threads
// would spin between calls and fight the pool (see blas_threads.cc).
// `block_done(row0, row1, col0, col1)`, when given, runs on the same thread right after each
// block of C is computed, while it is still in cache: the fused ops' epilogues (epilogue.h).
using GemmBlockFn = std::function<void(int64_t, int64_t, int64_t, int64_t)>;
inline void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                  const GemmBlockFn* block_done = nullptr) {
  constexpr int64_t kMinFlopsPerBlock = int64_t{1} << 18;  // below this a hand-off costs more than it saves
  constexpr int64_t kAlign = 16;                           // block edges on whole SIMD panels
  const bool split_columns = n >= m;
  const int64_t units = ((split_columns ? n : m) + kAlign - 1) / kAlign;
  const int64_t flops_per_unit = 2 * kAlign * (split_columns ? m : n) * k;
  const int64_t grain = std::max<int64_t>(1, kMinFlopsPerBlock / std::max<int64_t>(1, flops_per_unit));
  ParallelFor(units, grain, [&](int64_t u0, int64_t u1) {
    const int64_t lo = u0 * kAlign;
    if (split_columns) {
      const int64_t hi = std::min(n, u1 * kAlign);
      SgemmOnOneThread(trans_a, trans_b, m, hi - lo, k, alpha, a, lda, trans_b ? b + lo * ldb : b + lo, ldb, beta,
                       c + lo, ldc);
      if (block_done != nullptr) (*block_done)(0, m, lo, hi);
    } else {
      const int64_t hi = std::min(m, u1 * kAlign);
      SgemmOnOneThread(trans_a, trans_b, hi - lo, n, k, alpha, trans_a ? a + lo : a + lo * lda, lda, b, ldb, beta,
                       c + lo * ldc, ldc);
      if (block_done != nullptr) (*block_done)(lo, hi, 0, n);
    }
  });
}

}  // namespace kernels
}  // namespace tfpopef
