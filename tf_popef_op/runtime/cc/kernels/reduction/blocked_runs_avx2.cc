// The AVX2 builds of AddBlockedRuns and AddBlockedHalfRuns (blocked_runs.inc), compiled for that
// target whatever the build's -march (target_pragma.h), so they are entered only through
// BlockedRunsAdder() and BlockedHalfRunsAdder() after the CPU check.
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c")

namespace tfpopef {
namespace kernels {
namespace {

// 8 float16 (one 16-byte load) widened by F16C, exact.
struct HalfRunLoad {
  template <typename F8>
  void operator()(F8& v, const uint16_t* p) const {
    const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    __builtin_memcpy(&v, &w, sizeof(F8));
  }
};

}  // namespace

#define ADD_BLOCKED_RUNS AddBlockedRunsAvx2
#define ADD_BLOCKED_HALF_RUNS AddBlockedHalfRunsAvx2
#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.inc"
#undef ADD_BLOCKED_HALF_RUNS
#undef ADD_BLOCKED_RUNS

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
