// Transpose by `perm`, any dtype, any rank. Only the element size matters (1, 2, 4 or 8 bytes).
//
// At prepare the problem is reduced: size-1 dims are dropped and input dims that stay
// adjacent and in order in the output are merged (e.g. perm [0,2,3,1] on [N,C,H,W] becomes a
// 3-D [N, C, H*W] -> [N, H*W, C]). Then:
//   - nothing left to permute          -> one memcpy;
//   - input's innermost dim stays last -> contiguous rows, memcpy per row;
//   - otherwise                        -> 2-D tiled transpose between the output dim that
//     is the input's innermost (read contiguously) and the output's innermost (written
//     contiguously), so both sides stay cache friendly; with fewer than 32 such rows (an NHWC
//     image's channels) the work items are spans of columns instead of bands of rows.
// Remaining outer dims are walked by decomposing a flat index, which needs no per-rank state.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

constexpr int64_t kTile = 32;
constexpr int64_t kColumnSpan = 4096;  // columns per work item where rows are few

enum class TransposeMode { kCopy, kRows, kTiled };

struct TransposePlan {
  TransposeMode mode = TransposeMode::kCopy;
  int64_t numel = 0;
  // Outer dims (output order, outermost first) with their input and output element strides.
  std::vector<int64_t> outer_dims, outer_in_strides, outer_out_strides;
  int64_t num_outer = 1;
  int64_t row = 0;                     // kRows: elements per contiguous row
  int64_t tile_rows = 0, tile_cols = 0;  // kTiled: sizes of the two inner dims
  int64_t rows_out_stride = 0;         // kTiled: output stride of the "rows" dim (input stride 1)
  int64_t cols_in_stride = 0;          // kTiled: input stride of the "cols" dim (output stride 1)
};

template <typename T>
class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(TransposePlan plan) : p_(std::move(plan)) {}

  void Run(const KernelContext& ctx) const override {
    const T* in = static_cast<const T*>(ctx.inputs[0]);
    T* out = static_cast<T*>(ctx.outputs[0]);
    if (p_.numel == 0) return;
    if (p_.mode == TransposeMode::kCopy) {
      ParallelFor(p_.numel, kStreamingGrain, [&](int64_t begin, int64_t end) {
        std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin) * sizeof(T));
      });
      return;
    }
    if (p_.mode == TransposeMode::kRows) {
      ParallelFor(p_.num_outer, ItemsPerChunk(p_.row, kStreamingGrain), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const Offsets at = OuterOffsets(t);
          std::memcpy(out + at.out, in + at.in, static_cast<size_t>(p_.row) * sizeof(T));
        }
      });
      return;
    }
    if (p_.tile_rows < kTile) {
      // Few rows (an NHWC image's 3 channels to NCHW): one band would be one work item, so the
      // columns are split instead.
      const int64_t spans = (p_.tile_cols + kColumnSpan - 1) / kColumnSpan;
      ParallelFor(p_.num_outer * spans, ItemsPerChunk(kColumnSpan * p_.tile_rows, kStreamingGrain),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t item = begin; item < end; ++item) {
                      const Offsets at = OuterOffsets(item / spans);
                      const int64_t c0 = item % spans * kColumnSpan;
                      FewRows(in + at.in, out + at.out, c0, std::min(c0 + kColumnSpan, p_.tile_cols));
                    }
                  });
      return;
    }
    // Tiled: one item = one band of kTile rows of one outer index, so even a single 2-D
    // transpose splits across threads.
    const int64_t bands = (p_.tile_rows + kTile - 1) / kTile;
    ParallelFor(p_.num_outer * bands, ItemsPerChunk(kTile * p_.tile_cols, kStreamingGrain), [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const Offsets at = OuterOffsets(item / bands);
        const int64_t r0 = item % bands * kTile;
        Band(in + at.in, out + at.out, r0, std::min(r0 + kTile, p_.tile_rows), 0, p_.tile_cols);
      }
    });
  }

 private:
  struct Offsets {
    int64_t in = 0, out = 0;
  };

  // Element offsets of outer index t (row-major over outer_dims) in the input and the output.
  Offsets OuterOffsets(int64_t t) const {
    Offsets at;
    for (size_t d = p_.outer_dims.size(); d-- > 0;) {
      const int64_t i = t % p_.outer_dims[d];
      t /= p_.outer_dims[d];
      at.in += i * p_.outer_in_strides[d];
      at.out += i * p_.outer_out_strides[d];
    }
    return at;
  }

  // out[r * rows_out_stride + c] = in[r + c * cols_in_stride] for r in [r0, r1) and c in
  // [from, to), tiled over c.
  void Band(const T* in, T* out, int64_t r0, int64_t r1, int64_t from, int64_t to) const {
    for (int64_t c0 = from; c0 < to; c0 += kTile) {
      const int64_t c1 = std::min(c0 + kTile, to);
      for (int64_t r = r0; r < r1; ++r) {
        T* o = out + r * p_.rows_out_stride;
        const T* i = in + r;
        for (int64_t c = c0; c < c1; ++c) o[c] = i[c * p_.cols_in_stride];
      }
    }
  }

  // Band over every row and the columns [c0, c1). Where the input is those rows interleaved
  // (cols_in_stride == rows, e.g. [H*W, 3] -> [3, H*W]), a row count known at compile time lets
  // the compiler de-interleave with vector shuffles instead of one strided load per element.
  void FewRows(const T* in, T* out, int64_t c0, int64_t c1) const {
    if (p_.cols_in_stride == p_.tile_rows) {
      switch (p_.tile_rows) {
        case 2: return Deinterleave<2>(in, out, c0, c1);
        case 3: return Deinterleave<3>(in, out, c0, c1);
        case 4: return Deinterleave<4>(in, out, c0, c1);
      }
    }
    Band(in, out, 0, p_.tile_rows, c0, c1);
  }

  template <int R>
  void Deinterleave(const T* in, T* out, int64_t c0, int64_t c1) const {
    const int64_t stride = p_.rows_out_stride;
    for (int64_t c = c0; c < c1; ++c)
      for (int r = 0; r < R; ++r) out[r * stride + c] = in[c * R + r];
  }

  const TransposePlan p_;
};

