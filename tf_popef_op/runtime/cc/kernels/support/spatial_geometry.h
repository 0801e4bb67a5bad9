// Window geometry shared by Conv, ConvTranspose and the pools: 1-, 2- and 3-D spatial
// attributes read from a step and padded to exactly 3 spatial dims (leading size-1 dims,
// stride 1, dilation 1, pad 0), so every kernel has one triple loop instead of a version per
// rank. The compiler writes every attribute explicitly (docs/popef.md §3): `kernel_shape`,
// `strides`, `dilations` (one per spatial dim) and `pads` (begins then ends).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"

namespace tfpopef {
namespace kernels {

constexpr size_t kMaxSpatialRank = 3;

struct SpatialGeometry {
  // Index 0..2 = depth, height, width after left-padding to 3 dims.
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad_begin{0, 0, 0}, pad_end{0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// `x_shape`/`y_shape` are [N, C, spatial...]; `kernel` the window's spatial dims (from the
// weights for convs, from `kernel_shape` for pools). Attributes not listed in `attrs_present`
// keep their neutral default; present ones must have one value per spatial dim.
inline SpatialGeometry ReadSpatialGeometry(const KernelSpec& spec, const std::vector<int64_t>& x_shape,
                                           const std::vector<int64_t>& y_shape, const std::vector<int64_t>& kernel) {
  if (x_shape.size() < 3 || x_shape.size() > 2 + kMaxSpatialRank || y_shape.size() != x_shape.size())
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": input " + ShapeToString(x_shape) + " and output " +
                                               ShapeToString(y_shape) +
                                               " must both be [N, C, spatial...] with 1 to 3 spatial dims");
  const size_t rank = x_shape.size() - 2, lead = kMaxSpatialRank - rank;
  auto read = [&](const std::string& name, size_t count) {
    std::vector<int64_t> v = spec.attrs.Ints(name);
    if (v.size() != count)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute '" + name + "' has " +
                                                   std::to_string(v.size()) + " values, expected " +
                                                   std::to_string(count) + " for " + std::to_string(rank) +
                                                   " spatial dims");
    return v;
  };
  if (kernel.size() != rank)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": window " + ShapeToString(kernel) + " has " +
                                                 std::to_string(kernel.size()) + " dims but the input has " +
                                                 std::to_string(rank) + " spatial dims");
  const auto strides = read("strides", rank), dilations = read("dilations", rank), pads = read("pads", 2 * rank);
  SpatialGeometry g;
  for (size_t i = 0; i < rank; ++i) {
    g.in[lead + i] = x_shape[2 + i];
    g.out[lead + i] = y_shape[2 + i];
    g.kernel[lead + i] = kernel[i];
    g.stride[lead + i] = strides[i];
    g.dilation[lead + i] = dilations[i];
    g.pad_begin[lead + i] = pads[i];
    g.pad_end[lead + i] = pads[rank + i];
    if (strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[rank + i] < 0)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": strides and dilations must be >= 1 and pads >= 0");
  }
  return g;
}

// Conv and ConvTranspose: W has the rank of X.
inline void CheckConvWeightsRank(const KernelSpec& spec, const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  if (w.size() != x.size())
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": weights " + ShapeToString(w) +
                                                 " must have the rank of the input " + ShapeToString(x));
}

// Conv and ConvTranspose: the optional third input is a bias of shape [m]; true when present.
inline bool HasConvBias(const KernelSpec& spec, int64_t m) {
  if (spec.inputs.size() < 3) return false;
  if (spec.inputs[2].shape != std::vector<int64_t>{m})
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": bias has shape " +
                                                 ShapeToString(spec.inputs[2].shape) + ", expected [" +
                                                 std::to_string(m) + "]");
  return true;
}

}  // namespace kernels
}  // namespace tfpopef
