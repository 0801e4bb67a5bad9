#include "tf_popef_op/runtime/cc/core/subgraph_batching.h"

namespace tfpopef {
namespace {

AnchorLayout Layout(const Anchor& a, int index, int axis) {
  AnchorLayout l;
  l.anchor = index;
  l.compiled_shape = a.desc.shape;
  l.axis = axis;
  size_t inner = DTypeSize(a.desc.dtype);
  for (size_t d = 0; d < a.desc.shape.size(); ++d) {
    if (axis >= 0 && static_cast<int>(d) < axis) l.outer *= a.desc.shape[d];
    else if (axis < 0 || static_cast<int>(d) > axis) inner *= static_cast<size_t>(a.desc.shape[d]);
  }
  l.row_bytes = inner;
  return l;
}

}  // namespace

SubgraphBatching SubgraphBatching::Plan(const Executable& exe, int subgraph, const RuntimeConfig& config) {
  const Subgraph& sg = exe.subgraphs()[subgraph];
  const auto& anchors = exe.anchors();
  const bool by_config = config.batching_dim != RuntimeConfig::kBatchingOff;
  const int64_t axis = by_config ? static_cast<int64_t>(config.batching_dim) : sg.batch_axis;

  SubgraphBatching p;
  p.subgraph = subgraph;
  std::string reason;
  int64_t batch = -1;
  std::string batch_from;
  std::vector<int> all(sg.inputs);
  all.insert(all.end(), sg.outputs.begin(), sg.outputs.end());
  if (axis < 0) reason = "subgraph " + std::to_string(subgraph) + " has no batch axis (batch_axis -1)";
  for (int a : all) {
    if (!reason.empty()) break;
    const Anchor& an = anchors[a];
    const int64_t rank = static_cast<int64_t>(an.desc.shape.size());
    if (an.batch_axis < 0) {
      reason = "anchor '" + an.name + "' has no batch axis";
    } else if (rank <= axis) {
      reason = "anchor '" + an.name + "' has rank " + std::to_string(rank) + ", so it has no axis " + std::to_string(axis);
    } else if (batch < 0) {
      batch = an.desc.shape[axis];
      batch_from = an.name;
    } else if (an.desc.shape[axis] != batch) {
      reason = "anchors '" + batch_from + "' and '" + an.name + "' have different sizes along axis " +
               std::to_string(axis) + " (" + std::to_string(batch) + " vs " + std::to_string(an.desc.shape[axis]) + ")";
    }
  }
  if (reason.empty() && batch < 0) reason = "subgraph " + std::to_string(subgraph) + " has no anchors";
  if (reason.empty() && batch == 0) reason = "its compiled batch size along axis " + std::to_string(axis) + " is 0";

  p.batched = reason.empty();
  p.exact_reason = reason;
  p.dynamic = p.batched && by_config;
  p.axis = p.batched ? static_cast<int>(axis) : -1;
  p.batch = p.batched ? batch : 1;
  for (int a : sg.inputs) p.inputs.push_back(Layout(anchors[a], a, p.axis));
  for (int a : sg.outputs) p.outputs.push_back(Layout(anchors[a], a, p.axis));
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const AnchorLayout& l : *list) p.contiguous = p.contiguous && l.outer == 1;
  return p;
}

}  // namespace tfpopef
