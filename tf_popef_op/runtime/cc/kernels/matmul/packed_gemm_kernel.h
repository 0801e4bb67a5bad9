// MatMul, Gemm, FusedMatMul and FusedGemm on the packed GEMM (packed_gemm.h) when the shape is
// one it runs faster than BLAS; the ops' own factories (matmul.cc, gemm.cc) check the step and
// describe it here as one GEMM or a batch of them. A weight B (KernelSpec::constant_inputs) is
// packed on the first run that sees it and kept per weight address (each device has its own
// copy of the weights) for as long as the kernel lives; any other B (attention's products of
// two activations) is packed on every run into the kernel's scratch, a K·N pass against the
// M·K·N of the product.
//
// Which steps take it: TF_POPEF_GEMM, read at prepare:
//   auto (default)  the packed GEMM on the AVX2 and AVX-512 paths for a weight B with N >= 2
//                   and K >= 16 (float32) or any K (float16); BLAS for the rest
//                   (docs/benchmarks.md, "Packed GEMM", has the per-shape timings behind the rule)
//   packed          the packed GEMM wherever it applies (tests, benchmarks)
//   blas            never (OpenBLAS, for comparison)
#pragma once

#include <memory>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"

namespace tfpopef {
namespace kernels {

// `batches` products Y_i[M, N] = epilogue(A_i[M, K] · alpha·op(B_i) + beta·bias[N] + sum_i):
// input 0 is A (row-major, row length K, batches one after another), input 1 is B (each
// stored [K, N] or, with trans_b, [N, K], one after another), output 0 is Y (row length N).
struct PackedGemmStep {
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;
  bool trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  int bias_input = -1;  // input index of the bias [N] (any shape with N elements), or -1
  int sum_input = -1;   // input index of the sum (Y's shape), or -1
  Epilogue epilogue;
};

// The packed-GEMM kernel for `step`, or nullptr when BLAS should run it (an empty dimension, or
// TF_POPEF_GEMM's choice). spec's tensors are all float32 or all float16.
std::unique_ptr<Kernel> MaybeCreatePackedGemm(const KernelSpec& spec, const PackedGemmStep& step);

}  // namespace kernels
}  // namespace tfpopef
