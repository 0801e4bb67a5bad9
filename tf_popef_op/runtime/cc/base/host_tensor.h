// A tensor in caller memory, named by anchor name or alias. No ownership: the memory must
// stay valid (and, for inputs, unchanged) until the request that uses it completes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tf_popef_op/runtime/cc/base/dtype.h"

namespace tfpopef {

struct HostTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  void* data = nullptr;  // C-contiguous; read-only for inputs
};

}  // namespace tfpopef
