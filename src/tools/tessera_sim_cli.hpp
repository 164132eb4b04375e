// What tessera_sim's two modes (tessera_sim.cpp: one collective; tessera_sim_workload.cpp: a
// step) share on their command line: exit codes, the sentences for usage and failures, numbers.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/status.hpp"

namespace tessera::simcli {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// "tessera_sim: <why>" and the usage text; exit code 2.
inline int usage(const std::string& why, const char* text) {
  std::fprintf(stderr, "tessera_sim: %s\n%s", why.c_str(), text);
  return kExitUsage;
}

// "tessera_sim: <what>: <the last error's sentence>"; exit code 1.
inline int failed(const char* what) {
  std::fprintf(stderr, "tessera_sim: %s: %s\n", what, lastErrorMessage());
  return kExitFailed;
}

// A whole decimal integer in lo..hi.
inline bool parseInt(const char* s, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// A whole finite decimal number in (lo, hi].
inline bool parseFraction(const char* s, double lo, double hi, double* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v > lo && v <= hi)) return false;
  *out = v;
  return true;
}

}  // namespace tessera::simcli
