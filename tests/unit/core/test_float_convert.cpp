// Conversions of core/float_convert.hpp against a slow reference written here: the value of each
// code from the format's definition (ldexp), and rounding by searching the sorted table of all
// representable values for the nearest one, ties to the even code. Plus spot values from the
// IEEE and OCP OFP8 definitions, and the compiler's _Float16 where it exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/build_config.hpp"
#include "core/float_convert.hpp"

#if TESSERA_HAVE_CUDA
// Header-only: their host paths are software emulations of the device conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace tessera {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A narrow format as the reference sees it, with the functions under test.
struct Format {
  const char* name;
  int expBits;
  int manBits;
  bool saturating;  // E4M3: overflow gives the largest finite value; else IEEE (infinity)
  int totalBits;
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);

  int bias() const { return (1 << (expBits - 1)) - 1; }
  uint32_t signMask() const { return 1u << (totalBits - 1); }
  uint32_t allOnesExp() const { return ((1u << expBits) - 1u) << manBits; }
  // Magnitude codes of NaN: E4M3 has only S.1111.111; IEEE-like formats all-ones exponent and a
  // non-zero mantissa.
  bool isNaNCode(uint32_t code) const {
    uint32_t mag = code & (signMask() - 1u);
    if (saturating) return mag == (signMask() - 1u);
    return mag > allOnesExp();
  }
  uint32_t maxFiniteCode() const { return saturating ? signMask() - 2u : allOnesExp() - 1u; }
  uint32_t infCode() const { return allOnesExp(); }  // IEEE-like formats only

  // The value of a finite magnitude code, straight from the definition.
  double value(uint32_t mag) const {
    const uint32_t e = mag >> manBits;
    const uint32_t m = mag & ((1u << manBits) - 1u);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias() - manBits);
    return std::ldexp(static_cast<double>((1u << manBits) | m),
                      static_cast<int>(e) - bias() - manBits);
  }

  std::vector<double> table() const {
    std::vector<double> v;
    for (uint32_t c = 0; c <= maxFiniteCode(); ++c) v.push_back(value(c));
    return v;
  }
};

const Format kF16 = {"float16",
                     5,
                     10,
                     false,
                     16,
                     [](float f) -> uint32_t { return encodeFloat16(f); },
                     [](uint32_t c) { return decodeFloat16(static_cast<uint16_t>(c)); }};
const Format kBF16 = {"bfloat16",
                      8,
                      7,
                      false,
                      16,
                      [](float f) -> uint32_t { return encodeBFloat16(f); },
                      [](uint32_t c) { return decodeBFloat16(static_cast<uint16_t>(c)); }};
const Format kE4M3 = {"float8e4m3",
                      4,
                      3,
                      true,
                      8,
                      [](float f) -> uint32_t { return encodeFloat8E4M3(f); },
                      [](uint32_t c) { return decodeFloat8E4M3(static_cast<uint8_t>(c)); }};
const Format kE5M2 = {"float8e5m2",
                      5,
                      2,
                      false,
                      8,
                      [](float f) -> uint32_t { return encodeFloat8E5M2(f); },
                      [](uint32_t c) { return decodeFloat8E5M2(static_cast<uint8_t>(c)); }};
const Format* const kFormats[] = {&kF16, &kBF16, &kE4M3, &kE5M2};

// Round-to-nearest-even of a non-NaN x by search over every representable value.
class RefRounder {
 public:
  explicit RefRounder(const Format& f) : f_(f), vals_(f.table()) {}

  uint32_t round(double x) const {
    const uint32_t sign = std::signbit(x) ? f_.signMask() : 0u;
    const double ax = std::fabs(x);
    const double maxv = vals_.back();
    const uint32_t maxCode = static_cast<uint32_t>(vals_.size() - 1);
    if (ax > maxv) {
      if (f_.saturating) return sign | maxCode;
      // The next value after max would be 2^(emax+1), with an even code (the infinity code).
      const double next = std::ldexp(1.0, (1 << f_.expBits) - 1 - f_.bias());
      if (std::isinf(ax) || 2 * ax >= maxv + next) return sign | f_.infCode();
      return sign | maxCode;
    }
    const size_t i =
        static_cast<size_t>(std::upper_bound(vals_.begin(), vals_.end(), ax) - vals_.begin()) - 1;
    if (vals_[i] == ax) return sign | static_cast<uint32_t>(i);
    const double twice = 2 * ax, sum = vals_[i] + vals_[i + 1];  // both exact
    if (twice < sum) return sign | static_cast<uint32_t>(i);
    if (twice > sum) return sign | static_cast<uint32_t>(i + 1);
    return sign | static_cast<uint32_t>((i % 2 == 0) ? i : i + 1);
  }

