// Concat along `axis`, any dtype. Viewed as [outer, axis_dim * inner] per input, the output
// is, for each outer index, the inputs' slabs back to back, so it is a sequence of memcpys.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Bytes of the output per work unit: the output is split evenly over the intra-op pool whatever
// the shape (a batch-1 blocked concat along channels is one outer slab: DenseNet's).
constexpr size_t kConcatUnitBytes = 4096;

class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(int64_t outer, std::vector<size_t> slab_bytes) : outer_(outer), slab_bytes_(std::move(slab_bytes)) {
    for (size_t n : slab_bytes_) row_bytes_ += n;
  }

  void Run(const KernelContext& ctx) const override {
    const size_t total = static_cast<size_t>(outer_) * row_bytes_;
    const int64_t units = static_cast<int64_t>((total + kConcatUnitBytes - 1) / kConcatUnitBytes);
    ParallelFor(units, ItemsPerChunk(static_cast<int64_t>(kConcatUnitBytes / 4), kStreamingGrain),
                [&](int64_t begin, int64_t end) {
                  CopyRange(ctx, static_cast<size_t>(begin) * kConcatUnitBytes,
                            std::min(total, static_cast<size_t>(end) * kConcatUnitBytes));
                });
  }

 private:
  // Output bytes [begin, end): the pieces of the inputs' slabs they hold, one memcpy each.
  void CopyRange(const KernelContext& ctx, size_t begin, size_t end) const {
    char* out = static_cast<char*>(ctx.outputs[0]);
    size_t o = begin / row_bytes_, at = begin % row_bytes_;  // outer slab, and the offset in its row
    size_t i = 0, start = 0;                                 // the input at `at`, and its offset in the row
    while (at >= start + slab_bytes_[i]) start += slab_bytes_[i++];
    for (size_t b = begin; b < end;) {
      const size_t n = slab_bytes_[i], off = at - start, len = std::min(n - off, end - b);
      std::memcpy(out + b, static_cast<const char*>(ctx.inputs[i]) + o * n + off, len);
      b += len;
      at += len;
      if (at == start + n) {  // the next input's slab (or the next row's first)
        start += n;
        if (++i == slab_bytes_.size()) i = start = at = 0, ++o;
      }
    }
  }

  const int64_t outer_;
  const std::vector<size_t> slab_bytes_;  // per input: bytes of one outer slab
  size_t row_bytes_ = 0;                  // one outer slab of every input
};

std::unique_ptr<Kernel> CreateConcat(const KernelSpec& spec) {
  CheckArity(spec, 1, kAnyNumber, 1);
  const TensorDesc& first = spec.inputs[0];
  for (size_t i = 1; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].dtype != first.dtype)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input " + std::to_string(i) + " has dtype " +
                                                   DTypeName(spec.inputs[i].dtype) + " but input 0 has " +
                                                   DTypeName(first.dtype) + "; all inputs must have the same dtype");
  if (spec.outputs[0].dtype != first.dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype " + DTypeName(spec.outputs[0].dtype) +
                                                 " differs from the inputs' dtype " + DTypeName(first.dtype));
  const size_t rank = first.shape.size();
  const size_t axis = static_cast<size_t>(CheckedAxis(spec, "axis", rank));
  std::vector<int64_t> out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const auto& s = spec.inputs[i].shape;
    bool compatible = s.size() == rank;
    for (size_t d = 0; compatible && d < rank; ++d) compatible = d == axis || s[d] == first.shape[d];
    if (!compatible)
      throw Error(ErrorCode::kInvalidArgument,
                  spec.Where() + ": input " + std::to_string(i) + " has shape " + ShapeToString(s) +
                      ", incompatible with input 0 " + ShapeToString(first.shape) + " for concat along axis " +
                      std::to_string(axis) + " (same rank, all other dims equal)");
    out[axis] += s[axis];
  }
  CheckOutputShape(spec, 0, out);
  const int64_t outer = Product(first.shape, 0, axis);
  const int64_t inner = Product(first.shape, axis + 1, rank);
  std::vector<size_t> slab_bytes;
  for (const TensorDesc& t : spec.inputs)
    slab_bytes.push_back(static_cast<size_t>(t.shape[axis] * inner) * DTypeSize(t.dtype));
  return std::make_unique<ConcatKernel>(outer, std::move(slab_bytes));
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Concat", CreateConcat);

}  // namespace kernels
}  // namespace tfpopef
