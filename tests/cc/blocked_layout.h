// The blocked activation layout of the NCHWc kernels, for their tests.
#pragma once

#include <cstdint>
#include <vector>

namespace tfpopef {
namespace test {

constexpr int64_t B = 8;

// NCHW [n, c, h, w] -> [n, c/8, h, w, 8].
inline std::vector<double> ToBlocked(const std::vector<double>& x, int64_t n, int64_t c, int64_t hw) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        y[static_cast<size_t>(((i * (c / B) + ch / B) * hw + p) * B + ch % B)] =
            x[static_cast<size_t>((i * c + ch) * hw + p)];
  return y;
}

}  // namespace test
}  // namespace tfpopef