  const std::vector<double>& values() const { return vals_; }

 private:
  const Format& f_;
  std::vector<double> vals_;
};

// Checks encode(x) against the reference, or NaN-ness for NaN inputs. Returns false on mismatch.
bool checkEncode(const Format& f, const RefRounder& ref, float x) {
  const uint32_t got = f.encode(x);
  if (std::isnan(x)) {
    EXPECT_TRUE(f.isNaNCode(got)) << f.name << " NaN input bits 0x" << std::hex << bitsOf(x)
                                  << " gave non-NaN 0x" << got;
    return f.isNaNCode(got);
  }
  const uint32_t want = ref.round(static_cast<double>(x));
  EXPECT_EQ(got, want) << f.name << " encode(" << x << ", bits 0x" << std::hex << bitsOf(x) << ")";
  return got == want;
}

TEST(FloatConvert, DecodeEveryCodeMatchesDefinition) {
  for (const Format* f : kFormats) {
    const uint32_t ncodes = 1u << f->totalBits;
    int bad = 0;
    for (uint32_t c = 0; c < ncodes && bad < 10; ++c) {
      const float got = f->decode(c);
      if (f->isNaNCode(c)) {
        if (!std::isnan(got)) ++bad;
        EXPECT_TRUE(std::isnan(got)) << f->name << " code 0x" << std::hex << c;
        continue;
      }
      const uint32_t mag = c & (f->signMask() - 1u);
      const bool neg = (c & f->signMask()) != 0;
      double want = (!f->saturating && mag == f->infCode()) ? HUGE_VAL : f->value(mag);
      if (neg) want = -want;
      if (static_cast<double>(got) != want || std::signbit(got) != neg) ++bad;
      EXPECT_EQ(static_cast<double>(got), want) << f->name << " code 0x" << std::hex << c;
      EXPECT_EQ(std::signbit(got), neg) << f->name << " code 0x" << std::hex << c;
    }
  }
}

TEST(FloatConvert, EveryNonNaNCodeRoundTrips) {
  for (const Format* f : kFormats) {
    const uint32_t ncodes = 1u << f->totalBits;
    int nans = 0;
    for (uint32_t c = 0; c < ncodes; ++c) {
      if (f->isNaNCode(c)) {
        ++nans;
        EXPECT_TRUE(f->isNaNCode(f->encode(f->decode(c)))) << f->name << " 0x" << std::hex << c;
        continue;
      }
      ASSERT_EQ(f->encode(f->decode(c)), c) << f->name << " code 0x" << std::hex << c;
    }
    // Independent count of NaN codes: 2 for E4M3, 2 * (2^man - 1) for the others.
    EXPECT_EQ(nans, f->saturating ? 2 : 2 * ((1 << f->manBits) - 1)) << f->name;
  }
  // Signed zeros explicitly.
  EXPECT_EQ(encodeFloat8E4M3(-0.0f), 0x80);
  EXPECT_EQ(encodeFloat8E5M2(-0.0f), 0x80);
  EXPECT_EQ(encodeFloat16(-0.0f), 0x8000);
  EXPECT_EQ(encodeBFloat16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(decodeFloat8E4M3(0x80)) && decodeFloat8E4M3(0x80) == 0.0f);
  EXPECT_TRUE(std::signbit(decodeFloat16(0x8000)) && decodeFloat16(0x8000) == 0.0f);
}

