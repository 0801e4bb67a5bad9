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
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/spatial_geometry.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

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

// Per output position along each spatial dim: the taps inside the input and (AveragePool's
// count_include_pad) inside the padded input. Computed once at prepare, so the run loops do
// only loads and compares/adds.
struct WindowTable {
  std::array<std::vector<WindowRange>, kMaxSpatialRank> valid, padded;

  explicit WindowTable(const SpatialGeometry& g) {
    for (size_t d = 0; d < kMaxSpatialRank; ++d)
      for (int64_t o = 0; o < g.out[d]; ++o) {
        const int64_t start = o * g.stride[d] - g.pad_begin[d];
        valid[d].push_back(Taps(start, g.kernel[d], g.dilation[d], 0, g.in[d]));
        padded[d].push_back(Taps(start, g.kernel[d], g.dilation[d], -g.pad_begin[d], g.in[d] + g.pad_end[d]));
      }
  }
};

// Planes (image × channel) per chunk of the intra-op pool: about kStreamingGrain taps each.
int64_t PlanesPerChunk(const SpatialGeometry& g) {
  return ItemsPerChunk(g.out_size() * g.kernel_size(), kStreamingGrain);
}

// The row path covers every 1-D/2-D pool with unit dilation (all CNN pools): each output row
// first combines its window's input rows column by column into a row buffer (a loop the
// compiler vectorizes), then each output combines its kernel-width run of that buffer. The
// generic path visits every tap of every window with index arithmetic, ~5x slower.
bool UsesRowPath(const SpatialGeometry& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.dilation[1] == 1 && g.dilation[2] == 1;
}

// Row-path scratch: one row buffer of in[2] elements per chunk.
template <typename T>
size_t RowBufferBytes(const SpatialGeometry& g, int64_t planes) {
  if (!UsesRowPath(g)) return 0;
  return static_cast<size_t>(ThreadPool::Global().NumChunks(planes, PlanesPerChunk(g)) * g.in[2]) * sizeof(T);
}

template <typename T>
inline bool IsNaN(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// Max over windows of one plane by rows. Same results as the generic path: the first tap
// (top-left) is kept if it is NaN, a later NaN never compares greater, a window with no
// input tap gives the lowest value. So the column maxima skip NaNs (a NaN in the buffer is
// replaced by any later row's value), and each window starts from its first tap read from
// the input itself.
template <typename T>
void MaxPlaneByRows(const SpatialGeometry& g, const WindowTable& windows, const T* xp, T* yp, T* cols) {
  T empty = std::numeric_limits<T>::lowest();
  if constexpr (std::numeric_limits<T>::has_infinity) empty = -std::numeric_limits<T>::infinity();
  const int64_t width = g.in[2];
  for (int64_t oh = 0; oh < g.out[1]; ++oh, yp += g.out[2]) {
    const WindowRange rh = windows.valid[1][oh];
    if (rh.count == 0) {
      std::fill(yp, yp + g.out[2], empty);
      continue;
    }
    const T* row = xp + (oh * g.stride[1] - g.pad_begin[1] + rh.first) * width;
    std::copy(row, row + width, cols);
    for (int64_t b = 1; b < rh.count; ++b) {
      const T* next = row + b * width;
      for (int64_t w = 0; w < width; ++w) cols[w] = next[w] > cols[w] || IsNaN(cols[w]) ? next[w] : cols[w];
    }
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      const WindowRange rw = windows.valid[2][ow];
      const int64_t first = ow * g.stride[2] - g.pad_begin[2] + rw.first;
      const T* c = cols + first;
      T best = rw.count > 0 ? row[first] : empty;
      for (int64_t k = 0; k < rw.count; ++k) best = c[k] > best ? c[k] : best;
      yp[ow] = best;
    }
  }
}

