// Window pools over 1- to 3-D spatial dims, X [N, C, in...] -> Y [N, C, out...]:
// - MaxPool (float32, float16 via float32, int8/uint8/int32/int64) with dilations and an
//   optional int64 Indices output (flat index into X counted from the start of the tensor;
//   within a plane row-major, or column-major with attr storage_order = 1);
// - AveragePool (float32, float16 via float32) with `count_include_pad`.
// The compiler resolves auto_pad and ceil_mode into explicit pads and a static output shape,
// so a window may run past the padded input (ceil_mode); such positions are ignored. With
// count_include_pad the divisor counts the window positions inside [−pad_begin, in + pad_end),
// otherwise only those inside the input. Global pools are the same loop with one window per
// plane (GlobalAveragePool, GlobalMaxPool: any rank ≥ 2, float32/float16).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/spatial_geometry.h"

namespace tfpopef {
namespace kernels {
namespace {

// Clipped window range along one dim: positions start + i·dilation inside [lo, hi).
struct WindowRange {
  int64_t first = 0, count = 0;  // first in-range tap index and number of taps
};

WindowRange Taps(int64_t start, int64_t kernel, int64_t dilation, int64_t lo, int64_t hi) {
  WindowRange r;
  int64_t i = 0;
  while (i < kernel && start + i * dilation < lo) ++i;
  r.first = i;
  while (i < kernel && start + i * dilation < hi) ++i;
  r.count = i - r.first;
  return r;
}

template <typename T>
class MaxPoolKernel final : public Kernel {
 public:
  MaxPoolKernel(const SpatialGeometry& g, int64_t planes, bool indices, bool column_major)
      : g_(g), planes_(planes), indices_(indices), column_major_(column_major) {}

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    int64_t* idx = indices_ ? static_cast<int64_t*>(ctx.outputs[1]) : nullptr;
    const SpatialGeometry& g = g_;
    const int64_t in_size = g.in_size();
    for (int64_t p = 0; p < planes_; ++p) {
      const T* xp = x + p * in_size;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const int64_t sd = od * g.stride[0] - g.pad_begin[0];
        const WindowRange rd = Taps(sd, g.kernel[0], g.dilation[0], 0, g.in[0]);
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const int64_t sh = oh * g.stride[1] - g.pad_begin[1];
          const WindowRange rh = Taps(sh, g.kernel[1], g.dilation[1], 0, g.in[1]);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t sw = ow * g.stride[2] - g.pad_begin[2];
            const WindowRange rw = Taps(sw, g.kernel[2], g.dilation[2], 0, g.in[2]);
            T best = std::numeric_limits<T>::lowest();
            if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
            int64_t best_at = -1;
            for (int64_t a = rd.first; a < rd.first + rd.count; ++a)
              for (int64_t b = rh.first; b < rh.first + rh.count; ++b)
                for (int64_t c = rw.first; c < rw.first + rw.count; ++c) {
                  const int64_t at = ((sd + a * g.dilation[0]) * g.in[1] + sh + b * g.dilation[1]) * g.in[2] + sw +
                                     c * g.dilation[2];
                  if (best_at < 0 || xp[at] > best) {
                    best = xp[at];
                    best_at = at;
                  }
                }
            *y++ = best;
            if (idx) *idx++ = best_at < 0 ? -1 : p * in_size + (column_major_ ? ColumnMajor(best_at) : best_at);
          }
        }
      }
    }
  }

 private:
  // Row-major offset (d, h, w) in the plane -> d + h·D + w·D·H.
  int64_t ColumnMajor(int64_t at) const {
    const int64_t w = at % g_.in[2], h = (at / g_.in[2]) % g_.in[1], d = at / (g_.in[2] * g_.in[1]);
    return d + h * g_.in[0] + w * g_.in[0] * g_.in[1];
  }

  const SpatialGeometry g_;
  const int64_t planes_;
  const bool indices_, column_major_;
};