// Every representable value, every midpoint between neighbours (ties), and the floats just
// beside each midpoint, on both signs.
TEST(FloatConvert, MidpointsRoundToNearestEven) {
  for (const Format* f : kFormats) {
    RefRounder ref(*f);
    const std::vector<double>& v = ref.values();
    std::vector<double> points(v.begin(), v.end());
    for (size_t i = 0; i + 1 < v.size(); ++i) points.push_back((v[i] + v[i + 1]) / 2);
    if (!f->saturating) {  // the overflow threshold
      const double next = std::ldexp(1.0, (1 << f->expBits) - 1 - f->bias());
      points.push_back((v.back() + next) / 2);
    } else {
      points.push_back(v.back() + 16);  // 464: the tie above 448, and beyond
      points.push_back(v.back() + 32);
    }
    int bad = 0;
    for (double p : points) {
      const float x = static_cast<float>(p);
      ASSERT_EQ(static_cast<double>(x), p) << f->name << ": midpoint not a float";
      for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, HUGE_VALF)}) {
        if (!checkEncode(*f, ref, y)) ++bad;
        if (!checkEncode(*f, ref, -y)) ++bad;
      }
      ASSERT_LT(bad, 10) << f->name << ": stopping after 10 mismatches";
    }
  }
}

// Floats spread over the whole bit space (all exponents, NaNs and infinities included).
TEST(FloatConvert, SweepOfAllFloatsMatchesReference) {
  for (const Format* f : kFormats) {
    RefRounder ref(*f);
    int bad = 0;
    for (uint64_t u = 0; u <= 0xFFFFFFFFull && bad < 10; u += 4099) {
      if (!checkEncode(*f, ref, floatOf(static_cast<uint32_t>(u)))) ++bad;
    }
    for (float x :
         {HUGE_VALF, -HUGE_VALF, std::numeric_limits<float>::quiet_NaN(),
          -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
          std::numeric_limits<float>::min(), -std::numeric_limits<float>::min()}) {
      checkEncode(*f, ref, x);
    }
  }
}

TEST(FloatConvert, E4M3SpecValues) {
  // OFP8: bias 7, max normal S.1111.110 = 448, NaN S.1111.111, no infinities, saturating.
  EXPECT_EQ(encodeFloat8E4M3(448.0f), 0x7E);
  EXPECT_EQ(encodeFloat8E4M3(-448.0f), 0xFE);
  EXPECT_EQ(encodeFloat8E4M3(464.0f), 0x7E);  // tie between 448 and the absent 480
  EXPECT_EQ(encodeFloat8E4M3(465.0f), 0x7E);  // saturates rather than NaN
  EXPECT_EQ(encodeFloat8E4M3(1e30f), 0x7E);
  EXPECT_EQ(encodeFloat8E4M3(HUGE_VALF), 0x7E);
  EXPECT_EQ(encodeFloat8E4M3(-HUGE_VALF), 0xFE);
  EXPECT_EQ(encodeFloat8E4M3(std::nanf("")), 0x7F);
  EXPECT_EQ(encodeFloat8E4M3(-std::nanf("")), 0xFF);
  EXPECT_EQ(encodeFloat8E4M3(1.0f), 0x38);
  EXPECT_EQ(encodeFloat8E4M3(0.015625f), 0x08);                // 2^-6, smallest normal
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(1.0f, -9)), 0x01);     // smallest subnormal
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(1.0f, -10)), 0x00);    // tie below it: to even 0
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(1.001f, -10)), 0x01);  // just above the tie
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(3.0f, -10)), 0x02);    // tie 1 vs 2: to even 2
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(-1.0f, -10)), 0x80);   // -0
  EXPECT_EQ(encodeFloat8E4M3(std::ldexp(15.0f, -10)), 0x08);   // 7.5 * 2^-9: tie, carries to normal
  EXPECT_EQ(decodeFloat8E4M3(0x7E), 448.0f);
  EXPECT_EQ(decodeFloat8E4M3(0x77), 240.0f);  // S.1110.111
  EXPECT_EQ(decodeFloat8E4M3(0x78), 256.0f);  // exponent field 1111 is finite in E4M3
  EXPECT_EQ(decodeFloat8E4M3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(decodeFloat8E4M3(0x07), std::ldexp(7.0f, -9));
  EXPECT_TRUE(std::isnan(decodeFloat8E4M3(0x7F)));
  EXPECT_TRUE(std::isnan(decodeFloat8E4M3(0xFF)));
}

