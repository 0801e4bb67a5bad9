// Bulk float16 <-> float32 conversion for kernels (the float16 adapter, Cast).
//
// Same results as core/half.h (round to nearest even), but uses the CPU's F16C instructions
// when it has them (checked once), which is ~10x faster than the portable code. That matters
// because a float16 op widens every operand on every run, weights included. The one
// difference: a signaling NaN comes out of widening as a quiet NaN (IEEE conversion
// semantics) instead of keeping its signaling bit; every other value is bit-identical.
#pragma once

#include <cstdint>

namespace tfpopef {
namespace kernels {

void WidenHalfToFloat(const uint16_t* src, float* dst, int64_t n);
void NarrowFloatToHalf(const float* src, uint16_t* dst, int64_t n);

// True when the F16C path is in use (reported by the tests).
bool HalfConversionUsesF16C();

}  // namespace kernels
}  // namespace tfpopef
