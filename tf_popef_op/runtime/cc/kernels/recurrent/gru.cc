// ONNX GRU (opset 7-22): all directions, layouts 0/1, linear_before_reset 0/1, clip, any of the
// ONNX gate activations; no sequence_lens (see lstm.cc). Gate order z, r, h as in ONNX.
//
// Inputs (only the present ones, flags say which): X, W, R [, B] [, initial_h].
// Outputs (flags say which are present): [Y] [, Y_h].
// X·Wᵀ for all time steps is one SGEMM per direction; per step H·R_zrᵀ is one SGEMM and the
// candidate's recurrent product one more ((r⊙H)·R_hᵀ, or r⊙(H·R_hᵀ + Rb_h) with
// linear_before_reset). float16 goes through the float32 kernel (fp16_adapter.h).
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/recurrent/recurrent.h"
#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

namespace tfpopef {
namespace kernels {
namespace {

struct GruParams : RecurrentParams {
  bool linear_before_reset = false;
  std::vector<ActivationFunction> act;  // f, g per direction
};

class GruKernel final : public Kernel {
 public:
  explicit GruKernel(GruParams p) : p_(std::move(p)) {}

  size_t scratch_bytes() const override {
    const auto& l = p_.lay;
    // X·Wᵀ [seq*batch, 3H], H·R_zrᵀ [batch, 2H], candidate product [batch, H], r⊙H [batch, H],
    // r [batch, H], H [batch, H]
    return static_cast<size_t>(l.seq * l.batch * 3 * l.hidden + l.batch * 6 * l.hidden) * sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const auto& l = p_.lay;
    const int64_t H = l.hidden, B = l.batch, T = l.seq, G = 3 * H;
    float* xw = static_cast<float*>(ctx.scratch);
    float* hzr = xw + T * B * G;
    float* hh = hzr + B * 2 * H;
    float* rh = hh + B * H;
    float* rgate = rh + B * H;
    float* h = rgate + B * H;
    const float* x = In(ctx, 0);
    for (int64_t d = 0; d < l.dirs; ++d) {
      const float* w = In(ctx, 1) + d * G * p_.input_size;
      const float* r = In(ctx, 2) + d * G * H;
      const float* r_h = r + 2 * H * H;  // rows of the candidate gate
      const float* bias = p_.in_b >= 0 ? In(ctx, p_.in_b) + d * 2 * G : nullptr;
      const ActivationFunction& f = p_.act[2 * d];
      const ActivationFunction& g = p_.act[2 * d + 1];
      if (T * B > 0 && p_.input_size > 0)
        Sgemm(false, true, T * B, G, p_.input_size, 1.0f, x, p_.input_size, w, p_.input_size, 0.0f, xw, G);
      else
        std::memset(xw, 0, static_cast<size_t>(T * B * G) * sizeof(float));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t k = 0; k < H; ++k)
          h[b * H + k] = p_.in_h0 >= 0 ? In(ctx, p_.in_h0)[l.StateOffset(d, b) + k] : 0.0f;
      const bool backward = p_.reverse_only || d == 1;
      auto wb = [&](int64_t j) { return bias ? bias[j] : 0.0f; };
      auto rb = [&](int64_t j) { return bias ? bias[G + j] : 0.0f; };
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = backward ? T - 1 - step : step;
        if (H > 0) Sgemm(false, true, B, 2 * H, H, 1.0f, h, H, r, H, 0.0f, hzr, 2 * H);
        for (int64_t b = 0; b < B; ++b) {
          const float* xg = xw + l.XRow(t, b) * G;
          for (int64_t k = 0; k < H; ++k) {
            const float rv = f(ClipGate(xg[H + k] + hzr[b * 2 * H + H + k] + wb(H + k) + rb(H + k), p_.clip));
            rgate[b * H + k] = rv;
            rh[b * H + k] = rv * h[b * H + k];
          }
        }
        // linear_before_reset: H·R_hᵀ, then scaled by r; otherwise (r⊙H)·R_hᵀ.
        if (H > 0) Sgemm(false, true, B, H, H, 1.0f, p_.linear_before_reset ? h : rh, H, r_h, H, 0.0f, hh, H);
        for (int64_t b = 0; b < B; ++b) {
          const float* xg = xw + l.XRow(t, b) * G;
          float* hb = h + b * H;
          for (int64_t k = 0; k < H; ++k) {
            const float z = f(ClipGate(xg[k] + hzr[b * 2 * H + k] + wb(k) + rb(k), p_.clip));
            const float rec = p_.linear_before_reset ? rgate[b * H + k] * (hh[b * H + k] + rb(2 * H + k))
                                                     : hh[b * H + k] + rb(2 * H + k);
            const float cand = g(ClipGate(xg[2 * H + k] + wb(2 * H + k) + rec, p_.clip));
            hb[k] = (1.0f - z) * cand + z * hb[k];
          }
          if (p_.out_y >= 0) std::memcpy(Out(ctx, p_.out_y) + l.YOffset(t, d, b), hb, H * sizeof(float));
        }
      }
      if (p_.out_yh >= 0)
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(Out(ctx, p_.out_yh) + l.StateOffset(d, b), h + b * H, H * sizeof(float));
    }
  }

 private:
  static const float* In(const KernelContext& ctx, int i) { return static_cast<const float*>(ctx.inputs[i]); }
  static float* Out(const KernelContext& ctx, int i) { return static_cast<float*>(ctx.outputs[i]); }
  const GruParams p_;
};

std::unique_ptr<Kernel> CreateFloat32Gru(const KernelSpec& spec) {
  GruParams p;
  ParseRecurrent(spec, 3, "a GRU dimension", p);
  p.linear_before_reset = CheckedFlag(spec, "linear_before_reset");
  p.act = GateActivations(spec, 2, static_cast<size_t>(p.lay.dirs));
  return std::make_unique<GruKernel>(std::move(p));
}

std::unique_ptr<Kernel> CreateGru(const KernelSpec& spec) {
  CheckArity(spec, 3, 5, spec.outputs.size());
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32Gru);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("GRU", CreateGru);

}  // namespace kernels
}  // namespace tfpopef
