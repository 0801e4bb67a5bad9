// Prepare-time validation of a KernelSpec: arity, dtypes, attributes, shapes.
//
// Every check throws tfpopef::Error prefixed with spec.Where() and says what was expected and
// what was found, so a bad executable fails when it is loaded, never inside Kernel::Run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/kernels/kernel.h"

namespace tfpopef {
namespace kernels {

inline std::string DTypeList(std::initializer_list<DType> dtypes) {
  std::string s;
  for (DType t : dtypes) s += (s.empty() ? "" : ", ") + std::string(DTypeName(t));
  return s;
}

inline int64_t Product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) n *= dims[i];
  return n;
}

inline int64_t Product(const std::vector<int64_t>& dims) { return Product(dims, 0, dims.size()); }

// For CheckArity: no upper bound on the number of inputs.
constexpr size_t kAnyNumber = static_cast<size_t>(-1);

// Input/output counts must be in range; every shape must have non-negative dims (a negative
// dim would turn numel() negative and later into a huge memcpy).
inline void CheckArity(const KernelSpec& spec, size_t min_inputs, size_t max_inputs, size_t num_outputs) {
  const size_t n = spec.inputs.size();
  if (n < min_inputs || n > max_inputs) {
    const std::string expected =
        min_inputs == max_inputs       ? std::to_string(min_inputs)
        : max_inputs == kAnyNumber     ? "at least " + std::to_string(min_inputs)
                                       : std::to_string(min_inputs) + ".." + std::to_string(max_inputs);
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": expects " + expected + " inputs, got " + std::to_string(n));
  }
  if (spec.outputs.size() != num_outputs)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": expects " + std::to_string(num_outputs) +
                                                 " outputs, got " + std::to_string(spec.outputs.size()));
  auto check_dims = [&](const TensorDesc& t, const std::string& what) {
    for (int64_t d : t.shape)
      if (d < 0)
        throw Error(ErrorCode::kInvalidArgument,
                    spec.Where() + ": " + what + " has a negative dimension in shape " + ShapeToString(t.shape));
  };
  for (size_t i = 0; i < spec.inputs.size(); ++i) check_dims(spec.inputs[i], "input " + std::to_string(i));
  for (size_t i = 0; i < spec.outputs.size(); ++i) check_dims(spec.outputs[i], "output " + std::to_string(i));
}

// `what` names the tensor ("input 0"); an unsupported dtype is kUnimplemented.
inline void CheckDType(const KernelSpec& spec, const std::string& what, DType got,
                       std::initializer_list<DType> supported) {
  for (DType t : supported)
    if (t == got) return;
  throw Error(ErrorCode::kUnimplemented, spec.Where() + ": " + what + " has dtype " + DTypeName(got) +
                                             ", which this kernel does not support (supported: " +
                                             DTypeList(supported) + ")");
}

// Every input and output has input 0's dtype, and that dtype is one of `supported`.
inline void CheckSameDType(const KernelSpec& spec, std::initializer_list<DType> supported) {
  const DType t = spec.inputs.at(0).dtype;
  CheckDType(spec, "input 0", t, supported);
  auto check = [&](const TensorDesc& d, const std::string& what) {
    if (d.dtype != t)
      throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has dtype " + DTypeName(d.dtype) +
                                                   " but input 0 has " + DTypeName(t) +
                                                   "; all inputs and outputs must have the same dtype");
  };
  for (size_t i = 1; i < spec.inputs.size(); ++i) check(spec.inputs[i], "input " + std::to_string(i));
  for (size_t i = 0; i < spec.outputs.size(); ++i) check(spec.outputs[i], "output " + std::to_string(i));
}

// The compiler computed the output shapes; they must be what the op implies from its inputs.
inline void CheckOutputShape(const KernelSpec& spec, size_t index, const std::vector<int64_t>& implied) {
  const auto& got = spec.outputs.at(index).shape;
  if (got != implied)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": output " + std::to_string(index) + " has shape " +
                                                 ShapeToString(got) + " but the inputs imply " +
                                                 ShapeToString(implied));
}

// An input whose shape the op fixes (weights, state, bias): `what` names it ("weights W").
inline void CheckShape(const KernelSpec& spec, const std::string& what, const std::vector<int64_t>& got,
                       const std::vector<int64_t>& expected) {
  if (got != expected)
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": " + what + " has shape " + ShapeToString(got) +
                                                 ", expected " + ShapeToString(expected));
}

// A normalized axis attribute: 0 <= axis < rank.
inline int64_t CheckedAxis(const KernelSpec& spec, const std::string& attr, size_t rank) {
  const int64_t axis = spec.attrs.Int(attr);
  if (axis < 0 || axis >= static_cast<int64_t>(rank))
    throw Error(ErrorCode::kInvalidArgument, spec.Where() + ": attribute '" + attr + "' = " + std::to_string(axis) +
                                                 " is out of range for rank " + std::to_string(rank) +
                                                 " (expected 0.." + std::to_string(static_cast<int64_t>(rank) - 1) +
                                                 "; the compiler normalizes negative axes)");
  return axis;
}

// An attribute that is a 0/1 flag.
inline bool CheckedFlag(const KernelSpec& spec, const std::string& attr) {
  const int64_t v = spec.attrs.Int(attr);
  if (v != 0 && v != 1)
    throw Error(ErrorCode::kInvalidArgument,
                spec.Where() + ": attribute '" + attr + "' must be 0 or 1, got " + std::to_string(v));
  return v == 1;
}

}  // namespace kernels
}  // namespace tfpopef
