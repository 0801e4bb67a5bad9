// Float16 kernels that compute in float32 without a float32 copy of whole tensors: float16
// elements are widened a piece at a time into a small float32 buffer (on the stack, in L1),
// the float32 code runs on it, and its result is narrowed once, to nearest even, straight
// into the float16 output. Same arithmetic and rounding as the float16 adapter
// (fp16_adapter.h), so the same bits, in one pass over memory instead of three.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"

namespace tfpopef {
namespace kernels {

// Elements per piece: 2 KiB of float32, so a few pieces stay in L1 together.
constexpr int64_t kHalfPiece = 512;

// y[i] = fn(x[i]) for i in [begin, end): fn(const float* x, float* y, int64_t n) maps one
// float32 piece (y may alias x, and does here).
template <typename Fn>
inline void MapHalfPieces(const uint16_t* x, uint16_t* y, int64_t begin, int64_t end, Fn&& fn) {
  alignas(64) float piece[kHalfPiece];
  for (int64_t i = begin; i < end; i += kHalfPiece) {
    const int64_t n = std::min(kHalfPiece, end - i);
    WidenHalfToFloat(x + i, piece, n);
    fn(static_cast<const float*>(piece), piece, n);
    NarrowFloatToHalf(piece, y + i, n);
  }
}

}  // namespace kernels
}  // namespace tfpopef
