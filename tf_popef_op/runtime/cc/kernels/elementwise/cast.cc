// Cast between any two of the 12 dtypes. Rules (every input has a defined result; C++ leaves
// several of these conversions undefined, so none is left to a plain static_cast):
//   float -> int:    truncate toward zero, then saturate to the target's range; NaN -> 0
//                    (so -1.5 -> uint8 is 0 and 1e10 -> int32 is INT32_MAX).
//   int -> int:      modular (two's complement wrap), like numpy's astype.
//   int -> float:    nearest representable value (e.g. int64 -> float32 may round).
//   any -> bool:     x != 0 (NaN is true, -0.0 is false).
//   bool -> any:     0 or 1.
//   -> float16:      round to nearest even once. float64 goes through float32 with
//                    round-to-odd so that the double rounding stays exact.
//   float16 -> any:  exact widening to float32, then the float rules above.
//   float16 <-> float32 use the bulk converters of fp16_convert.h (F16C when available).
// The conversion function is chosen once at prepare from a 12 x 12 template table.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

#include "tf_popef_op/runtime/cc/base/half.h"
#include "tf_popef_op/runtime/cc/kernels/kernel_checks.h"
#include "tf_popef_op/runtime/cc/kernels/support/fp16_convert.h"
#include "tf_popef_op/runtime/cc/kernels/support/thread_pool.h"