// Window sums of one plane by rows, divided by the tap count count_include_pad asks for.
inline void AveragePlaneByRows(const SpatialGeometry& g, const WindowTable& windows, bool count_include_pad,
                               const float* xp, float* yp, float* cols) {
  const int64_t width = g.in[2];
  for (int64_t oh = 0; oh < g.out[1]; ++oh, yp += g.out[2]) {
    const WindowRange rh = windows.valid[1][oh], ph = windows.padded[1][oh];
    std::fill(cols, cols + width, 0.0f);
    const float* row = xp + (oh * g.stride[1] - g.pad_begin[1] + rh.first) * width;
    for (int64_t b = 0; b < rh.count; ++b) {
      const float* next = row + b * width;
      for (int64_t w = 0; w < width; ++w) cols[w] += next[w];
    }
    // Outputs whose window lies inside the row, [lo, hi), all have kernel-width taps: their
    // sums are accumulated tap by tap across the row (vectorizable loops, same order of
    // additions as one output at a time) and divided by one count. Border outputs go one by one.
    const int64_t kw = g.kernel[2], stride = g.stride[2], pad = g.pad_begin[2];
    const int64_t lo = std::min(g.out[2], (pad + stride - 1) / stride);
    const int64_t hi = std::max(lo, std::min(g.out[2], width - kw + pad >= 0 ? (width - kw + pad) / stride + 1 : 0));
    for (int64_t ow = lo; ow < hi; ++ow) yp[ow] = 0.0f;
    for (int64_t k = 0; k < kw; ++k) {
      const float* c = cols + k - pad;
      for (int64_t ow = lo; ow < hi; ++ow) yp[ow] += c[ow * stride];
    }
    const int64_t inner_count = (count_include_pad ? ph.count : rh.count) * kw;
    if (inner_count > 0) {
      const float divisor = static_cast<float>(inner_count);
      for (int64_t ow = lo; ow < hi; ++ow) yp[ow] /= divisor;
    }
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      if (ow == lo && hi > lo) ow = hi;  // the interior is done
      if (ow >= g.out[2]) break;
      const WindowRange rw = windows.valid[2][ow], pw = windows.padded[2][ow];
      const float* c = cols + ow * stride - pad + rw.first;
      float sum = 0.0f;
      for (int64_t k = 0; k < rw.count; ++k) sum += c[k];
      const int64_t count = count_include_pad ? ph.count * pw.count : rh.count * rw.count;
      yp[ow] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
    }
  }
}

template <typename T>
class MaxPoolKernel final : public Kernel {
 public:
  MaxPoolKernel(const SpatialGeometry& g, int64_t planes, bool indices, bool column_major)
      : g_(g), windows_(g), planes_(planes), indices_(indices), column_major_(column_major),
        scratch_bytes_(indices ? 0 : RowBufferBytes<T>(g, planes)) {}

  size_t scratch_bytes() const override { return scratch_bytes_; }

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    int64_t* idx = indices_ ? static_cast<int64_t*>(ctx.outputs[1]) : nullptr;
    ParallelForChunks(planes_, PlanesPerChunk(g_), [&](int64_t chunk, int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        if (scratch_bytes_ > 0) {
          T* cols = static_cast<T*>(ctx.scratch) + chunk * g_.in[2];
          MaxPlaneByRows(g_, windows_, x + p * g_.in_size(), y + p * g_.out_size(), cols);
          continue;
        }
        if (idx) Plane<true>(x, y, idx, p);
        else Plane<false>(x, y, nullptr, p);
      }
    });
  }

 private:
  // The first tap in the window wins ties and is kept if it is NaN (a later NaN never
  // compares greater), whatever the split over threads.
  template <bool kIndices>
  void Plane(const T* x, T* y, int64_t* idx, int64_t p) const {
    const SpatialGeometry& g = g_;
    const int64_t in_size = g.in_size();
    const T* xp = x + p * in_size;
    int64_t out = p * g.out_size();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t sd = od * g.stride[0] - g.pad_begin[0];
      const WindowRange rd = windows_.valid[0][od];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t sh = oh * g.stride[1] - g.pad_begin[1];
        const WindowRange rh = windows_.valid[1][oh];
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++out) {
          const int64_t sw = ow * g.stride[2] - g.pad_begin[2];
          const WindowRange rw = windows_.valid[2][ow];
          T best = std::numeric_limits<T>::lowest();
          if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
          int64_t best_at = -1;
          for (int64_t a = rd.first; a < rd.first + rd.count; ++a)
            for (int64_t b = rh.first; b < rh.first + rh.count; ++b) {
              const int64_t row_at = ((sd + a * g.dilation[0]) * g.in[1] + sh + b * g.dilation[1]) * g.in[2] + sw;
              const T* row = xp + row_at;
              for (int64_t c = rw.first; c < rw.first + rw.count; ++c) {
                const T v = row[c * g.dilation[2]];
                if (best_at < 0 || v > best) {
                  best = v;
                  best_at = row_at + c * g.dilation[2];
                }
              }
            }
          y[out] = best;
          if constexpr (kIndices)
            idx[out] = best_at < 0 ? -1 : p * in_size + (column_major_ ? ColumnMajor(best_at) : best_at);
        }
      }
    }
  }

  // Row-major offset (d, h, w) in the plane -> d + h·D + w·D·H.
  int64_t ColumnMajor(int64_t at) const {
    const int64_t w = at % g_.in[2], h = (at / g_.in[2]) % g_.in[1], d = at / (g_.in[2] * g_.in[1]);
    return d + h * g_.in[0] + w * g_.in[0] * g_.in[1];
  }

  const SpatialGeometry g_;
  const WindowTable windows_;
  const int64_t planes_;
  const bool indices_, column_major_;
  const size_t scratch_bytes_;  // row buffers: the row path (no Indices output) only
};

