// How requests for one subgraph are cut into compiled batches under a RuntimeConfig: the
// batch axis, the compiled batch size and, per anchor, the byte geometry of one row.
//
// A subgraph is "batched" when every one of its anchors carries the batch along the same axis
// with the same compiled size; otherwise it accepts only its exact compiled shapes (a request
// is then a single unit run as is) and `exact_reason` says why.
//
// Ownership: plain value, computed once per runner. Thread safety: immutable after Plan().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/core/executable.h"
#include "tf_popef_op/runtime/cc/core/runtime_config.h"

namespace tfpopef {

// One anchor seen as `outer` blocks of rows: a tensor of n rows is outer x n x row_bytes.
struct AnchorLayout {
  int anchor = -1;
  int axis = -1;           // batch axis; -1: the whole tensor is one row
  int64_t outer = 1;       // product of the dims before the axis
  size_t row_bytes = 0;    // bytes of one row (dims after the axis x item size)
  std::vector<int64_t> compiled_shape;

  // The compiled shape with `rows` along the batch axis.
  std::vector<int64_t> ShapeFor(int64_t rows) const {
    std::vector<int64_t> s = compiled_shape;
    if (axis >= 0) s[axis] = rows;
    return s;
  }
};

struct SubgraphBatching {
  int subgraph = 0;
  bool batched = false;     // false: exact compiled shapes only
  std::string exact_reason;  // why not batched
  bool dynamic = false;     // batched with RuntimeConfig.batching_dim: any n >= 1, cross-request packing
  int axis = -1;
  int64_t batch = 1;        // rows per run (the compiled batch; 1 when not batched)
  bool contiguous = true;   // every anchor has outer == 1: consecutive rows are one memory block
  std::vector<AnchorLayout> inputs, outputs;

  static SubgraphBatching Plan(const Executable& exe, int subgraph, const RuntimeConfig& config);
};

}  // namespace tfpopef
