// numpy broadcasting, reduced at prepare time to the smallest loop nest.
//
// A BroadcastPlan walks an output shape while N operands are read with their own strides
// (0 along broadcast dims). Size-1 output dims are dropped and adjacent dims are merged when
// every operand treats them alike, so equal shapes become one flat loop, a scalar operand a
// flat loop with stride 0, and [M,N] op [N] a row loop. The innermost merged dim is handed to
// the caller as one "run" so its loop can be specialized for strides 0/1 and vectorized.
// Used by elementwise ops (elements), MatMul (whole matrices per batch index) and Gemm's C.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/dtype.h"
#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {
namespace kernels {

// Loop levels after merging; the contract's "any rank up to 8" always fits.
constexpr size_t kMaxBroadcastRank = 8;

// numpy's rule: align on the right, each pair of dims must be equal or one of them 1.
// Returns false when the shapes are not broadcastable.
inline bool BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                            std::vector<int64_t>* out) {
  const size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

// True when `operand` can be broadcast to `target` without changing `target` (ONNX
// "unidirectional" broadcasting, e.g. Gemm's C).
inline bool BroadcastsTo(const std::vector<int64_t>& operand, const std::vector<int64_t>& target) {
  if (operand.size() > target.size()) return false;
  const size_t lead = target.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    if (operand[i] != 1 && operand[i] != target[lead + i]) return false;
  return true;
}

template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;                    // merged output dims, outermost first; never empty
  std::array<std::vector<int64_t>, N> strides;  // per operand, per merged dim, in elements
  int64_t num_runs = 0;                         // product of all dims but the last; 0 if empty
  int64_t run_length() const { return dims.back(); }
  int64_t run_stride(size_t operand) const { return strides[operand].back(); }
};

// `operands` must each broadcast to `out` (checked by the caller with a better message).
// Throws kUnimplemented naming `where` if more than kMaxBroadcastRank loop levels remain.
template <size_t N>
BroadcastPlan<N> MakeBroadcastPlan(const std::vector<int64_t>& out,
                                   const std::array<std::vector<int64_t>, N>& operands, const std::string& where) {
  BroadcastPlan<N> plan;
  const size_t rank = out.size();
  int64_t numel = 1;
  for (int64_t d : out) numel *= d;
  // Dim d of operand k padded on the left with 1s; "broadcast" = read with stride 0.
  auto dim_of = [&](size_t k, size_t d) -> int64_t {
    const auto& s = operands[k];
    return d < rank - s.size() ? 1 : s[d - (rank - s.size())];
  };
  auto broadcast = [&](size_t k, size_t d) { return dim_of(k, d) == 1 && out[d] != 1; };

  // Merge kept dims (size > 1) with the same broadcast pattern across all operands.
  std::vector<int64_t> dims;
  std::vector<std::array<bool, N>> patterns;
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    std::array<bool, N> pattern;
    for (size_t k = 0; k < N; ++k) pattern[k] = broadcast(k, d);
    if (!dims.empty() && patterns.back() == pattern) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      patterns.push_back(pattern);
    }
  }
  if (dims.empty()) {  // all dims 1 (or rank 0): a single element
    dims.push_back(1);
    std::array<bool, N> none{};
    patterns.push_back(none);
  }
  if (dims.size() > kMaxBroadcastRank)
    throw Error(ErrorCode::kUnimplemented, where + ": broadcasting to " + ShapeToString(out) + " needs " +
                                               std::to_string(dims.size()) + " loop levels; at most " +
                                               std::to_string(kMaxBroadcastRank) + " are supported");
  for (size_t k = 0; k < N; ++k) {
    plan.strides[k].assign(dims.size(), 0);
    int64_t stride = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      if (patterns[i][k]) continue;
      plan.strides[k][i] = stride;
      stride *= dims[i];
    }
  }
  plan.dims = std::move(dims);
  plan.num_runs = numel == 0 ? 0 : numel / plan.dims.back();
  return plan;
}

// Calls body(out_offset, offsets, length) for every innermost run (or the part of it) inside
// the output elements [begin, end), in output order. out_offset is the first output element
// (runs are contiguous in the output); offsets[k] is operand k's first element, and within the
// run operand k advances by plan.run_stride(k). Disjoint ranges can be handed to different
// threads (ParallelFor over the output elements).
template <size_t N, typename Body>
void ForEachRunInRange(const BroadcastPlan<N>& plan, int64_t begin, int64_t end, Body&& body) {
  const int64_t run = plan.run_length();
  if (begin >= end || run == 0) return;
  const int outer_rank = static_cast<int>(plan.dims.size()) - 1;
  std::array<int64_t, kMaxBroadcastRank> index{};
  std::array<int64_t, N> offsets{};
  int64_t rest = begin / run;  // the first run's position in the outer dims
  for (int d = outer_rank - 1; d >= 0; --d) {
    index[d] = rest % plan.dims[d];
    rest /= plan.dims[d];
    for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * plan.strides[k][d];
  }
  for (int64_t out_offset = begin / run * run; out_offset < end; out_offset += run) {
    const int64_t first = std::max(begin, out_offset) - out_offset;
    const int64_t last = std::min(end - out_offset, run);
    std::array<int64_t, N> at = offsets;
    for (size_t k = 0; k < N; ++k) at[k] += first * plan.strides[k].back();
    body(out_offset + first, static_cast<const std::array<int64_t, N>&>(at), last - first);
    for (int d = outer_rank - 1; d >= 0; --d) {  // odometer over the outer dims
      if (++index[d] < plan.dims[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
        break;
      }
      index[d] = 0;
      for (size_t k = 0; k < N; ++k) offsets[k] -= plan.strides[k][d] * (plan.dims[d] - 1);
    }
  }
}

// ForEachRunInRange over the whole output, with body(out_offset, offsets) per whole run.
template <size_t N, typename Body>
void ForEachRun(const BroadcastPlan<N>& plan, Body&& body) {
  ForEachRunInRange(plan, 0, plan.num_runs * plan.run_length(),
                    [&body](int64_t out_offset, const std::array<int64_t, N>& offsets, int64_t) {
                      body(out_offset, offsets);
                    });
}

}  // namespace kernels
}  // namespace tfpopef
