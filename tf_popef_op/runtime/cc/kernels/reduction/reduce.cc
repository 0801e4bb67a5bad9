// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare,
// ReduceLogSum, ReduceLogSumExp over the axes in attr `axes` (normalized, sorted; empty = reduce
// over nothing, i.e. the elementwise part only, as onnx's noop_with_empty_axes). keepdims
// only changes the output's static shape, not its element order, so the kernel ignores it.
// float32, float16 (widened a piece at a time in L1 and reduced by the float32 loops in the same
// order, so the float32 kernel's result rounded once), float64, int32, int64; Max/Min also
// int8/uint8/bool; LogSumExp float16 via the float32 kernel. Sums accumulate in
// double (the blocked per-channel Sum/Mean of float32 in float32 batches of 64 pixels first,
// blocked_runs.h), Max/Min in the element type (exact for int64). An empty reduction gives the op's
// identity (0, 1, -inf for Max/LogSumExp, +inf for Min; NaN for Mean).
//
// The input is walked once in memory order with a BroadcastPlan whose operand is the output
// (stride 0 along reduced axes), so every reduction pattern is a sequence of contiguous runs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/reduction/blocked_runs.h"
#include "tf_popef_op/runtime/cc/kernels/support/broadcast.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_pieces.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

template <typename T>
T Lowest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <typename T>
T Highest() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// Each op: Acc type, init, step(acc, x), finish(acc, count) -> T.
template <typename T>
struct SumOp {
  using Acc = double;
  Acc init() const { return 0.0; }
  Acc step(Acc a, T x) const { return a + static_cast<double>(x); }
  T finish(Acc a, int64_t) const { return static_cast<T>(a); }
};
template <typename T>
struct MeanOp : SumOp<T> {
  T finish(double a, int64_t n) const {
    return static_cast<T>(n ? a / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
  }
};
template <typename T>
struct ProdOp {
  using Acc = double;
  Acc init() const { return 1.0; }
  Acc step(Acc a, T x) const { return a * static_cast<double>(x); }
  T finish(Acc a, int64_t) const { return static_cast<T>(a); }
};
template <typename T>
struct L1Op : SumOp<T> {
  double step(double a, T x) const { return a + std::fabs(static_cast<double>(x)); }
};
template <typename T>
struct SumSquareOp : SumOp<T> {
  double step(double a, T x) const { return a + static_cast<double>(x) * static_cast<double>(x); }
};
template <typename T>
struct L2Op : SumSquareOp<T> {
  T finish(double a, int64_t) const { return static_cast<T>(std::sqrt(a)); }
};
template <typename T>
struct LogSumOp : SumOp<T> {
  T finish(double a, int64_t) const { return static_cast<T>(std::log(a)); }
};
template <typename T>
struct MaxOp {
  using Acc = T;
  Acc init() const { return Lowest<T>(); }
  Acc step(Acc a, T x) const { return x > a || x != x ? x : a; }  // NaN propagates
  T finish(Acc a, int64_t) const { return a; }
};
template <typename T>
struct MinOp {
  using Acc = T;
  Acc init() const { return Highest<T>(); }
  Acc step(Acc a, T x) const { return x < a || x != x ? x : a; }
  T finish(Acc a, int64_t) const { return a; }
};

// The blocked layout's lanes: [N, C/8, H, W, 8] reduced over H and W (the squeeze-and-excite
// means) is rows of runs of 8 into the same 8 outputs, summed by AddBlockedRuns (blocked_runs.h).
constexpr int64_t kBlockLanes = 8;
// AddBlockedRuns' float32 batches are one float16 piece, so a float16 input (widened a piece at
// a time, or by AddBlockedHalfRuns as it loads each run) takes the same steps as float32.
static_assert(kBlockedRunsFloatBatch * kBlockLanes == kHalfPiece, "a float32 batch is one float16 piece");

// T: the stored element type; Op works on V = T, or float for float16 (T = uint16_t), whose
// elements are widened a piece at a time into `piece` buffers before the loops read them.
template <typename T, typename Op>
class ReduceKernel final : public Kernel {
 public:
  static constexpr bool kHalf = std::is_same_v<T, uint16_t>;
  using V = std::conditional_t<kHalf, float, T>;
  using Acc = typename Op::Acc;
  ReduceKernel(BroadcastPlan<1> plan, int64_t out_numel, int64_t count)
      : plan_(std::move(plan)), out_numel_(out_numel), count_(count) {
    // Short contiguous runs into as many outputs (the blocked layout's 8 channels, reduced over
    // H and W: [N, C/8, H, W, 8] -> [N, C/8, 1, 1, 8]) are walked a row of runs at a time with
    // the run's accumulators in registers, instead of stepping the odometer every 8 elements.
    // (The level above a kept run is a reduced one, else the plan would have merged them.)
    const size_t levels = plan_.dims.size();
    if (plan_.num_runs > 0 && levels >= 2 && plan_.run_length() <= kShortRun && plan_.run_stride(0) == 1 &&
        plan_.strides[0][levels - 2] == 0) {
      rows_.dims.assign(plan_.dims.begin(), plan_.dims.end() - 1);
      rows_.strides[0].assign(plan_.strides[0].begin(), plan_.strides[0].end() - 1);
      rows_.num_runs = plan_.num_runs / rows_.run_length();
    }
  }

