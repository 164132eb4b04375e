// Shared by the fuzz targets: quiet logs, and a failed property that libFuzzer reports as a crash.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tessera::fuzz {

// Error sentences are the point of most inputs; printing them would only slow the fuzzer.
inline void quietLogs() { setenv("TESSERA_DEBUG", "NONE", 1); }

// A property of the code under test that does not hold: abort, so libFuzzer saves the input.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz property broken: %s\n", what);
  std::abort();
}

}  // namespace tessera::fuzz
