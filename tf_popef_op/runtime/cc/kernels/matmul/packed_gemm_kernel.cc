#include "tf_popef_op/runtime/cc/kernels/matmul/packed_gemm_kernel.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/matmul/packed_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/constant_copies.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace {

enum class GemmChoice { kAuto, kPacked, kBlas };

GemmChoice GemmChoiceFromEnvironment(const KernelSpec& spec) {
  const char* text = std::getenv("TF_POPEF_GEMM");
  const std::string value = text == nullptr ? "" : text;
  if (value.empty() || value == "auto") return GemmChoice::kAuto;
  if (value == "packed") return GemmChoice::kPacked;
  if (value == "blas") return GemmChoice::kBlas;
  throw Error(ErrorCode::kInvalidArgument,
              spec.Where() + ": TF_POPEF_GEMM=\"" + value + "\": expected one of auto, packed, blas");
}

// TF_POPEF_GEMM=auto's rule, from the per-shape timings of docs/benchmarks.md ("Packed GEMM"):
// a weight B with K >= 16 in float32 (K = 16-96 measured 0.82-1.06x OpenBLAS's time, 0.71-0.79x
// where a Gelu epilogue is fused, which OpenBLAS runs as a second pass; K >= 128 0.5-0.95x),
// or any K in float16 (OpenBLAS runs behind the float16 adapter, which widens A and narrows Y
// through whole-tensor buffers); not an activation B (attention's products measured 1.0-1.3x:
// OpenBLAS's own packing is as good).
bool PackedIsFaster(const PackedGemmStep& step, bool b_is_weight, bool float16) {
  return vmath::UsesAvx2(vmath::ActivePath()) && b_is_weight && (step.k >= 16 || float16) && step.n >= 2;
}

// T: float, or uint16_t for a float16 step.
template <typename T>
class PackedGemmKernel final : public Kernel {
 public:
  PackedGemmKernel(const PackedGemmStep& step, bool b_is_weight)
      : step_(step),
        tiles_(PackedGemmTiles()),
        layout_(PackedLayoutFor(tiles_, step.k, step.n)),
        weights_(b_is_weight ? std::make_unique<ConstantCopies>() : nullptr) {}

  size_t scratch_bytes() const override {
    return weights_ != nullptr ? 0 : static_cast<size_t>(step_.batches * layout_.floats()) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const T* b = static_cast<const T*>(ctx.inputs[1]);
    ConstantCopies::Copy held;  // a weight's packed copy, kept alive for this run
    const float* panels;
    if (weights_ != nullptr) {
      held = weights_->Get(b, [&] {
        std::vector<float> packed(static_cast<size_t>(step_.batches * layout_.floats()));
        Pack(b, packed.data());
        return packed;
      });
      panels = held->data();
    } else {
      Pack(b, static_cast<float*>(ctx.scratch));
      panels = static_cast<const float*>(ctx.scratch);
    }
    PackedGemmArgs<T> args;
    args.m = step_.m;
    args.batches = step_.batches;
    args.a = static_cast<const T*>(ctx.inputs[0]);
    args.lda = step_.k;
    args.a_batch_stride = step_.m * step_.k;
    args.b = layout_;
    args.b_data = panels;
    if (step_.bias_input >= 0) args.bias = static_cast<const T*>(ctx.inputs[step_.bias_input]);
    args.bias_scale = step_.beta;
    if (step_.sum_input >= 0) args.sum = static_cast<const T*>(ctx.inputs[step_.sum_input]);
    args.c = static_cast<T*>(ctx.outputs[0]);
    args.ldc = step_.n;
    args.c_batch_stride = step_.m * step_.n;
    args.epilogue = step_.epilogue;
    RunPackedGemm(tiles_, args, ThreadPool::Global());
  }

 private:
  // Every batch entry of B into `out`, in the layout's panels.
  void Pack(const T* b, float* out) const {
    const int64_t ldb = step_.trans_b ? step_.k : step_.n, entry = step_.k * step_.n, floats = layout_.floats();
    ParallelFor(step_.batches, ItemsPerChunk(entry, kStreamingGrain), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        PackB(layout_, b + i * entry, ldb, step_.trans_b, step_.alpha, out + i * floats);
    });
  }

  const PackedGemmStep step_;
  const PackedGemmTileFns& tiles_;  // the path at prepare: the packing belongs to it
  const PackedLayout layout_;
  const std::unique_ptr<ConstantCopies> weights_;  // null unless B is a weight; thread-safe
};

}  // namespace

std::unique_ptr<Kernel> MaybeCreatePackedGemm(const KernelSpec& spec, const PackedGemmStep& step) {
  const GemmChoice choice = GemmChoiceFromEnvironment(spec);
  if (choice == GemmChoice::kBlas) return nullptr;
  if (step.m <= 0 || step.n <= 0 || step.k <= 0 || step.batches <= 0) return nullptr;
  const bool b_is_weight = spec.constant_inputs.size() > 1 && spec.constant_inputs[1];
  const bool float16 = spec.inputs[0].dtype == DType::kFloat16;
  if (choice == GemmChoice::kAuto && !PackedIsFaster(step, b_is_weight, float16)) return nullptr;
  if (float16) return std::make_unique<PackedGemmKernel<uint16_t>>(step, b_is_weight);
  return std::make_unique<PackedGemmKernel<float>>(step, b_is_weight);
}

}  // namespace kernels
}  // namespace tfpopef
