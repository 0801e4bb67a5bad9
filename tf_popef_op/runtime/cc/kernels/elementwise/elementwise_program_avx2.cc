// The AVX2+FMA copy of FusedElementwise's block arithmetic (elementwise_program_ops.inc
// compiled for that target: target_pragma.h). Entered only through kAvx2BlockOps after the CPU
// check.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_program.h"
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

TFPOPEF_TARGET_BEGIN("avx2,fma")

namespace tfpopef {
namespace kernels {
namespace elementwise {
namespace {

#include "tf_popef_op/runtime/cc/kernels/elementwise/elementwise_program_ops.inc"

}  // namespace

const BlockOps kAvx2BlockOps = {BlockBinary, BlockUnary, BlockClip};

}  // namespace elementwise
}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