class AveragePoolKernel final : public Kernel {
 public:
  AveragePoolKernel(const SpatialGeometry& g, int64_t planes, bool count_include_pad)
      : g_(g), planes_(planes), count_include_pad_(count_include_pad) {}

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    const SpatialGeometry& g = g_;
    const int64_t in_size = g.in_size();
    for (int64_t p = 0; p < planes_; ++p) {
      const float* xp = x + p * in_size;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const int64_t sd = od * g.stride[0] - g.pad_begin[0];
        const WindowRange rd = Taps(sd, g.kernel[0], g.dilation[0], 0, g.in[0]);
        const WindowRange pd = Taps(sd, g.kernel[0], g.dilation[0], -g.pad_begin[0], g.in[0] + g.pad_end[0]);
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const int64_t sh = oh * g.stride[1] - g.pad_begin[1];
          const WindowRange rh = Taps(sh, g.kernel[1], g.dilation[1], 0, g.in[1]);
          const WindowRange ph = Taps(sh, g.kernel[1], g.dilation[1], -g.pad_begin[1], g.in[1] + g.pad_end[1]);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t sw = ow * g.stride[2] - g.pad_begin[2];
            const WindowRange rw = Taps(sw, g.kernel[2], g.dilation[2], 0, g.in[2]);
            const WindowRange pw = Taps(sw, g.kernel[2], g.dilation[2], -g.pad_begin[2], g.in[2] + g.pad_end[2]);
            float sum = 0.0f;
            for (int64_t a = rd.first; a < rd.first + rd.count; ++a)
              for (int64_t b = rh.first; b < rh.first + rh.count; ++b) {
                const float* row =
                    xp + ((sd + a * g.dilation[0]) * g.in[1] + sh + b * g.dilation[1]) * g.in[2] + sw;
                for (int64_t c = rw.first; c < rw.first + rw.count; ++c) sum += row[c * g.dilation[2]];
              }
            const int64_t count =
                count_include_pad_ ? pd.count * ph.count * pw.count : rd.count * rh.count * rw.count;
            *y++ = count > 0 ? sum / static_cast<float>(count) : 0.0f;
          }
        }
      }
    }
  }

 private:
  const SpatialGeometry g_;
  const int64_t planes_;
  const bool count_include_pad_;
};

// Output shape implied by explicit pads: floor((in + pads − span) / stride) + 1, except that
// the compiler may have added one more window for ceil_mode; both are accepted here, the
// kernel clips windows either way.
void CheckPoolOutput(const KernelSpec& spec, const SpatialGeometry& g, size_t index) {
  const auto& x = spec.inputs[0].shape;
  const auto& y = spec.outputs[index].shape;
  bool ok = y.size() == x.size() && y[0] == x[0] && y[1] == x[1];
  for (size_t d = 0; ok && d < kMaxSpatialRank; ++d) {
    const int64_t span = g.dilation[d] * (g.kernel[d] - 1) + 1;
    const int64_t floor_out = (g.in[d] + g.pad_begin[d] + g.pad_end[d] - span) / g.stride[d] + 1;
    ok = g.out[d] == floor_out || g.out[d] == floor_out + 1;
  }
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output " + std::to_string(index) + " has shape " +
                                                 ShapeToString(y) + ", which the window attributes do not imply for "
                                                 "input " + ShapeToString(x));
}

SpatialGeometry PoolGeometry(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  SpatialGeometry g = ReadSpatialGeometry(spec, x, spec.outputs[0].shape, spec.attrs.Ints("kernel_shape"));
  CheckPoolOutput(spec, g, 0);
  return g;
}

