// The activation functions of every kernel, defined once: the fused-op epilogues
// (epilogue.h), the LSTM/GRU gates (recurrent/recurrent.h), the elementwise ops
// (elementwise/), the FusedElementwise program and the portable path of vector_math.h.
//
// - activation::Name(x): the scalar definition (the portable path of vector_math.h is these
//   functions in a loop, so both paths compute the same function);
// - kActivations: names, parameter counts and ONNX defaults, looked up by ParseActivation /
//   ActivationWithDefaults;
// - ActivationFunction::Activate(y, n): a whole array in place, the switch outside the loops
//   so each piecewise-linear one is a plain auto-vectorized loop and the transcendental ones
//   run the run-time dispatched vector math (AVX2+FMA when the CPU has it).
//
// Parameters (p0, p1) and their defaults, as in the ONNX spec:
//   Clip [min, max]; LeakyRelu [alpha = 0.01]; ThresholdedRelu [alpha = 1]; Swish [alpha = 1]
//   (x·σ(αx)); HardSigmoid [alpha = 0.2, beta = 0.5]; ScaledTanh [alpha = 1, beta = 1]
//   (α·tanh(βx)); Affine [alpha = 1, beta = 0]; Elu [alpha = 1]; the others none.
// NaN in gives NaN out (Relu included: `x < 0 ? 0 : x`, as numpy.maximum(x, 0)).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace activation {

template <typename T>
inline T Relu(T x) { return x < T(0) ? T(0) : x; }
inline float LeakyRelu(float x, float alpha) { return x < 0.0f ? alpha * x : x; }
inline float ThresholdedRelu(float x, float alpha) { return x > alpha ? x : 0.0f; }
inline float Clip(float x, float lo, float hi) { return std::min(std::max(x, lo), hi); }
inline float HardSigmoid(float x, float alpha, float beta) { return Clip(alpha * x + beta, 0.0f, 1.0f); }
inline float HardSwish(float x) { return x * HardSigmoid(x, 1.0f / 6.0f, 0.5f); }
inline float Affine(float x, float alpha, float beta) { return alpha * x + beta; }
inline float Softsign(float x) { return x / (1.0f + std::fabs(x)); }
// log(1 + e^x) without overflow for large x.
inline float Softplus(float x) { return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
// exp of a non-positive argument only, so nothing overflows.
inline float Sigmoid(float x) {
  const float e = std::exp(-std::fabs(x));
  const float q = 1.0f / (1.0f + e);
  return x >= 0.0f ? q : e * q;
}
inline float Swish(float x, float alpha) { return x * Sigmoid(alpha * x); }
inline float Tanh(float x) { return std::tanh(x); }
inline float ScaledTanh(float x, float alpha, float beta) { return alpha * std::tanh(beta * x); }
// x < 0 ? alpha·(e^x − 1) : x, all times `scale` (Elu: scale 1; Selu: alpha, gamma).
inline float Elu(float x, float alpha, float scale = 1.0f) { return scale * (x < 0.0f ? alpha * std::expm1(x) : x); }
// 0.5·x·(1 + erf(x/√2)) = 0.5·x·erfc(−x/√2): erfc in double keeps the relative accuracy for
// x << 0, where 1 + erf cancels. Below −14.5 the result is under half the smallest denormal
// (−0; also the limit at −inf, which the formula would turn into −inf·0 = NaN).
inline float Gelu(float x) {
  if (x < -14.5f) return -0.0f;
  return static_cast<float>(0.5 * x * std::erfc(-0.70710678118654752440 * x));
}
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
inline float GeluTanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

}  // namespace activation

enum class Activation { kNone, kRelu, kClip, kLeakyRelu, kThresholdedRelu, kSigmoid, kSwish, kHardSigmoid,
                        kHardSwish, kGeluErf, kGeluTanh, kTanh, kScaledTanh, kAffine, kElu, kSoftsign, kSoftplus };

struct ActivationInfo {
  const char* name;  // as written by the compiler ("" = none)
  Activation activation;
  size_t num_params;
  float default_p0, default_p1;
};

inline constexpr ActivationInfo kActivations[] = {
    {"", Activation::kNone, 0, 0, 0},
    {"Relu", Activation::kRelu, 0, 0, 0},
    {"Clip", Activation::kClip, 2, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity()},
    {"LeakyRelu", Activation::kLeakyRelu, 1, 0.01f, 0},
    {"ThresholdedRelu", Activation::kThresholdedRelu, 1, 1, 0},
    {"Sigmoid", Activation::kSigmoid, 0, 0, 0},
    {"Swish", Activation::kSwish, 1, 1, 0},
    {"HardSigmoid", Activation::kHardSigmoid, 2, 0.2f, 0.5f},
    {"HardSwish", Activation::kHardSwish, 0, 0, 0},
    {"GeluErf", Activation::kGeluErf, 0, 0, 0},
    {"GeluTanh", Activation::kGeluTanh, 0, 0, 0},
    {"Tanh", Activation::kTanh, 0, 0, 0},
    {"ScaledTanh", Activation::kScaledTanh, 2, 1, 1},
    {"Affine", Activation::kAffine, 2, 1, 0},
    {"Elu", Activation::kElu, 1, 1, 0},
    {"Softsign", Activation::kSoftsign, 0, 0, 0},
    {"Softplus", Activation::kSoftplus, 0, 0, 0},
};

// One activation with its parameters.
struct ActivationFunction {
  Activation activation = Activation::kNone;
  float p0 = 0.0f, p1 = 0.0f;

