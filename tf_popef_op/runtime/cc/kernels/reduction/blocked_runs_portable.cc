// The portable build of AddBlockedRuns (blocked_runs.inc, GCC vectors lowered to the build's
// baseline), plus BlockedRunsAdder(), which picks it or the AVX2 build at run time.
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {

#define ADD_BLOCKED_RUNS AddBlockedRunsPortable
#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.inc"
#undef ADD_BLOCKED_RUNS

AddBlockedRunsFn BlockedRunsAdder() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return AddBlockedRunsAvx2;
#endif
  return AddBlockedRunsPortable;
}

}  // namespace kernels
}  // namespace tfpopef