namespace tfpopef {
namespace kernels {
namespace {

// Storage types that are not plain C++ arithmetic types.
struct Half {
  uint16_t bits;
};
struct Bool8 {
  uint8_t value;  // read as a byte: a bool object holding anything but 0/1 would be UB
};

template <typename Dst, typename F>
Dst FloatToInt(F x) {
  if (std::isnan(x)) return 0;
  x = std::trunc(x);
  // 2^digits is the exclusive upper bound and, for signed types, -2^digits the minimum; both
  // are exact in float and double, so the comparisons are exact.
  const F upper = std::ldexp(F(1), std::numeric_limits<Dst>::digits);
  if (x >= upper) return std::numeric_limits<Dst>::max();
  if (x <= F(std::numeric_limits<Dst>::min())) return std::numeric_limits<Dst>::min();
  return static_cast<Dst>(x);
}

// float64 -> float32 rounding to odd: if inexact, the result is the truncated value with its
// last bit forced to 1. A later rounding to a narrower format (float16) is then correct.
inline float DoubleToFloatRoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // truncate
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
constexpr bool kIsPlainFloat = std::is_floating_point_v<T>;

template <typename Dst, typename Src>
Dst Convert(Src s) {
  if constexpr (std::is_same_v<Src, Half>) {
    if constexpr (std::is_same_v<Dst, Bool8>) return Bool8{static_cast<uint8_t>((s.bits & 0x7FFFu) != 0)};
    else return Convert<Dst>(HalfToFloat(s.bits));
  } else if constexpr (std::is_same_v<Src, Bool8>) {
    return Convert<Dst>(static_cast<uint8_t>(s.value != 0));
  } else if constexpr (std::is_same_v<Dst, Bool8>) {
    return Bool8{static_cast<uint8_t>(s != Src(0))};
  } else if constexpr (std::is_same_v<Dst, Half>) {
    if constexpr (std::is_same_v<Src, double>) return Half{FloatToHalf(DoubleToFloatRoundToOdd(s))};
    // Integers: |x| < 2^24 converts to float exactly, anything larger is beyond float16's
    // range (65504) either way, so rounding once more cannot change the result.
    else return Half{FloatToHalf(static_cast<float>(s))};
  } else if constexpr (kIsPlainFloat<Dst>) {
    return static_cast<Dst>(s);
  } else if constexpr (kIsPlainFloat<Src>) {
    return FloatToInt<Dst>(s);
  } else {
    // int -> int: modular. Conversion to the unsigned type is defined modulo 2^bits; the
    // final unsigned -> signed step is modular in GCC/Clang (and guaranteed from C++20).
    return static_cast<Dst>(static_cast<std::make_unsigned_t<Dst>>(s));
  }
}

using CastFn = void (*)(const void* src, void* dst, int64_t n);

template <typename Src, typename Dst>
void CastN(const void* src, void* dst, int64_t n) {
  const Src* s = static_cast<const Src*>(src);
  Dst* d = static_cast<Dst*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = Convert<Dst>(s[i]);
}

template <typename Src>
CastFn SelectTo(DType to) {
  switch (to) {
    case DType::kFloat32: return CastN<Src, float>;
    case DType::kFloat16: return CastN<Src, Half>;
    case DType::kFloat64: return CastN<Src, double>;
    case DType::kInt8: return CastN<Src, int8_t>;
    case DType::kInt16: return CastN<Src, int16_t>;
    case DType::kInt32: return CastN<Src, int32_t>;
    case DType::kInt64: return CastN<Src, int64_t>;
    case DType::kUInt8: return CastN<Src, uint8_t>;
    case DType::kUInt16: return CastN<Src, uint16_t>;
    case DType::kUInt32: return CastN<Src, uint32_t>;
    case DType::kUInt64: return CastN<Src, uint64_t>;
    case DType::kBool: return CastN<Src, Bool8>;
  }
  return nullptr;
}

// float16 <-> float32, the common case around float16 models: the bulk (F16C) converters.
void WidenN(const void* src, void* dst, int64_t n) {
  WidenHalfToFloat(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
}
void NarrowN(const void* src, void* dst, int64_t n) {
  NarrowFloatToHalf(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
}

CastFn SelectCast(DType from, DType to) {
  if (from == DType::kFloat16 && to == DType::kFloat32) return WidenN;
  if (from == DType::kFloat32 && to == DType::kFloat16) return NarrowN;
  switch (from) {
    case DType::kFloat32: return SelectTo<float>(to);
    case DType::kFloat16: return SelectTo<Half>(to);
    case DType::kFloat64: return SelectTo<double>(to);
    case DType::kInt8: return SelectTo<int8_t>(to);
    case DType::kInt16: return SelectTo<int16_t>(to);
    case DType::kInt32: return SelectTo<int32_t>(to);
    case DType::kInt64: return SelectTo<int64_t>(to);
    case DType::kUInt8: return SelectTo<uint8_t>(to);
    case DType::kUInt16: return SelectTo<uint16_t>(to);
    case DType::kUInt32: return SelectTo<uint32_t>(to);
    case DType::kUInt64: return SelectTo<uint64_t>(to);
    case DType::kBool: return SelectTo<Bool8>(to);
  }
  return nullptr;
}

// Large tensors are converted in element ranges on the intra-op pool.
class CastKernel final : public Kernel {
 public:
  // fn == nullptr: same dtype, a plain copy.
  CastKernel(CastFn fn, int64_t numel, size_t in_size, size_t out_size)
      : fn_(fn), numel_(numel), in_size_(in_size), out_size_(out_size) {}

  void Run(const KernelContext& ctx) const override {
    if (fn_ == nullptr && ctx.outputs[0] == ctx.inputs[0]) return;
    const auto* src = static_cast<const char*>(ctx.inputs[0]);
    auto* dst = static_cast<char*>(ctx.outputs[0]);
    ParallelFor(numel_, kStreamingGrain, [&](int64_t begin, int64_t end) {
      const char* s = src + static_cast<size_t>(begin) * in_size_;
      char* d = dst + static_cast<size_t>(begin) * out_size_;
      if (fn_ != nullptr) fn_(s, d, end - begin);
      else std::memcpy(d, s, static_cast<size_t>(end - begin) * in_size_);
    });
  }

 private:
  const CastFn fn_;
  const int64_t numel_;
  const size_t in_size_, out_size_;  // bytes per element
};

std::unique_ptr<Kernel> CreateCast(const KernelSpec& spec) {
  CheckArity(spec, 1, 1, 1);
  const TensorDesc& in = spec.inputs[0];
  const TensorDesc& out = spec.outputs[0];
  const std::string to_name = spec.attrs.String("to");
  DType to;
  try {
    to = DTypeFromName(to_name);
  } catch (const Error&) {
    throw Error(ErrorCode::kUnimplemented,
                spec.Where() + ": attribute 'to' = '" + to_name +
                    "' is not a supported dtype (supported: float32, float16, float64, int8, int16, int32, "
                    "int64, uint8, uint16, uint32, uint64, bool)");
  }
  if (out.dtype != to)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output dtype " + DTypeName(out.dtype) +
                                                 " differs from attribute 'to' = " + to_name);
  CheckOutputShape(spec, 0, in.shape);
  const CastFn fn = in.dtype == to ? nullptr : SelectCast(in.dtype, to);
  return std::make_unique<CastKernel>(fn, in.numel(), DTypeSize(in.dtype), DTypeSize(to));
}

}  // namespace

TFPOPEF_REGISTER_KERNEL("Cast", CreateCast);

}  // namespace kernels
}  // namespace tfpopef
