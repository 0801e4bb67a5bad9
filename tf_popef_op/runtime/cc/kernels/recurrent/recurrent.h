// Shared pieces of the ONNX recurrent kernels (LSTM, GRU): the gate activation functions
// (support/activations.h; alpha/beta defaults as in the ONNX spec) and the tensor layout of X,
// Y and the per-direction states, for layout 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]).
//
// Attributes the compiler always writes (compiler/lowering_rules/recurrent.py): direction
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
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"
#include "tf_popef_op/runtime/cc/kernels/support/blas_gemm.h"

namespace tfpopef {
namespace kernels {

// `per_direction` functions for each of `num_directions` directions, from the attributes.
inline std::vector<ActivationFunction> GateActivations(const KernelSpec& spec, size_t per_direction,
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
  std::vector<ActivationFunction> out;
  for (size_t i = 0; i < n; ++i) out.push_back(ActivationWithDefaults(spec, names[i], alpha[i], beta[i]));
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

// What LSTM and GRU share: layout, direction, clip and the indices of the optional inputs
// (B, initial_h) and outputs (Y, Y_h); -1 when absent.
struct RecurrentParams {
  RecurrentLayout lay;
  int64_t input_size = 0;
  bool reverse_only = false;  // direction "reverse"
  float clip = 0.0f;
  int in_b = -1, in_h0 = -1;
  int out_y = -1, out_yh = -1;
  std::vector<int64_t> state_shape;  // of initial_h / Y_h (and LSTM's initial_c / Y_c)
};

// Reads the shared attributes and checks X, W, R, B, initial_h, Y and Y_h for a cell with
// `gates` gates (LSTM 4, GRU 3). `extra_inputs` / `extra_outputs` are the kernel's own optional
// operands, which follow the shared ones in the step's input / output lists.
inline void ParseRecurrent(const KernelSpec& spec, int64_t gates, const std::string& what, RecurrentParams& p,
                           const std::vector<std::pair<std::string, int*>>& extra_inputs = {},
                           const std::vector<std::pair<std::string, int*>>& extra_outputs = {}) {
  p.lay.dirs = NumDirections(spec);
  p.reverse_only = spec.attrs.String("direction") == "reverse";
  p.lay.hidden = spec.attrs.Int("hidden_size");
  p.lay.batch_major = CheckedFlag(spec, "layout");
  p.clip = spec.attrs.Float("clip");
  std::vector<std::pair<std::string, int*>> inputs = {{"has_bias", &p.in_b}, {"has_initial_h", &p.in_h0}};
  std::vector<std::pair<std::string, int*>> outputs = {{"output_y", &p.out_y}, {"output_y_h", &p.out_yh}};
  inputs.insert(inputs.end(), extra_inputs.begin(), extra_inputs.end());
  outputs.insert(outputs.end(), extra_outputs.begin(), extra_outputs.end());
  const int n_in = AssignIndices(spec, inputs, 3);
  const int n_out = AssignIndices(spec, outputs, 0);
  if (static_cast<int>(spec.inputs.size()) != n_in || static_cast<int>(spec.outputs.size()) != n_out)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": the has_*/output_* flags announce " +
                                                 std::to_string(n_in) + " inputs and " + std::to_string(n_out) +
                                                 " outputs, the step has " + std::to_string(spec.inputs.size()) +
                                                 " and " + std::to_string(spec.outputs.size()));
  const auto& xs = spec.inputs[0].shape;
  if (xs.size() != 3)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": X must be 3-D, got " + ShapeToString(xs));
  auto& l = p.lay;
  l.seq = l.batch_major ? xs[1] : xs[0];
  l.batch = l.batch_major ? xs[0] : xs[1];
  p.input_size = xs[2];
  const int64_t D = l.dirs, H = l.hidden;
  CheckShape(spec, "W", spec.inputs[1].shape, {D, gates * H, p.input_size});
  CheckShape(spec, "R", spec.inputs[2].shape, {D, gates * H, H});
  if (p.in_b >= 0) CheckShape(spec, "B", spec.inputs[p.in_b].shape, {D, 2 * gates * H});
  p.state_shape = l.batch_major ? std::vector<int64_t>{l.batch, D, H} : std::vector<int64_t>{D, l.batch, H};
  if (p.in_h0 >= 0) CheckShape(spec, "initial_h", spec.inputs[p.in_h0].shape, p.state_shape);
  if (p.out_y >= 0)
    CheckOutputShape(spec, p.out_y, l.batch_major ? std::vector<int64_t>{l.batch, l.seq, D, H}
                                                  : std::vector<int64_t>{l.seq, D, l.batch, H});
  if (p.out_yh >= 0) CheckOutputShape(spec, p.out_yh, p.state_shape);
  for (int64_t v : {l.seq * l.batch, gates * H, p.input_size}) CheckBlasDim(spec, what, v);
}

inline float ClipGate(float x, float clip) { return clip > 0.0f ? std::min(clip, std::max(-clip, x)) : x; }

}  // namespace kernels
}  // namespace tfpopef
