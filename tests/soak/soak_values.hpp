// The soak's data: what every rank puts into a call and what the result must then be, in closed
// form per element, so any element of any output can be checked without a reference run.
//   Reductions: small integers (or +-1, +-2 for prod) chosen so that every partial result is
//     exactly representable in the type, whatever order the library adds in: the sum, product,
//     max, min and scalar * sum are exact and compared bitwise after decoding; avg is the exact
//     sum divided once by nranks (truncated toward zero for integers, rounded once for floats).
//   Copies (gather, broadcast, all-to-all, send/recv): pseudo-random bytes, a function of
//     (call seed, source rank, byte index in the source buffer).
// The decoders of the narrow float types are written here, not taken from the library under test.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/tessera.h"

namespace soak {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One shared stream of choices: every rank seeds it alike and so draws the same calls.
struct Rng {
  uint64_t s;
  uint64_t next() { return s = mix(s); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  bool chance(double p) { return uniform() < p; }
};

struct TypeInfo {
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  int expBits, manBits, bias;  // narrow floats (f16, bf16, fp8); 0 for the others
  double maxExact;             // every integer of magnitude <= this is exact in the type
};

inline const TypeInfo& typeInfo(tsrDataType_t t) {
  static const TypeInfo kTypes[tsrNumTypes] = {
      {"int8", 1, false, true, 0, 0, 0, 127},      {"uint8", 1, false, false, 0, 0, 0, 255},
      {"int32", 4, false, true, 0, 0, 0, 1e6},     {"uint32", 4, false, false, 0, 0, 0, 1e6},
      {"int64", 8, false, true, 0, 0, 0, 1e6},     {"uint64", 8, false, false, 0, 0, 0, 1e6},
      {"float16", 2, true, true, 5, 10, 15, 2048}, {"float32", 4, true, true, 0, 0, 0, 1e6},
      {"float64", 8, true, true, 0, 0, 0, 1e6},    {"bfloat16", 2, true, true, 8, 7, 127, 256},
      {"fp8e4m3", 1, true, true, 4, 3, 7, 16},     {"fp8e5m2", 1, true, true, 5, 2, 15, 8},
  };
  return kTypes[t];
}

// Significand bits (with the implicit one) of a float type: the avg tolerance is 2^-bits.
inline int significandBits(tsrDataType_t t) {
  if (t == tsrFloat32) return 24;
  if (t == tsrFloat64) return 53;
  return typeInfo(t).manBits + 1;
}

// Encodes v, which must be exact in the type (a small integer or a power of two here).
inline void encode(tsrDataType_t t, double v, void* p) {
  const TypeInfo& ti = typeInfo(t);
  switch (t) {
    case tsrInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      return;
    }
    case tsrUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      return;
    }
    case tsrInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case tsrUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case tsrInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case tsrUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      return;
    }
    case tsrFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case tsrFloat64: std::memcpy(p, &v, 8); return;
    default: break;
  }
  uint32_t bits = 0;
  if (v != 0) {
    const uint32_t sign = v < 0 ? 1u : 0u;
    int k = 0;
    const double f = std::frexp(std::fabs(v), &k);  // |v| = f 2^k, f in [0.5, 1)
    const auto exp = static_cast<uint32_t>(k - 1 + ti.bias);
    const auto man = static_cast<uint32_t>(std::ldexp(2 * f - 1, ti.manBits));
    bits = (sign << (ti.expBits + ti.manBits)) | (exp << ti.manBits) | man;
  }
  if (ti.size == 1) {
    auto b = static_cast<uint8_t>(bits);
    std::memcpy(p, &b, 1);
  } else {
    auto h = static_cast<uint16_t>(bits);
    std::memcpy(p, &h, 2);
  }
}

