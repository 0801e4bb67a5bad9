// ONNX LSTM (opset 7-22): all directions, layouts 0/1, peepholes, clip, input_forget, any of
// the ONNX gate activations; no sequence_lens (the compiler drops it when it is constant and
// covers every sequence fully, and refuses it otherwise). Gate order i, o, f, c as in ONNX.
//
// Inputs (only the present ones, flags say which): X, W, R [, B] [, initial_h] [, initial_c]
// [, P]. Outputs (flags say which are present): [Y] [, Y_h] [, Y_c].
// X·Wᵀ for all time steps is one SGEMM per direction; each step adds H·Rᵀ with one more SGEMM.
// float16 goes through the float32 kernel (fp16_adapter.h).
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/recurrent/recurrent.h"
#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"

namespace tfpopef {
namespace kernels {
namespace {

struct LstmParams : RecurrentParams {
  bool input_forget = false;
  int in_c0 = -1, in_p = -1;        // input index or -1
  int out_yc = -1;                  // output index or -1
  std::vector<ActivationFunction> act;  // f, g, h per direction
};

class LstmKernel final : public Kernel {
 public:
  explicit LstmKernel(LstmParams p) : p_(std::move(p)) {}

  size_t scratch_bytes() const override {
    const auto& l = p_.lay;
    // X·Wᵀ [seq*batch, 4H], H·Rᵀ [batch, 4H], H and C [batch, H]
    return static_cast<size_t>(l.seq * l.batch * 4 * l.hidden + l.batch * 4 * l.hidden + 2 * l.batch * l.hidden) *
           sizeof(float);
  }

  void Run(const KernelContext& ctx) const override {
    const auto& l = p_.lay;
    const int64_t H = l.hidden, B = l.batch, T = l.seq, G = 4 * H;
    float* xw = static_cast<float*>(ctx.scratch);
    float* hr = xw + T * B * G;
    float* h = hr + B * G;
    float* c = h + B * H;
    const float* x = In(ctx, 0);
    for (int64_t d = 0; d < l.dirs; ++d) {
      const float* w = In(ctx, 1) + d * G * p_.input_size;
      const float* r = In(ctx, 2) + d * G * H;
      const float* bias = p_.in_b >= 0 ? In(ctx, p_.in_b) + d * 2 * G : nullptr;
      const float* peep = p_.in_p >= 0 ? In(ctx, p_.in_p) + d * 3 * H : nullptr;
      const ActivationFunction& f = p_.act[3 * d];
      const ActivationFunction& g = p_.act[3 * d + 1];
      const ActivationFunction& hact = p_.act[3 * d + 2];
      if (T * B > 0 && p_.input_size > 0)
        Sgemm(false, true, T * B, G, p_.input_size, 1.0f, x, p_.input_size, w, p_.input_size, 0.0f, xw, G);
      else
        std::memset(xw, 0, static_cast<size_t>(T * B * G) * sizeof(float));
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t k = 0; k < H; ++k) {
          h[b * H + k] = p_.in_h0 >= 0 ? In(ctx, p_.in_h0)[l.StateOffset(d, b) + k] : 0.0f;
          c[b * H + k] = p_.in_c0 >= 0 ? In(ctx, p_.in_c0)[l.StateOffset(d, b) + k] : 0.0f;
        }
      }
      const bool backward = p_.reverse_only || d == 1;
      for (int64_t step = 0; step < T; ++step) {
        const int64_t t = backward ? T - 1 - step : step;
        if (H > 0) Sgemm(false, true, B, G, H, 1.0f, h, H, r, H, 0.0f, hr, G);
        for (int64_t b = 0; b < B; ++b) {
          const float* xg = xw + l.XRow(t, b) * G;
          const float* hg = hr + b * G;
          float* hb = h + b * H;
          float* cb = c + b * H;
          for (int64_t k = 0; k < H; ++k) {
            auto gate = [&](int64_t which) {  // 0 i, 1 o, 2 f, 3 c
              const int64_t j = which * H + k;
              float v = xg[j] + hg[j];
              if (bias) v += bias[j] + bias[G + j];
              return v;
            };
            const float c_prev = cb[k];
            const float gi = gate(0) + (peep ? peep[k] * c_prev : 0.0f);
            const float i_gate = f(ClipGate(gi, p_.clip));
            float f_gate;
            if (p_.input_forget) {
              f_gate = 1.0f - i_gate;
            } else {
              const float gf = gate(2) + (peep ? peep[2 * H + k] * c_prev : 0.0f);
              f_gate = f(ClipGate(gf, p_.clip));
            }
            const float c_new = f_gate * c_prev + i_gate * g(ClipGate(gate(3), p_.clip));
            const float go = gate(1) + (peep ? peep[H + k] * c_new : 0.0f);
            const float o_gate = f(ClipGate(go, p_.clip));
            cb[k] = c_new;
            hb[k] = o_gate * hact(c_new);
          }
          if (p_.out_y >= 0) std::memcpy(Out(ctx, p_.out_y) + l.YOffset(t, d, b), hb, H * sizeof(float));
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        if (p_.out_yh >= 0) std::memcpy(Out(ctx, p_.out_yh) + l.StateOffset(d, b), h + b * H, H * sizeof(float));
        if (p_.out_yc >= 0) std::memcpy(Out(ctx, p_.out_yc) + l.StateOffset(d, b), c + b * H, H * sizeof(float));
      }
    }
  }

 private:
  static const float* In(const KernelContext& ctx, int i) { return static_cast<const float*>(ctx.inputs[i]); }
  static float* Out(const KernelContext& ctx, int i) { return static_cast<float*>(ctx.outputs[i]); }
  const LstmParams p_;
};

std::unique_ptr<Kernel> CreateFloat32Lstm(const KernelSpec& spec) {
  LstmParams p;
  ParseRecurrent(spec, 4, "an LSTM dimension", p, {{"has_initial_c", &p.in_c0}, {"has_peephole", &p.in_p}},
                 {{"output_y_c", &p.out_yc}});
  p.input_forget = CheckedFlag(spec, "input_forget");
  const int64_t D = p.lay.dirs, H = p.lay.hidden;
  if (p.in_c0 >= 0) CheckShape(spec, "initial_c", spec.inputs[p.in_c0].shape, p.state_shape);
  if (p.in_p >= 0) CheckShape(spec, "P", spec.inputs[p.in_p].shape, {D, 3 * H});
  if (p.out_yc >= 0) CheckOutputShape(spec, p.out_yc, p.state_shape);
  p.act = GateActivations(spec, 3, static_cast<size_t>(D));
  return std::make_unique<LstmKernel>(std::move(p));
}

std::unique_ptr<Kernel> CreateLstm(const KernelSpec& spec) {
  CheckArity(spec, 3, 7, spec.outputs.size());
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return WithFloat16Support(spec, CreateFloat32Lstm);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("LSTM", CreateLstm);

}  // namespace kernels
}  // namespace tfpopef
