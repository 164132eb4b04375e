// hostReduce / hostPostOp / hostCopyBytes against core/reduce_op.hpp's reference kernels
// (applyPreOp, reduceAllHost, applyPostOp), byte for byte: every datatype and op, 1..17 sources,
// counts around the SIMD block sizes, pointers off by one element, NaN/inf/-0/subnormal inputs,
// dst aliasing a source, dst2; once with the baseline SIMD build and once with the best one.
//
// Floating-point NaNs: when two NaNs with different bits meet in an add or multiply, IEEE 754
// leaves open which one comes out, and compilers may swap the operands of a commutative
// operation, so not even two builds of the reference agree. The random data therefore never lets
// two distinct NaNs meet in sum/prod: an element with a NaN input gets tame values in the other
// sources (no infinity, no zero, no overflow), so only that NaN propagates. min/max define the
// NaN they return, and are tested with any inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/exec/host_ops.hpp"
#include "core/datatype.hpp"
#include "core/reduce_op.hpp"

namespace tessera {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr tsrDataType_t kTypes[] = {tsrInt8,    tsrUint8,   tsrInt32,      tsrUint32,
                                    tsrInt64,   tsrUint64,  tsrFloat16,    tsrBfloat16,
                                    tsrFloat32, tsrFloat64, tsrFloat8e4m3, tsrFloat8e5m2};
constexpr RedKind kKinds[] = {RedKind::kSum, RedKind::kProd, RedKind::kMax,
                              RedKind::kMin, RedKind::kAvg,  RedKind::kPreMulSum};

// Bit layout of a floating type (sign on top).
struct Layout {
  int bits, expBits, manBits;
};
template <class T>
Layout layoutOf() {
  if constexpr (std::is_same_v<T, double>)
    return {64, 11, 52};
  else if constexpr (std::is_same_v<T, float>)
    return {32, 8, 23};
  else if constexpr (std::is_same_v<T, Float16>)
    return {16, 5, 10};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return {16, 8, 7};
  else if constexpr (std::is_same_v<T, Float8E4M3>)
    return {8, 4, 3};
  else
    return {8, 5, 2};
}

template <class T>
T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);  // little-endian: the low bytes
  return v;
}
template <class T>
T fromDouble(double d) {
  if constexpr (std::is_class_v<T>)
    return T::fromFloat(static_cast<float>(d));
  else
    return static_cast<T>(d);
}
template <class T>
bool isNan(T x) {
  if constexpr (std::is_integral_v<T>)
    return false;
  else
    return std::isnan(static_cast<double>(ElemTraits<T>::load(x)));
}

// Every value class: small values (fine rounding), small integers (exact ties), random bits,
// zeros and subnormals, infinities and NaNs with any payload and sign, values near overflow.
template <class T>
T randomElem(std::mt19937_64& rng) {
  const uint64_t r = rng();
  const int kind = static_cast<int>(rng() % 8);
  if constexpr (std::is_integral_v<T>) {
    switch (kind) {
      case 0: return T{0};
      case 1: return std::numeric_limits<T>::max();
      case 2: return std::numeric_limits<T>::min();
      case 3: return static_cast<T>(static_cast<int>(r % 7) - 3);
      default: return fromBits<T>(r);
    }
  } else {
    const Layout l = layoutOf<T>();
    const uint64_t sign = (r >> 1) & 1, man = (r >> 2) & ((uint64_t{1} << l.manBits) - 1);
    const uint64_t expMax = (uint64_t{1} << l.expBits) - 1;
    auto make = [&](uint64_t e) {
      return fromBits<T>((sign << (l.bits - 1)) | (e << l.manBits) | man);
    };
    switch (kind) {
      case 0: return fromBits<T>(r);
      case 1: return make(0);           // zero or subnormal
      case 2: return make(expMax);      // infinity or NaN (E4M3: large normal or NaN)
      case 3: return make(expMax - 1);  // near overflow
      case 4: {                         // small integers, and zeros of both signs
        const double v = static_cast<double>(r % 9) - 4.0;
        return fromDouble<T>(v == 0 && (r >> 20) % 2 != 0 ? -0.0 : v);
      }
      default: return fromDouble<T>(std::ldexp(static_cast<double>(r % 100000), -14) - 3.0);
    }
  }
}

