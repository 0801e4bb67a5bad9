// The epilogue of the fused ops FusedConv / FusedGemm / FusedMatMul (docs/popef.md, "internal
// ops"): y = activation(y + bias + sum), applied by the producing kernel to each output block
// right after it is computed (while it is still in cache), instead of by 1-3 separate
// elementwise steps that each stream the whole tensor through memory again. For float16
// models it also removes the float16 roundings between the steps: the fused op computes in
// float32 and rounds once.
//
// Step attributes (written by the compiler's lowering rules, always explicit):
//   activation         "" (none), Relu, Clip, LeakyRelu, Sigmoid, Swish, HardSigmoid, HardSwish,
//                      GeluErf, GeluTanh, Tanh
//   activation_params  floats: Clip [min, max]; LeakyRelu [alpha]; Swish [alpha] (x·σ(αx));
//                      HardSigmoid [alpha, beta]; the others []
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {

enum class Activation { kNone, kRelu, kClip, kLeakyRelu, kSigmoid, kSwish, kHardSigmoid, kHardSwish, kGeluErf,
                        kGeluTanh, kTanh };

struct Epilogue {
  Activation activation = Activation::kNone;
  float p0 = 0.0f, p1 = 0.0f;  // activation_params (see the header comment)

  bool is_identity() const { return activation == Activation::kNone; }

  // y[i] = activation(y[i] + bias + bias_row[i] + sum[i]) for i in [0, count); bias_row and
  // sum may be null (then they count as 0). One pass over y: bias/sum/activation in one loop.
  void Apply(float* y, int64_t count, float bias, const float* bias_row, const float* sum) const {
    if (bias != 0.0f || bias_row != nullptr || sum != nullptr) {
      if (bias_row == nullptr && sum == nullptr) {
        for (int64_t i = 0; i < count; ++i) y[i] += bias;
      } else if (bias_row == nullptr) {
        for (int64_t i = 0; i < count; ++i) y[i] += bias + sum[i];
      } else if (sum == nullptr) {
        for (int64_t i = 0; i < count; ++i) y[i] += bias + bias_row[i];
      } else {
        for (int64_t i = 0; i < count; ++i) y[i] += bias + bias_row[i] + sum[i];
      }
    }
    Activate(y, count);
  }

  // y[i] = activation(y[i]); the switch is outside the loops so each loop is a plain
  // (auto-vectorizable for the piecewise-linear ones) pass; the transcendental ones use the
  // run-time dispatched vector math (vector_math.h, AVX2+FMA when the CPU has it).
  void Activate(float* y, int64_t count) const {
    switch (activation) {
      case Activation::kNone:
        return;
      case Activation::kRelu:
        for (int64_t i = 0; i < count; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        return;
      case Activation::kClip: {
        const float lo = p0, hi = p1;
        for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(y[i], lo), hi);
        return;
      }
      case Activation::kLeakyRelu: {
        const float alpha = p0;
        for (int64_t i = 0; i < count; ++i) y[i] = y[i] >= 0.0f ? y[i] : alpha * y[i];
        return;
      }
      case Activation::kSigmoid:
        vmath::Sigmoid(y, y, count);
        return;
      case Activation::kSwish: {
        const float alpha = p0;
        if (alpha == 1.0f) {
          vmath::Swish(y, y, count);
          return;
        }
        for (int64_t i = 0; i < count; ++i) y[i] = y[i] * Sigmoid(alpha * y[i]);
        return;
      }
      case Activation::kHardSigmoid: {
        const float alpha = p0, beta = p1;
        for (int64_t i = 0; i < count; ++i) y[i] = std::min(std::max(alpha * y[i] + beta, 0.0f), 1.0f);
        return;
      }
      case Activation::kHardSwish:
        for (int64_t i = 0; i < count; ++i)
          y[i] = y[i] * std::min(std::max(y[i] * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
        return;
      case Activation::kGeluErf:
        vmath::Gelu(y, y, count);
        return;
      case Activation::kGeluTanh:
        vmath::GeluTanh(y, y, count);
        return;
      case Activation::kTanh:
        vmath::Tanh(y, y, count);
        return;
    }
  }

 private:
  // Written so that large |x| neither overflows exp nor loses the tiny tail (as onnxruntime).
  static float Sigmoid(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
};

// The optional inputs after a fused op's two operands, announced by the 0/1 step attributes
// has_bias / has_sum. Checks that exactly those inputs are there and that the sum has the
// output's shape (the bias's shape is each op's own: [M], [N] or Gemm's broadcastable C).
struct EpilogueInputs {
  bool has_bias = false, has_sum = false;
};

inline EpilogueInputs ReadEpilogueInputs(const KernelSpec& spec) {
  EpilogueInputs in;
  in.has_bias = CheckedFlag(spec, "has_bias");
  in.has_sum = CheckedFlag(spec, "has_sum");
  const size_t want = 2 + (in.has_bias ? 1 : 0) + (in.has_sum ? 1 : 0);
  if (spec.inputs.size() != want)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": has_bias = " + std::to_string(in.has_bias) +
                                                 " and has_sum = " + std::to_string(in.has_sum) + " need " +
                                                 std::to_string(want) + " inputs, got " +
                                                 std::to_string(spec.inputs.size()));
  const std::vector<int64_t>& out = spec.outputs.at(0).shape;
  if (in.has_sum && spec.inputs.back().shape != out)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": sum has shape " +
                                                 ShapeToString(spec.inputs.back().shape) +
                                                 ", expected the output shape " + ShapeToString(out));
  return in;
}

// Reads `activation` / `activation_params`; unknown names or a wrong parameter count raise an
// error naming the step.
inline Epilogue ReadEpilogue(const KernelSpec& spec) {
  struct Known {
    const char* name;
    Activation activation;
    size_t params;
  };
  static const Known kKnown[] = {
      {"", Activation::kNone, 0},           {"Relu", Activation::kRelu, 0},
      {"Clip", Activation::kClip, 2},       {"LeakyRelu", Activation::kLeakyRelu, 1},
      {"Sigmoid", Activation::kSigmoid, 0}, {"Swish", Activation::kSwish, 1},
      {"HardSigmoid", Activation::kHardSigmoid, 2}, {"HardSwish", Activation::kHardSwish, 0},
      {"GeluErf", Activation::kGeluErf, 0}, {"GeluTanh", Activation::kGeluTanh, 0},
      {"Tanh", Activation::kTanh, 0},
  };
  const std::string name = spec.attrs.String("activation", "");
  const std::vector<float> params = spec.attrs.Has("activation_params") ? spec.attrs.Floats("activation_params")
                                                                        : std::vector<float>{};
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    if (params.size() != k.params)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": activation '" + name + "' takes " +
                                                   std::to_string(k.params) + " activation_params, got " +
                                                   std::to_string(params.size()));
    Epilogue e;
    e.activation = k.activation;
    if (params.size() > 0) e.p0 = params[0];
    if (params.size() > 1) e.p1 = params[1];
    return e;
  }
  std::string known;
  for (const Known& k : kKnown) known += std::string(known.empty() ? "" : ", ") + (*k.name ? k.name : "\"\"");
  throw Error(ErrorCode::kUnimplemented,
              spec.Where() + ": unknown activation '" + name + "' (supported: " + known + ")");
}

}  // namespace kernels
}  // namespace tfpopef