inline double decode(tsrDataType_t t, const void* p) {
  switch (t) {
    case tsrInt8: {
      int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case tsrUint8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case tsrInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case tsrUint32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case tsrInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case tsrUint64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case tsrFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case tsrFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    default: break;
  }
  const TypeInfo& ti = typeInfo(t);
  uint32_t bits = 0;
  if (ti.size == 1) {
    uint8_t b;
    std::memcpy(&b, p, 1);
    bits = b;
  } else {
    uint16_t h;
    std::memcpy(&h, p, 2);
    bits = h;
  }
  const uint32_t man = bits & ((1u << ti.manBits) - 1);
  const uint32_t exp = (bits >> ti.manBits) & ((1u << ti.expBits) - 1);
  const double sign = (bits >> (ti.expBits + ti.manBits)) != 0 ? -1.0 : 1.0;
  const uint32_t expMax = (1u << ti.expBits) - 1;
  if (t == tsrFloat8e4m3) {
    if (exp == expMax && man == 7) return NAN;  // E4M3FN: no infinities
  } else if (exp == expMax) {
    return man == 0 ? sign * INFINITY : NAN;
  }
  if (exp == 0) return sign * std::ldexp(man, 1 - ti.bias - ti.manBits);
  return sign * std::ldexp((1u << ti.manBits) + man, static_cast<int>(exp) - ti.bias - ti.manBits);
}

// The ops the soak draws: the built-in ones and a premulsum of scalar 2.
enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
inline const char* opName(OpKind k) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return kNames[static_cast<int>(k)];
}
constexpr double kPreMulScalar = 2;

// Input element i of rank r in a reduction: exact partial results for up to `nranks` ranks.
inline double reduceInput(uint64_t seed, int r, size_t i, tsrDataType_t t, OpKind op, int nranks) {
  const TypeInfo& ti = typeInfo(t);
  const uint64_t x = mix(seed ^ mix((static_cast<uint64_t>(r) << 40) + i));
  if (op == OpKind::kProd) {
    // +-1 and +-2: products are powers of two up to 2^nranks (exact in every type for n <= 6).
    const bool two = nranks <= 6;
    if (!ti.isSigned) return two && (x & 1) ? 2 : 1;
    const double mag = two && (x & 2) ? 2 : 1;
    return (x & 1) ? -mag : mag;
  }
  double m = ti.maxExact;
  if (op != OpKind::kMax && op != OpKind::kMin) m = std::floor(m / (kPreMulScalar * nranks));
  if (m < 1) m = 1;
  const auto span = static_cast<uint64_t>(m);
  if (!ti.isSigned) return static_cast<double>(x % (span + 1));
  return static_cast<double>(x % (2 * span + 1)) - static_cast<double>(span);
}

// The result element i of a reduction over all ranks' inputs.
inline double reduceExpected(uint64_t seed, size_t i, tsrDataType_t t, OpKind op, int nranks) {
  double acc = reduceInput(seed, 0, i, t, op, nranks);
  for (int r = 1; r < nranks; ++r) {
    const double v = reduceInput(seed, r, i, t, op, nranks);
    switch (op) {
      case OpKind::kProd: acc *= v; break;
      case OpKind::kMax: acc = std::fmax(acc, v); break;
      case OpKind::kMin: acc = std::fmin(acc, v); break;
      default: acc += v; break;
    }
  }
  if (op == OpKind::kPreMulSum) acc *= kPreMulScalar;
  if (op == OpKind::kAvg) {
    acc /= nranks;
    if (!typeInfo(t).isFloat) acc = std::trunc(acc);
  }
  return acc;
}

// True when `got` is the right result `want` (avg on floats: within one rounding).
inline bool resultMatches(double got, double want, tsrDataType_t t, OpKind op) {
  if (got == want) return true;
  if (op != OpKind::kAvg || !typeInfo(t).isFloat) return false;
  return std::fabs(got - want) <= std::ldexp(std::fabs(want), -significandBits(t));
}

// Byte j of rank r's source buffer in a copying call.
inline uint8_t copyByte(uint64_t seed, int r, size_t j) {
  return static_cast<uint8_t>(mix(seed ^ mix((static_cast<uint64_t>(r) << 40) + j / 8)) >>
                              (8 * (j % 8)));
}

// Fills bytes [first, first + n) of rank r's source into dst.
inline void fillCopy(uint8_t* dst, uint64_t seed, int r, size_t first, size_t n) {
  size_t j = first;
  const size_t end = first + n;
  while (j < end && j % 8 != 0) *dst++ = copyByte(seed, r, j++);
  for (; j + 8 <= end; j += 8, dst += 8) {
    const uint64_t w = mix(seed ^ mix((static_cast<uint64_t>(r) << 40) + j / 8));
    std::memcpy(dst, &w, 8);  // little-endian: byte j % 8 is bits 8 (j % 8)
  }
  while (j < end) *dst++ = copyByte(seed, r, j++);
}

}  // namespace soak
