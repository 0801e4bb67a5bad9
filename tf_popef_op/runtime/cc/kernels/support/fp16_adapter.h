// Gives a float32 kernel float16 support with one line:
//
//   return WithFloat16Support(spec, CreateFloat32Relu);
//
// If the step has float16 tensors, the float32 factory is called with a copy of the spec in
// which every float16 tensor is float32, and the resulting kernel is wrapped: at run time the
// wrapper widens float16 inputs into its scratch, runs the float32 kernel (whose float16
// outputs also land in scratch) and narrows the outputs with round-to-nearest-even. So a
// float16 op computes in float32 and rounds once, as docs/popef.md §3 requires.
// Tensors of other dtypes are passed through untouched. Constant float16 inputs (weights,
// KernelSpec::constant_inputs) are widened on the first run only and their float32 copies kept
// (per device) for the later ones: twice their bytes in host memory, one conversion pass less
// per run.
//
// `native_float16_inputs` lists inputs the float32 kernel reads as float16 itself (NchwcConv's
// weights, widened in registers as its tiles load them): they are neither copied nor widened,
// and stay float16 in the spec it is prepared with. `native_float16_outputs` likewise lists
// outputs it writes as float16 itself (rounding once, to nearest even, as the adapter would).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/constant_copies.h"

namespace tfpopef {
namespace kernels {

// Validate dtypes *before* calling this (so errors name the real dtype); `make_float32` sees
// the float32 view of the spec and does the shape checks.
std::unique_ptr<Kernel> WithFloat16Support(const KernelSpec& spec, const KernelFactory& make_float32,
                                           const std::vector<size_t>& native_float16_inputs = {},
                                           const std::vector<size_t>& native_float16_outputs = {});

// The float32 copy of the float16 constant `f16` (n values) held by `copies`: widened over the
// thread pool on the first run that sees it, reused by every later one. The adapter's constants
// and the kernels that keep float16 weights' copies themselves (NchwcConv,
// NchwcInvertedResidual) all take theirs from here.
ConstantCopies::Copy WidenedConstant(ConstantCopies& copies, const uint16_t* f16, int64_t n);

}  // namespace kernels
}  // namespace tfpopef
