// Gather and GatherElements along `axis`, any data dtype, int32/int64 indices read at run
// time. Negative indices count from the end (ONNX). An index outside [-dim, dim) cannot be
// reported from Run, so it yields zeros (Gather: the whole slab; GatherElements: the element)
// rather than reading out of bounds.
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

template <typename Index>
int64_t Normalized(Index i, int64_t dim) {
  const int64_t v = static_cast<int64_t>(i) < 0 ? static_cast<int64_t>(i) + dim : static_cast<int64_t>(i);
  return v >= 0 && v < dim ? v : -1;
}

// data viewed as [outer, dim, inner]; output [outer, num_indices, inner].
template <typename Index>
class GatherKernel final : public Kernel {
 public:
  GatherKernel(int64_t outer, int64_t dim, int64_t inner_bytes, int64_t num_indices)
      : outer_(outer), dim_(dim), inner_bytes_(inner_bytes), n_(num_indices) {}

  void Run(const KernelContext& ctx) const override {
    const char* data = static_cast<const char*>(ctx.inputs[0]);
    const Index* idx = static_cast<const Index*>(ctx.inputs[1]);
    const size_t slab = static_cast<size_t>(inner_bytes_);
    // Output slabs (outer × index) split across the intra-op pool (grain in 4-byte elements).
    ParallelFor(outer_ * n_, ItemsPerChunk(inner_bytes_ / 4, kStreamingGrain), [&](int64_t begin, int64_t end) {
      char* out = static_cast<char*>(ctx.outputs[0]) + static_cast<size_t>(begin) * slab;
      for (int64_t k = begin; k < end; ++k, out += slab) {
        const int64_t o = k / n_, i = Normalized(idx[k % n_], dim_);
        if (i < 0) std::memset(out, 0, slab);
        else std::memcpy(out, data + (o * dim_ + i) * inner_bytes_, slab);
      }
    });
  }

 private:
  const int64_t outer_, dim_, inner_bytes_, n_;
};

void CheckIndices(const KernelSpec& spec) {
  CheckDType(spec, "input 1 (indices)", spec.inputs[1].dtype, {DType::kInt32, DType::kInt64});
  if (spec.outputs[0].dtype != spec.inputs[0].dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype must be the data's dtype");
}

std::unique_ptr<Kernel> CreateGather(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckIndices(spec);
  const auto& data = spec.inputs[0].shape;
  const auto& indices = spec.inputs[1].shape;
  if (data.empty()) throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": data must have rank >= 1");
  const size_t axis = static_cast<size_t>(CheckedAxis(spec, "axis", data.size()));
  std::vector<int64_t> out(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.end());
  CheckOutputShape(spec, 0, out);
  const int64_t outer = Product(data, 0, axis), inner = Product(data, axis + 1, data.size());
  const int64_t inner_bytes = inner * static_cast<int64_t>(DTypeSize(spec.inputs[0].dtype));
  const int64_t n = Product(indices);
  if (spec.inputs[1].dtype == DType::kInt32)
    return std::make_unique<GatherKernel<int32_t>>(outer, data[axis], inner_bytes, n);
  return std::make_unique<GatherKernel<int64_t>>(outer, data[axis], inner_bytes, n);
}

// out[i0..ik..] = data[i0..idx[i]..] with the index replacing position `axis`.
template <typename Index>
class GatherElementsKernel final : public Kernel {
 public:
  GatherElementsKernel(std::vector<int64_t> data_shape, std::vector<int64_t> index_shape, size_t axis,
                       size_t elem_bytes)
      : data_shape_(std::move(data_shape)), index_shape_(std::move(index_shape)), axis_(axis), bytes_(elem_bytes) {
    strides_.assign(data_shape_.size(), 1);
    for (size_t d = data_shape_.size(); d-- > 1;) strides_[d - 1] = strides_[d] * data_shape_[d];
  }

  void Run(const KernelContext& ctx) const override {
    const char* data = static_cast<const char*>(ctx.inputs[0]);
    const Index* idx = static_cast<const Index*>(ctx.inputs[1]);
    char* out = static_cast<char*>(ctx.outputs[0]);
    const int64_t n = Product(index_shape_);
    const size_t rank = index_shape_.size();
    std::vector<int64_t> pos(rank, 0);
    for (int64_t e = 0; e < n; ++e, out += bytes_) {
      const int64_t i = Normalized(idx[e], data_shape_[axis_]);
      if (i < 0) {
        std::memset(out, 0, bytes_);
      } else {
        int64_t offset = 0;
        for (size_t d = 0; d < rank; ++d) offset += (d == axis_ ? i : pos[d]) * strides_[d];
        std::memcpy(out, data + offset * static_cast<int64_t>(bytes_), bytes_);
      }
      for (size_t d = rank; d-- > 0;) {
        if (++pos[d] < index_shape_[d]) break;
        pos[d] = 0;
      }
    }
  }

 private:
  const std::vector<int64_t> data_shape_, index_shape_;
  std::vector<int64_t> strides_;
  const size_t axis_, bytes_;
};

std::unique_ptr<Kernel> CreateGatherElements(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckIndices(spec);
  const auto& data = spec.inputs[0].shape;
  const auto& indices = spec.inputs[1].shape;
  bool ok = !data.empty() && indices.size() == data.size();
  const size_t axis = ok ? static_cast<size_t>(CheckedAxis(spec, "axis", data.size())) : 0;
  for (size_t d = 0; ok && d < data.size(); ++d) ok = d == axis || indices[d] <= data[d];
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": indices " + ShapeToString(indices) +
                                                 " must have the rank of data " + ShapeToString(data) +
                                                 " and no larger dims off the axis");
  CheckOutputShape(spec, 0, indices);
  const size_t bytes = DTypeSize(spec.inputs[0].dtype);
  if (spec.inputs[1].dtype == DType::kInt32)
    return std::make_unique<GatherElementsKernel<int32_t>>(data, indices, axis, bytes);
  return std::make_unique<GatherElementsKernel<int64_t>>(data, indices, axis, bytes);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Gather", CreateGather);
TFPOPEF_REGISTER_KERNEL("GatherElements", CreateGatherElements);

}  // namespace kernels
}  // namespace tfpopef
