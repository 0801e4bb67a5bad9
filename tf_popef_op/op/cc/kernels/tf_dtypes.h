// TF DataType <-> runtime DType. Every PopEF dtype has a TF twin of the same size and layout
// (float16 = DT_HALF, IEEE binary16).
#pragma once

#include <optional>

#include "tensorflow/core/framework/types.pb.h"
#include "tf_popef_op/runtime/cc/base/dtype.h"

namespace tfpopef {

inline std::optional<DType> FromTfDataType(::tensorflow::DataType t) {
  using namespace ::tensorflow;
  switch (t) {
    case DT_FLOAT: return DType::kFloat32;
    case DT_HALF: return DType::kFloat16;
    case DT_DOUBLE: return DType::kFloat64;
    case DT_INT8: return DType::kInt8;
    case DT_INT16: return DType::kInt16;
    case DT_INT32: return DType::kInt32;
    case DT_INT64: return DType::kInt64;
    case DT_UINT8: return DType::kUInt8;
    case DT_UINT16: return DType::kUInt16;
    case DT_UINT32: return DType::kUInt32;
    case DT_UINT64: return DType::kUInt64;
    case DT_BOOL: return DType::kBool;
    default: return std::nullopt;
  }
}

}  // namespace tfpopef
