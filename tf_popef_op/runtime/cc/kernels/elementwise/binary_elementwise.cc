// Add, Sub, Mul, Div with numpy broadcasting; float32, float16 (computed in float32 piece by
// piece, fp16_pieces.h), float64, int8/16/32/64 and uint8/16/32/64.
//
// Integer semantics are defined for every input, so a model can never crash the process:
// - Add/Sub/Mul wrap around (two's complement), like numpy; computed in the unsigned type
//   because signed overflow is undefined behaviour in C++.
// - Div truncates toward zero (ONNX). x / 0 is defined as 0 (it would raise SIGFPE), and
//   MIN / -1 wraps to MIN (the only other trapping case).
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>

#include "tf_popef_op/runtime/cc/kernels/elementwise/blocked_half_mul.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_pieces.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

struct AddOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
    else return a + b;
  }
};

struct SubOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b));
    else return a - b;
  }
};

struct MulOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b));
    else return a * b;
  }
};

struct DivOp {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;                                                // defined: x / 0 = 0
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(a));  // MIN / -1 wraps
      return a / b;                                                        // C++ truncates toward zero
    } else {
      return a / b;  // IEEE: x / 0 = +-inf, 0 / 0 = nan
    }
  }
};

// y[i] = op(a[i·sa], b[i·sb]) over n elements, one loop per stride pattern so each vectorizes.
template <typename T, typename Op>
inline void BinaryRun(const T* pa, int64_t sa, const T* pb, int64_t sb, T* pc, int64_t n) {
  const Op op;
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) pc[i] = op(pa[i], pb[i]);
  } else if (sa == 1 && sb == 0) {
    const T vb = *pb;
    for (int64_t i = 0; i < n; ++i) pc[i] = op(pa[i], vb);
  } else if (sa == 0 && sb == 1) {
    const T va = *pa;
    for (int64_t i = 0; i < n; ++i) pc[i] = op(va, pb[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) pc[i] = op(pa[i * sa], pb[i * sb]);
  }
}

// c[0..8) = op(a[i], b[i]): a fixed-length loop on distinct buffers, one or two vector ops.
template <typename Op>
inline void BlockOf8(const float* __restrict a, const float* __restrict b, float* __restrict c) {
  const Op op;
  for (int i = 0; i < 8; ++i) c[i] = op(a[i], b[i]);
}

// Runs shorter than this are walked two loop levels at a time (see BinaryKernel).
constexpr int64_t kShortRun = 64;
// Elements per chunk of BinaryKernel's row-walked path, a quarter of kStreamingGrain. Its main
// use, squeeze-and-excite's Mul(D, S) on the blocked layout, reads a D the step before wrote,
// still in the cores' L2: at kStreamingGrain a 7² × 1152 float32 D (EfficientNetB0 batch 1,
// 226 KB) was one chunk, and the thread that ran it took 21 µs, half of D coming from the
// other core's L2 (10 µs with a one-thread pool); split over both threads it takes 10.5 µs,
// in 6 chunks as in 2 (one per thread) (docs/benchmarks.md, "Squeeze-and-excite blocks").
constexpr int64_t kRowsGrain = kStreamingGrain / 4;

