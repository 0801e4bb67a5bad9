// The PopefExecute op: its interface (inputs, outputs, attrs) and shape function only; the
// kernel is in ../kernels/popef_execute_kernel.cc.
//
// One op call is one request to the IPU emulator runtime for one subgraph of a PopEF:
//   popef_path     scalar string: the PopEF file (in a SavedModel: the asset's path, so the
//                  SavedModel can be moved);
//   inputs         the subgraph's input tensors, fed to the anchors named by `input_names`
//                  (anchor names or aliases, e.g. "graph0/X");
//   outputs        the anchors named by `output_names`, of dtypes `Tout`;
//   output_shapes  their static shapes; -1 marks the batch dimension of outputs the runtime
//                  batches (dynamic batching on and the subgraph carries the batch), so the
//                  shape function gives static shapes with the batch dimension unknown;
//   batching_dim   RuntimeConfig.batching_dim (-1 = off: only the compiled batch, or
//                  multiples of it along the PopEF's batch axis);
//   timeout_ns     RuntimeConfig.timeout_ns (how long a batch waits for rows of other calls);
//   index          the conditional-execution index of a fused executable (-1 for a
//                  single-model PopEF).
// Stateful: it must not be constant-folded or deduplicated (each call is a device request).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfpopef {
namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

absl::Status PopefExecuteShape(InferenceContext* c) {
  ShapeHandle path;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &path));

  std::vector<std::string> input_names, output_names;
  std::vector<::tensorflow::PartialTensorShape> output_shapes;
  TF_RETURN_IF_ERROR(c->GetAttr("input_names", &input_names));
  TF_RETURN_IF_ERROR(c->GetAttr("output_names", &output_names));
  TF_RETURN_IF_ERROR(c->GetAttr("output_shapes", &output_shapes));
  int64_t batching_dim;
  TF_RETURN_IF_ERROR(c->GetAttr("batching_dim", &batching_dim));

  if (static_cast<int>(input_names.size()) != c->num_inputs() - 1)
    return absl::InvalidArgumentError("PopefExecute: " + std::to_string(input_names.size()) +
                                      " input_names for " + std::to_string(c->num_inputs() - 1) + " inputs");
  if (output_names.size() != output_shapes.size() || static_cast<int>(output_names.size()) != c->num_outputs())
    return absl::InvalidArgumentError("PopefExecute: output_names (" + std::to_string(output_names.size()) +
                                      "), output_shapes (" + std::to_string(output_shapes.size()) +
                                      ") and Tout (" + std::to_string(c->num_outputs()) + ") must have the same length");
  for (size_t i = 0; i < output_shapes.size(); ++i) {
    if (batching_dim < 0 && !output_shapes[i].IsFullyDefined())
      return absl::InvalidArgumentError("PopefExecute: output '" + output_names[i] + "' has shape " +
                                        output_shapes[i].DebugString() +
                                        " but batching_dim is off, so every output shape must be static");
    ShapeHandle out;
    TF_RETURN_IF_ERROR(c->MakeShapeFromPartialTensorShape(output_shapes[i], &out));
    c->set_output(static_cast<int>(i), out);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tfpopef

REGISTER_OP("PopefExecute")
    .Input("popef_path: string")
    .Input("inputs: Tin")
    .Output("outputs: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 1")
    .Attr("input_names: list(string) >= 0")
    .Attr("output_names: list(string) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("batching_dim: int = -1")
    .Attr("timeout_ns: int = 5000000")
    .Attr("index: int = -1")
    .SetIsStateful()
    .SetShapeFn(tfpopef::PopefExecuteShape)
    .Doc(R"doc(
Runs one subgraph of a PopEF executable on the IPU emulator runtime.

popef_path: scalar path of the PopEF file (a SavedModel asset).
inputs: tensors fed to the anchors named by input_names.
outputs: the anchors named by output_names.
output_shapes: static output shapes; -1 marks a batch dimension (dynamic batching).
batching_dim: RuntimeConfig.batching_dim; -1 turns dynamic batching off.
timeout_ns: RuntimeConfig.timeout_ns, the time a batch waits for rows of other calls.
index: subgraph of a fused executable (its `index` anchor); -1 for a single model.
)doc");