struct Case {
  tsrDataType_t dtype;
  RedKind kind;
  int nsrcs;
  size_t count;
  int offset;    // elements by which the pointers are moved off the allocation's alignment
  int aliasSrc;  // -1: separate dst, else dst is that source
  bool dst2;
  bool preFlags;  // pass per-source pre-op flags (random), or nullptr
  std::string str() const {
    return std::string(dtypeName(dtype)) + " " + redKindName(kind) +
           " nsrcs=" + std::to_string(nsrcs) + " count=" + std::to_string(count) +
           " offset=" + std::to_string(offset) + " alias=" + std::to_string(aliasSrc) +
           (dst2 ? " dst2" : "") + (preFlags ? " preflags" : "");
  }
};

::testing::AssertionResult sameBytes(const unsigned char* got, const unsigned char* want, size_t n,
                                     size_t esize, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    const size_t e = i / esize;
    std::string g, w;
    char buf[8];
    for (size_t b = esize; b-- > 0;) {
      std::snprintf(buf, sizeof buf, "%02x", got[e * esize + b]);
      g += buf;
      std::snprintf(buf, sizeof buf, "%02x", want[e * esize + b]);
      w += buf;
    }
    return ::testing::AssertionFailure()
           << what << ": element " << e << " is 0x" << g << ", reference 0x" << w;
  }
  return ::testing::AssertionSuccess();
}

constexpr size_t kGuard = 32;
constexpr unsigned char kCanary = 0xA5;

// A buffer of `count` elements at `offset` elements past an aligned start, with canaries around.
struct Buf {
  Bytes mem;
  size_t start, bytes;
  Buf(size_t count, size_t esize, int offset)
      : mem(2 * kGuard + (count + 1) * esize, kCanary),
        start(kGuard + static_cast<size_t>(offset) * esize),
        bytes(count * esize) {}
  unsigned char* data() { return mem.data() + start; }
  bool guardsIntact() const {
    for (size_t i = 0; i < mem.size(); ++i) {
      if ((i < start || i >= start + bytes) && mem[i] != kCanary) return false;
    }
    return true;
  }
};

