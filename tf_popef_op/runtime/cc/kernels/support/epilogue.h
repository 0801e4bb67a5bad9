// The epilogue of the fused ops FusedConv / FusedGemm / FusedMatMul (docs/popef.md, "internal
// ops"): y = activation(y + bias + sum), applied by the producing kernel to each output block
// right after it is computed (while it is still in cache), instead of by 1-3 separate
// elementwise steps that each stream the whole tensor through memory again. For float16
// models it also removes the float16 roundings between the steps: the fused op computes in
// float32 and rounds once.
//
// Step attributes (written by the compiler's lowering rules, always explicit):
//   activation         "" (none) or a name of activations.h (the compiler writes Relu, Clip,
//                      LeakyRelu, Sigmoid, Swish, HardSigmoid, HardSwish, GeluErf, GeluTanh, Tanh)
//   activation_params  floats, exactly as many as the activation takes (activations.h)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"

namespace tfpopef {
namespace kernels {

struct Epilogue : ActivationFunction {
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

// Reads `activation` / `activation_params` (activations.h); unknown names or a wrong parameter
// count raise an error naming the step.
inline Epilogue ReadEpilogue(const KernelSpec& spec) {
  const std::vector<float> params = spec.attrs.Has("activation_params") ? spec.attrs.Floats("activation_params")
                                                                        : std::vector<float>{};
  return Epilogue{ParseActivation(spec, spec.attrs.String("activation", ""), params)};
}

}  // namespace kernels
}  // namespace tfpopef