template <typename T, typename Op>
class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(BroadcastPlan<2> plan) : plan_(std::move(plan)), numel_(plan_.num_runs * plan_.run_length()) {
    // A short innermost run (the blocked layout's 8 channels against a per-channel operand
    // [1, C/8, 1, 1, 8]) would spend more time stepping the odometer than computing: the
    // plan without its last level then hands out rows of runs, walked here with the
    // second-last level's strides.
    if (numel_ > 0 && plan_.dims.size() >= 2 && plan_.run_length() < kShortRun) {
      rows_.dims.assign(plan_.dims.begin(), plan_.dims.end() - 1);
      for (size_t k = 0; k < 2; ++k) rows_.strides[k].assign(plan_.strides[k].begin(), plan_.strides[k].end() - 1);
      rows_.num_runs = plan_.num_runs / rows_.run_length();
    }
  }

  void Run(const KernelContext& ctx) const override {
    const T* a = static_cast<const T*>(ctx.inputs[0]);
    const T* b = static_cast<const T*>(ctx.inputs[1]);
    T* c = static_cast<T*>(ctx.outputs[0]);
    const int64_t sa = plan_.run_stride(0), sb = plan_.run_stride(1);
    // The run strides are fixed per kernel, so each branch is a simple loop the compiler
    // vectorizes: same shape / scalar operand / row broadcast all end up here. Large outputs
    // are split into element ranges on the intra-op pool.
    if (!rows_.dims.empty()) {
      const int64_t run = plan_.run_length(), ra = rows_.run_stride(0), rb = rows_.run_stride(1);
      const bool blocks_of_8 = run == 8 && sa == 1 && sb == 1;
      ParallelFor(plan_.num_runs, ItemsPerChunk(run, kRowsGrain), [&](int64_t begin, int64_t end) {
        ForEachRunInRange(rows_, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
          if (blocks_of_8) {  // a fixed-length loop the compiler turns into whole vectors
            const Op op;
            for (int64_t j = 0; j < n; ++j) {
              const T* pa = a + off[0] + j * ra;
              const T* pb = b + off[1] + j * rb;
              T* pc = c + (o + j) * 8;
              for (int i = 0; i < 8; ++i) pc[i] = op(pa[i], pb[i]);
            }
            return;
          }
          for (int64_t j = 0; j < n; ++j)
            BinaryRun<T, Op>(a + off[0] + j * ra, sa, b + off[1] + j * rb, sb, c + (o + j) * run, run);
        });
      });
      return;
    }
    ParallelFor(numel_, kStreamingGrain, [&](int64_t begin, int64_t end) {
      ForEachRunInRange(plan_, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
        BinaryRun<T, Op>(a + off[0], sa, b + off[1], sb, c + o, n);
      });
    });
  }

 private:
  const BroadcastPlan<2> plan_;
  const int64_t numel_;
  BroadcastPlan<2> rows_;  // plan_ without its innermost level, when its runs are short
};

// float16: the output is computed in pieces of float32 (the float32 kernel's loops on widened
// operands) and each piece narrowed once. An operand of the output's shape is widened piece by
// piece alongside it; a broadcast operand (a per-channel vector, a scalar) is widened whole
// into scratch once per run. Short runs are walked in rows as BinaryKernel does. A Mul of a
// blocked tensor by a per-channel operand runs MulBlockedHalfRuns (blocked_half_mul.h) on the
// AVX2 and AVX-512 paths instead: each run widened and narrowed in registers, in chunks of
// BinaryKernel's row grain.
template <typename Op>
class HalfBinaryKernel final : public Kernel {
 public:
  HalfBinaryKernel(BroadcastPlan<2> plan, std::array<bool, 2> full, std::array<int64_t, 2> numel)
      : plan_(std::move(plan)), numel_(plan_.num_runs * plan_.run_length()), full_(full) {
    if (numel_ > 0 && plan_.dims.size() >= 2 && plan_.run_length() < kShortRun) {
      rows_.dims.assign(plan_.dims.begin(), plan_.dims.end() - 1);
      for (size_t k = 0; k < 2; ++k) rows_.strides[k].assign(plan_.strides[k].begin(), plan_.strides[k].end() - 1);
      rows_.num_runs = plan_.num_runs / rows_.run_length();
    }
    if constexpr (std::is_same_v<Op, MulOp>) {
      if (!rows_.dims.empty() && plan_.run_length() == 8 && plan_.run_stride(0) == 1 && plan_.run_stride(1) == 1 &&
          full_[0] != full_[1]) {
        const size_t f = full_[0] ? 0 : 1;
        if (rows_.run_stride(f) == 8 && rows_.run_stride(1 - f) == 0) {
          mul_runs_ = BlockedHalfRunsMultiplier();
          full_index_ = f;
        }
      }
    }
    for (size_t k = 0; k < 2; ++k) {
      copy_offset_[k] = scratch_bytes_;
      if (!full_[k]) scratch_bytes_ += (static_cast<size_t>(numel[k]) * sizeof(float) + 63) / 64 * 64;
      copy_numel_[k] = full_[k] ? 0 : numel[k];
    }
  }

