// <immintrin.h> for the translation units that use 512-bit intrinsics. GCC 12's 512-bit
// intrinsics pass _mm512_undefined_*() as the source of their unmasked lanes, which
// -Wuninitialized reports at every use (GCC bug 105593); nothing here reads it. The pragmas
// hold for the rest of the including file. Include it inside the file's x86-64 GCC/Clang guard.
#pragma once

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
