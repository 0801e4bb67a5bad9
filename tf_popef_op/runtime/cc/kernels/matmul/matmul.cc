// MatMul with numpy.matmul semantics: a 1-D A is a row vector [1,K] and a 1-D B a column
// vector [K,1], the added dim being dropped from the result; leading (batch) dims broadcast.
// Each batch entry is one SGEMM; the batch loop walks a BroadcastPlan whose "elements" are
// whole matrices. When B is shared by every batch entry and A's batches are contiguous
// ([..., M, K] x [K, N], the common dense-layer case) the batches are folded into M and a
// single SGEMM runs. float16 goes through the float32 kernel (fp16_adapter.h). The packed GEMM
// (packed_gemm_kernel.h) runs instead, float16 included, where it is the faster one: with one
// B for all batch entries (batches folded into M) or with A and B of the same batch dims.
// Also the internal op FusedMatMul (docs/popef.md, internal ops): inputs A, B, then a bias [N]
// (added to every row) when attr has_bias = 1, then Sum (the output's shape) when has_sum = 1;
// Y = activation(alpha·A·B + bias + Sum), applied by the epilogue (epilogue.h) to each SGEMM
// block; alpha (attr, default 1) is float32, so a float16 B may hold a column scale's products
// brought into float16's range by a power of two that alpha takes back.
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/matmul/packed_gemm_kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/epilogue.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

namespace tfpopef {
namespace kernels {
namespace {

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(BroadcastPlan<2> batch, int64_t m, int64_t n, int64_t k, bool fold_batch_into_m, float alpha,
               bool has_bias, bool has_sum, Epilogue epilogue)
      : batch_(std::move(batch)), m_(m), n_(n), k_(k), fold_(fold_batch_into_m), alpha_(alpha), has_bias_(has_bias),
        has_sum_(has_sum), epilogue_(epilogue) {}

  void Run(const KernelContext& ctx) const override {
    const float* a = static_cast<const float*>(ctx.inputs[0]);
    const float* b = static_cast<const float*>(ctx.inputs[1]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    const int64_t num_batches = batch_.num_runs * batch_.run_length();
    if (m_ == 0 || n_ == 0 || num_batches == 0) return;
    const float* bias = has_bias_ ? static_cast<const float*>(ctx.inputs[2]) : nullptr;
    const float* sum = has_sum_ ? static_cast<const float*>(ctx.inputs[has_bias_ ? 3 : 2]) : nullptr;
    const bool epilogue = bias != nullptr || sum != nullptr || !epilogue_.is_identity();
    // Rows [r0, r1), columns [c0, c1) of the output seen as [num_batches·M, N].
    auto finish = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      for (int64_t r = r0; r < r1; ++r)
        epilogue_.Apply(y + r * n_ + c0, c1 - c0, 0.0f, bias != nullptr ? bias + c0 : nullptr,
                        sum != nullptr ? sum + r * n_ + c0 : nullptr);
    };
    if (k_ == 0) {  // empty sum: zeros (not left to BLAS, which may skip the write)
      std::memset(y, 0, static_cast<size_t>(num_batches * m_ * n_) * sizeof(float));
      if (epilogue) finish(0, num_batches * m_, 0, n_);
      return;
    }
    if (fold_) {
      const GemmBlockFn block_done = finish;
      Sgemm(false, false, num_batches * m_, n_, k_, alpha_, a, k_, b, n_, 0.0f, y, n_, epilogue ? &block_done : nullptr);
      return;
    }
    const int64_t a_size = m_ * k_, b_size = k_ * n_, y_size = m_ * n_;
    const int64_t run = batch_.run_length();
    const int64_t sa = batch_.run_stride(0), sb = batch_.run_stride(1);
    ForEachRun(batch_, [&](int64_t out, const std::array<int64_t, 2>& off) {
      for (int64_t i = 0; i < run; ++i)
        Sgemm(false, false, m_, n_, k_, alpha_, a + (off[0] + i * sa) * a_size, k_, b + (off[1] + i * sb) * b_size,
              n_, 0.0f, y + (out + i) * y_size, n_);
    });
    if (epilogue) finish(0, num_batches * m_, 0, n_);
  }

