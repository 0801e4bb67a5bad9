// Shared pieces of the ONNX recurrent kernels (LSTM, GRU): the gate activation functions
// (names and alpha/beta defaults as in the ONNX spec) and the tensor layout of X, Y and the
// per-direction states, for layout 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]).
//
// Attributes the compiler always writes (compiler/lowering/rules/recurrent.py): direction
// ("forward", "reverse", "bidirectional"), hidden_size, layout, clip (<= 0: none),
// activations (comma-separated names, one per function and direction), activation_alpha/activation_beta (same
// length, NaN = the function's default), has_* flags for the optional inputs that are present
// (in order) and output_* flags for the outputs that are present (in order).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"

namespace tfpopef {
namespace kernels {

struct GateActivation {
  enum Kind { kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu, kThresholdedRelu, kScaledTanh, kAffine, kElu,
              kSoftsign, kSoftplus } kind = kSigmoid;
  float alpha = 0.0f, beta = 0.0f;

  float operator()(float x) const {
    switch (kind) {
      case kSigmoid: return 1.0f / (1.0f + std::exp(-x));
      case kTanh: return std::tanh(x);
      case kRelu: return x > 0.0f ? x : 0.0f;
      case kHardSigmoid: return std::min(1.0f, std::max(0.0f, alpha * x + beta));
      case kLeakyRelu: return x >= 0.0f ? x : alpha * x;
      case kThresholdedRelu: return x > alpha ? x : 0.0f;
      case kScaledTanh: return alpha * std::tanh(beta * x);
      case kAffine: return alpha * x + beta;
      case kElu: return x >= 0.0f ? x : alpha * (std::exp(x) - 1.0f);
      case kSoftsign: return x / (1.0f + std::fabs(x));
      case kSoftplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0f);
    }
    return x;
  }
};

inline GateActivation MakeGateActivation(const KernelSpec& spec, const std::string& name, float alpha, float beta) {
  struct Known { const char* name; GateActivation::Kind kind; float alpha, beta; };
  static const Known kKnown[] = {
      {"Sigmoid", GateActivation::kSigmoid, 0, 0},          {"Tanh", GateActivation::kTanh, 0, 0},
      {"Relu", GateActivation::kRelu, 0, 0},                {"HardSigmoid", GateActivation::kHardSigmoid, 0.2f, 0.5f},
      {"LeakyRelu", GateActivation::kLeakyRelu, 0.01f, 0},  {"ThresholdedRelu", GateActivation::kThresholdedRelu, 1, 0},
      {"ScaledTanh", GateActivation::kScaledTanh, 1, 1},    {"Affine", GateActivation::kAffine, 1, 0},
      {"Elu", GateActivation::kElu, 1, 0},                  {"Softsign", GateActivation::kSoftsign, 0, 0},
      {"Softplus", GateActivation::kSoftplus, 0, 0}};
  std::string names;
  for (const Known& k : kKnown) {
    if (name == k.name) {
      GateActivation a;
      a.kind = k.kind;
      a.alpha = std::isnan(alpha) ? k.alpha : alpha;
      a.beta = std::isnan(beta) ? k.beta : beta;
      return a;
    }
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  throw Error(ErrorCode::kUnimplemented,
              spec.Where() + ": activation '" + name + "' is not supported (supported: " + names + ")");
}

// `per_direction` functions for each of `num_directions` directions, from the attributes.
inline std::vector<GateActivation> GateActivations(const KernelSpec& spec, size_t per_direction,
                                                   size_t num_directions) {
  const auto& j = spec.attrs;
  std::vector<std::string> names;  // "Sigmoid,Tanh,Tanh": comma-separated, one per function and direction
  const std::string joined = j.String("activations");
  for (size_t start = 0; start <= joined.size();) {
    const size_t comma = std::min(joined.find(',', start), joined.size());
    names.push_back(joined.substr(start, comma - start));
    start = comma + 1;
  }
  std::vector<float> alpha = j.Floats("activation_alpha"), beta = j.Floats("activation_beta");
  const size_t n = per_direction * num_directions;
  if (names.size() != n || alpha.size() != n || beta.size() != n)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expected " + std::to_string(n) +
                                                 " activations (and as many alphas and betas), got " +
                                                 std::to_string(names.size()));
  std::vector<GateActivation> out;
  for (size_t i = 0; i < n; ++i) out.push_back(MakeGateActivation(spec, names[i], alpha[i], beta[i]));
  return out;
}

// Where row (t, b) of X / Y / the states lives, for the ONNX `layout` attribute.
struct RecurrentLayout {
  int64_t seq = 0, batch = 0, dirs = 1, hidden = 0;
  bool batch_major = false;  // layout 1

  int64_t XRow(int64_t t, int64_t b) const { return batch_major ? b * seq + t : t * batch + b; }
  // Offset (in elements) of Y[t, d, b, :] (layout 0) or Y[b, t, d, :] (layout 1).
  int64_t YOffset(int64_t t, int64_t d, int64_t b) const {
    return (batch_major ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  // Offset of Y_h[d, b, :] (layout 0) or Y_h[b, d, :] (layout 1); also initial_h/initial_c.
  int64_t StateOffset(int64_t d, int64_t b) const {
    return (batch_major ? b * dirs + d : d * batch + b) * hidden;
  }
};

inline int64_t NumDirections(const KernelSpec& spec) {
  const std::string dir = spec.attrs.String("direction");
  if (dir == "forward" || dir == "reverse") return 1;
  if (dir == "bidirectional") return 2;
  throw Error(ErrorCode::kInvalidArgument,
              spec.Where() + ": direction must be forward, reverse or bidirectional, got '" + dir + "'");
}

// Gives the set flags consecutive input/output indices from `first`, in order (-1 when unset);
// returns one past the last index.
inline int AssignIndices(const KernelSpec& spec, const std::vector<std::pair<std::string, int*>>& flags, int first) {
  int next = first;
  for (const auto& [name, index] : flags) *index = CheckedFlag(spec, name) ? next++ : -1;
  return next;
}

inline void CheckShape(const KernelSpec& spec, const std::string& what, const std::vector<int64_t>& got,
                const std::vector<int64_t>& expected) {
  if (got != expected)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has shape " + ShapeToString(got) +
                                                 ", expected " + ShapeToString(expected));
}

inline float ClipGate(float x, float clip) { return clip > 0.0f ? std::min(clip, std::max(-clip, x)) : x; }

}  // namespace kernels
}  // namespace tfpopef
