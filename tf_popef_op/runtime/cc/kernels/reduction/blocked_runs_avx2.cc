// The AVX2 build of AddBlockedRuns (blocked_runs.inc), compiled for that target whatever the
// build's -march (target_pragma.h), so it is entered only through BlockedRunsAdder() after the
// CPU check.
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {

#define ADD_BLOCKED_RUNS AddBlockedRunsAvx2
#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.inc"
#undef ADD_BLOCKED_RUNS

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
