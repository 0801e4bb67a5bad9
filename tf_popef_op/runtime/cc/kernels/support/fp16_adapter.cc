#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/support/constant_copies.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

constexpr size_t kScratchAlign = 64;  // KernelContext::scratch alignment; kept for every region

size_t AlignUp(size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

// Scratch layout (all regions 64-byte aligned, offsets fixed at prepare):
//   [input pointer table][output pointer table][float32 copy per float16 tensor][inner scratch]
// The pointer tables live in scratch so Run allocates nothing and stays thread-safe; constant
// inputs (weights: KernelSpec::constant_inputs) are widened once into ConstantCopies instead.
class Float16Adapter final : public Kernel {
 public:
  // `float32_spec`: the spec the inner kernel was prepared with (float16 tensors it widens itself
  // are still float16 there).
  Float16Adapter(const KernelSpec& spec, const KernelSpec& float32_spec, std::unique_ptr<Kernel> inner)
      : inner_(std::move(inner)) {
    size_t offset = 0;
    input_table_offset_ = offset;
    offset += AlignUp(spec.inputs.size() * sizeof(void*));
    output_table_offset_ = offset;
    offset += AlignUp(spec.outputs.size() * sizeof(void*));
    auto plan = [&](const std::vector<TensorDesc>& tensors, const std::vector<TensorDesc>& inner_view,
                    const std::vector<bool>& constant, std::vector<Widened>* out) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        if (tensors[i].dtype != DType::kFloat16 || inner_view[i].dtype == DType::kFloat16) continue;
        if (i < constant.size() && constant[i] && constants_.size() < kMaxConstants) {
          constants_.push_back({i, tensors[i].numel(), std::make_unique<ConstantCopies>()});
          continue;
        }
        out->push_back({i, tensors[i].numel(), offset});
        offset += AlignUp(static_cast<size_t>(tensors[i].numel()) * sizeof(float));
      }
    };
    plan(spec.inputs, float32_spec.inputs, spec.constant_inputs, &widened_inputs_);
    plan(spec.outputs, float32_spec.outputs, {}, &widened_outputs_);
    num_inputs_ = spec.inputs.size();
    num_outputs_ = spec.outputs.size();
    inner_scratch_offset_ = offset;
    scratch_bytes_ = offset + inner_->scratch_bytes();
  }

  size_t scratch_bytes() const override { return scratch_bytes_; }

  void Run(const KernelContext& ctx) const override {
    auto* scratch = static_cast<char*>(ctx.scratch);
    auto** inputs = reinterpret_cast<const void**>(scratch + input_table_offset_);
    auto** outputs = reinterpret_cast<void**>(scratch + output_table_offset_);
    for (size_t i = 0; i < num_inputs_; ++i) inputs[i] = ctx.inputs[i];
    for (size_t i = 0; i < num_outputs_; ++i) outputs[i] = ctx.outputs[i];
    for (const Widened& w : widened_inputs_) {
      auto* f32 = reinterpret_cast<float*>(scratch + w.scratch_offset);
      const auto* f16 = static_cast<const uint16_t*>(ctx.inputs[w.index]);
      ParallelFor(w.numel, kStreamingGrain,
                  [&](int64_t begin, int64_t end) { WidenHalfToFloat(f16 + begin, f32 + begin, end - begin); });
      inputs[w.index] = f32;
    }
    for (const Widened& w : widened_outputs_) outputs[w.index] = scratch + w.scratch_offset;
    ConstantCopies::Copy held[kMaxConstants];  // kept alive until the inner kernel is done
    for (size_t c = 0; c < constants_.size(); ++c) {
      const Constant& k = constants_[c];
      const auto* f16 = static_cast<const uint16_t*>(ctx.inputs[k.index]);
      held[c] = WidenedConstant(*k.copies, f16, k.numel);
      inputs[k.index] = held[c]->data();
    }

    inner_->Run(KernelContext{inputs, outputs, scratch + inner_scratch_offset_});

    for (const Widened& w : widened_outputs_) {
      const auto* f32 = reinterpret_cast<const float*>(scratch + w.scratch_offset);
      auto* f16 = static_cast<uint16_t*>(ctx.outputs[w.index]);
      ParallelFor(w.numel, kStreamingGrain,
                  [&](int64_t begin, int64_t end) { NarrowFloatToHalf(f32 + begin, f16 + begin, end - begin); });
    }
  }

 private:
  struct Widened {
    size_t index;           // input or output position
    int64_t numel;
    size_t scratch_offset;  // of its float32 copy
  };
  static constexpr size_t kMaxConstants = 8;  // more (none of the ops has them) use scratch
  struct Constant {
    size_t index;
    int64_t numel;
    std::unique_ptr<ConstantCopies> copies;  // mutable state of a const kernel: thread-safe
  };
  std::unique_ptr<Kernel> inner_;
  std::vector<Widened> widened_inputs_, widened_outputs_;
  std::vector<Constant> constants_;
  size_t num_inputs_ = 0, num_outputs_ = 0;
  size_t input_table_offset_ = 0, output_table_offset_ = 0, inner_scratch_offset_ = 0, scratch_bytes_ = 0;
};

bool HasFloat16(const std::vector<TensorDesc>& tensors) {
  for (const TensorDesc& t : tensors)
    if (t.dtype == DType::kFloat16) return true;
  return false;
}

bool SameDTypes(const std::vector<TensorDesc>& a, const std::vector<TensorDesc>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype) return false;
  return true;
}

// Float16 tensors of `tensors` become float32, except those at the `native` positions.
void WidenDTypes(std::vector<TensorDesc>* tensors, const std::vector<size_t>& native) {
  for (size_t i = 0; i < tensors->size(); ++i)
    if ((*tensors)[i].dtype == DType::kFloat16 && std::find(native.begin(), native.end(), i) == native.end())
      (*tensors)[i].dtype = DType::kFloat32;
}

}  // namespace

std::unique_ptr<Kernel> WithFloat16Support(const KernelSpec& spec, const KernelFactory& make_float32,
                                           const std::vector<size_t>& native_float16_inputs,
                                           const std::vector<size_t>& native_float16_outputs) {
  if (!HasFloat16(spec.inputs) && !HasFloat16(spec.outputs)) return make_float32(spec);
  KernelSpec float32_spec = spec;
  WidenDTypes(&float32_spec.inputs, native_float16_inputs);
  WidenDTypes(&float32_spec.outputs, native_float16_outputs);
  std::unique_ptr<Kernel> inner = make_float32(float32_spec);
  if (SameDTypes(spec.inputs, float32_spec.inputs) && SameDTypes(spec.outputs, float32_spec.outputs))
    return inner;  // every float16 tensor is native: nothing to widen or narrow
  return std::make_unique<Float16Adapter>(spec, float32_spec, std::move(inner));
}

ConstantCopies::Copy WidenedConstant(ConstantCopies& copies, const uint16_t* f16, int64_t n) {
  return copies.Get(f16, [&] {
    std::vector<float> f32(static_cast<size_t>(n));
    ParallelFor(n, kStreamingGrain,
                [&](int64_t begin, int64_t end) { WidenHalfToFloat(f16 + begin, f32.data() + begin, end - begin); });
    return f32;
  });
}

}  // namespace kernels
}  // namespace tfpopef
