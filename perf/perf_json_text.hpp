// JSON text for the perf binaries' -J output where it is written by hand (no JSON library needed
// for a flat document of numbers and strings).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace tessera::perf {

// `s` as a JSON string literal (quotes, backslashes and control characters escaped).
inline std::string jsonQuoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A number with `digits` significant digits; null for NaN and infinities (not JSON numbers).
inline std::string jsonNumber(double v, int digits) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

}  // namespace tessera::perf
