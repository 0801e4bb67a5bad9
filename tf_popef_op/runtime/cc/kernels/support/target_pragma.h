// Compiles the code between TFPOPEF_TARGET_BEGIN("avx2,fma") and TFPOPEF_TARGET_END() for that
// x86 instruction set whatever the build's -march, so a kernel file can hold an AVX2 or AVX-512
// build next to the portable one and pick it at run time (vector_math.h's SimdPath). Code
// compiled this way must only be entered after the CPU check, and every header must be
// included *before* TFPOPEF_TARGET_BEGIN, so that no inline or template function from a header
// gets a copy compiled for the wider target (the linker could pick that copy for the whole
// library). Use inside `#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))`.
#pragma once

#define TFPOPEF_PRAGMA(text) _Pragma(#text)

#if defined(__clang__)
#define TFPOPEF_TARGET_BEGIN(isa) \
  TFPOPEF_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define TFPOPEF_TARGET_END() TFPOPEF_PRAGMA(clang attribute pop)
#else
#define TFPOPEF_TARGET_BEGIN(isa) TFPOPEF_PRAGMA(GCC push_options) TFPOPEF_PRAGMA(GCC target(isa))
#define TFPOPEF_TARGET_END() TFPOPEF_PRAGMA(GCC pop_options)
#endif
