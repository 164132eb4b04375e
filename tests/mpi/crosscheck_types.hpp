// Datatypes for the randomized cross-check against MPI (test_crosscheck_mpi.cpp): every
// tsrDataType_t with its MPI counterpart, random values chosen so that no reduction of up to four
// ranks overflows, and an exact decoder of the narrow floating-point formats written from their
// definitions (IEEE binary16, bfloat16, OCP FP8 E4M3FN and E5M2), independent of the library's
// own conversions, which are under test.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera::test::crosscheck {

// splitmix64: small, fast, and the same sequence on every rank for the same seed.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_++); }
  // Uniform in [0, n); n > 0. The modulo bias is irrelevant for test choices.
  uint64_t below(uint64_t n) { return next() % n; }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1p-53 < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t state_;
};

enum class Kind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  tsrDataType_t dt;
  const char* name;
  size_t size;
  Kind kind;
  // Integers: the type itself. Floats: an unsigned integer of the same size, for collectives
  // that only move bytes (MPI has no 16- or 8-bit float; reductions of floats use doubles).
  MPI_Datatype mpi;
  // Floats: exponent and mantissa field widths, exponent bias, and the range of unbiased
  // exponents drawn for normal values (sums of four ranks, times a premulsum scalar up to 2,
  // stay finite: E4M3 saturates at 448, float16 overflows past 65504).
  int expBits = 0, mantBits = 0, bias = 0, eMin = 0, eMax = 0;
  bool fnuz = false;  // E4M3FN: no infinities, only S.1111.111 is NaN
  int significand() const { return mantBits + 1; }
  double minSubnormal() const { return std::ldexp(1.0, 1 - bias - mantBits); }
};

inline const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> kTypes = {
      {tsrInt8, "int8", 1, Kind::kSigned, MPI_INT8_T},
      {tsrUint8, "uint8", 1, Kind::kUnsigned, MPI_UINT8_T},
      {tsrInt32, "int32", 4, Kind::kSigned, MPI_INT32_T},
      {tsrUint32, "uint32", 4, Kind::kUnsigned, MPI_UINT32_T},
      {tsrInt64, "int64", 8, Kind::kSigned, MPI_INT64_T},
      {tsrUint64, "uint64", 8, Kind::kUnsigned, MPI_UINT64_T},
      {tsrFloat16, "float16", 2, Kind::kFloat, MPI_UINT16_T, 5, 10, 15, -14, 6},
      {tsrFloat32, "float32", 4, Kind::kFloat, MPI_UINT32_T, 8, 23, 127, -20, 20},
      {tsrFloat64, "float64", 8, Kind::kFloat, MPI_UINT64_T, 11, 52, 1023, -30, 30},
      {tsrBfloat16, "bfloat16", 2, Kind::kFloat, MPI_UINT16_T, 8, 7, 127, -20, 20},
      {tsrFloat8e4m3, "float8e4m3", 1, Kind::kFloat, MPI_UINT8_T, 4, 3, 7, -6, 4, true},
      {tsrFloat8e5m2, "float8e5m2", 1, Kind::kFloat, MPI_UINT8_T, 5, 2, 15, -14, 6},
  };
  return kTypes;
}

// Element i of a buffer as raw bits (little-endian host), and back.
inline uint64_t loadBits(const TypeInfo& t, const void* p, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + i * t.size, t.size);
  return v;
}
inline void storeBits(const TypeInfo& t, void* p, size_t i, uint64_t v) {
  std::memcpy(static_cast<uint8_t*>(p) + i * t.size, &v, t.size);
}

// Integer bits as a signed value (sign-extended) for reports and the average.
inline int64_t signExtend(const TypeInfo& t, uint64_t v) {
  if (t.size == 8) return static_cast<int64_t>(v);
  const int bits = static_cast<int>(t.size * 8);
  const uint64_t sign = 1ull << (bits - 1);
  v &= (1ull << bits) - 1;
  return static_cast<int64_t>((v ^ sign) - sign);
}

// Exact value of a floating-point encoding (every format here fits a double exactly).
inline double decodeFloat(const TypeInfo& t, uint64_t bits) {
  const uint64_t mant = bits & ((1ull << t.mantBits) - 1);
  const uint64_t expField = (bits >> t.mantBits) & ((1ull << t.expBits) - 1);
  const bool negative = ((bits >> (t.mantBits + t.expBits)) & 1) != 0;
  const uint64_t expMax = (1ull << t.expBits) - 1;
  double v;
  if (t.fnuz && expField == expMax && mant == (1ull << t.mantBits) - 1) {
    v = NAN;
  } else if (!t.fnuz && expField == expMax) {
    v = mant == 0 ? INFINITY : NAN;
  } else if (expField == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - t.bias - t.mantBits);
  } else {
    v = std::ldexp(static_cast<double>((1ull << t.mantBits) | mant),
                   static_cast<int>(expField) - t.bias - t.mantBits);
  }
  return negative ? -v : v;
}