  size_t scratch_bytes() const override { return static_cast<size_t>(out_numel_) * sizeof(Acc); }

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    Acc* acc = static_cast<Acc*>(ctx.scratch);
    const int64_t in_numel = plan_.num_runs * plan_.run_length();
    // When the outermost loop level is kept (e.g. [N, C, H, W] reduced over H, W, or any
    // reduction of the trailing axes), each of its indices owns a contiguous block of outputs,
    // so blocks go to different threads. Otherwise (reducing the leading axis) every input
    // slice adds to every output and the walk stays on one thread.
    const bool split = plan_.dims.size() >= 2 && plan_.strides[0][0] != 0;
    const int64_t blocks = split ? plan_.dims[0] : 1;
    const int64_t block_in = in_numel / std::max<int64_t>(blocks, 1), block_out = out_numel_ / std::max<int64_t>(blocks, 1);
    ParallelFor(blocks, ItemsPerChunk(block_in, kStreamingGrain), [&](int64_t begin, int64_t end) {
      Reduce(x, y, acc, begin * block_in, end * block_in, begin * block_out, end * block_out);
    });
  }

 private:
  // Input elements [in_begin, in_end) reduce into exactly the outputs [out_begin, out_end).
  void Reduce(const T* x, T* y, Acc* acc, int64_t in_begin, int64_t in_end, int64_t out_begin, int64_t out_end) const {
    const Op op;
    std::fill(acc + out_begin, acc + out_end, op.init());
    if (!rows_.dims.empty()) return ReduceRows(x, y, acc, in_begin, in_end, out_begin, out_end);
    const int64_t s = plan_.run_stride(0);
    alignas(64) float piece[kHalf ? kHalfPiece : 1];
    ForEachRunInRange(plan_, in_begin, in_end, [&](int64_t in, const std::array<int64_t, 1>& off, int64_t n) {
      Acc* ar = acc + off[0];
      // Elements [p, p + m) of the run, as V: float16 is widened in pieces whose length is a
      // multiple of 4, so the loops below take the same steps as on the whole run.
      auto for_each_piece = [&](auto&& body) {
        if constexpr (kHalf) {
          for (int64_t p = 0; p < n; p += kHalfPiece) {
            const int64_t m = std::min(kHalfPiece, n - p);
            WidenHalfToFloat(x + in + p, piece, m);
            body(static_cast<const V*>(piece), p, m);
          }
        } else {
          body(x + in, int64_t{0}, n);
        }
      };
      if constexpr (std::is_base_of_v<SumOp<V>, Op>) {
        if (s == 0) {
          // Sums of a contiguous run: four partial sums so the additions overlap.
          double part[4] = {0.0, 0.0, 0.0, 0.0};
          for_each_piece([&](const V* xr, int64_t, int64_t m) {
            int64_t i = 0;
            for (; i + 4 <= m; i += 4)
              for (int k = 0; k < 4; ++k) part[k] = op.step(part[k], xr[i + k]);
            for (; i < m; ++i) part[0] = op.step(part[0], xr[i]);
          });
          *ar += (part[0] + part[1]) + (part[2] + part[3]);
          return;
        }
      }
      if (s == 0) {
        Acc a = *ar;
        for_each_piece([&](const V* xr, int64_t, int64_t m) {
          for (int64_t i = 0; i < m; ++i) a = op.step(a, xr[i]);
        });
        *ar = a;
      } else {
        for_each_piece([&](const V* xr, int64_t p, int64_t m) {
          for (int64_t i = 0; i < m; ++i) ar[(p + i) * s] = op.step(ar[(p + i) * s], xr[i]);
        });
      }
    });
    Finish(y, acc, out_begin, out_end);
  }

