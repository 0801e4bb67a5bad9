// Elementwise math and parametric activations. Float ops run on float32 (float16 as float32 on
// pieces widened in L1, fp16_pieces.h); Neg and Abs also on signed integers, Clip on every
// numeric dtype.
// Parameters come from attrs the compiler always writes:
//   LeakyRelu alpha; Elu alpha; Selu alpha, gamma; HardSigmoid alpha, beta;
//   Gelu approximate ("none" | "tanh"); Clip optional min, max (numbers in the tensor's
//   dtype; a missing bound does not clip, so +-inf pass through).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/activations.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_adapter.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_pieces.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace kernels {
namespace {

struct Params {
  float a = 0.0f, b = 0.0f;
  bool flag = false;
};

// Ops with an Apply run whole ranges through vector_math.h (AVX2 when available); the others
// are scalar loops the compiler vectorizes where it can. kGrain: see thread_pool.h.
struct ErfOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params&) { vmath::Erf(x, y, n); }
};
struct ExpOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params&) { vmath::Exp(x, y, n); }
};
struct LogOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params&) { vmath::Log(x, y, n); }
};
struct SqrtOp { float operator()(float x, const Params&) const { return std::sqrt(x); } };
struct ReciprocalOp { float operator()(float x, const Params&) const { return 1.0f / x; } };
struct SoftsignOp { float operator()(float x, const Params&) const { return activation::Softsign(x); } };
struct SoftplusOp {
  static constexpr int64_t kGrain = kMathGrain;
  float operator()(float x, const Params&) const { return activation::Softplus(x); }
};
struct LeakyReluOp { float operator()(float x, const Params& p) const { return activation::LeakyRelu(x, p.a); } };
struct EluOp {
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params& p) { vmath::Elu(x, y, n, p.a, 1.0f); }
};
struct SeluOp {  // gamma · (x <= 0 ? alpha·(e^x − 1) : x); at x = 0 both sides are 0
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params& p) { vmath::Elu(x, y, n, p.a, p.b); }
};
struct HardSigmoidOp {
  float operator()(float x, const Params& p) const { return activation::HardSigmoid(x, p.a, p.b); }
};
struct HardSwishOp { float operator()(float x, const Params&) const { return activation::HardSwish(x); } };
struct GeluOp {  // exact: x·Φ(x); tanh approximation when p.flag
  static constexpr int64_t kGrain = kMathGrain;
  static void Apply(const float* x, float* y, int64_t n, const Params& p) {
    if (p.flag) vmath::GeluTanh(x, y, n);
    else vmath::Gelu(x, y, n);
  }
};
struct NegOp {
  template <typename T>
  T operator()(T x, const Params&) const {
    using U = std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>;
    if constexpr (std::is_integral_v<T>) return static_cast<T>(U(0) - static_cast<U>(x));  // wraps, no UB
    else return -x;
  }
};
struct AbsOp {
  template <typename T>
  T operator()(T x, const Params& p) const { return x < T(0) ? NegOp()(x, p) : x; }
};

template <typename Op, typename = void>
struct HasApply : std::false_type {};
template <typename Op>
struct HasApply<Op, std::void_t<decltype(&Op::Apply)>> : std::true_type {};

template <typename Op, typename = void>
struct GrainOf : std::integral_constant<int64_t, kStreamingGrain> {};
template <typename Op>
struct GrainOf<Op, std::void_t<decltype(Op::kGrain)>> : std::integral_constant<int64_t, Op::kGrain> {};

template <typename T, typename Op>
class MapKernel final : public Kernel {
 public:
  MapKernel(int64_t n, Params p) : n_(n), p_(p) {}
  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    ParallelFor(n_, GrainOf<Op>::value, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, uint16_t>) {  // float16, computed as float32
        MapHalfPieces(x, y, begin, end, [&](const float* in, float* out, int64_t n) {
          if constexpr (HasApply<Op>::value) {
            Op::Apply(in, out, n, p_);
          } else {
            const Op op;
            for (int64_t i = 0; i < n; ++i) out[i] = op(in[i], p_);
          }
        });
      } else if constexpr (HasApply<Op>::value) {
        Op::Apply(x + begin, y + begin, end - begin, p_);
      } else {
        const Op op;
        for (int64_t i = begin; i < end; ++i) y[i] = op(x[i], p_);
      }
    });
  }

 private:
  const int64_t n_;
  const Params p_;
};

// Integer kernels exist for Neg and Abs only (the rules and dtype checks keep others out).
template <typename T, typename Op>
std::unique_ptr<Kernel> MakeSignedMap(const KernelSpec& spec, int64_t n, const Params& p) {
  if constexpr (std::is_same_v<Op, NegOp> || std::is_same_v<Op, AbsOp>) return std::make_unique<MapKernel<T, Op>>(n, p);
  throw Error(ErrorCode::kInternal, spec.Where() + ": no integer kernel for this op");
}

Params ReadParams(const KernelSpec& spec) {
  Params p;
  if (spec.op == "LeakyRelu" || spec.op == "Elu") p.a = spec.attrs.Float("alpha");
  if (spec.op == "Selu") p.a = spec.attrs.Float("alpha"), p.b = spec.attrs.Float("gamma");
  if (spec.op == "HardSigmoid") p.a = spec.attrs.Float("alpha"), p.b = spec.attrs.Float("beta");
  if (spec.op == "Gelu") {
    const std::string approximate = spec.attrs.String("approximate");
    if (approximate != "none" && approximate != "tanh")
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": approximate must be 'none' or 'tanh', got '" +
                                                   approximate + "'");
    p.flag = approximate == "tanh";
  }
  return p;
}

