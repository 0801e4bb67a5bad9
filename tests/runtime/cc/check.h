// The CHECK macro of the runtime's C++ test programs: reports a failed condition with its
// location and counts it; main() returns failures == 0 ? 0 : 1.
#pragma once

#include <cstdio>

static int failures = 0;
#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                                    \
    }                                                                                \
  } while (0)