  void Finish(T* y, const Acc* acc, int64_t out_begin, int64_t out_end) const {
    const Op op;
    if constexpr (kHalf) {
      // Finished in float32 a piece at a time, then narrowed in bulk (F16C where the CPU has it,
      // the same bits as FloatToHalf): a 7x7 squeeze mean sums only 49 values per output, so
      // a scalar conversion per output is a visible part of its step.
      alignas(64) float piece[kHalfPiece];
      for (int64_t o = out_begin; o < out_end; o += kHalfPiece) {
        const int64_t m = std::min(kHalfPiece, out_end - o);
        for (int64_t i = 0; i < m; ++i) piece[i] = op.finish(acc[o + i], count_);
        NarrowFloatToHalf(piece, y + o, m);
      }
    } else {
      for (int64_t o = out_begin; o < out_end; ++o) y[o] = op.finish(acc[o], count_);
    }
  }

  // Reduce() for short runs (rows_): each row of rows_ is `n` runs of `run` contiguous inputs
  // into the same `run` contiguous outputs, summed in local accumulators.
  void ReduceRows(const T* x, T* y, Acc* acc, int64_t in_begin, int64_t in_end, int64_t out_begin,
                  int64_t out_end) const {
    const Op op;
    const int64_t run = plan_.run_length();
    alignas(64) float piece[kHalf ? kHalfPiece : 1];
    const int64_t piece_runs = kHalf ? kHalfPiece / run : 0;
    [[maybe_unused]] const AddBlockedRunsFn add_blocked_runs = BlockedRunsAdder();
    [[maybe_unused]] const AddBlockedHalfRunsFn add_blocked_half_runs = BlockedHalfRunsAdder();
    ForEachRunInRange(rows_, in_begin / run, in_end / run, [&](int64_t r, const std::array<int64_t, 1>& off, int64_t n) {
      Acc local[kShortRun];
      std::copy(acc + off[0], acc + off[0] + run, local);
      auto add_runs = [&](const V* xr, int64_t runs) {
        if constexpr (kPlainFloatSum) {
          if (run == kBlockLanes) return add_blocked_runs(xr, runs, local);
        }
        for (int64_t j = 0; j < runs; ++j, xr += run)
          for (int64_t i = 0; i < run; ++i) local[i] = op.step(local[i], xr[i]);
      };
      if constexpr (kHalf) {
        if constexpr (kPlainFloatSum) {  // (widened as the loop loads it, in the same batches)
          if (run == kBlockLanes) {
            add_blocked_half_runs(x + r * run, n, local);
            std::copy(local, local + run, acc + off[0]);
            return;
          }
        }
        for (int64_t j = 0; j < n; j += piece_runs) {
          const int64_t runs = std::min(piece_runs, n - j);
          WidenHalfToFloat(x + (r + j) * run, piece, runs * run);
          add_runs(piece, runs);
        }
      } else {
        add_runs(x + r * run, n);
      }
      std::copy(local, local + run, acc + off[0]);
    });
    Finish(y, acc, out_begin, out_end);
  }

  static constexpr int64_t kShortRun = 64;
  // Sum and Mean of float32 (or widened float16) elements: the blocked layout's runs of 8 take
  // AddBlockedRuns' vector loop.
  static constexpr bool kPlainFloatSum =
      std::is_same_v<V, float> && (std::is_same_v<Op, SumOp<float>> || std::is_same_v<Op, MeanOp<float>>);
  const BroadcastPlan<1> plan_;
  const int64_t out_numel_, count_;
  BroadcastPlan<1> rows_;  // plan_ without its innermost level, when its runs are short, kept and contiguous
};

// log(sum(exp(x))) computed as max + log(sum(exp(x − max))): two passes, max kept in the
// output buffer between them.
template <typename T>
class LogSumExpKernel final : public Kernel {
 public:
  LogSumExpKernel(BroadcastPlan<1> plan, int64_t out_numel) : plan_(std::move(plan)), out_numel_(out_numel) {}

  size_t scratch_bytes() const override { return static_cast<size_t>(out_numel_) * sizeof(double); }

  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* max = static_cast<T*>(ctx.outputs[0]);
    double* sum = static_cast<double*>(ctx.scratch);
    std::fill(max, max + out_numel_, -std::numeric_limits<T>::infinity());
    std::fill(sum, sum + out_numel_, 0.0);
    const int64_t n = plan_.run_length(), s = plan_.run_stride(0);
    ForEachRun(plan_, [&](int64_t in, const std::array<int64_t, 1>& off) {
      for (int64_t i = 0; i < n; ++i) max[off[0] + i * s] = std::max(max[off[0] + i * s], x[in + i]);
    });
    ForEachRun(plan_, [&](int64_t in, const std::array<int64_t, 1>& off) {
      for (int64_t i = 0; i < n; ++i) {
        const T m = max[off[0] + i * s];
        const double shifted = std::isinf(m) ? (x[in + i] == m ? 0.0 : -INFINITY) : static_cast<double>(x[in + i]) - m;
        sum[off[0] + i * s] += std::exp(shifted);
      }
    });
    for (int64_t o = 0; o < out_numel_; ++o)
      max[o] = std::isinf(max[o]) && max[o] < 0 && sum[o] == 0.0 ? max[o]
                                                                  : static_cast<T>(max[o] + std::log(sum[o]));
  }

 private:
  const BroadcastPlan<1> plan_;
  const int64_t out_numel_;
};

