// CPU feature checks that __builtin_cpu_supports cannot make with every supported compiler.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

namespace tfpopef {
namespace kernels {

// F16C (CPUID leaf 1, ECX bit 29): clang before 16 rejects __builtin_cpu_supports("f16c").
// Callers also check AVX with __builtin_cpu_supports, which includes the OS's AVX state support.
inline bool CpuidHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

}  // namespace kernels
}  // namespace tfpopef
#endif
