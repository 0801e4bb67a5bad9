// Split along `axis` into the step's outputs (sizes = their shapes along the axis), any
// dtype. Viewed as [outer, axis_dim · inner], each output takes one contiguous slab per outer
// index, so it is a sequence of memcpys (the inverse of Concat).
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

class SplitKernel final : public Kernel {
 public:
  SplitKernel(int64_t outer, std::vector<size_t> slab_bytes) : outer_(outer), slab_bytes_(std::move(slab_bytes)) {}

  void Run(const KernelContext& ctx) const override {
    size_t row_bytes = 0;  // one outer slab of every output
    for (size_t n : slab_bytes_) row_bytes += n;
    // Outer slabs split across the intra-op pool (grain in 4-byte elements).
    ParallelFor(outer_, ItemsPerChunk(static_cast<int64_t>(row_bytes / 4), kStreamingGrain), [&](int64_t begin, int64_t end) {
      const char* in = static_cast<const char*>(ctx.inputs[0]) + static_cast<size_t>(begin) * row_bytes;
      for (int64_t o = begin; o < end; ++o)
        for (size_t i = 0; i < slab_bytes_.size(); ++i) {
          const size_t n = slab_bytes_[i];
          if (n == 0) continue;
          std::memcpy(static_cast<char*>(ctx.outputs[i]) + o * n, in, n);
          in += n;
        }
    });
  }

 private:
  const int64_t outer_;
  const std::vector<size_t> slab_bytes_;
};

std::unique_ptr<Kernel> CreateSplit(const KernelSpec& spec) {
  if (spec.inputs.size() != 1 || spec.outputs.empty())
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expects 1 input and at least 1 output");
  const TensorDesc& in = spec.inputs[0];
  const size_t axis = static_cast<size_t>(CheckedAxis(spec, "axis", in.shape.size()));
  int64_t total = 0;
  std::vector<size_t> slabs;
  const int64_t inner = Product(in.shape, axis + 1, in.shape.size()) * static_cast<int64_t>(DTypeSize(in.dtype));
  for (size_t i = 0; i < spec.outputs.size(); ++i) {
    const TensorDesc& out = spec.outputs[i];
    std::vector<int64_t> expected = in.shape;
    expected[axis] = out.shape.size() == in.shape.size() ? out.shape[axis] : -1;
    if (out.dtype != in.dtype || out.shape != expected)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output " + std::to_string(i) + " (" +
                                                   DTypeName(out.dtype) + " " + ShapeToString(out.shape) +
                                                   ") is not a piece of input " + DTypeName(in.dtype) + " " +
                                                   ShapeToString(in.shape) + " along axis " + std::to_string(axis));
    total += out.shape[axis];
    slabs.push_back(static_cast<size_t>(out.shape[axis] * inner));
  }
  if (total != in.shape[axis])
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": outputs take " + std::to_string(total) +
                                                 " of the " + std::to_string(in.shape[axis]) + " entries of axis " +
                                                 std::to_string(axis));
  return std::make_unique<SplitKernel>(Product(in.shape, 0, axis), std::move(slabs));
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Split", CreateSplit);

}  // namespace kernels
}  // namespace tfpopef
