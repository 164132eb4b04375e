// Reduction ops on every datatype against references computed here: exact 64-bit modular
// arithmetic for integers, double arithmetic for floats, and for the narrow floats a rounding
// written from the formats' definitions (frexp / nearbyint), applied as the documented semantics
// say: combine in float, round once per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/datatype.hpp"
#include "core/reduce_op.hpp"
#include "core/status.hpp"

namespace tessera {
namespace {

// ---- Per-type facts, written from the public header and the format definitions ----------------

template <class T>
constexpr tsrDataType_t kDtype = tsrNumTypes;
template <>
constexpr tsrDataType_t kDtype<int8_t> = tsrInt8;
template <>
constexpr tsrDataType_t kDtype<uint8_t> = tsrUint8;
template <>
constexpr tsrDataType_t kDtype<int32_t> = tsrInt32;
template <>
constexpr tsrDataType_t kDtype<uint32_t> = tsrUint32;
template <>
constexpr tsrDataType_t kDtype<int64_t> = tsrInt64;
template <>
constexpr tsrDataType_t kDtype<uint64_t> = tsrUint64;
template <>
constexpr tsrDataType_t kDtype<Float16> = tsrFloat16;
template <>
constexpr tsrDataType_t kDtype<float> = tsrFloat32;
template <>
constexpr tsrDataType_t kDtype<double> = tsrFloat64;
template <>
constexpr tsrDataType_t kDtype<BFloat16> = tsrBfloat16;
template <>
constexpr tsrDataType_t kDtype<Float8E4M3> = tsrFloat8e4m3;
template <>
constexpr tsrDataType_t kDtype<Float8E5M2> = tsrFloat8e5m2;

struct NarrowFormat {
  int manBits;
  int emin;  // exponent of the smallest normal
  double maxv;
  bool saturating;
};
template <class T>
constexpr bool kNarrow = std::is_class_v<T>;
template <class T>
constexpr NarrowFormat kFormat{};
template <>
constexpr NarrowFormat kFormat<Float16> = {10, -14, 65504.0, false};
template <>
constexpr NarrowFormat kFormat<BFloat16> = {7, -126, 3.3895313892515355e38, false};
template <>
constexpr NarrowFormat kFormat<Float8E4M3> = {3, -6, 448.0, true};
template <>
constexpr NarrowFormat kFormat<Float8E5M2> = {2, -14, 57344.0, false};

// Round-to-nearest-even of any double into a narrow format, as a double value.
double roundNarrow(double x, const NarrowFormat& f) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return f.saturating ? std::copysign(f.maxv, x) : x;
  const double ax = std::fabs(x);
  if (ax == 0) return x;
  int e;
  std::frexp(ax, &e);  // ax in [2^(e-1), 2^e)
  const int q = std::max(e - 1, f.emin);
  const double r = std::nearbyint(std::ldexp(ax, f.manBits - q));  // ties to even
  double v = std::ldexp(r, q - f.manBits);
  if (v > f.maxv) v = f.saturating ? f.maxv : HUGE_VAL;
  return std::copysign(v, x);
}

template <class T>
double valueOf(T x) {
  if constexpr (kNarrow<T>) {
    return static_cast<double>(toFloat(x));
  } else {
    return static_cast<double>(x);
  }
}

// The documented semantics of one step whose exact (double) result is `exact`: float32 rounds
// to float, the narrow types compute in float and round once more.
template <class T>
double roundStep(double exact) {
  if constexpr (std::is_same_v<T, double>) {
    return exact;
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(exact);
  } else {
    return roundNarrow(static_cast<float>(exact), kFormat<T>);
  }
}

template <class T>
T fromDouble(double v) {  // rounds v to T
  if constexpr (kNarrow<T>) {
    return T::fromFloat(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Exact modular integer arithmetic in 64 bits, then the low bits.
template <class T>
T intRef(RedKind k, T a, T b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (k) {
    case RedKind::kProd: return static_cast<T>(ua * ub);
    case RedKind::kMin: return std::min(a, b);
    case RedKind::kMax: return std::max(a, b);
    default: return static_cast<T>(ua + ub);
  }
}

double floatMinMaxRef(RedKind k, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) {  // only zeros can differ, by sign
    const bool neg = k == RedKind::kMin ? (std::signbit(a) || std::signbit(b))
                                        : (std::signbit(a) && std::signbit(b));
    return std::copysign(a, neg ? -1.0 : 1.0);
  }
  return k == RedKind::kMin ? std::min(a, b) : std::max(a, b);
}

template <class T>
double floatRef(RedKind k, T a, T b) {
  const double x = valueOf(a), y = valueOf(b);
  switch (k) {
    case RedKind::kProd: return roundStep<T>(x * y);
    case RedKind::kMin:
    case RedKind::kMax: return floatMinMaxRef(k, x, y);
    default: return roundStep<T>(x + y);
  }
}

template <class T>
::testing::AssertionResult sameValue(T got, double want) {
  const double g = valueOf(got);
  if (std::isnan(want) ? std::isnan(g) : (g == want && std::signbit(g) == std::signbit(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << g << ", want " << want;
}

template <class T>
::testing::AssertionResult sameElem(T got, T want) {
  if constexpr (kNarrow<T> || std::is_floating_point_v<T>) {
    return sameValue(got, valueOf(want));
  } else {
    if (got == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << +got << ", want " << +want;
  }
}

// Random bit patterns (every value class, NaN and infinities included) for the first half, small
// values (where rounding is fine-grained) for the second.
template <class T>
std::vector<T> randomValues(size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  std::uniform_real_distribution<double> small(-4.0, 4.0);
  for (size_t i = 0; i < n; ++i) {
    if (i < n / 2 || !std::is_class_v<T>) {
      const uint64_t r = rng();
      std::memcpy(&v[i], &r, sizeof(T));
    }
    if (i >= n / 2) {
      if constexpr (kNarrow<T>) {
        v[i] = T::fromFloat(static_cast<float>(small(rng)));
      } else if constexpr (std::is_floating_point_v<T>) {
        v[i] = static_cast<T>(small(rng));
      }
    }
  }
  return v;
}

template <class T>
class ReduceOpTyped : public ::testing::Test {};

struct TypeNames {
  template <class T>
  static std::string GetName(int) {
    return dtypeName(kDtype<T>);
  }
};
using AllTypes = ::testing::Types<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, Float16,
                                  float, double, BFloat16, Float8E4M3, Float8E5M2>;
TYPED_TEST_SUITE(ReduceOpTyped, AllTypes, TypeNames);

TYPED_TEST(ReduceOpTyped, BinaryOpsMatchReference) {
  using T = TypeParam;
  constexpr tsrDataType_t dt = kDtype<T>;
  std::mt19937_64 rng(1234 + static_cast<int>(dt));
  const size_t n = 4000;
  const std::vector<T> a = randomValues<T>(n, rng), b = randomValues<T>(n, rng);
  for (RedKind k : {RedKind::kSum, RedKind::kProd, RedKind::kMin, RedKind::kMax}) {
    RedOpDesc op;
    op.kind = k;
    std::vector<T> dst(n);
    ASSERT_EQ(reduceHost(op, dt, a.data(), b.data(), dst.data(), n), tsrSuccess);
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; ++i) {
      ::testing::AssertionResult ok = ::testing::AssertionSuccess();
      if constexpr (std::is_integral_v<T>) {
        ok = sameElem(dst[i], intRef(k, a[i], b[i]));
      } else {
        ok = sameValue(dst[i], floatRef(k, a[i], b[i]));
      }
      if (!ok) ++bad;
      EXPECT_TRUE(ok) << redKindName(k) << " element " << i << " of " << valueOf(a[i]) << ", "
                      << valueOf(b[i]);
    }
    // In place, either operand: the same results.
    std::vector<T> inA = a, inB = b;
    ASSERT_EQ(reduceHost(op, dt, inA.data(), b.data(), inA.data(), n), tsrSuccess);
    ASSERT_EQ(reduceHost(op, dt, a.data(), inB.data(), inB.data(), n), tsrSuccess);
    EXPECT_EQ(std::memcmp(inA.data(), dst.data(), n * sizeof(T)), 0) << redKindName(k);
    EXPECT_EQ(std::memcmp(inB.data(), dst.data(), n * sizeof(T)), 0) << redKindName(k);
  }
}

// Narrow sums and products computed in float and rounded once are the correctly rounded exact
// results (float has >= 2p+2 bits): checked without the float step for the formats whose exact
// sums and products stay inside float's normal range (bfloat16 products can underflow it).
template <class T>
class NarrowStep : public ::testing::Test {};
using ExactInFloatTypes = ::testing::Types<Float16, Float8E4M3, Float8E5M2>;
TYPED_TEST_SUITE(NarrowStep, ExactInFloatTypes, TypeNames);

TYPED_TEST(NarrowStep, EqualsExactResultRoundedOnce) {
  using T = TypeParam;
  for (uint32_t ca = 0; ca < 256; ++ca) {
    for (uint32_t cb = 0; cb < 256; ++cb) {
      // For float16, a 256 x 256 grid spread over all codes.
      const uint32_t sa = sizeof(T) == 1 ? ca : ca * 257, sb = sizeof(T) == 1 ? cb : cb * 257;
      T a, b;
      std::memcpy(&a, &sa, sizeof(T));  // little-endian: the low bytes of the code
      std::memcpy(&b, &sb, sizeof(T));
      const double x = valueOf(a), y = valueOf(b);
      ASSERT_TRUE(sameValue(reduceElem<RedSum>(a, b), roundNarrow(x + y, kFormat<T>)))
          << x << " + " << y;
      ASSERT_TRUE(sameValue(reduceElem<RedProd>(a, b), roundNarrow(x * y, kFormat<T>)))
          << x << " * " << y;
    }
  }
}

// Several ranks: sum (rounded every step, in rank order), avg, premulsum, through reduceAllHost.
TYPED_TEST(ReduceOpTyped, MultiRankSumAvgPreMulSum) {
  using T = TypeParam;
  constexpr tsrDataType_t dt = kDtype<T>;
  std::mt19937_64 rng(99 + static_cast<int>(dt));
  const size_t n = 1000;
  for (int nranks : {1, 3, 5}) {
    std::vector<std::vector<T>> in;
    std::vector<const void*> ptrs;
    for (int r = 0; r < nranks; ++r) in.push_back(randomValues<T>(n, rng));
    for (auto& v : in) ptrs.push_back(v.data());
    // Premul scalars of the datatype: -3 (3 for unsigned types), and for floats 0.1 rounded to
    // the type, whose many mantissa bits make each product round.
    const T scalar = fromDouble<T>(std::is_signed_v<T> || kNarrow<T> ? -3.0 : 3.0);
    const T scalarF = kNarrow<T> || std::is_floating_point_v<T> ? fromDouble<T>(0.1) : scalar;
    for (RedKind k : {RedKind::kSum, RedKind::kAvg, RedKind::kPreMulSum}) {
      for (const T& s : {scalar, scalarF}) {
        RedOpDesc op;
        op.kind = k;
        if (k == RedKind::kPreMulSum) {
          ASSERT_EQ(makePreMulSum(dt, &s, &op), tsrSuccess);
        }
        std::vector<T> got(n);
        ASSERT_EQ(reduceAllHost(op, dt, ptrs.data(), nranks, got.data(), n), tsrSuccess);
        int bad = 0;
        for (size_t i = 0; i < n && bad < 5; ++i) {
          ::testing::AssertionResult ok = ::testing::AssertionSuccess();
          if constexpr (std::is_integral_v<T>) {
            auto pre = [&](T x) {
              return k == RedKind::kPreMulSum ? intRef(RedKind::kProd, x, s) : x;
            };
            T acc = pre(in[0][i]);
            for (int r = 1; r < nranks; ++r) acc = intRef(RedKind::kSum, acc, pre(in[r][i]));
            if (k == RedKind::kAvg) {
              // Truncation toward zero, spelled out.
              const bool neg = std::is_signed_v<T> && static_cast<int64_t>(acc) < 0;
              const uint64_t mag =
                  neg ? 0 - static_cast<uint64_t>(acc) : static_cast<uint64_t>(acc);
              const uint64_t q = mag / static_cast<uint64_t>(nranks);
              acc = static_cast<T>(neg ? 0 - q : q);
            }
            ok = sameElem(got[i], acc);
          } else {
            auto pre = [&](T x) {
              return k == RedKind::kPreMulSum ? roundStep<T>(valueOf(x) * valueOf(s)) : valueOf(x);
            };
            double acc = pre(in[0][i]);
            for (int r = 1; r < nranks; ++r) acc = roundStep<T>(acc + pre(in[r][i]));
            if (k == RedKind::kAvg) acc = roundStep<T>(acc / nranks);
            ok = sameValue(got[i], acc);
          }
          if (!ok) ++bad;
          EXPECT_TRUE(ok) << redKindName(k) << " nranks " << nranks << " element " << i;
        }
        if (k != RedKind::kPreMulSum) break;  // the scalar matters only for premulsum
      }
    }
  }
}

TEST(ReduceOp, NarrowRoundsOncePerStep) {
  // 1 + 2^-11 is a float16 tie that goes to 1; two such steps stay at 1, whereas accumulating in
  // float would give 1 + 2^-10, a float16 value.
  const Float16 one = Float16::fromFloat(1.0f), tiny = Float16::fromFloat(std::ldexp(1.0f, -11));
  const Float16 ins[3][1] = {{one}, {tiny}, {tiny}};
  const void* ptrs[3] = {ins[0], ins[1], ins[2]};
  Float16 out[1];
  RedOpDesc sum;
  ASSERT_EQ(reduceAllHost(sum, tsrFloat16, ptrs, 3, out, 1), tsrSuccess);
  EXPECT_EQ(out[0].bits, 0x3C00);
  // E4M3 saturates at every step; E5M2 overflows to infinity.
  const Float8E4M3 big8 = Float8E4M3::fromFloat(448.0f);
  EXPECT_EQ(reduceElem<RedSum>(big8, big8).bits, 0x7E);
  const Float8E5M2 big5 = Float8E5M2::fromFloat(57344.0f);
  EXPECT_EQ(reduceElem<RedSum>(big5, big5).bits, 0x7C);
  // bfloat16: 256 + 1 is a tie that goes to 256.
  const BFloat16 b256 = BFloat16::fromFloat(256.0f), b1 = BFloat16::fromFloat(1.0f);
  EXPECT_EQ(toFloat(reduceElem<RedSum>(b256, b1)), 256.0f);
}

TEST(ReduceOp, MinMaxPropagateNaNAndOrderZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {1.0f, -1.0f, 0.0f, HUGE_VALF}) {
    EXPECT_TRUE(std::isnan(RedMin<float>{}(nan, x)));
    EXPECT_TRUE(std::isnan(RedMin<float>{}(x, nan)));
    EXPECT_TRUE(std::isnan(RedMax<float>{}(nan, x)));
    EXPECT_TRUE(std::isnan(RedMax<float>{}(x, nan)));
    EXPECT_TRUE(std::isnan(RedMax<double>{}(static_cast<double>(x), NAN)));
  }
  // Every narrow format, through the host kernel, NaN in either operand.
  const RedOpDesc mx{RedKind::kMax}, mn{RedKind::kMin};
  const Float16 h[2] = {Float16::fromFloat(nan), Float16::fromFloat(3.0f)};
  Float16 r[2];
  const Float16 hRev[2] = {h[1], h[0]};
  ASSERT_EQ(reduceHost(mx, tsrFloat16, h, hRev, r, 2), tsrSuccess);
  EXPECT_TRUE(std::isnan(toFloat(r[0])) && std::isnan(toFloat(r[1])));
  const Float8E4M3 e[1] = {Float8E4M3{0x7F}}, f[1] = {Float8E4M3::fromFloat(-2.0f)};
  Float8E4M3 er[1];
  ASSERT_EQ(reduceHost(mn, tsrFloat8e4m3, f, e, er, 1), tsrSuccess);
  EXPECT_TRUE(std::isnan(toFloat(er[0])));
  // -0 is the min and +0 the max of {-0, +0}, in both orders.
  EXPECT_TRUE(std::signbit(RedMin<float>{}(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(RedMin<float>{}(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(RedMax<float>{}(0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(RedMax<float>{}(-0.0f, 0.0f)));
  EXPECT_TRUE(std::signbit(RedMin<double>{}(0.0, -0.0)));
  EXPECT_FALSE(std::signbit(RedMax<double>{}(-0.0, 0.0)));
}

TEST(ReduceOp, IntegerWrapAndAvgTruncation) {
  EXPECT_EQ(reduceElem<RedSum>(int8_t{127}, int8_t{1}), int8_t{-128});
  EXPECT_EQ(reduceElem<RedSum>(uint8_t{255}, uint8_t{1}), uint8_t{0});
  EXPECT_EQ(reduceElem<RedProd>(uint8_t{16}, uint8_t{17}), uint8_t{16});  // 272 mod 256
  EXPECT_EQ(reduceElem<RedProd>(int8_t{-128}, int8_t{-1}), int8_t{-128});
  EXPECT_EQ(reduceElem<RedSum>(std::numeric_limits<int32_t>::max(), int32_t{1}),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(reduceElem<RedProd>(std::numeric_limits<int64_t>::min(), int64_t{-1}),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(reduceElem<RedProd>(~uint64_t{0}, ~uint64_t{0}), uint64_t{1});
  // avg: truncation toward zero, and nranks beyond the type's range.
  RedOpDesc avg{RedKind::kAvg};
  int8_t v[4] = {-128, 127, -5, 5};
  ASSERT_EQ(applyPostOp(avg, tsrInt8, v, 4, 2), tsrSuccess);
  EXPECT_EQ(v[0], -64);
  EXPECT_EQ(v[1], 63);
  EXPECT_EQ(v[2], -2);
  EXPECT_EQ(v[3], 2);
  int8_t w[2] = {-128, 127};
  ASSERT_EQ(applyPostOp(avg, tsrInt8, w, 2, 200), tsrSuccess);
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[1], 0);
  int64_t x[1] = {std::numeric_limits<int64_t>::min()};
  ASSERT_EQ(applyPostOp(avg, tsrInt64, x, 1, 1), tsrSuccess);
  EXPECT_EQ(x[0], std::numeric_limits<int64_t>::min());
  // Other ops leave the buffer alone.
  int8_t y[1] = {-7};
  ASSERT_EQ(applyPostOp(RedOpDesc{RedKind::kSum}, tsrInt8, y, 1, 3), tsrSuccess);
  EXPECT_EQ(y[0], -7);
}

TEST(ReduceOp, PreMulSumScalars) {
  RedOpDesc op;
  const int8_t s8 = -2;
  ASSERT_EQ(makePreMulSum(tsrInt8, &s8, &op), tsrSuccess);
  EXPECT_EQ(op.kind, RedKind::kPreMulSum);
  EXPECT_EQ(op.dtype, tsrInt8);
  EXPECT_EQ(op.scalarInt, ~uint64_t{0} - 1);  // -2 sign-extended
  const Float16 sh = Float16::fromFloat(0.1f);
  ASSERT_EQ(makePreMulSum(tsrFloat16, &sh, &op), tsrSuccess);
  EXPECT_EQ(op.scalarF, static_cast<double>(toFloat(sh)));  // the float16 value, not 0.1
  const uint64_t big = ~uint64_t{0};
  ASSERT_EQ(makePreMulSum(tsrUint64, &big, &op), tsrSuccess);
  EXPECT_EQ(op.scalarInt, big);
  // An unaligned scalar is read correctly.
  alignas(8) unsigned char raw[16] = {};
  const double d = -1.5;
  std::memcpy(raw + 1, &d, sizeof d);
  ASSERT_EQ(makePreMulSum(tsrFloat64, raw + 1, &op), tsrSuccess);
  EXPECT_EQ(op.scalarF, -1.5);
  // The op reduces only its own datatype.
  float a[1] = {1}, b[1] = {2}, c[1];
  clearLastError();
  EXPECT_EQ(reduceHost(op, tsrFloat32, a, b, c, 1), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("float64"), std::string::npos);
}

TEST(ReduceOp, Validation) {
  for (int v = 0; v < tsrNumOps; ++v) {
    EXPECT_EQ(redOpCheck(static_cast<tsrRedOp_t>(v), "tsrAllReduce"), tsrSuccess);
    RedOpDesc d;
    ASSERT_EQ(redOpBuiltin(static_cast<tsrRedOp_t>(v), &d), tsrSuccess);
  }
  RedOpDesc d;
  ASSERT_EQ(redOpBuiltin(tsrMax, &d), tsrSuccess);
  EXPECT_EQ(d.kind, RedKind::kMax);
  ASSERT_EQ(redOpBuiltin(tsrMin, &d), tsrSuccess);
  EXPECT_EQ(d.kind, RedKind::kMin);
  ASSERT_EQ(redOpBuiltin(tsrAvg, &d), tsrSuccess);
  EXPECT_EQ(d.kind, RedKind::kAvg);
  for (int v : {-1, 5, 99}) {
    clearLastError();
    EXPECT_EQ(redOpCheck(static_cast<tsrRedOp_t>(v), "tsrAllReduce"), tsrInvalidArgument);
    const std::string msg = lastErrorMessage();
    EXPECT_NE(msg.find("invalid reduction op " + std::to_string(v) + " for tsrAllReduce"),
              std::string::npos)
        << msg;
    EXPECT_EQ(redOpBuiltin(static_cast<tsrRedOp_t>(v), &d), tsrInvalidArgument);
  }
  const int8_t s = 1;
  EXPECT_EQ(makePreMulSum(static_cast<tsrDataType_t>(42), &s, &d), tsrInvalidArgument);
  EXPECT_EQ(makePreMulSum(tsrInt8, nullptr, &d), tsrInvalidArgument);
  EXPECT_EQ(makePreMulSum(tsrInt8, &s, nullptr), tsrInvalidArgument);
  // Kernels: bad datatype, NULL buffers with elements, nothing to do with none.
  const RedOpDesc sum;
  float buf[2] = {1, 2};
  clearLastError();
  EXPECT_EQ(reduceHost(sum, static_cast<tsrDataType_t>(42), buf, buf, buf, 2), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("invalid datatype 42"), std::string::npos);
  EXPECT_EQ(reduceHost(sum, tsrFloat32, nullptr, buf, buf, 2), tsrInvalidArgument);
  EXPECT_EQ(reduceHost(sum, tsrFloat32, nullptr, nullptr, nullptr, 0), tsrSuccess);
  EXPECT_EQ(applyPreOp(sum, tsrFloat32, buf, nullptr, 2), tsrInvalidArgument);
  EXPECT_EQ(applyPostOp(RedOpDesc{RedKind::kAvg}, tsrFloat32, buf, 2, 0), tsrInvalidArgument);
  EXPECT_EQ(reduceAllHost(sum, tsrFloat32, nullptr, 0, buf, 2), tsrInvalidArgument);
  const void* ins[2] = {buf, nullptr};
  EXPECT_EQ(reduceAllHost(sum, tsrFloat32, ins, 2, buf, 2), tsrInvalidArgument);
  EXPECT_EQ(buf[0], 1.0f);  // nothing written on failure
  // reduceAllHost's destination may be one of its inputs.
  float p[2] = {1, 2}, q[2] = {10, 20};
  const void* pq[2] = {p, q};
  ASSERT_EQ(reduceAllHost(sum, tsrFloat32, pq, 2, q, 2), tsrSuccess);
  EXPECT_EQ(q[0], 11.0f);
  EXPECT_EQ(q[1], 22.0f);
  EXPECT_STREQ(redKindName(RedKind::kPreMulSum), "premulsum");
}

}  // namespace
}  // namespace tessera
