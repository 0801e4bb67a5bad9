// The AVX2+FMA copy of FusedElementwise's block arithmetic (elementwise_program_ops.inc
// compiled for that target; see vector_math_avx2.cc for why every header comes before the
// target pragma). Entered only through kAvx2BlockOps after the CPU check.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/elementwise_program.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace tfpopef {
namespace kernels {
namespace elementwise {
namespace {

#include "tf_popef_op/runtime/cc/kernels/elementwise_program_ops.inc"

}  // namespace

const BlockOps kAvx2BlockOps = {BlockBinary, BlockUnary, BlockClip};

}  // namespace elementwise
}  // namespace kernels
}  // namespace tfpopef

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // x86-64
