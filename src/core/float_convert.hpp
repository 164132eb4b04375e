// Conversions between float and the narrow floating-point formats tessera reduces: IEEE binary16
// (float16), bfloat16, and the two OCP FP8 formats. Header-only and TSR_INLINE so that the host
// executor and CUDA kernels round identically (DESIGN.md, "One algorithm, two executors"); no
// library call and no union type punning appears here, so nvcc accepts every function in device
// code.
//
// Rules (all formats):
//  - narrow -> float is exact (every narrow value is a float); NaN stays NaN (quiet).
//  - float -> narrow rounds to nearest, ties to even, including into and out of the target's
//    subnormal range; the sign of zero is kept; NaN becomes the target's canonical quiet NaN
//    with the input's sign.
//  - Overflow follows IEEE 754 round-to-nearest-even for the formats that have infinities
//    (float16, bfloat16, E5M2): a value at or beyond max + ulp(max)/2 becomes infinity.
//
// The FP8 rules follow the OCP 8-bit Floating Point Specification (OFP8), Revision 1.0:
//  - E4M3 ("E4M3FN"): 1 sign, 4 exponent bits, 3 mantissa bits, bias 7. There are no
//    infinities: S.1111.111 is NaN (the only NaN encodings, 0x7F and 0xFF), so the exponent
//    field 1111 still holds normal values up to S.1111.110 = 448. Subnormals go down to 2^-9.
//    OFP8 defines a saturating and a non-saturating conversion; we implement the SATURATING one,
//    which is what training frameworks and the hardware's .satfinite conversions use: every
//    finite value beyond the range, and +-infinity, becomes +-448 (the largest normal), never
//    NaN. Values below 448 + 16 round to nearest as usual (464 is a tie and goes to 448 anyway).
//  - E5M2: 1 sign, 5 exponent bits, 2 mantissa bits, bias 15, IEEE-like: S.11111.00 is
//    infinity, S.11111.{01,10,11} are NaN, the largest finite value is 57344 and subnormals go
//    down to 2^-16. We implement OFP8's non-saturating conversion: overflow rounds to infinity
//    by round-to-nearest-even, i.e. |x| >= 61440 (the midpoint between 57344 and 2^16) gives
//    +-inf, and +-inf stays +-inf.
//
// Floating-point subtleties: the device path relies on nvcc's default IEEE behaviour (no
// -ftz=true / --use_fast_math), since decoding bfloat16 subnormals produces float subnormals.
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace tessera {

// ---- Bit casts that work on the host and in device code ----------------------------------------

TSR_INLINE uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}

TSR_INLINE float floatFromBits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

TSR_INLINE uint64_t doubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  return __builtin_bit_cast(uint64_t, d);
#endif
}

TSR_INLINE double doubleFromBits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  return __builtin_bit_cast(double, u);
#endif
}

namespace fpdetail {

// v >> shift rounded to nearest, ties to even (shift in 0..31).
TSR_INLINE uint32_t shiftRoundEven(uint32_t v, int shift) {
  if (shift == 0) return v;
  uint32_t q = v >> shift;
  uint32_t rem = v & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
  return q;
}

// 2^k as a float, for -126 <= k <= 127.
TSR_INLINE float pow2(int k) { return floatFromBits(static_cast<uint32_t>(k + 127) << 23); }

// The magnitude code (exponent and mantissa fields, no sign) of the finite, non-NaN float whose
// magnitude bits are `a`, in a format with kExp exponent bits, kMan mantissa bits and an IEEE
// bias. Codes are ordered like magnitudes, so a result beyond the format's largest finite code
// means overflow; the caller decides what overflow becomes. Rounding carries naturally from the
// mantissa into the exponent field, and from the subnormal range into the normal range.
template <int kExp, int kMan>
TSR_INLINE uint32_t encodeMagnitude(uint32_t a) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kEmin = 1 - kBias;  // exponent of the smallest normal
  const uint32_t expField = a >> 23;
  const uint32_t mant = a & 0x7FFFFFu;
  const int e = static_cast<int>(expField) - 127;
  if (expField != 0 && e >= kEmin) {
    // Normal in the target: re-bias the exponent in place and drop mantissa bits. The re-biased
    // exponent is at most 127 + 127, so the shifted value fits in 32 bits.
    return shiftRoundEven((static_cast<uint32_t>(e + kBias) << 23) | mant, 23 - kMan);
  }
  // Subnormal (or zero) in the target: value = sig * 2^(exp - 23), counted in units of the
  // target's smallest subnormal 2^(kEmin - kMan).
  const uint32_t sig = expField == 0 ? mant : (mant | 0x800000u);
  const int exp = expField == 0 ? -126 : e;
  const int shift = 23 - kMan + kEmin - exp;
  if (shift > 31) return 0;  // below a quarter of the smallest subnormal
  return shiftRoundEven(sig, shift);
}

