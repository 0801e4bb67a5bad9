// Concat along `axis`, any dtype. Viewed as [outer, axis_dim * inner] per input, the output
// is, for each outer index, the inputs' slabs back to back, so it is a sequence of memcpys.
// With one outer slab, an input the memory plan placed at its slice of the output (its
// producer wrote it there: docs/popef.md "Arena plan") is already in place and is skipped.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(int64_t outer, std::vector<size_t> slab_bytes) : outer_(outer), slab_bytes_(std::move(slab_bytes)) {}

  void Run(const KernelContext& ctx) const override {
    if (outer_ == 1) {
      RunOneSlab(ctx);
      return;
    }
    size_t row_bytes = 0;  // one outer slab of every input
    for (size_t n : slab_bytes_) row_bytes += n;
    // Outer slabs split across the intra-op pool (grain in 4-byte elements).
    ParallelFor(outer_, ItemsPerChunk(static_cast<int64_t>(row_bytes / 4), kStreamingGrain), [&](int64_t begin, int64_t end) {
      auto* out = static_cast<char*>(ctx.outputs[0]) + static_cast<size_t>(begin) * row_bytes;
      for (int64_t o = begin; o < end; ++o) {
        for (size_t i = 0; i < slab_bytes_.size(); ++i) {
          const size_t n = slab_bytes_[i];
          if (n == 0) continue;
          std::memcpy(out, static_cast<const char*>(ctx.inputs[i]) + o * n, n);
          out += n;
        }
      }
    });
  }

 private:
  // Each input is one byte range of the output: copy those not already there, split into
  // chunks across the intra-op pool (one outer slab would otherwise be one thread's work).
  void RunOneSlab(const KernelContext& ctx) const {
    struct Chunk {
      const char* src;
      char* dst;
      size_t n;
    };
    constexpr size_t kChunkBytes = 64 * 1024;
    std::vector<Chunk> chunks;
    char* out = static_cast<char*>(ctx.outputs[0]);
    for (size_t i = 0; i < slab_bytes_.size(); ++i) {
      const auto* in = static_cast<const char*>(ctx.inputs[i]);
      if (in != out)
        for (size_t done = 0; done < slab_bytes_[i]; done += kChunkBytes)
          chunks.push_back(Chunk{in + done, out + done, std::min(kChunkBytes, slab_bytes_[i] - done)});
      out += slab_bytes_[i];
    }
    ParallelFor(static_cast<int64_t>(chunks.size()), ItemsPerChunk(kChunkBytes / 4, kStreamingGrain),
                [&](int64_t begin, int64_t end) {
                  for (int64_t k = begin; k < end; ++k) std::memcpy(chunks[k].dst, chunks[k].src, chunks[k].n);
                });
  }

  const int64_t outer_;
  const std::vector<size_t> slab_bytes_;  // per input: bytes of one outer slab
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