TransposePlan MakePlan(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  TransposePlan plan;
  plan.numel = Product(shape);
  // Positions of the non-1 input dims, and their order in the output.
  std::vector<int64_t> kept_pos(shape.size(), -1);
  std::vector<int64_t> kept_dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) {
      kept_pos[d] = static_cast<int64_t>(kept_dims.size());
      kept_dims.push_back(shape[d]);
    }
  std::vector<int64_t> order;  // kept positions in output order
  for (int64_t d : perm)
    if (kept_pos[d] >= 0) order.push_back(kept_pos[d]);
  // Group runs of consecutive kept positions: each group is one merged dim.
  std::vector<int64_t> group_first, group_size;  // in output order
  for (size_t j = 0; j < order.size(); ++j) {
    if (j > 0 && order[j] == order[j - 1] + 1) {
      group_size.back() *= kept_dims[order[j]];
    } else {
      group_first.push_back(order[j]);
      group_size.push_back(kept_dims[order[j]]);
    }
  }
  const size_t rank = group_first.size();
  if (rank <= 1) return plan;  // kCopy: the bytes are already in output order
  // Merged input dims in input order; cperm[j] = input dim of output dim j.
  std::vector<size_t> by_input(rank);
  for (size_t g = 0; g < rank; ++g) by_input[g] = g;
  std::sort(by_input.begin(), by_input.end(), [&](size_t x, size_t y) { return group_first[x] < group_first[y]; });
  std::vector<int64_t> in_dims(rank), cperm(rank);
  for (size_t i = 0; i < rank; ++i) {
    in_dims[i] = group_size[by_input[i]];
    cperm[by_input[i]] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> in_strides(rank, 1), out_dims(rank), out_strides(rank, 1), out_in_strides(rank);
  for (size_t i = rank - 1; i-- > 0;) in_strides[i] = in_strides[i + 1] * in_dims[i + 1];
  for (size_t j = 0; j < rank; ++j) {
    out_dims[j] = in_dims[cperm[j]];
    out_in_strides[j] = in_strides[cperm[j]];
  }
  for (size_t j = rank - 1; j-- > 0;) out_strides[j] = out_strides[j + 1] * out_dims[j + 1];

  const size_t last = rank - 1;
  const size_t rows_dim = static_cast<size_t>(std::find(cperm.begin(), cperm.end(), int64_t(last)) - cperm.begin());
  auto add_outer = [&](size_t j) {
    plan.outer_dims.push_back(out_dims[j]);
    plan.outer_in_strides.push_back(out_in_strides[j]);
    plan.outer_out_strides.push_back(out_strides[j]);
    plan.num_outer *= out_dims[j];
  };
  if (rows_dim == last) {
    plan.mode = TransposeMode::kRows;
    plan.row = out_dims[last];
    for (size_t j = 0; j < last; ++j) add_outer(j);
  } else {
    plan.mode = TransposeMode::kTiled;
    plan.tile_rows = out_dims[rows_dim];
    plan.tile_cols = out_dims[last];
    plan.rows_out_stride = out_strides[rows_dim];
    plan.cols_in_stride = out_in_strides[last];
    for (size_t j = 0; j < last; ++j)
      if (j != rows_dim) add_outer(j);
  }
  return plan;
}

std::unique_ptr<Kernel> CreateTranspose(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const TensorDesc& in = spec.inputs[0];
  if (spec.outputs[0].dtype != in.dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype " + DTypeName(spec.outputs[0].dtype) +
                                                 " differs from input dtype " + DTypeName(in.dtype));
  const std::vector<int64_t> perm = spec.attrs.Ints("perm");
  std::vector<bool> seen(in.shape.size(), false);
  bool valid = perm.size() == in.shape.size();
  for (size_t j = 0; valid && j < perm.size(); ++j) {
    valid = perm[j] >= 0 && perm[j] < static_cast<int64_t>(perm.size()) && !seen[perm[j]];
    if (valid) seen[perm[j]] = true;
  }
  if (!valid)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute 'perm' = " + ShapeToString(perm) +
                                                 " is not a permutation of 0.." +
                                                 std::to_string(static_cast<int64_t>(in.shape.size()) - 1) +
                                                 " for input shape " + ShapeToString(in.shape));
  std::vector<int64_t> out(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) out[j] = in.shape[perm[j]];
  CheckOutputShape(spec, 0, out);
  TransposePlan plan = MakePlan(in.shape, perm);
  switch (DTypeSize(in.dtype)) {
    case 1: return std::make_unique<TransposeKernel<uint8_t>>(std::move(plan));
    case 2: return std::make_unique<TransposeKernel<uint16_t>>(std::move(plan));
    case 4: return std::make_unique<TransposeKernel<uint32_t>>(std::move(plan));
    case 8: return std::make_unique<TransposeKernel<uint64_t>>(std::move(plan));
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected element size for dtype " + DTypeName(in.dtype));
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Transpose", CreateTranspose);

}  // namespace kernels
}  // namespace tfpopef