  size_t scratch_bytes() const override { return scratch_bytes_; }

  void Run(const KernelContext& ctx) const override {
    if (numel_ == 0) return;
    const uint16_t* half[2] = {static_cast<const uint16_t*>(ctx.inputs[0]), static_cast<const uint16_t*>(ctx.inputs[1])};
    if (mul_runs_ != nullptr) {
      const uint16_t* x = half[full_index_];
      const uint16_t* s = half[1 - full_index_];
      uint16_t* y = static_cast<uint16_t*>(ctx.outputs[0]);
      ParallelFor(plan_.num_runs, ItemsPerChunk(8, kRowsGrain), [&](int64_t begin, int64_t end) {
        ForEachRunInRange(rows_, begin, end, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
          mul_runs_(x + off[full_index_], s + off[1 - full_index_], y + o * 8, n);
        });
      });
      return;
    }
    const float* copy[2] = {nullptr, nullptr};
    for (size_t k = 0; k < 2; ++k) {
      if (full_[k]) continue;
      float* dst = reinterpret_cast<float*>(static_cast<char*>(ctx.scratch) + copy_offset_[k]);
      ParallelFor(copy_numel_[k], kStreamingGrain,
                  [&](int64_t b, int64_t e) { WidenHalfToFloat(half[k] + b, dst + b, e - b); });
      copy[k] = dst;
    }
    uint16_t* c = static_cast<uint16_t*>(ctx.outputs[0]);
    const int64_t sa = plan_.run_stride(0), sb = plan_.run_stride(1);
    // Widens the full operands' elements [s, s + n) into `operands`.
    auto widen_full = [&](int64_t s, int64_t n, float (*operands)[kHalfPiece]) {
      for (size_t k = 0; k < 2; ++k)
        if (full_[k]) WidenHalfToFloat(half[k] + s, operands[k], n);
    };
    if (!rows_.dims.empty()) {
      const int64_t run = plan_.run_length(), ra = rows_.run_stride(0), rb = rows_.run_stride(1);
      const int64_t piece_runs = kHalfPiece / run;
      const bool blocks_of_8 = run == 8 && sa == 1 && sb == 1;
      ParallelFor(plan_.num_runs, ItemsPerChunk(run, kStreamingGrain), [&](int64_t begin, int64_t end) {
        alignas(64) float operands[2][kHalfPiece];
        alignas(64) float out[kHalfPiece];
        for (int64_t r0 = begin; r0 < end; r0 += piece_runs) {
          const int64_t r1 = std::min(end, r0 + piece_runs);
          widen_full(r0 * run, (r1 - r0) * run, operands);
          ForEachRunInRange(rows_, r0, r1, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n) {
            for (int64_t j = 0; j < n; ++j) {
              const int64_t at = (o + j - r0) * run;
              const float* pa = full_[0] ? operands[0] + at : copy[0] + off[0] + j * ra;
              const float* pb = full_[1] ? operands[1] + at : copy[1] + off[1] + j * rb;
              if (blocks_of_8) {
                BlockOf8<Op>(pa, pb, out + at);
              } else {
                BinaryRun<float, Op>(pa, sa, pb, sb, out + at, run);
              }
            }
          });
          NarrowFloatToHalf(out, c + r0 * run, (r1 - r0) * run);
        }
      });
      return;
    }
    ParallelFor(numel_, kStreamingGrain, [&](int64_t begin, int64_t end) {
      alignas(64) float operands[2][kHalfPiece];
      alignas(64) float out[kHalfPiece];
      for (int64_t s = begin; s < end; s += kHalfPiece) {
        const int64_t n = std::min(kHalfPiece, end - s);
        widen_full(s, n, operands);
        ForEachRunInRange(plan_, s, s + n, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
          const float* pa = full_[0] ? operands[0] + (o - s) : copy[0] + off[0];
          const float* pb = full_[1] ? operands[1] + (o - s) : copy[1] + off[1];
          BinaryRun<float, Op>(pa, sa, pb, sb, out + (o - s), len);
        });
        NarrowFloatToHalf(out, c + s, n);
      }
    });
  }

 private:
  const BroadcastPlan<2> plan_;
  const int64_t numel_;
  const std::array<bool, 2> full_;  // operand k has the output's shape
  BroadcastPlan<2> rows_;
  size_t copy_offset_[2] = {0, 0}, scratch_bytes_ = 0;
  int64_t copy_numel_[2] = {0, 0};
  MulBlockedHalfRunsFn mul_runs_ = nullptr;  // set: a blocked tensor times a per-channel run
  size_t full_index_ = 0;                    // which operand is the blocked tensor
};

