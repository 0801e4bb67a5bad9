// Pad, Slice, Tile and Expand as per-axis index maps (axis_index_map.h); any dtype.
// Attributes (normalized by the compiler, one entry per axis of the input):
// - Pad: `mode` (constant | reflect | edge | wrap), `pads` (begins then ends; negative crops),
//   `value` (constant mode's fill, converted to the dtype);
// - Slice: `starts`, `steps` (start clamped into the axis, step != 0; the output shape gives
//   the count);
// - Tile: nothing (the output shape gives the repeats);
// - Expand: nothing (numpy broadcast of the input to the output shape).
#include <memory>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/data_movement/axis_index_map.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"

namespace tfpopef {
namespace kernels {
namespace {

int64_t PadSource(const std::string& mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  if (n == 0 || mode == "constant") return -1;
  if (mode == "edge") return i < 0 ? 0 : n - 1;
  if (mode == "wrap") return ((i % n) + n) % n;
  if (n == 1) return 0;  // reflect of a single element
  const int64_t period = 2 * (n - 1);
  int64_t r = ((i % period) + period) % period;
  return r >= n ? period - r : r;
}

std::unique_ptr<Kernel> CreatePad(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const TensorDesc& in = spec.inputs[0];
  const size_t rank = in.shape.size();
  const std::string mode = spec.attrs.String("mode");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    throw Error(ErrorCode::kUnimplemented, spec.Where() + ": pad mode '" + mode +
                                               "' is not supported (constant, reflect, edge, wrap)");
  const auto pads = spec.attrs.Ints("pads");
  if (pads.size() != 2 * rank)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": 'pads' has " + std::to_string(pads.size()) +
                                                 " values, expected " + std::to_string(2 * rank));
  std::vector<std::vector<int64_t>> tables(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = in.shape[d], size = n + pads[d] + pads[rank + d];
    if (size < 0)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": pads crop axis " + std::to_string(d) + " below 0");
    if (n == 0 && size > 0 && mode != "constant")
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": cannot " + mode + "-pad the empty axis " +
                                                   std::to_string(d));
    for (int64_t o = 0; o < size; ++o) tables[d].push_back(PadSource(mode, o - pads[d], n));
  }
  return MakeAxisIndexMap(spec, std::move(tables), EncodeScalar(in.dtype, spec.attrs.Float("value", 0.0f)));
}

std::unique_ptr<Kernel> CreateSlice(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const TensorDesc& in = spec.inputs[0];
  const size_t rank = in.shape.size();
  const auto starts = spec.attrs.Ints("starts"), steps = spec.attrs.Ints("steps");
  if (starts.size() != rank || steps.size() != rank || spec.outputs[0].shape.size() != rank)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": 'starts', 'steps' and the output need one entry per "
                                                 "axis of the input " + ShapeToString(in.shape));
  std::vector<std::vector<int64_t>> tables(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (steps[d] == 0) throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": a step is 0");
    for (int64_t o = 0; o < spec.outputs[0].shape[d]; ++o) tables[d].push_back(starts[d] + o * steps[d]);
  }
  return MakeAxisIndexMap(spec, std::move(tables), {});
}

std::unique_ptr<Kernel> CreateTile(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const auto& in = spec.inputs[0].shape;
  const auto& out = spec.outputs[0].shape;
  if (out.size() != in.size())
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output rank differs from the input's");
  std::vector<std::vector<int64_t>> tables(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 0 ? out[d] != 0 : out[d] % in[d] != 0)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output " + ShapeToString(out) +
                                                   " is not a whole number of tiles of " + ShapeToString(in));
    for (int64_t o = 0; o < out[d]; ++o) tables[d].push_back(o % in[d]);
  }
  return MakeAxisIndexMap(spec, std::move(tables), {});
}

// Expand = broadcast: the input is viewed with the output's rank (leading 1s), and a size-1
// axis always reads index 0.
std::unique_ptr<Kernel> CreateExpand(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const auto& out = spec.outputs[0].shape;
  const auto& in = spec.inputs[0].shape;
  if (!BroadcastsTo(in, out))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + ShapeToString(in) +
                                                 " does not broadcast to the output " + ShapeToString(out));
  KernelSpec view = spec;
  view.inputs[0].shape.insert(view.inputs[0].shape.begin(), out.size() - in.size(), 1);
  std::vector<std::vector<int64_t>> tables(out.size());
  for (size_t d = 0; d < out.size(); ++d)
    for (int64_t o = 0; o < out[d]; ++o) tables[d].push_back(view.inputs[0].shape[d] == 1 ? 0 : o);
  return MakeAxisIndexMap(view, std::move(tables), {});
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Pad", CreatePad);
TFPOPEF_REGISTER_KERNEL("Slice", CreateSlice);
TFPOPEF_REGISTER_KERNEL("Tile", CreateTile);
TFPOPEF_REGISTER_KERNEL("Expand", CreateExpand);

}  // namespace kernels
}  // namespace tfpopef