std::unique_ptr<Kernel> CreateFloat32MaxPool(const KernelSpec& spec) {
  const SpatialGeometry g = PoolGeometry(spec);
  const bool indices = spec.outputs.size() == 2;
  const bool column_major = CheckedFlag(spec, "storage_order");
  const int64_t planes = spec.inputs[0].shape[0] * spec.inputs[0].shape[1];
  if (indices) {
    CheckDType(spec, "output 1 (Indices)", spec.outputs[1].dtype, {DType::kInt64});
    CheckOutputShape(spec, 1, spec.outputs[0].shape);
  }
  switch (spec.inputs[0].dtype) {
    case DType::kFloat32: return std::make_unique<MaxPoolKernel<float>>(g, planes, indices, column_major);
    case DType::kInt8: return std::make_unique<MaxPoolKernel<int8_t>>(g, planes, indices, column_major);
    case DType::kUInt8: return std::make_unique<MaxPoolKernel<uint8_t>>(g, planes, indices, column_major);
    case DType::kInt32: return std::make_unique<MaxPoolKernel<int32_t>>(g, planes, indices, column_major);
    case DType::kInt64: return std::make_unique<MaxPoolKernel<int64_t>>(g, planes, indices, column_major);
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

std::unique_ptr<Kernel> CreateMaxPool(const KernelSpec& spec) {
  if (spec.inputs.size() != 1 || spec.outputs.empty() || spec.outputs.size() > 2)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expects 1 input and 1..2 outputs");
  const std::initializer_list<DType> types = {DType::kFloat32, DType::kFloat16, DType::kInt8, DType::kUInt8,
                                              DType::kInt32, DType::kInt64};
  CheckDType(spec, "input 0", spec.inputs[0].dtype, types);
  if (spec.outputs[0].dtype != spec.inputs[0].dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output 0 must have the input's dtype");
  return WithFloat16Support(spec, CreateFloat32MaxPool);
}

std::unique_ptr<Kernel> CreateFloat32AveragePool(const KernelSpec& spec) {
  const SpatialGeometry g = PoolGeometry(spec);
  return std::make_unique<AveragePoolKernel>(g, spec.inputs[0].shape[0] * spec.inputs[0].shape[1],
                                             CheckedFlag(spec, "count_include_pad"));
}

std::unique_ptr<Kernel> CreateAveragePool(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32AveragePool);
}

// Global pools: one window covering each [N, C] plane of any rank >= 2.
class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(int64_t planes, int64_t plane_size, bool max) : planes_(planes), size_(plane_size), max_(max) {}

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    for (int64_t p = 0; p < planes_; ++p) {
      const float* xp = x + p * size_;
      if (max_) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < size_; ++i) best = xp[i] > best || i == 0 ? xp[i] : best;
        y[p] = best;
      } else {
        double sum = 0.0;
        for (int64_t i = 0; i < size_; ++i) sum += xp[i];
        y[p] = size_ ? static_cast<float>(sum / static_cast<double>(size_)) : 0.0f;
      }
    }
  }

 private:
  const int64_t planes_, size_;
  const bool max_;
};

template <bool kMax>
std::unique_ptr<Kernel> CreateFloat32GlobalPool(const KernelSpec& spec) {
  const auto& x = spec.inputs[0].shape;
  if (x.size() < 2)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + ShapeToString(x) + " must be [N, C, ...]");
  std::vector<int64_t> out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  CheckOutputShape(spec, 0, out);
  return std::make_unique<GlobalPoolKernel>(x[0] * x[1], Product(x, 2, x.size()), kMax);
}

template <bool kMax>
std::unique_ptr<Kernel> CreateGlobalPool(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32GlobalPool<kMax>);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("MaxPool", CreateMaxPool);
TFPOPEF_REGISTER_KERNEL("AveragePool", CreateAveragePool);
TFPOPEF_REGISTER_KERNEL("GlobalMaxPool", CreateGlobalPool<true>);
TFPOPEF_REGISTER_KERNEL("GlobalAveragePool", CreateGlobalPool<false>);

}  // namespace kernels
}  // namespace tfpopef