template <class T>
::testing::AssertionResult runCase(const Case& c, std::mt19937_64& rng) {
  const size_t n = c.count, es = sizeof(T);
  std::vector<Buf> srcs;
  for (int s = 0; s < c.nsrcs; ++s) srcs.emplace_back(n, es, (c.offset + s) % 2);
  for (int s = 0; s < c.nsrcs; ++s) {
    T* p = reinterpret_cast<T*>(srcs[s].data());
    for (size_t i = 0; i < n; ++i) p[i] = randomElem<T>(rng);
  }
  const bool arith = c.kind != RedKind::kMax && c.kind != RedKind::kMin;
  if (arith && !std::is_integral_v<T>) {  // see the file comment
    for (size_t i = 0; i < n; ++i) {
      int nanSrc = -1;
      for (int s = 0; s < c.nsrcs && nanSrc < 0; ++s) {
        if (isNan(reinterpret_cast<T*>(srcs[s].data())[i])) nanSrc = s;
      }
      if (nanSrc < 0) continue;
      std::uniform_real_distribution<double> tame(0.5, 1.5);
      for (int s = 0; s < c.nsrcs; ++s) {
        const double v = (rng() & 1) ? tame(rng) : -tame(rng);
        if (s != nanSrc) reinterpret_cast<T*>(srcs[s].data())[i] = fromDouble<T>(v);
      }
    }
  }
  RedOpDesc op;
  if (c.kind == RedKind::kPreMulSum) {
    const double scalars[] = {1.0, -1.0, 0.5, 3.0, -2.75, 0.0};
    const T scalar = std::is_integral_v<T> ? fromBits<T>(rng()) : fromDouble<T>(scalars[rng() % 6]);
    if (makePreMulSum(c.dtype, &scalar, &op) != tsrSuccess) {
      return ::testing::AssertionFailure() << "makePreMulSum failed";
    }
  } else {
    op.kind = c.kind;
  }
  std::vector<uint8_t> flags(static_cast<size_t>(c.nsrcs));
  for (auto& f : flags) f = static_cast<uint8_t>(rng() % 2);

  // Reference: the pre-op on the flagged sources, then reduceAllHost with the plain step.
  std::vector<Bytes> terms(static_cast<size_t>(c.nsrcs), Bytes(n * es + 1));
  std::vector<const void*> termPtrs, srcPtrs;
  for (int s = 0; s < c.nsrcs; ++s) {
    const bool pre = c.preFlags && flags[s] != 0;
    if (applyPreOp(pre ? op : RedOpDesc{}, c.dtype, srcs[s].data(), terms[s].data(), n) !=
        tsrSuccess) {
      return ::testing::AssertionFailure() << "applyPreOp failed";
    }
    termPtrs.push_back(terms[s].data());
    srcPtrs.push_back(srcs[s].data());
  }
  RedOpDesc step = op;
  if (c.kind == RedKind::kAvg || c.kind == RedKind::kPreMulSum) step = RedOpDesc{};
  Bytes want(n * es + 1);
  if (reduceAllHost(step, c.dtype, termPtrs.data(), c.nsrcs, want.data(), n) != tsrSuccess) {
    return ::testing::AssertionFailure() << "reduceAllHost failed";
  }

  Buf dst(n, es, c.offset), dst2(n, es, (c.offset + 1) % 2);
  HostReduceArgs a{op,
                   c.dtype,
                   srcPtrs.data(),
                   c.nsrcs,
                   c.preFlags ? flags.data() : nullptr,
                   dst.data(),
                   c.dst2 ? dst2.data() : nullptr,
                   n};
  if (c.aliasSrc >= 0) a.dst = srcs[c.aliasSrc].data();
  if (hostReduce(a) != tsrSuccess) {
    return ::testing::AssertionFailure() << c.str() << ": hostReduce failed";
  }
  auto r = sameBytes(static_cast<unsigned char*>(a.dst), want.data(), n * es, es, c.str());
  if (r && c.dst2) r = sameBytes(dst2.data(), want.data(), n * es, es, c.str() + " (dst2)");
  if (r && !(dst.guardsIntact() && dst2.guardsIntact())) {
    r = ::testing::AssertionFailure() << c.str() << ": wrote outside the destination";
  }
  for (int s = 0; r && s < c.nsrcs; ++s) {
    if (!srcs[s].guardsIntact()) r = ::testing::AssertionFailure() << c.str() << ": src guard";
  }
  return r;
}

class HostOps : public ::testing::TestWithParam<HostSimd> {
 protected:
  void SetUp() override { prev_ = setHostSimd(GetParam()); }
  void TearDown() override { setHostSimd(prev_); }
  HostSimd prev_ = HostSimd::kBest;
};

::testing::AssertionResult runAny(const Case& c, std::mt19937_64& rng) {
  ::testing::AssertionResult r = ::testing::AssertionFailure() << "invalid dtype";
  dtypeVisit(c.dtype, [&](auto tag) { r = runCase<decltype(tag)>(c, rng); });
  return r;
}

