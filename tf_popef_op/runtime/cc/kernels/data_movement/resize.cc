// Resize. The compiler turns the ONNX attributes (mode, coordinate_transformation_mode,
// nearest_mode, cubic_coeff_a, exclude_outside, scales or sizes) into per-axis tap tables, so
// the kernel only applies them; docs/popef.md §3 lists the attrs:
//   `mode`     "nearest": one tap per output index, any dtype (an index map);
//              "linear" / "cubic": float32 (float16 via float32), `taps` per output index;
//   `axes`     the axes that change (others are copied);
//   `taps`     taps per output index, one entry per listed axis;
//   `indices`  per listed axis, out_dim · taps source indices (clamped into the axis);
//   `weights`  same layout (linear/cubic only).
// Linear and cubic resizing is separable, so the axes are processed one after the other
// ([outer, in, inner] -> [outer, out, inner]) through two scratch buffers.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/data_movement/axis_index_map.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

namespace tfpopef {
namespace kernels {
namespace {

struct AxisPass {
  int64_t outer = 1, in = 1, out = 1, inner = 1, taps = 1;
  std::vector<int64_t> index;  // out · taps
  std::vector<float> weight;   // out · taps
};

class SeparableResizeKernel final : public Kernel {
 public:
  SeparableResizeKernel(std::vector<AxisPass> passes, size_t max_numel)
      : passes_(std::move(passes)), max_numel_(max_numel) {}

  size_t scratch_bytes() const override { return 2 * max_numel_ * sizeof(float); }

  void Run(const KernelContext& ctx) const override {
    const float* src = static_cast<const float*>(ctx.inputs[0]);
    float* buffers[2] = {static_cast<float*>(ctx.scratch), static_cast<float*>(ctx.scratch) + max_numel_};
    for (size_t p = 0; p < passes_.size(); ++p) {
      const AxisPass& a = passes_[p];
      float* dst = p + 1 == passes_.size() ? static_cast<float*>(ctx.outputs[0]) : buffers[p % 2];
      for (int64_t o = 0; o < a.outer; ++o) {
        const float* s = src + o * a.in * a.inner;
        float* d = dst + o * a.out * a.inner;
        for (int64_t j = 0; j < a.out; ++j) {
          float* row = d + j * a.inner;
          std::fill(row, row + a.inner, 0.0f);
          for (int64_t t = 0; t < a.taps; ++t) {
            const float w = a.weight[static_cast<size_t>(j * a.taps + t)];
            const float* srow = s + a.index[static_cast<size_t>(j * a.taps + t)] * a.inner;
            for (int64_t i = 0; i < a.inner; ++i) row[i] += w * srow[i];
          }
        }
      }
      src = dst;
    }
  }

 private:
  const std::vector<AxisPass> passes_;
  const size_t max_numel_;
};

struct ResizePlan {
  std::vector<int64_t> axes, taps, indices;
  std::vector<float> weights;
};

ResizePlan ReadPlan(const KernelSpec& spec, bool with_weights) {
  ResizePlan plan{spec.attrs.Ints("axes"), spec.attrs.Ints("taps"), spec.attrs.Ints("indices"), {}};
  if (with_weights) plan.weights = spec.attrs.Floats("weights");
  const auto& in = spec.inputs[0].shape;
  const auto& out = spec.outputs[0].shape;
  size_t expected = 0;
  bool ok = plan.axes.size() == plan.taps.size() && out.size() == in.size();
  for (size_t i = 0; ok && i < plan.axes.size(); ++i) {
    ok = plan.axes[i] >= 0 && plan.axes[i] < static_cast<int64_t>(in.size()) && plan.taps[i] >= 1;
    if (ok) expected += static_cast<size_t>(out[static_cast<size_t>(plan.axes[i])] * plan.taps[i]);
  }
  ok = ok && plan.indices.size() == expected && (!with_weights || plan.weights.size() == expected);
  for (size_t d = 0; ok && d < in.size(); ++d)
    ok = in[d] == out[d] || std::find(plan.axes.begin(), plan.axes.end(), static_cast<int64_t>(d)) != plan.axes.end();
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": the tap tables (axes/taps/indices" +
                                                 std::string(with_weights ? "/weights" : "") +
                                                 ") do not match input " + ShapeToString(in) + " and output " +
                                                 ShapeToString(out));
  return plan;
}

std::unique_ptr<Kernel> CreateFloat32Resize(const KernelSpec& spec) {
  const ResizePlan plan = ReadPlan(spec, true);
  std::vector<int64_t> shape = spec.inputs[0].shape;
  const auto& out = spec.outputs[0].shape;
  std::vector<AxisPass> passes;
  size_t max_numel = 0, offset = 0;
  for (size_t i = 0; i < plan.axes.size(); ++i) {
    const size_t d = static_cast<size_t>(plan.axes[i]);
    AxisPass a;
    a.outer = Product(shape, 0, d);
    a.in = shape[d];
    a.out = out[d];
    a.inner = Product(shape, d + 1, shape.size());
    a.taps = plan.taps[i];
    const size_t n = static_cast<size_t>(a.out * a.taps);
    a.index.assign(plan.indices.begin() + offset, plan.indices.begin() + offset + n);
    a.weight.assign(plan.weights.begin() + offset, plan.weights.begin() + offset + n);
    offset += n;
    for (int64_t s : a.index)
      if (s < 0 || s >= a.in)
        throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": tap index " + std::to_string(s) +
                                                     " is outside axis " + std::to_string(d) + " of size " +
                                                     std::to_string(a.in));
    shape[d] = out[d];
    max_numel = std::max(max_numel, static_cast<size_t>(Product(shape)));
    passes.push_back(std::move(a));
  }
  if (passes.empty()) {  // nothing changes: one identity pass keeps the kernel uniform
    AxisPass a;
    a.in = a.out = Product(shape);
    for (int64_t j = 0; j < a.out; ++j) a.index.push_back(j);
    a.weight.assign(static_cast<size_t>(a.out), 1.0f);
    passes.push_back(std::move(a));
  }
  return std::make_unique<SeparableResizeKernel>(std::move(passes), max_numel);
}

std::unique_ptr<Kernel> CreateResize(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const std::string mode = spec.attrs.String("mode");
  if (mode == "nearest") {
    const ResizePlan plan = ReadPlan(spec, false);
    const auto& in = spec.inputs[0].shape;
    const auto& out = spec.outputs[0].shape;
    std::vector<std::vector<int64_t>> tables(in.size());
    for (size_t d = 0; d < in.size(); ++d)
      for (int64_t o = 0; o < out[d]; ++o) tables[d].push_back(o);
    size_t offset = 0;
    for (size_t i = 0; i < plan.axes.size(); ++i) {
      if (plan.taps[i] != 1)
        throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": nearest resizing has one tap per index");
      auto& t = tables[static_cast<size_t>(plan.axes[i])];
      t.assign(plan.indices.begin() + offset, plan.indices.begin() + offset + t.size());
      offset += t.size();
    }
    return MakeAxisIndexMap(spec, std::move(tables), {});
  }
  if (mode != "linear" && mode != "cubic")
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": resize mode '" + mode +
                                               "' is not supported (nearest, linear, cubic)");
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32Resize);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Resize", CreateResize);

}  // namespace kernels
}  // namespace tfpopef
