#include "served_model.h"

#include <cstring>

namespace tfpopef {
namespace kserve {

namespace {
struct Pair {
  DType dtype;
  const char* name;
};
constexpr Pair kPairs[] = {
    {DType::kBool, "BOOL"},     {DType::kInt8, "INT8"},     {DType::kInt16, "INT16"},
    {DType::kInt32, "INT32"},   {DType::kInt64, "INT64"},   {DType::kUInt8, "UINT8"},
    {DType::kUInt16, "UINT16"}, {DType::kUInt32, "UINT32"}, {DType::kUInt64, "UINT64"},
    {DType::kFloat16, "FP16"},  {DType::kFloat32, "FP32"},  {DType::kFloat64, "FP64"},
};
}  // namespace

const char* V2Datatype(DType dtype) {
  for (const Pair& p : kPairs)
    if (p.dtype == dtype) return p.name;
  return "";
}

bool DTypeOfV2(const std::string& datatype, DType* dtype) {
  for (const Pair& p : kPairs) {
    if (datatype == p.name) {
      *dtype = p.dtype;
      return true;
    }
  }
  return false;
}

}  // namespace kserve
}  // namespace tfpopef
