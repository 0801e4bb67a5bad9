// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, op = optional transpose, A and B 2-D,
// C optional and unidirectionally broadcast to Y = [M, N]. Y is first filled with the
// broadcast C and then SGEMM accumulates into it with BLAS's beta, so no temporary is needed.
// When beta == 0 C is not read at all (BLAS semantics, as onnxruntime does), so a C holding
// inf/nan does not leak into Y. float16 goes through the float32 kernel (fp16_adapter.h).
// With A not transposed and C absent or a row [N] (a dense layer's bias), the product runs on
// the packed GEMM instead (packed_gemm_kernel.h), float16 included, where it is the faster one.
// Also the internal op FusedGemm (docs/popef.md, internal ops): inputs A, B, then C when attr
// has_bias = 1, then Sum [M, N] when has_sum = 1; Y = activation(Gemm(A, B, C) + Sum), the
// sum and activation applied by the epilogue (epilogue.h) to each SGEMM block of Y.
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

struct GemmParams {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0;  // stored row lengths of A and B
  bool use_c = false;
  bool has_c = false, has_sum = false;  // inputs present (has_c with beta == 0 leaves use_c false)
  Epilogue epilogue;
};

class GemmKernel final : public Kernel {
 public:
  GemmKernel(const GemmParams& p, BroadcastPlan<1> c_plan) : p_(p), c_plan_(std::move(c_plan)) {}

  void Run(const KernelContext& ctx) const override {
    const float* a = static_cast<const float*>(ctx.inputs[0]);
    const float* b = static_cast<const float*>(ctx.inputs[1]);
    float* y = static_cast<float*>(ctx.outputs[0]);
    if (p_.m == 0 || p_.n == 0) return;
    const int64_t numel = p_.m * p_.n;
    if (p_.use_c) {
      const float* c = static_cast<const float*>(ctx.inputs[2]);
      const int64_t run = c_plan_.run_length(), stride = c_plan_.run_stride(0);
      ForEachRun(c_plan_, [&](int64_t out, const std::array<int64_t, 1>& off) {
        if (stride == 1) {
          std::memcpy(y + out, c + off[0], static_cast<size_t>(run) * sizeof(float));
        } else {
          for (int64_t i = 0; i < run; ++i) y[out + i] = c[off[0]];
        }
      });
    }
    const float* sum = p_.has_sum ? static_cast<const float*>(ctx.inputs[p_.has_c ? 3 : 2]) : nullptr;
    const bool epilogue = sum != nullptr || !p_.epilogue.is_identity();
    if (p_.k == 0) {  // empty product: Y = beta * C, or 0
      if (!p_.use_c) std::memset(y, 0, static_cast<size_t>(numel) * sizeof(float));
      else if (p_.beta != 1.0f)
        for (int64_t i = 0; i < numel; ++i) y[i] *= p_.beta;
      if (epilogue) p_.epilogue.Apply(y, numel, 0.0f, nullptr, sum);
      return;
    }
    const GemmBlockFn block_done = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      for (int64_t r = r0; r < r1; ++r)
        p_.epilogue.Apply(y + r * p_.n + c0, c1 - c0, 0.0f, nullptr, sum != nullptr ? sum + r * p_.n + c0 : nullptr);
    };
    Sgemm(p_.trans_a, p_.trans_b, p_.m, p_.n, p_.k, p_.alpha, a, p_.lda, b, p_.ldb, p_.use_c ? p_.beta : 0.0f, y,
          p_.n, epilogue ? &block_done : nullptr);
  }

 private:
  const GemmParams p_;
  const BroadcastPlan<1> c_plan_;  // C -> [M, N]; unused without C
};

// Checks the step (any float dtype: only shapes are read) and prepares its kernel.
std::unique_ptr<Kernel> CreateGemmKernel(const KernelSpec& spec, bool fused) {
  const auto& a = spec.inputs[0].shape;
  const auto& b = spec.inputs[1].shape;
  if (a.size() != 2 || b.size() != 2)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": Gemm needs 2-D A and B, got A " + ShapeToString(a) +
                                                 " and B " + ShapeToString(b));
  GemmParams p;
  p.trans_a = CheckedFlag(spec, "transA");
  p.trans_b = CheckedFlag(spec, "transB");
  p.alpha = spec.attrs.Float("alpha");
  p.beta = spec.attrs.Float("beta");
  p.m = p.trans_a ? a[1] : a[0];
  p.k = p.trans_a ? a[0] : a[1];
  const int64_t kb = p.trans_b ? b[1] : b[0];
  p.n = p.trans_b ? b[0] : b[1];
  p.lda = a[1];
  p.ldb = b[1];
  if (p.k != kb)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": inner dimensions differ: op(A) of A " + ShapeToString(a) +
                    (p.trans_a ? " (transA=1)" : "") + " has K = " + std::to_string(p.k) + " but op(B) of B " +
                    ShapeToString(b) + (p.trans_b ? " (transB=1)" : "") + " has K = " + std::to_string(kb));
  const std::vector<int64_t> out = {p.m, p.n};
  CheckOutputShape(spec, 0, out);
  for (int64_t v : {a[0], a[1], b[0], b[1]}) CheckBlasDim(spec, "a dimension of A or B", v);

  if (fused) {
    const EpilogueInputs in = ReadEpilogueInputs(spec);
    p.has_c = in.has_bias;
    p.has_sum = in.has_sum;
    p.epilogue = ReadEpilogue(spec);
  } else {
    p.has_c = spec.inputs.size() == 3;
  }
  std::vector<int64_t> c_shape;
  if (p.has_c) {
    c_shape = spec.inputs[2].shape;
    if (c_shape.size() > 2 || !BroadcastsTo(c_shape, out))
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": C " + ShapeToString(c_shape) +
                                                   " cannot be broadcast to the output " + ShapeToString(out));
    p.use_c = p.beta != 0.0f;
  }
  const bool c_is_row =  // [N] or [1, N]: the packed GEMM's bias
      !p.use_c || (Product(c_shape) == p.n && (c_shape.size() == 1 || (c_shape.size() == 2 && c_shape[0] == 1)));
  if (!p.trans_a && c_is_row) {
    PackedGemmStep step;
    step.m = p.m;
    step.n = p.n;
    step.k = p.k;
    step.trans_b = p.trans_b;
    step.alpha = p.alpha;
    step.beta = p.beta;
    step.bias_input = p.use_c ? 2 : -1;
    step.sum_input = p.has_sum ? (p.has_c ? 3 : 2) : -1;
    step.epilogue = p.epilogue;
    if (std::unique_ptr<Kernel> packed = MaybeCreatePackedGemm(spec, step)) return packed;
  }
  BroadcastPlan<1> c_plan = MakeBroadcastPlan<1>(out, {c_shape}, spec.Where());
  return WithFloat16Support(spec, [&](const KernelSpec&) { return std::make_unique<GemmKernel>(p, c_plan); });
}

std::unique_ptr<Kernel> CreateGemm(const KernelSpec& spec) {
  CheckArity(spec, 2, 3, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateGemmKernel(spec, false);
}

std::unique_ptr<Kernel> CreateFusedGemm(const KernelSpec& spec) {
  CheckArity(spec, 2, 4, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateGemmKernel(spec, true);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Gemm", CreateGemm);
TFPOPEF_REGISTER_KERNEL("FusedGemm", CreateFusedGemm);

}  // namespace kernels
}  // namespace tfpopef