 private:
  const BroadcastPlan<2> batch_;  // over the broadcast batch dims, in units of matrices
  const int64_t m_, n_, k_;
  const bool fold_;
  const float alpha_;
  const bool has_bias_, has_sum_;
  const Epilogue epilogue_;
};

// Checks the step (any float dtype: only shapes are read) and prepares its kernel.
std::unique_ptr<Kernel> CreateMatMulKernel(const KernelSpec& spec, bool fused) {
  const auto& a = spec.inputs[0].shape;
  const auto& b = spec.inputs[1].shape;
  if (a.empty() || b.empty())
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": MatMul operands must have rank >= 1, got " +
                                                 ShapeToString(a) + " and " + ShapeToString(b));
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  const int64_t m = a_vector ? 1 : a[a.size() - 2];
  const int64_t k = a.back();
  const int64_t kb = b_vector ? b[0] : b[b.size() - 2];
  const int64_t n = b_vector ? 1 : b.back();
  if (k != kb)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": inner dimensions differ: A " + ShapeToString(a) +
                                                 " has K = " + std::to_string(k) + " but B " + ShapeToString(b) +
                                                 " has K = " + std::to_string(kb));
  const std::vector<int64_t> a_batch(a.begin(), a.end() - (a_vector ? 1 : 2));
  const std::vector<int64_t> b_batch(b.begin(), b.end() - (b_vector ? 1 : 2));
  std::vector<int64_t> batch;
  if (!BroadcastShapes(a_batch, b_batch, &batch))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": batch dims of A " + ShapeToString(a) + " and B " +
                                                 ShapeToString(b) + " are not broadcastable");
  std::vector<int64_t> out = batch;
  if (!a_vector) out.push_back(m);
  if (!b_vector) out.push_back(n);
  CheckOutputShape(spec, 0, out);
  CheckBlasDim(spec, "M", m);
  CheckBlasDim(spec, "N", n);
  CheckBlasDim(spec, "K", k);

  BroadcastPlan<2> plan = MakeBroadcastPlan<2>(batch, {a_batch, b_batch}, spec.Where());
  const int64_t num_batches = Product(batch);
  const bool fold = plan.dims.size() == 1 && plan.run_stride(0) == 1 && plan.run_stride(1) == 0 &&
                    num_batches * m <= std::numeric_limits<blasint>::max();
  bool has_bias = false, has_sum = false;
  float alpha = 1.0f;
  Epilogue epilogue;
  if (fused) {
    alpha = spec.attrs.Float("alpha", 1.0f);
    const EpilogueInputs in = ReadEpilogueInputs(spec);
    has_bias = in.has_bias;
    has_sum = in.has_sum;
    if (has_bias && spec.inputs[2].shape != std::vector<int64_t>{n})
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": bias has shape " +
                                                   ShapeToString(spec.inputs[2].shape) + ", expected [" +
                                                   std::to_string(n) + "]");
    epilogue = ReadEpilogue(spec);
  } else if (spec.inputs.size() != 2) {
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": MatMul takes 2 inputs");
  }
  // The packed GEMM takes one B for every batch entry (the batches folded into M: rows of A and
  // Y follow on) or one B per batch entry of A (no broadcasting: attention's products).
  const bool one_b = !b_vector && Product(b_batch) == 1;
  if (one_b || (!a_vector && !b_vector && a_batch == b_batch)) {
    PackedGemmStep step;
    step.m = one_b ? num_batches * m : m;
    step.batches = one_b ? 1 : num_batches;
    step.n = n;
    step.k = k;
    step.alpha = alpha;
    step.bias_input = has_bias ? 2 : -1;
    step.sum_input = has_sum ? (has_bias ? 3 : 2) : -1;
    step.epilogue = epilogue;
    if (std::unique_ptr<Kernel> packed = MaybeCreatePackedGemm(spec, step)) return packed;
  }
  return WithFloat16Support(spec, [&](const KernelSpec&) {
    return std::make_unique<MatMulKernel>(plan, m, n, k, fold, alpha, has_bias, has_sum, epilogue);
  });
}

std::unique_ptr<Kernel> CreateMatMul(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateMatMulKernel(spec, false);
}

std::unique_ptr<Kernel> CreateFusedMatMul(const KernelSpec& spec) {
  CheckArity(spec, 2, 4, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateMatMulKernel(spec, true);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("MatMul", CreateMatMul);
TFPOPEF_REGISTER_KERNEL("FusedMatMul", CreateFusedMatMul);

}  // namespace kernels
}  // namespace tfpopef