inline uint64_t encodeFields(const TypeInfo& t, bool negative, uint64_t expField, uint64_t mant) {
  return (static_cast<uint64_t>(negative) << (t.expBits + t.mantBits)) | (expField << t.mantBits) |
         mant;
}

// The encoding of v, which must be a normal value of the format with few significant bits.
inline uint64_t encodeExactNormal(const TypeInfo& t, double v) {
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);  // v = m * 2^e, m in [0.5, 1)
  const auto mant =
      static_cast<uint64_t>(std::ldexp(m, t.mantBits + 1)) & ((1ull << t.mantBits) - 1);
  return encodeFields(t, v < 0, static_cast<uint64_t>(e - 1 + t.bias), mant);
}

// Element i as a double (integers exactly up to 2^53; for reports and float references).
inline double toDouble(const TypeInfo& t, const void* p, size_t i) {
  const uint64_t b = loadBits(t, p, i);
  switch (t.kind) {
    case Kind::kSigned: return static_cast<double>(signExtend(t, b));
    case Kind::kUnsigned: return static_cast<double>(b);
    case Kind::kFloat: return decodeFloat(t, b);
  }
  return 0;
}

// A printable element: integers exactly, floats with all their digits and their bits.
inline std::string showElement(const TypeInfo& t, const void* p, size_t i) {
  char buf[96];
  const uint64_t b = loadBits(t, p, i);
  if (t.kind == Kind::kSigned) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(signExtend(t, b)));
  } else if (t.kind == Kind::kUnsigned) {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(b));
  } else {
    std::snprintf(buf, sizeof buf, "%.17g (0x%llx)", decodeFloat(t, b),
                  static_cast<unsigned long long>(b));
  }
  return buf;
}

enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
inline const char* opName(OpKind op) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return kNames[static_cast<int>(op)];
}

// Random bits of one input element for `op`. Unsigned integers take any value (their sums and
// products wrap, and MPI wraps them too); signed ones stay where neither library can overflow
// (four ranks, scalar magnitude up to 3). Floats: a random sign, exponent and mantissa, now and
// then a zero or a subnormal; prod draws magnitudes in [0.5, 2) so products stay normal.
inline uint64_t randomElement(const TypeInfo& t, OpKind op, Rng& rng) {
  const uint64_t r = rng.next();
  if (t.kind == Kind::kUnsigned) return r;
  if (t.kind == Kind::kSigned) {
    const int bits = static_cast<int>(t.size * 8);
    int64_t v;
    if (op == OpKind::kMax || op == OpKind::kMin) return r;
    if (op == OpKind::kProd) {
      v = static_cast<int64_t>(r % 7) - 3;
    } else {
      const uint64_t bound = (1ull << (bits - 5)) - 1;  // 2^(bits-1) / 16
      v = static_cast<int64_t>(r % (2 * bound + 1)) - static_cast<int64_t>(bound);
    }
    return static_cast<uint64_t>(v);
  }
  const bool negative = (r & 1) != 0;
  const uint64_t mant = (r >> 1) & ((1ull << t.mantBits) - 1);
  const uint64_t cls = (r >> 60) % 16;
  if (cls == 0) return encodeFields(t, negative, 0, 0);  // +-0
  if (op == OpKind::kProd) {
    const int e = (r >> 59) & 1 ? 0 : -1;
    return encodeFields(t, negative, static_cast<uint64_t>(e + t.bias), mant);
  }
  if (cls == 1 && mant != 0) return encodeFields(t, negative, 0, mant);  // subnormal
  const int e = t.eMin + static_cast<int>(rng.below(static_cast<uint64_t>(t.eMax - t.eMin + 1)));
  return encodeFields(t, negative, static_cast<uint64_t>(e + t.bias), mant);
}

// A premulsum scalar, as bits of the type: small for signed integers, anything for unsigned
// ones, and for floats a value every format holds exactly.
inline uint64_t randomScalar(const TypeInfo& t, Rng& rng) {
  if (t.kind == Kind::kUnsigned) return rng.next();
  if (t.kind == Kind::kSigned) return static_cast<uint64_t>(static_cast<int64_t>(rng.below(7)) - 3);
  static const std::vector<double> kScalars = {0.25, 0.5, 0.75, 1, 1.5, 2, -0.5, -1, -2};
  return encodeExactNormal(t, rng.pick(kScalars));
}

}  // namespace tessera::test::crosscheck