struct ReduceShape {
  BroadcastPlan<1> plan;
  int64_t out_numel = 0, count = 1;
};

ReduceShape ReadReduceShape(const KernelSpec& spec) {
  const auto& in = spec.inputs[0].shape;
  std::vector<int64_t> kept = in;
  int64_t count = 1;
  int64_t previous = -1;
  for (int64_t a : spec.attrs.Ints("axes")) {
    if (a <= previous || a >= static_cast<int64_t>(in.size()))
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": 'axes' must be sorted, unique and in [0, " +
                                                   std::to_string(in.size()) + ")");
    previous = a;
    count *= in[static_cast<size_t>(a)];
    kept[static_cast<size_t>(a)] = 1;
  }
  if (spec.outputs[0].numel() != Product(kept))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output " + ShapeToString(spec.outputs[0].shape) +
                                                 " does not hold the reduction of " + ShapeToString(in) +
                                                 " to " + ShapeToString(kept));
  return {MakeBroadcastPlan<1>(in, {kept}, spec.Where()), Product(kept), count};
}

template <template <typename> class Op>
std::unique_ptr<Kernel> CreateReduceKernel(const KernelSpec& spec) {
  ReduceShape r = ReadReduceShape(spec);
  auto make = [&](auto type) -> std::unique_ptr<Kernel> {
    using T = decltype(type);
    return std::make_unique<ReduceKernel<T, Op<T>>>(std::move(r.plan), r.out_numel, r.count);
  };
  switch (spec.inputs[0].dtype) {
    case DType::kFloat16:
      return std::make_unique<ReduceKernel<uint16_t, Op<float>>>(std::move(r.plan), r.out_numel, r.count);
    case DType::kFloat32: return make(float{});
    case DType::kFloat64: return make(double{});
    case DType::kInt32: return make(int32_t{});
    case DType::kInt64: return make(int64_t{});
    case DType::kInt8: return make(int8_t{});
    case DType::kUInt8: return make(uint8_t{});
    case DType::kBool:  // Max/Min only (checked by the caller)
      if constexpr (std::is_same_v<Op<bool>, MaxOp<bool>> || std::is_same_v<Op<bool>, MinOp<bool>>) return make(bool{});
      break;
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

template <template <typename> class Op, bool kBytes>
std::unique_ptr<Kernel> CreateReduce(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  if (kBytes)
    CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kInt8,
                          DType::kUInt8, DType::kBool});
  else
    CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32, DType::kInt64});
  return CreateReduceKernel<Op>(spec);
}

std::unique_ptr<Kernel> CreateFloat32LogSumExp(const KernelSpec& spec) {
  ReduceShape r = ReadReduceShape(spec);
  if (spec.inputs[0].dtype == DType::kFloat64)
    return std::make_unique<LogSumExpKernel<double>>(std::move(r.plan), r.out_numel);
  return std::make_unique<LogSumExpKernel<float>>(std::move(r.plan), r.out_numel);
}

std::unique_ptr<Kernel> CreateLogSumExp(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kFloat64});
  return WithFloat16Support(spec, CreateFloat32LogSumExp);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("ReduceSum", (CreateReduce<SumOp, false>));
TFPOPEF_REGISTER_KERNEL("ReduceMean", (CreateReduce<MeanOp, false>));
TFPOPEF_REGISTER_KERNEL("ReduceProd", (CreateReduce<ProdOp, false>));
TFPOPEF_REGISTER_KERNEL("ReduceL1", (CreateReduce<L1Op, false>));
TFPOPEF_REGISTER_KERNEL("ReduceL2", (CreateReduce<L2Op, false>));
TFPOPEF_REGISTER_KERNEL("ReduceSumSquare", (CreateReduce<SumSquareOp, false>));
TFPOPEF_REGISTER_KERNEL("ReduceLogSum", (CreateReduce<LogSumOp, false>));
TFPOPEF_REGISTER_KERNEL("ReduceMax", (CreateReduce<MaxOp, true>));
TFPOPEF_REGISTER_KERNEL("ReduceMin", (CreateReduce<MinOp, true>));
TFPOPEF_REGISTER_KERNEL("ReduceLogSumExp", CreateLogSumExp);

}  // namespace kernels
}  // namespace tfpopef
