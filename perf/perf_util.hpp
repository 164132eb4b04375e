// What more than one perf binary reads or computes the same way: size arguments, elapsed time,
// the median of samples. Header-only, because the binaries link different libraries
// (coll_perf_common, or none beside tessera).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace tessera::perf {

// A size argument as nccl-tests reads one: a number with an optional K, M or G (binary) suffix,
// "64K", "1.5M". False on anything else, a negative number or text after the suffix.
inline bool parseByteSize(const char* text, uint64_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || !(v >= 0)) return false;
  switch (*end) {
    case 'k':
    case 'K': v *= 1024.0; break;
    case 'm':
    case 'M': v *= 1048576.0; break;
    case 'g':
    case 'G': v *= 1073741824.0; break;
    case '\0': break;
    default: return false;
  }
  if (*end != '\0' && end[1] != '\0') return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

inline double usSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// The middle sample, or the mean of the two middle ones for an even count; 0 for none.
inline double medianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

}  // namespace tessera::perf
