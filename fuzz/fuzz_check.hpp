// FUZZ_CHECK: a property a fuzz target asserts. A violated property is a finding, so it must
// stop the run with a crash libFuzzer records (abort), in every build type (assert() would
// vanish under NDEBUG).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: property violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (false)