template <typename Op>
std::unique_ptr<Kernel> CreateKernel(const KernelSpec& spec) {
  const auto& a = spec.inputs[0].shape;
  const auto& b = spec.inputs[1].shape;
  std::vector<int64_t> out;
  if (!BroadcastShapes(a, b, &out))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": input shapes " + ShapeToString(a) + " and " +
                                                 ShapeToString(b) + " are not broadcastable (numpy rules)");
  CheckOutputShape(spec, 0, out);
  BroadcastPlan<2> plan = MakeBroadcastPlan<2>(out, {a, b}, spec.Where());
  switch (spec.inputs[0].dtype) {
    case DType::kFloat16:
      return std::make_unique<HalfBinaryKernel<Op>>(std::move(plan), std::array<bool, 2>{a == out, b == out},
                                                    std::array<int64_t, 2>{Product(a), Product(b)});
    case DType::kFloat32: return std::make_unique<BinaryKernel<float, Op>>(std::move(plan));
    case DType::kFloat64: return std::make_unique<BinaryKernel<double, Op>>(std::move(plan));
    case DType::kInt8: return std::make_unique<BinaryKernel<int8_t, Op>>(std::move(plan));
    case DType::kInt16: return std::make_unique<BinaryKernel<int16_t, Op>>(std::move(plan));
    case DType::kInt32: return std::make_unique<BinaryKernel<int32_t, Op>>(std::move(plan));
    case DType::kInt64: return std::make_unique<BinaryKernel<int64_t, Op>>(std::move(plan));
    case DType::kUInt8: return std::make_unique<BinaryKernel<uint8_t, Op>>(std::move(plan));
    case DType::kUInt16: return std::make_unique<BinaryKernel<uint16_t, Op>>(std::move(plan));
    case DType::kUInt32: return std::make_unique<BinaryKernel<uint32_t, Op>>(std::move(plan));
    case DType::kUInt64: return std::make_unique<BinaryKernel<uint64_t, Op>>(std::move(plan));
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

template <typename Op>
std::unique_ptr<Kernel> CreateBinary(const KernelSpec& spec) {
  CheckArity(spec, 2, 2, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kInt16, DType::kInt32,
                       DType::kInt64, DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64});
  return CreateKernel<Op>(spec);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Add", CreateBinary<AddOp>);
TFPOPEF_REGISTER_KERNEL("Sub", CreateBinary<SubOp>);
TFPOPEF_REGISTER_KERNEL("Mul", CreateBinary<MulOp>);
TFPOPEF_REGISTER_KERNEL("Div", CreateBinary<DivOp>);

}  // namespace kernels
}  // namespace tfpopef
