// The AVX-512VL build of the Winograd transforms (nchwc_winograd_transforms.inc), compiled for that
// target whatever the build's -march (target_pragma.h): entered only through WinogradTransforms()
// after the CPU check.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_winograd.h"
#include "tf_popef_op/runtime/cc/kernels/support/target_pragma.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC diagnostic ignored "-Wpsabi"
#include <immintrin.h>

TFPOPEF_TARGET_BEGIN("avx2,fma,f16c,avx512f,avx512vl")

namespace tfpopef {
namespace kernels {
namespace {

#define TFPOPEF_WINOGRAD_F16C
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_winograd_transforms.inc"
#undef TFPOPEF_WINOGRAD_F16C

}  // namespace

const WinogradTransformFns kWinogradAvx512Transforms = {TransformsOf<float>(), TransformsOf<uint16_t>()};

}  // namespace kernels
}  // namespace tfpopef

TFPOPEF_TARGET_END()

#endif  // x86-64
