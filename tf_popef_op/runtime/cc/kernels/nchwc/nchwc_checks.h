// Prepare-time reading and validation shared by the NCHW8c kernels (nchwc_conv.cc,
// nchwc_pool.cc): the 2-D window attributes and the blocked shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/nchwc/nchwc_tiles.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"

namespace tfpopef {
namespace kernels {

// A blocked tensor [N, C/8, H, W, 8].
inline void CheckBlocked(const KernelSpec& spec, const std::string& what, const std::vector<int64_t>& shape) {
  if (shape.size() != 5 || shape[4] != kNchwcBlock)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has shape " + ShapeToString(shape) +
                                                 ", expected a blocked tensor [N, C/8, H, W, 8]");
}

// kernel_shape, strides, dilations (2 values each) and pads [top, left, bottom, right] into g
// (whose h and w are set), and g.oh / g.ow from ONNX's output formula (floor division; the
// callers compare it with their output's shape).
inline void ReadNchwcWindow(const KernelSpec& spec, NchwcGeometry* g) {
  auto pair = [&](const std::string& name) {
    const std::vector<int64_t> v = spec.attrs.Ints(name);
    if (v.size() != 2)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute '" + name + "' has " +
                                                   std::to_string(v.size()) + " values, expected 2 (2-D window)");
    return v;
  };
  const auto k = pair("kernel_shape"), s = pair("strides"), d = pair("dilations");
  const std::vector<int64_t> pads = spec.attrs.Ints("pads");
  if (pads.size() != 4)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute 'pads' has " + std::to_string(pads.size()) +
                                                 " values, expected 4 [top, left, bottom, right]");
  if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1 || d[0] < 1 || d[1] < 1 || pads[0] < 0 || pads[1] < 0 ||
      pads[2] < 0 || pads[3] < 0)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": kernel_shape, strides and dilations must be >= 1 and pads >= 0");
  g->kh = k[0];
  g->kw = k[1];
  g->sh = s[0];
  g->sw = s[1];
  g->dh = d[0];
  g->dw = d[1];
  g->pad_top = pads[0];
  g->pad_left = pads[1];
  g->pad_bottom = pads[2];
  g->pad_right = pads[3];
  const int64_t span_h = g->dh * (g->kh - 1) + 1, span_w = g->dw * (g->kw - 1) + 1;
  const int64_t in_h = g->h + pads[0] + pads[2], in_w = g->w + pads[1] + pads[3];
  if (in_h < span_h || in_w < span_w)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": the window (" + std::to_string(span_h) + "x" +
                                                 std::to_string(span_w) + " with dilation) is larger than the padded "
                                                 "input (" + std::to_string(in_h) + "x" + std::to_string(in_w) + ")");
  g->oh = (in_h - span_h) / g->sh + 1;
  g->ow = (in_w - span_w) / g->sw + 1;
}

// The epilogue attributes as the NCHW8c tiles apply them: Relu and Clip in registers, any other
// activation afterwards (NchwcEpilogue::post); with `sigmoids_in_registers` (the direct
// convolution's tiles, nchwc_tiles.inc) Sigmoid, Swish, HardSigmoid and HardSwish in registers too.
inline NchwcEpilogue ReadNchwcEpilogue(const KernelSpec& spec, bool sigmoids_in_registers = false) {
  using R = NchwcEpilogue::InRegister;
  NchwcEpilogue e;
  const Epilogue read = ReadEpilogue(spec);
  e.lo = read.p0;
  e.hi = read.p1;
  switch (read.activation) {
    case Activation::kNone: return e;
    case Activation::kRelu: e.in_register = R::kRelu; return e;
    case Activation::kClip: e.in_register = R::kClip; return e;
    default: break;
  }
  if (sigmoids_in_registers) {
    switch (read.activation) {
      case Activation::kSigmoid: e.in_register = R::kSigmoid; return e;
      case Activation::kSwish: e.in_register = R::kSwish; return e;
      case Activation::kHardSigmoid: e.in_register = R::kHardSigmoid; return e;
      case Activation::kHardSwish: e.in_register = R::kHardSwish; return e;
      default: break;
    }
  }
  e.post = read;
  return e;
}

}  // namespace kernels
}  // namespace tfpopef
