// Element types of anchors and tensors, with the names used in PopEF JSON ("float32", ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/error.h"

namespace tfpopef {

enum class DType : uint8_t {
  kFloat32, kFloat16, kFloat64,
  kInt8, kInt16, kInt32, kInt64,
  kUInt8, kUInt16, kUInt32, kUInt64,
  kBool,
};

inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    default: return 1;
  }
}

inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
  }
  return "?";
}

inline DType DTypeFromName(const std::string& name) {
  static const DType all[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8,
                              DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUInt8,
                              DType::kUInt16,  DType::kUInt32,  DType::kUInt64,  DType::kBool};
  for (DType t : all)
    if (name == DTypeName(t)) return t;
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype '" + name + "'");
}

inline bool IsInteger(DType t) {
  return t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kFloat64 && t != DType::kBool;
}

// The value of an integer scalar at `p`; `ok` is false for non-integer dtypes and for uint64
// values that do not fit in int64 (e.g. a subgraph index read from any integer anchor).
inline int64_t ReadIntegerScalar(DType dtype, const void* p, bool* ok) {
  *ok = true;
  switch (dtype) {
    case DType::kInt8: return *static_cast<const int8_t*>(p);
    case DType::kInt16: return *static_cast<const int16_t*>(p);
    case DType::kInt32: return *static_cast<const int32_t*>(p);
    case DType::kInt64: return *static_cast<const int64_t*>(p);
    case DType::kUInt8: return *static_cast<const uint8_t*>(p);
    case DType::kUInt16: return *static_cast<const uint16_t*>(p);
    case DType::kUInt32: return *static_cast<const uint32_t*>(p);
    case DType::kUInt64: {
      const uint64_t v = *static_cast<const uint64_t*>(p);
      *ok = v <= static_cast<uint64_t>(INT64_MAX);
      return static_cast<int64_t>(v);
    }
    default: *ok = false; return 0;
  }
}

// A tensor's static type: dtype and shape (row-major, C order).
struct TensorDesc {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
};

inline std::string ShapeToString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace tfpopef