template <typename Op>
std::unique_ptr<Kernel> CreateMap(const KernelSpec& spec) {
  CheckOutputShape(spec, 0, spec.inputs[0].shape);
  vmath::ActivePath();  // a bad TF_POPEF_SIMD fails here, at prepare
  const Params p = ReadParams(spec);
  const int64_t n = spec.inputs[0].numel();
  switch (spec.inputs[0].dtype) {
    case DType::kFloat32: return std::make_unique<MapKernel<float, Op>>(n, p);
    case DType::kFloat16: return std::make_unique<MapKernel<uint16_t, Op>>(n, p);
    case DType::kInt8: return MakeSignedMap<int8_t, Op>(spec, n, p);
    case DType::kInt16: return MakeSignedMap<int16_t, Op>(spec, n, p);
    case DType::kInt32: return MakeSignedMap<int32_t, Op>(spec, n, p);
    case DType::kInt64: return MakeSignedMap<int64_t, Op>(spec, n, p);
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

template <typename Op>
std::unique_ptr<Kernel> CreateFloatMap(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16});
  return CreateMap<Op>(spec);
}

template <typename Op>
std::unique_ptr<Kernel> CreateSignedMap(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64});
  return CreateMap<Op>(spec);
}

template <typename T>
class ClipKernel final : public Kernel {
 public:
  ClipKernel(int64_t n, T lo, T hi) : n_(n), lo_(lo), hi_(hi) {}
  void Run(const KernelContext& ctx) const override {
    const T* x = static_cast<const T*>(ctx.inputs[0]);
    T* y = static_cast<T*>(ctx.outputs[0]);
    // Written so NaN passes through (every comparison with NaN is false).
    // min(max(x, lo), hi): when lo > hi every value becomes hi (ONNX).
    ParallelFor(n_, kStreamingGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T v = x[i] < lo_ ? lo_ : x[i];
        y[i] = v > hi_ ? hi_ : v;
      }
    });
  }

 private:
  const int64_t n_;
  const T lo_, hi_;
};

template <typename T>
std::unique_ptr<Kernel> MakeClip(const KernelSpec& spec, int64_t n) {
  T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  if constexpr (std::numeric_limits<T>::has_infinity) lo = -std::numeric_limits<T>::infinity(), hi = -lo;
  auto bound = [&](const char* name) {
    return std::is_integral_v<T> ? static_cast<T>(spec.attrs.Int(name)) : static_cast<T>(spec.attrs.Float(name));
  };
  if (spec.attrs.Has("min")) lo = bound("min");
  if (spec.attrs.Has("max")) hi = bound("max");
  return std::make_unique<ClipKernel<T>>(n, lo, hi);
}

std::unique_ptr<Kernel> CreateFloat32Clip(const KernelSpec& spec) {
  CheckOutputShape(spec, 0, spec.inputs[0].shape);
  const int64_t n = spec.inputs[0].numel();
  switch (spec.inputs[0].dtype) {
    case DType::kFloat32: return MakeClip<float>(spec, n);
    case DType::kFloat64: return MakeClip<double>(spec, n);
    case DType::kInt8: return MakeClip<int8_t>(spec, n);
    case DType::kInt16: return MakeClip<int16_t>(spec, n);
    case DType::kInt32: return MakeClip<int32_t>(spec, n);
    case DType::kInt64: return MakeClip<int64_t>(spec, n);
    case DType::kUInt8: return MakeClip<uint8_t>(spec, n);
    case DType::kUInt16: return MakeClip<uint16_t>(spec, n);
    case DType::kUInt32: return MakeClip<uint32_t>(spec, n);
    case DType::kUInt64: return MakeClip<uint64_t>(spec, n);
    default: break;
  }
  throw Error(ErrorCode::kInternal, spec.Where() + ": unexpected dtype " + DTypeName(spec.inputs[0].dtype));
}

std::unique_ptr<Kernel> CreateClip(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  CheckSameDType(spec, {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kInt16, DType::kInt32,
                       DType::kInt64, DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64});
  return WithFloat16Support(spec, CreateFloat32Clip);
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Erf", CreateFloatMap<ErfOp>);
TFPOPEF_REGISTER_KERNEL("Exp", CreateFloatMap<ExpOp>);
TFPOPEF_REGISTER_KERNEL("Log", CreateFloatMap<LogOp>);
TFPOPEF_REGISTER_KERNEL("Sqrt", CreateFloatMap<SqrtOp>);
TFPOPEF_REGISTER_KERNEL("Reciprocal", CreateFloatMap<ReciprocalOp>);
TFPOPEF_REGISTER_KERNEL("Softsign", CreateFloatMap<SoftsignOp>);
TFPOPEF_REGISTER_KERNEL("Softplus", CreateFloatMap<SoftplusOp>);
TFPOPEF_REGISTER_KERNEL("LeakyRelu", CreateFloatMap<LeakyReluOp>);
TFPOPEF_REGISTER_KERNEL("Elu", CreateFloatMap<EluOp>);
TFPOPEF_REGISTER_KERNEL("Selu", CreateFloatMap<SeluOp>);
TFPOPEF_REGISTER_KERNEL("HardSigmoid", CreateFloatMap<HardSigmoidOp>);
TFPOPEF_REGISTER_KERNEL("HardSwish", CreateFloatMap<HardSwishOp>);
TFPOPEF_REGISTER_KERNEL("Gelu", CreateFloatMap<GeluOp>);
TFPOPEF_REGISTER_KERNEL("Neg", CreateSignedMap<NegOp>);
TFPOPEF_REGISTER_KERNEL("Abs", CreateSignedMap<AbsOp>);
TFPOPEF_REGISTER_KERNEL("Clip", CreateClip);

}  // namespace kernels
}  // namespace tfpopef
