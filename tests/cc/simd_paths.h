// Runs a test body under every SIMD path of the kernels (vector_math.h), for the kernel tests
// that must hold on the portable build as well as on the AVX2+FMA and AVX-512 ones.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/cc/kernel_tester.h"
#include "tf_popef_op/runtime/cc/kernels/support/vector_math.h"

namespace tfpopef {
namespace test {

// Runs body once per SIMD path this CPU has (portable always, AVX2 and AVX-512 when present), restoring
// the path in use afterwards. Failures recorded meanwhile carry the path name.
inline void ForEachSimdPath(const std::function<void()>& body) {
  namespace vm = kernels::vmath;
  std::vector<vm::SimdPath> paths = {vm::SimdPath::kPortable};
  if (vm::CpuHasAvx2Fma()) paths.push_back(vm::SimdPath::kAvx2);
  if (vm::CpuHasAvx512()) paths.push_back(vm::SimdPath::kAvx512);
  const vm::SimdPath before = vm::ActivePath();
  for (vm::SimdPath path : paths) {
    vm::SetPathForTesting(path);
    const size_t failures = CurrentFailures().size();
    body();
    for (size_t i = failures; i < CurrentFailures().size(); ++i)
      CurrentFailures()[i] = std::string("[") + vm::SimdPathName(path) + " path] " + CurrentFailures()[i];
  }
  vm::SetPathForTesting(before);
}

}  // namespace test
}  // namespace tfpopef
