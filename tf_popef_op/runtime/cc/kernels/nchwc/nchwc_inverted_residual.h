// NchwcInvertedResidual's choices that its tests read (nchwc_inverted_residual.cc has the op).
#pragma once

#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace tfpopef {
namespace kernels {

// Whether the op prepared for `spec` (float16 X and Y) keeps E and D in float32 band buffers, so
// that its result is the float32 steps' on the same values, rounded once, instead of the float16
// steps' (the rule and why: nchwc_inverted_residual.cc, PlanNchwcInvertedResidual).
bool NchwcInvertedResidualFloatBands(const KernelSpec& spec);

}  // namespace kernels
}  // namespace tfpopef
