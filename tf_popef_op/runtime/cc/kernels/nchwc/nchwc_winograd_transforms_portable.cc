// The portable build of the Winograd transforms (nchwc_winograd_transforms.inc, lowered for the
// build's -march), plus WinogradTransforms(), which picks this, the AVX2+FMA or the AVX-512 build.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_winograd.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

// The vector type is internal to this file (no caller passes it).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tfpopef {
namespace kernels {
namespace {

#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_winograd_transforms.inc"

}  // namespace

const WinogradTransformFns kWinogradPortableTransforms = {TransformsOf<float>(), TransformsOf<uint16_t>()};

const WinogradTransformFns& WinogradTransforms() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  switch (vmath::ActivePath()) {
    case vmath::SimdPath::kAvx512: return kWinogradAvx512Transforms;
    case vmath::SimdPath::kAvx2: return kWinogradAvx2Transforms;
    case vmath::SimdPath::kPortable: break;
  }
#endif
  return kWinogradPortableTransforms;
}

}  // namespace kernels
}  // namespace tfpopef