TEST_P(HostOps, ReduceMatchesReferenceForEveryTypeOpAndFanIn) {
  const size_t counts[] = {0, 1, 3, 8, 31, 32, 33, 64, 127, 128, 129, 257, 1000};
  std::mt19937_64 rng(12345);
  int cases = 0;
  for (tsrDataType_t t : kTypes) {
    for (RedKind k : kKinds) {
      for (int nsrcs = 1; nsrcs <= 17; ++nsrcs) {
        for (size_t count : counts) {
          const uint64_t r = rng();
          const int alias =
              (r % 3 == 0) ? static_cast<int>((r >> 8) % static_cast<uint64_t>(nsrcs)) : -1;
          Case c{t,
                 k,
                 nsrcs,
                 count,
                 static_cast<int>((r >> 4) % 2),
                 alias,
                 (r >> 5) % 2 == 0,
                 (r >> 6) % 4 != 0};
          ASSERT_TRUE(runAny(c, rng));
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 12 * 6 * 17 * 13);
}

// Every narrow value against a set of second operands, for each step kind: exhaustive for the
// conversions on the SIMD paths (float16 with F16C, bfloat16 in integer lanes).
TEST_P(HostOps, NarrowFloatsExhaustive) {
  const double others[] = {0.0,     -0.0,      1.0,     -1.5,   0.1,     3.0,  0x1p-24,  0x1p-14,
                           0x1p-11, -0x1p-126, 65504.0, -448.0, 57344.0, 1e30, INFINITY, -INFINITY};
  for (tsrDataType_t t : {tsrFloat16, tsrBfloat16, tsrFloat8e4m3, tsrFloat8e5m2}) {
    dtypeVisit(t, [&](auto tag) {
      using T = decltype(tag);
      const size_t n = size_t{1} << (8 * std::min(sizeof(T), size_t{2}));  // narrow types only
      std::vector<T> all(n), second(n), want(n), got(n);
      for (size_t i = 0; i < n; ++i) all[i] = fromBits<T>(i);
      for (double o : others) {
        for (size_t i = 0; i < n; ++i) second[i] = fromDouble<T>(o);
        for (RedKind k :
             {RedKind::kSum, RedKind::kProd, RedKind::kMax, RedKind::kMin, RedKind::kPreMulSum}) {
          RedOpDesc op;
          op.kind = k;
          const T scalar = fromDouble<T>(-0.3);
          if (k == RedKind::kPreMulSum) {
            ASSERT_EQ(makePreMulSum(t, &scalar, &op), tsrSuccess);
          }
          const void* srcs[] = {all.data(), second.data()};
          const uint8_t flags[] = {1, 0};
          // Reference: the pre-op of source 0 aside, then one step.
          std::vector<T> pre(all);
          ASSERT_EQ(applyPreOp(op, t, all.data(), pre.data(), n), tsrSuccess);
          const void* refSrcs[] = {k == RedKind::kPreMulSum ? pre.data() : all.data(),
                                   second.data()};
          ASSERT_EQ(reduceHost(op, t, refSrcs[0], refSrcs[1], want.data(), n), tsrSuccess);
          HostReduceArgs a{op, t, srcs, 2, flags, got.data(), nullptr, n};
          ASSERT_EQ(hostReduce(a), tsrSuccess);
          ASSERT_TRUE(sameBytes(
              reinterpret_cast<unsigned char*>(got.data()),
              reinterpret_cast<unsigned char*>(want.data()), n * sizeof(T), sizeof(T),
              std::string(dtypeName(t)) + " " + redKindName(k) + " with " + std::to_string(o)));
        }
      }
    });
  }
}

TEST_P(HostOps, PostOpMatchesReference) {
  std::mt19937_64 rng(777);
  for (tsrDataType_t t : kTypes) {
    for (RedKind k : kKinds) {
      for (size_t count :
           {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{100}, size_t{1000}}) {
        for (int nranks : {1, 2, 3, 7, 16}) {
          dtypeVisit(t, [&](auto tag) {
            using T = decltype(tag);
            RedOpDesc op;
            op.kind = k;
            if (k == RedKind::kPreMulSum) op.dtype = t;
            Buf buf(count, sizeof(T), static_cast<int>(rng() % 2));
            T* p = reinterpret_cast<T*>(buf.data());
            for (size_t i = 0; i < count; ++i) p[i] = randomElem<T>(rng);
            Bytes want(buf.data(), buf.data() + buf.bytes);
            ASSERT_EQ(applyPostOp(op, t, want.data(), count, nranks), tsrSuccess);
            ASSERT_EQ(hostPostOp(op, t, buf.data(), count, nranks), tsrSuccess);
            ASSERT_TRUE(sameBytes(
                buf.data(), want.data(), buf.bytes, sizeof(T),
                std::string(dtypeName(t)) + " " + redKindName(k) + " n=" + std::to_string(nranks)));
            ASSERT_TRUE(buf.guardsIntact());
          });
        }
      }
    }
  }
}

TEST_P(HostOps, ManySourcesBeyondTheInlinePointerArray) {
  std::mt19937_64 rng(99);
  for (tsrDataType_t t : {tsrFloat32, tsrFloat16, tsrFloat8e5m2}) {
    Case c{t, RedKind::kSum, 70, 100, 1, 69, true, false};
    ASSERT_TRUE(runAny(c, rng));
  }
}

// Outputs of 8 MiB and more take the streaming-store path (element kernel up to dst's first
// aligned element, then blocks); dst one element off alignment makes that head non-empty.
TEST_P(HostOps, LargeOutputMatchesReference) {
  std::mt19937_64 rng(4242);
  const size_t count = (size_t{9} << 20) / sizeof(float) + 37;
  ASSERT_TRUE(runAny(Case{tsrFloat32, RedKind::kSum, 2, count, 1, -1, true, false}, rng));
}

INSTANTIATE_TEST_SUITE_P(Simd, HostOps, ::testing::Values(HostSimd::kBaseline, HostSimd::kBest),
                         [](const ::testing::TestParamInfo<HostSimd>& i) {
                           return std::string(i.param == HostSimd::kBaseline ? "Baseline" : "Best");
                         });

TEST(HostOpsCopy, CopiesBytesToOneOrTwoDestinations) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
    Bytes src(bytes + 1), dst(bytes + 1, 0), dst2(bytes + 1, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    hostCopyBytes(dst.data(), nullptr, src.data() + 1, bytes);
    EXPECT_EQ(0, std::memcmp(dst.data(), src.data() + 1, bytes));
    EXPECT_EQ(dst[bytes], 0);
    std::fill(dst.begin(), dst.end(), 0);
    hostCopyBytes(dst.data() + 1, dst2.data(), src.data(), bytes);
    EXPECT_EQ(0, std::memcmp(dst.data() + 1, src.data(), bytes));
    EXPECT_EQ(0, std::memcmp(dst2.data(), src.data(), bytes));
    EXPECT_EQ(dst[0], 0);
    const Bytes before = src;
    hostCopyBytes(src.data(), nullptr, src.data(), bytes);  // in place: nothing to do
    EXPECT_EQ(src, before);
  }
}

TEST(HostOpsErrors, InvalidArgumentsAreRejectedAndNothingIsWritten) {
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, d[4] = {0, 0, 0, 0};
  const void* srcs[] = {a, b};
  const void* withNull[] = {a, nullptr};
  RedOpDesc sum;
  HostReduceArgs ok{sum, tsrFloat32, srcs, 2, nullptr, d, nullptr, 4};
  auto expectInvalid = [&](HostReduceArgs x, const char* why) {
    EXPECT_EQ(hostReduce(x), tsrInvalidArgument) << why;
    EXPECT_EQ(d[0], 0.0f) << why;
  };
  HostReduceArgs x = ok;
  x.nsrcs = 0;
  expectInvalid(x, "no sources");
  x = ok;
  x.srcs = nullptr;
  expectInvalid(x, "NULL source array");
  x = ok;
  x.srcs = withNull;
  expectInvalid(x, "NULL source");
  x = ok;
  x.dst = nullptr;
  expectInvalid(x, "NULL dst");
  x = ok;
  x.dtype = tsrNumTypes;
  expectInvalid(x, "bad dtype");
  x = ok;
  x.op.kind = static_cast<RedKind>(17);
  expectInvalid(x, "bad kind");
  x = ok;
  const double scalar = 2.0;
  ASSERT_EQ(makePreMulSum(tsrFloat64, &scalar, &x.op), tsrSuccess);
  expectInvalid(x, "premulsum for float64 on float32");

  // count == 0 accepts NULL pointers.
  const void* nulls[] = {nullptr, nullptr};
  EXPECT_EQ(hostReduce(HostReduceArgs{sum, tsrFloat32, nulls, 2, nullptr, nullptr, nullptr, 0}),
            tsrSuccess);
  RedOpDesc avg;
  avg.kind = RedKind::kAvg;
  EXPECT_EQ(hostPostOp(avg, tsrFloat32, d, 4, 0), tsrInvalidArgument);
  EXPECT_EQ(hostPostOp(avg, tsrFloat32, nullptr, 4, 2), tsrInvalidArgument);
  EXPECT_EQ(hostPostOp(avg, tsrNumTypes, d, 4, 2), tsrInvalidArgument);
  EXPECT_EQ(hostPostOp(avg, tsrFloat32, nullptr, 0, 2), tsrSuccess);
  EXPECT_EQ(hostReduce(ok), tsrSuccess);
  EXPECT_EQ(d[3], 12.0f);
}

}  // namespace
}  // namespace tessera