  bool is_identity() const { return activation == Activation::kNone; }

  float operator()(float x) const {
    switch (activation) {
      case Activation::kNone: return x;
      case Activation::kRelu: return activation::Relu(x);
      case Activation::kClip: return activation::Clip(x, p0, p1);
      case Activation::kLeakyRelu: return activation::LeakyRelu(x, p0);
      case Activation::kThresholdedRelu: return activation::ThresholdedRelu(x, p0);
      case Activation::kSigmoid: return activation::Sigmoid(x);
      case Activation::kSwish: return activation::Swish(x, p0);
      case Activation::kHardSigmoid: return activation::HardSigmoid(x, p0, p1);
      case Activation::kHardSwish: return activation::HardSwish(x);
      case Activation::kGeluErf: return activation::Gelu(x);
      case Activation::kGeluTanh: return activation::GeluTanh(x);
      case Activation::kTanh: return activation::Tanh(x);
      case Activation::kScaledTanh: return activation::ScaledTanh(x, p0, p1);
      case Activation::kAffine: return activation::Affine(x, p0, p1);
      case Activation::kElu: return activation::Elu(x, p0);
      case Activation::kSoftsign: return activation::Softsign(x);
      case Activation::kSoftplus: return activation::Softplus(x);
    }
    return x;
  }

  // y[i] = f(y[i]) for i in [0, n).
  void Activate(float* y, int64_t n) const {
    switch (activation) {
      case Activation::kNone: return;
      case Activation::kRelu: return Map(y, n, [](float v) { return activation::Relu(v); });
      case Activation::kClip: return Map(y, n, [lo = p0, hi = p1](float v) { return activation::Clip(v, lo, hi); });
      case Activation::kLeakyRelu: return Map(y, n, [a = p0](float v) { return activation::LeakyRelu(v, a); });
      case Activation::kThresholdedRelu:
        return Map(y, n, [a = p0](float v) { return activation::ThresholdedRelu(v, a); });
      case Activation::kSigmoid: return vmath::Sigmoid(y, y, n);
      case Activation::kSwish:
        if (p0 == 1.0f) return vmath::Swish(y, y, n);
        return Map(y, n, [a = p0](float v) { return activation::Swish(v, a); });
      case Activation::kHardSigmoid:
        return Map(y, n, [a = p0, b = p1](float v) { return activation::HardSigmoid(v, a, b); });
      case Activation::kHardSwish: return Map(y, n, [](float v) { return activation::HardSwish(v); });
      case Activation::kGeluErf: return vmath::Gelu(y, y, n);
      case Activation::kGeluTanh: return vmath::GeluTanh(y, y, n);
      case Activation::kTanh: return vmath::Tanh(y, y, n);
      case Activation::kScaledTanh:
        Map(y, n, [b = p1](float v) { return b * v; });
        vmath::Tanh(y, y, n);
        return Map(y, n, [a = p0](float v) { return a * v; });
      case Activation::kAffine: return Map(y, n, [a = p0, b = p1](float v) { return activation::Affine(v, a, b); });
      case Activation::kElu: return vmath::Elu(y, y, n, p0, 1.0f);
      case Activation::kSoftsign: return Map(y, n, [](float v) { return activation::Softsign(v); });
      case Activation::kSoftplus: return Map(y, n, [](float v) { return activation::Softplus(v); });
    }
  }

 private:
  template <typename F>
  static void Map(float* y, int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(y[i]);
  }
};

inline const ActivationInfo* FindActivation(const std::string& name) {
  for (const ActivationInfo& info : kActivations)
    if (name == info.name) return &info;
  return nullptr;
}

inline std::string ActivationNames() {
  std::string names;
  for (const ActivationInfo& info : kActivations)
    names += std::string(names.empty() ? "" : ", ") + (*info.name ? info.name : "\"\"");
  return names;
}

// `name` with exactly its number of `params`; an unknown name or a wrong count raises an error
// naming the step.
inline ActivationFunction ParseActivation(const KernelSpec& spec, const std::string& name,
                                          const std::vector<float>& params) {
  const ActivationInfo* info = FindActivation(name);
  if (info == nullptr)
    throw Error(ErrorCode::kUnimplemented,
                spec.Where() + ": unknown activation '" + name + "' (supported: " + ActivationNames() + ")");
  if (params.size() != info->num_params)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": activation '" + name + "' takes " +
                                                 std::to_string(info->num_params) + " activation_params, got " +
                                                 std::to_string(params.size()));
  ActivationFunction f;
  f.activation = info->activation;
  if (params.size() > 0) f.p0 = params[0];
  if (params.size() > 1) f.p1 = params[1];
  return f;
}

// `name` with parameters alpha and beta, NaN standing for the ONNX default (the recurrent
// ops' activation_alpha / activation_beta); the none activation ("") is not accepted.
inline ActivationFunction ActivationWithDefaults(const KernelSpec& spec, const std::string& name, float alpha,
                                                 float beta) {
  const ActivationInfo* info = name.empty() ? nullptr : FindActivation(name);
  if (info == nullptr)
    throw Error(ErrorCode::kUnimplemented,
                spec.Where() + ": activation '" + name + "' is not supported (supported: " + ActivationNames() + ")");
  ActivationFunction f;
  f.activation = info->activation;
  f.p0 = std::isnan(alpha) ? info->default_p0 : alpha;
  f.p1 = std::isnan(beta) ? info->default_p1 : beta;
  return f;
}

}  // namespace kernels
}  // namespace tfpopef