TEST(FloatConvert, E5M2SpecValues) {
  // OFP8: bias 15, IEEE-like; max 57344 = S.11110.11; inf S.11111.00.
  EXPECT_EQ(encodeFloat8E5M2(57344.0f), 0x7B);
  EXPECT_EQ(encodeFloat8E5M2(61439.0f), 0x7B);
  EXPECT_EQ(encodeFloat8E5M2(61440.0f), 0x7C);  // tie with 2^16: to even, which is inf
  EXPECT_EQ(encodeFloat8E5M2(-61440.0f), 0xFC);
  EXPECT_EQ(encodeFloat8E5M2(HUGE_VALF), 0x7C);
  EXPECT_EQ(encodeFloat8E5M2(-HUGE_VALF), 0xFC);
  EXPECT_TRUE(kE5M2.isNaNCode(encodeFloat8E5M2(std::nanf(""))));
  EXPECT_EQ(encodeFloat8E5M2(1.0f), 0x3C);
  EXPECT_EQ(encodeFloat8E5M2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(encodeFloat8E5M2(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(encodeFloat8E5M2(std::ldexp(3.0f, -17)), 0x02);
  EXPECT_EQ(encodeFloat8E5M2(1.125f), 0x3C);  // tie 1.0 vs 1.25: to even
  EXPECT_EQ(encodeFloat8E5M2(1.375f), 0x3E);  // tie 1.25 vs 1.5: to even 1.5
  EXPECT_EQ(decodeFloat8E5M2(0x7B), 57344.0f);
  EXPECT_EQ(decodeFloat8E5M2(0x7C), HUGE_VALF);
  EXPECT_EQ(decodeFloat8E5M2(0xFC), -HUGE_VALF);
  EXPECT_TRUE(std::isnan(decodeFloat8E5M2(0x7D)));
  EXPECT_TRUE(std::isnan(decodeFloat8E5M2(0x7E)));
  EXPECT_TRUE(std::isnan(decodeFloat8E5M2(0x7F)));
  EXPECT_EQ(decodeFloat8E5M2(0x01), std::ldexp(1.0f, -16));
}

TEST(FloatConvert, Float16AndBFloat16SpecValues) {
  EXPECT_EQ(encodeFloat16(65504.0f), 0x7BFF);
  EXPECT_EQ(encodeFloat16(65519.0f), 0x7BFF);
  EXPECT_EQ(encodeFloat16(65520.0f), 0x7C00);
  EXPECT_EQ(encodeFloat16(-HUGE_VALF), 0xFC00);
  EXPECT_EQ(encodeFloat16(std::nanf("")), 0x7E00);
  EXPECT_EQ(encodeFloat16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: to even
  EXPECT_EQ(encodeFloat16(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie: to even
  EXPECT_EQ(encodeFloat16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(encodeFloat16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(encodeFloat16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(encodeFloat16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(decodeFloat16(0x3555), 0.333251953125f);  // 1365 / 4096
  EXPECT_EQ(encodeBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(encodeBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(encodeBFloat16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  EXPECT_EQ(encodeBFloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(encodeBFloat16(floatOf(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(encodeBFloat16(floatOf(0x7F7F8000u)), 0x7F80);  // tie with 2^128: to even (inf)
  EXPECT_EQ(encodeBFloat16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(encodeBFloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(encodeBFloat16(floatOf(0x00008000u)), 0x0000);  // tie below 2^-133: to even 0
  EXPECT_EQ(encodeBFloat16(floatOf(0x00018000u)), 0x0002);
  EXPECT_EQ(decodeBFloat16(0x0001), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isnan(decodeBFloat16(0x7F81)));
  EXPECT_TRUE(std::isnan(decodeBFloat16(0xFFC0)));
}

#if defined(__FLT16_MANT_DIG__)
// GCC's _Float16 (libgcc's software conversion on x86-64) is a second, independent reference.
TEST(FloatConvert, Float16MatchesCompilerFloat16) {
  auto compilerBits = [](float x) {
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t b;
    std::memcpy(&b, &h, 2);
    return b;
  };
  int bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull && bad < 10; u += 997) {
    const float x = floatOf(static_cast<uint32_t>(u));
    if (std::isnan(x)) continue;
    const uint16_t want = compilerBits(x);
    if (encodeFloat16(x) != want) ++bad;
    EXPECT_EQ(encodeFloat16(x), want) << "bits 0x" << std::hex << u;
  }
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    _Float16 h;
    const uint16_t b = static_cast<uint16_t>(c);
    std::memcpy(&h, &b, 2);
    const float want = static_cast<float>(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(decodeFloat16(b)));
    } else {
      ASSERT_EQ(bitsOf(decodeFloat16(b)), bitsOf(want)) << "code 0x" << std::hex << c;
    }
  }
}
#endif

#if TESSERA_HAVE_CUDA
// CUDA's own conversions (host emulation of __float2half_rn, __float2bfloat16_rn and
// __nv_cvt_float_to_fp8 with E4M3 saturating to finite and E5M2 not saturating) are a third,
// independent reference; the gpu test compares the device versions. NaN encodings differ
// between implementations, so NaN inputs are left to the other tests.
TEST(FloatConvert, MatchesCudaHeaderConversions) {
  int bad = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull && bad < 10; u += 4093) {
    const float x = floatOf(static_cast<uint32_t>(u));
    if (std::isnan(x)) continue;
    const uint16_t h = __half_as_ushort(__float2half_rn(x));
    const __nv_bfloat16 bv = __float2bfloat16_rn(x);
    uint16_t b;
    std::memcpy(&b, &bv, 2);
    const uint8_t e4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const uint8_t e5 = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
    const bool ok = encodeFloat16(x) == h && encodeBFloat16(x) == b && encodeFloat8E4M3(x) == e4 &&
                    encodeFloat8E5M2(x) == e5;
    if (!ok) ++bad;
    EXPECT_TRUE(ok) << "bits 0x" << std::hex << u << ": f16 " << encodeFloat16(x) << "/" << h
                    << " bf16 " << encodeBFloat16(x) << "/" << b << " e4m3 " << +encodeFloat8E4M3(x)
                    << "/" << +e4 << " e5m2 " << +encodeFloat8E5M2(x) << "/" << +e5;
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const auto code = static_cast<__nv_fp8_storage_t>(c);
    const float want4 = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
    const float want5 = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E5M2)));
    const float got4 = decodeFloat8E4M3(static_cast<uint8_t>(c));
    const float got5 = decodeFloat8E5M2(static_cast<uint8_t>(c));
    EXPECT_TRUE(std::isnan(want4) ? std::isnan(got4) : bitsOf(got4) == bitsOf(want4)) << c;
    EXPECT_TRUE(std::isnan(want5) ? std::isnan(got5) : bitsOf(got5) == bitsOf(want5)) << c;
  }
}
#endif

TEST(FloatConvert, StorageTypes) {
  static_assert(std::is_trivially_copyable_v<Float16> && std::is_standard_layout_v<Float16>);
  static_assert(std::is_trivially_copyable_v<BFloat16> && std::is_standard_layout_v<BFloat16>);
  static_assert(std::is_trivially_copyable_v<Float8E4M3> && std::is_standard_layout_v<Float8E4M3>);
  static_assert(std::is_trivially_copyable_v<Float8E5M2> && std::is_standard_layout_v<Float8E5M2>);
  EXPECT_EQ(Float16::fromFloat(1.0f).bits, 0x3C00);
  EXPECT_EQ(BFloat16::fromFloat(-2.0f).bits, 0xC000);
  EXPECT_EQ(Float8E4M3::fromFloat(1000.0f).bits, 0x7E);
  EXPECT_EQ(Float8E5M2::fromFloat(-1.5f).bits, 0xBE);
  EXPECT_EQ(toFloat(Float16{0x3C00}), 1.0f);
  EXPECT_EQ(toFloat(BFloat16{0xC000}), -2.0f);
  EXPECT_EQ(toFloat(Float8E4M3{0x7E}), 448.0f);
  EXPECT_EQ(toFloat(Float8E5M2{0xBE}), -1.5f);
}

}  // namespace
}  // namespace tessera
