// The portable builds of AddBlockedRuns (blocked_runs.inc, GCC vectors lowered to the build's
// baseline) and AddBlockedHalfRuns, plus BlockedRunsAdder() and BlockedHalfRunsAdder(), which pick
// them or the AVX2 builds at run time.
#include <algorithm>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {

#define ADD_BLOCKED_RUNS AddBlockedRunsPortable
#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.inc"
#undef ADD_BLOCKED_RUNS

// A batch at a time widened into L1, then the float32 loop on it: the same batches, so the same bits.
void AddBlockedHalfRunsPortable(const uint16_t* x, int64_t runs, double* acc) {
  constexpr int64_t lanes = 8;
  alignas(64) float batch[kBlockedRunsFloatBatch * lanes];
  for (int64_t j0 = 0; j0 < runs; j0 += kBlockedRunsFloatBatch) {
    const int64_t m = std::min(kBlockedRunsFloatBatch, runs - j0);
    WidenHalfToFloat(x + j0 * lanes, batch, m * lanes);
    AddBlockedRunsPortable(batch, m, acc);
  }
}

AddBlockedRunsFn BlockedRunsAdder() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return AddBlockedRunsAvx2;
#endif
  return AddBlockedRunsPortable;
}

AddBlockedHalfRunsFn BlockedHalfRunsAdder() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (vmath::UsesAvx2(vmath::ActivePath())) return AddBlockedHalfRunsAvx2;
#endif
  return AddBlockedHalfRunsPortable;
}

}  // namespace kernels
}  // namespace tfpopef