class AveragePoolKernel final : public Kernel {
 public:
  AveragePoolKernel(const SpatialGeometry& g, int64_t planes, bool count_include_pad)
      : g_(g), windows_(g), planes_(planes), count_include_pad_(count_include_pad),
        scratch_bytes_(RowBufferBytes<float>(g, planes)) {}

  size_t scratch_bytes() const override { return scratch_bytes_; }

  void Run(const KernelContext& ctx) const override {
    const float* x = static_cast<const float*>(ctx.inputs[0]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    ParallelForChunks(planes_, PlanesPerChunk(g_), [&](int64_t chunk, int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        if (scratch_bytes_ > 0)
          AveragePlaneByRows(g_, windows_, count_include_pad_, x + p * g_.in_size(), y + p * g_.out_size(),
                             static_cast<float*>(ctx.scratch) + chunk * g_.in[2]);
        else
          Plane(x, y, p);
      }
    });
  }

 private:
  void Plane(const float* x, float* y, int64_t p) const {
    const SpatialGeometry& g = g_;
    const float* xp = x + p * g.in_size();
    float* yp = y + p * g.out_size();
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t sd = od * g.stride[0] - g.pad_begin[0];
      const WindowRange rd = windows_.valid[0][od], pd = windows_.padded[0][od];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t sh = oh * g.stride[1] - g.pad_begin[1];
        const WindowRange rh = windows_.valid[1][oh], ph = windows_.padded[1][oh];
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const int64_t sw = ow * g.stride[2] - g.pad_begin[2];
          const WindowRange rw = windows_.valid[2][ow], pw = windows_.padded[2][ow];
          float sum = 0.0f;
          for (int64_t a = rd.first; a < rd.first + rd.count; ++a)
            for (int64_t b = rh.first; b < rh.first + rh.count; ++b) {
              const float* row = xp + ((sd + a * g.dilation[0]) * g.in[1] + sh + b * g.dilation[1]) * g.in[2] + sw;
              for (int64_t c = rw.first; c < rw.first + rw.count; ++c) sum += row[c * g.dilation[2]];
            }
          const int64_t count =
              count_include_pad_ ? pd.count * ph.count * pw.count : rd.count * rh.count * rw.count;
          *yp++ = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        }
      }
    }
  }

  const SpatialGeometry g_;
  const WindowTable windows_;
  const int64_t planes_;
  const bool count_include_pad_;
  const size_t scratch_bytes_;  // row buffers of the row path
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
    ParallelFor(planes_, ItemsPerChunk(size_, kStreamingGrain), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float* xp = x + p * size_;
        if (max_) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t i = 0; i < size_; ++i) best = xp[i] > best || i == 0 ? xp[i] : best;
          y[p] = best;
        } else {
          // Four double accumulators: the additions overlap instead of waiting on each other.
          double acc[4] = {0.0, 0.0, 0.0, 0.0};
          int64_t i = 0;
          for (; i + 4 <= size_; i += 4)
            for (int k = 0; k < 4; ++k) acc[k] += xp[i + k];
          for (; i < size_; ++i) acc[0] += xp[i];
          const double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
          y[p] = size_ ? static_cast<float>(sum / static_cast<double>(size_)) : 0.0f;
        }
      }
    });
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
