// Data movement where every output axis reads one input position chosen per output index:
// out[o0, o1, ...] = in[t0[o0], t1[o1], ...], or a fill value when any t_d[o_d] is -1.
// Pad (constant/reflect/edge/wrap, negative pads), Slice (any steps), Tile, Expand and
// nearest-neighbour resizing are all such maps; each op only builds the tables at prepare.
// Any dtype: elements are moved as 1/2/4/8-byte words.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {

// The bytes of `value` converted to `dtype` (float16 rounded to nearest even, bool = != 0).
inline std::vector<uint8_t> EncodeScalar(DType dtype, double value) {
  std::vector<uint8_t> bytes(DTypeSize(dtype));
  auto put = [&](auto v) { std::memcpy(bytes.data(), &v, sizeof(v)); };
  switch (dtype) {
    case DType::kFloat32: put(static_cast<float>(value)); break;
    case DType::kFloat16: put(FloatToHalf(static_cast<float>(value))); break;
    case DType::kFloat64: put(value); break;
    case DType::kInt8: put(static_cast<int8_t>(value)); break;
    case DType::kInt16: put(static_cast<int16_t>(value)); break;
    case DType::kInt32: put(static_cast<int32_t>(value)); break;
    case DType::kInt64: put(static_cast<int64_t>(value)); break;
    case DType::kUInt8: put(static_cast<uint8_t>(value)); break;
    case DType::kUInt16: put(static_cast<uint16_t>(value)); break;
    case DType::kUInt32: put(static_cast<uint32_t>(value)); break;
    case DType::kUInt64: put(static_cast<uint64_t>(value)); break;
    case DType::kBool: put(static_cast<uint8_t>(value != 0.0)); break;
  }
  return bytes;
}

template <typename Word>
class AxisIndexMapKernel final : public Kernel {
 public:
  // tables[d] has out_shape[d] entries, each in [-1, in_shape[d]).
  AxisIndexMapKernel(std::vector<int64_t> in_shape, std::vector<std::vector<int64_t>> tables, Word fill)
      : tables_(std::move(tables)), fill_(fill) {
    in_strides_.assign(in_shape.size(), 1);
    for (size_t d = in_shape.size(); d-- > 1;) in_strides_[d - 1] = in_strides_[d] * in_shape[d];
    numel_ = 1;
    for (const auto& t : tables_) numel_ *= static_cast<int64_t>(t.size());
  }

  void Run(const KernelContext& ctx) const override {
    const Word* in = static_cast<const Word*>(ctx.inputs[0]);
    Word* out = static_cast<Word*>(ctx.outputs[0]);
    if (numel_ == 0) return;
    const size_t rank = tables_.size();
    if (rank == 0) {
      out[0] = in[0];
      return;
    }
    const std::vector<int64_t>& last = tables_.back();
    const int64_t run = static_cast<int64_t>(last.size());
    // Rows (runs of the last axis) split across the intra-op pool; each row finds its outer
    // indices by division, so chunks share no state and nothing is allocated.
    ParallelFor(numel_ / run, ItemsPerChunk(run, kStreamingGrain), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        // Offset of the outer dims; -1 when any of them reads the fill value.
        int64_t base = 0;
        for (size_t d = rank - 1, rest = static_cast<size_t>(r); d-- > 0 && base >= 0;) {
          const size_t size = tables_[d].size();
          const int64_t s = tables_[d][rest % size];
          rest /= size;
          base = s < 0 ? -1 : base + s * in_strides_[d];
        }
        Word* row = out + r * run;
        if (base < 0) {
          for (int64_t i = 0; i < run; ++i) row[i] = fill_;
        } else {
          const Word* src = in + base;
          for (int64_t i = 0; i < run; ++i) {
            const int64_t s = last[static_cast<size_t>(i)];
            row[i] = s < 0 ? fill_ : src[s];
          }
        }
      }
    });
  }

 private:
  std::vector<std::vector<int64_t>> tables_;
  std::vector<int64_t> in_strides_;
  int64_t numel_ = 0;
  const Word fill_;
};

// `fill` holds DTypeSize(dtype) bytes (or is empty when no table has -1 entries).
inline std::unique_ptr<Kernel> MakeAxisIndexMap(const KernelSpec& spec, std::vector<std::vector<int64_t>> tables,
                                                const std::vector<uint8_t>& fill) {
  const TensorDesc& in = spec.inputs[0];
  std::vector<int64_t> out_shape;
  for (const auto& t : tables) out_shape.push_back(static_cast<int64_t>(t.size()));
  CheckOutputShape(spec, 0, out_shape);
  if (spec.outputs[0].dtype != in.dtype)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype " + DTypeName(spec.outputs[0].dtype) +
                                                 " differs from input dtype " + DTypeName(in.dtype));
  for (size_t d = 0; d < tables.size(); ++d)
    for (int64_t s : tables[d])
      if (s < -1 || s >= in.shape[d])
        throw Error(ErrorCode::kInternal, spec.Where() + ": index map reads position " + std::to_string(s) +
                                              " of axis " + std::to_string(d) + " of size " +
                                              std::to_string(in.shape[d]));
  auto make = [&](auto word) -> std::unique_ptr<Kernel> {
    using Word = decltype(word);
    Word f{};
    if (fill.size() == sizeof(Word)) std::memcpy(&f, fill.data(), sizeof(Word));
    return std::make_unique<AxisIndexMapKernel<Word>>(in.shape, std::move(tables), f);
  };
  switch (DTypeSize(in.dtype)) {
    case 1: return make(uint8_t{});
    case 2: return make(uint16_t{});
    case 4: return make(uint32_t{});
    default: return make(uint64_t{});
  }
}

}  // namespace kernels
}  // namespace tfpopef