// The float value of a finite magnitude code (exact).
template <int kExp, int kMan>
TSR_INLINE float decodeMagnitude(uint32_t code) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  const uint32_t expField = code >> kMan;
  const uint32_t mant = code & ((1u << kMan) - 1u);
  if (expField == 0) {
    // Two exact scalings: mant * 2^-kMan has at most kMan bits, and its product with 2^kEmin is
    // representable in float for every format here, so neither multiply rounds.
    return static_cast<float>(mant) * pow2(-kMan) * pow2(kEmin);
  }
  const uint32_t fexp = expField - static_cast<uint32_t>(kBias) + 127u;
  return floatFromBits((fexp << 23) | (mant << (23 - kMan)));
}

}  // namespace fpdetail

// ---- float16 (IEEE 754 binary16) ---------------------------------------------------------------

TSR_INLINE uint16_t encodeFloat16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (a == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
  uint32_t mag = fpdetail::encodeMagnitude<5, 10>(a);
  if (mag > 0x7C00u) mag = 0x7C00u;
  return static_cast<uint16_t>(sign | mag);
}

TSR_INLINE float decodeFloat16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t mag = h & 0x7FFFu;
  if (mag >= 0x7C00u) {  // inf keeps mantissa 0; NaN keeps its payload and becomes quiet
    const uint32_t quiet = mag > 0x7C00u ? 0x400000u : 0u;
    return floatFromBits(sign | 0x7F800000u | quiet | ((mag & 0x3FFu) << 13));
  }
  return floatFromBits(sign | floatBits(fpdetail::decodeMagnitude<5, 10>(mag)));
}

// ---- bfloat16 (the top half of a float) -----------------------------------------------------

TSR_INLINE uint16_t encodeBFloat16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7FC0u);  // NaN
  // Same exponent range as float: rounding away the low 16 bits is the whole conversion, and a
  // carry out of the largest finite value reaches the infinity code.
  return static_cast<uint16_t>(sign | fpdetail::shiftRoundEven(a, 16));
}

TSR_INLINE float decodeBFloat16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x400000u;  // quiet a signalling NaN
  return floatFromBits(u);
}

// ---- FP8 E4M3 (OCP E4M3FN, saturating) ------------------------------------------------------

TSR_INLINE uint8_t encodeFloat8E4M3(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);   // NaN
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Eu);  // saturate infinity
  uint32_t mag = fpdetail::encodeMagnitude<4, 3>(a);
  if (mag > 0x7Eu) mag = 0x7Eu;  // saturate; also keeps 0x7F (NaN) from being produced
  return static_cast<uint8_t>(sign | mag);
}

TSR_INLINE float decodeFloat8E4M3(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (mag == 0x7Fu) return floatFromBits(sign | 0x7FC00000u);
  return floatFromBits(sign | floatBits(fpdetail::decodeMagnitude<4, 3>(mag)));
}

// ---- FP8 E5M2 (OCP, IEEE-like, non-saturating) ----------------------------------------------

TSR_INLINE uint8_t encodeFloat8E5M2(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Eu);  // NaN
  if (a == 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Cu);
  uint32_t mag = fpdetail::encodeMagnitude<5, 2>(a);
  if (mag > 0x7Cu) mag = 0x7Cu;
  return static_cast<uint8_t>(sign | mag);
}

TSR_INLINE float decodeFloat8E5M2(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t mag = b & 0x7Fu;
  if (mag >= 0x7Cu) {
    const uint32_t quiet = mag > 0x7Cu ? 0x400000u : 0u;
    return floatFromBits(sign | 0x7F800000u | quiet | ((mag & 0x3u) << 21));
  }
  return floatFromBits(sign | floatBits(fpdetail::decodeMagnitude<5, 2>(mag)));
}

// ---- Storage types ------------------------------------------------------------------------------
// Plain bit containers with the size and alignment of the format (trivial, standard layout), so
// buffers can be reinterpreted as arrays of them on either side. Conversions are explicit:
// T::fromFloat(f) rounds as above, toFloat(x) is exact.

struct Float16 {
  uint16_t bits;
  TSR_INLINE static Float16 fromFloat(float f) { return Float16{encodeFloat16(f)}; }
};
struct BFloat16 {
  uint16_t bits;
  TSR_INLINE static BFloat16 fromFloat(float f) { return BFloat16{encodeBFloat16(f)}; }
};
struct Float8E4M3 {
  uint8_t bits;
  TSR_INLINE static Float8E4M3 fromFloat(float f) { return Float8E4M3{encodeFloat8E4M3(f)}; }
};
struct Float8E5M2 {
  uint8_t bits;
  TSR_INLINE static Float8E5M2 fromFloat(float f) { return Float8E5M2{encodeFloat8E5M2(f)}; }
};

TSR_INLINE float toFloat(Float16 x) { return decodeFloat16(x.bits); }
TSR_INLINE float toFloat(BFloat16 x) { return decodeBFloat16(x.bits); }
TSR_INLINE float toFloat(Float8E4M3 x) { return decodeFloat8E4M3(x.bits); }
TSR_INLINE float toFloat(Float8E5M2 x) { return decodeFloat8E5M2(x.bits); }

static_assert(sizeof(Float16) == 2 && alignof(Float16) == 2);
static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2);
static_assert(sizeof(Float8E4M3) == 1 && sizeof(Float8E5M2) == 1);

}  // namespace tessera
