// Large calls over thread ranks, and determinism.
//  - A seeded random sample of the matrix at count 100003 (a prime above 1e5, so no chunking
//    divides it evenly) and a few calls of 2^24 elements of 1- and 2-byte types. The seed is
//    printed; TESSERA_TEST_SEED replays a run. Floating-point reductions of the sample run twice
//    and must give the same bytes.
//  - The canonical-order families (plan.hpp) give bit-identical float sums, equal to a serial
//    left-to-right chain over ranks 0..n-1 rounded at every step, and TESSERA_DETERMINISTIC=1 makes
//    the tuner's own choice give that sum too.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "collectives/algorithms/algorithms.hpp"
#include "core/datatype.hpp"
#include "support/harness.hpp"
#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

// A family of `coll` at random, or "" (the tuner) as one more choice.
std::string pickFamily(Collective coll, std::mt19937_64& rng) {
  std::vector<std::string> f = familiesFor(coll);
  f.emplace_back("");
  return f[rng() % f.size()];
}

TEST(ApiLarge, RandomSampleAtPrimeCount) {
  setTestEnvironment();
  std::mt19937_64 rng(testSeed(20240611));
  constexpr int kRankChoices[] = {2, 3, 4, 5, 8};
  for (int group = 0; group < 4; ++group) {
    const int n = kRankChoices[rng() % 5];
    std::vector<Case> cases;
    for (int j = 0; j < 8; ++j) {
      Spec s;
      s.coll = static_cast<Collective>(rng() % kCollectiveCount);
      s.dtype = static_cast<tsrDataType_t>(rng() % tsrNumTypes);
      s.op = allOps()[rng() % allOps().size()];
      s.algorithm = pickFamily(s.coll, rng);
      s.inPlace = s.coll != Collective::kAllToAll && rng() % 2 == 0;
      s.count = 100003;
      s.root = static_cast<int>(rng() % static_cast<uint64_t>(n));
      s.seed = rng();
      s.repeat = collectiveReduces(s.coll) && dtypeIsFloat(s.dtype);
      std::printf("  sample: %s\n", describe(s, n).c_str());
      cases.push_back(makeCase(s, n));
    }
    ThreadComms comms(n);
    ASSERT_TRUE(comms.ok()) << comms.error();
    for (const std::string& f : runMatrix(comms, cases, 240)) ADD_FAILURE() << f;
  }
}

TEST(ApiLarge, TwoToThe24ElementsOfNarrowTypes) {
  setTestEnvironment();
  std::mt19937_64 rng(testSeed(20240611) ^ 0x2424);
  constexpr Collective kColls[] = {Collective::kAllReduce, Collective::kBroadcast,
                                   Collective::kReduce};
  constexpr tsrDataType_t kTypes[] = {tsrInt8,     tsrUint8,      tsrFloat16,
                                      tsrBfloat16, tsrFloat8e4m3, tsrFloat8e5m2};
  for (int k = 0; k < 2; ++k) {
    const int n = 2 + static_cast<int>(rng() % 3);
    Spec s;
    s.coll = kColls[rng() % 3];
    s.dtype = kTypes[rng() % 6];
    s.op = allOps()[rng() % allOps().size()];
    s.algorithm = pickFamily(s.coll, rng);
    s.inPlace = rng() % 2 == 0;
    s.count = size_t{1} << 24;
    s.root = static_cast<int>(rng() % static_cast<uint64_t>(n));
    s.seed = rng();
    std::printf("  sample: %s\n", describe(s, n).c_str());
    std::vector<Case> cases;
    cases.push_back(makeCase(s, n));
    ThreadComms comms(n);
    ASSERT_TRUE(comms.ok()) << comms.error();
    for (const std::string& f : runMatrix(comms, cases, 240)) ADD_FAILURE() << f;
  }
}

// ---- Determinism --------------------------------------------------------------------------------

void storeRounded(tsrDataType_t dt, uint8_t* p, float f) {
  if (dt == tsrFloat32) {
    std::memcpy(p, &f, 4);
  } else {
    uint16_t b = dt == tsrFloat16 ? Float16::fromFloat(f).bits : BFloat16::fromFloat(f).bits;
    std::memcpy(p, &b, 2);
  }
}

// Random values in [-1, 1) with every bit of the type used, so the order of additions shows.
std::vector<uint8_t> randomFloats(tsrDataType_t dt, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint8_t> out(count * dtypeSize(dt));
  for (size_t i = 0; i < count; ++i) {
    float f = u(rng);
    uint8_t* p = out.data() + i * dtypeSize(dt);
    storeRounded(dt, p, f);
  }
  return out;
}

float asFloat(tsrDataType_t dt, const uint8_t* p) {
  float f = 0;
  uint16_t b = 0;
  if (dt == tsrFloat32) {
    std::memcpy(&f, p, 4);
    return f;
  }
  std::memcpy(&b, p, 2);
  return dt == tsrFloat16 ? toFloat(Float16{b}) : toFloat(BFloat16{b});
}

// The canonical sum: ranks 0, 1, ..., n-1 left to right, rounded to the type at every step.
std::vector<uint8_t> chainSum(tsrDataType_t dt, const std::vector<std::vector<uint8_t>>& in,
                              size_t count) {
  const size_t size = dtypeSize(dt);
  std::vector<uint8_t> acc = in[0];
  for (size_t q = 1; q < in.size(); ++q)
    for (size_t i = 0; i < count; ++i)
      storeRounded(dt, acc.data() + i * size,
                   asFloat(dt, acc.data() + i * size) + asFloat(dt, in[q].data() + i * size));
  return acc;
}

// Allreduce-sums random floats with `family` ("" = tuner) on every rank; returns rank results.
std::vector<std::vector<uint8_t>> sumOnRanks(const ThreadComms& comms, const std::string& family,
                                             tsrDataType_t dt,
                                             const std::vector<std::vector<uint8_t>>& in,
                                             size_t count, std::vector<std::string>* errors) {
  const int n = comms.size();
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) {
    auto& o = out[static_cast<size_t>(r)];
    o.assign(count * dtypeSize(dt), 0);
    setAlgorithm(comms[r], family);
    if (tsrAllReduce(in[static_cast<size_t>(r)].data(), o.data(), count, dt, tsrSum, comms[r],
                     nullptr) != tsrSuccess)
      (*errors)[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
    setAlgorithm(comms[r], "");
  });
  return out;
}

std::vector<std::string> canonicalFamilies() {
  std::vector<std::string> out;
  for (const AlgorithmInfo& a : algorithms())
    if (a.canonicalOrder && !a.needsHosts && algorithmSupports(a.name, Collective::kAllReduce))
      out.emplace_back(a.name);
  return out;
}

TEST(ApiDeterminism, CanonicalFamiliesGiveTheChainSumBitForBit) {
  setTestEnvironment();
  const std::vector<std::string> families = canonicalFamilies();
  ASSERT_FALSE(families.empty()) << "no canonical-order family generates allreduce";
  for (const std::string& f : families) std::printf("  canonical family: %s\n", f.c_str());
  for (int n : {4, 5}) {
    ThreadComms comms(n);
    ASSERT_TRUE(comms.ok()) << comms.error();
    for (tsrDataType_t dt : {tsrFloat16, tsrBfloat16, tsrFloat32}) {
      const size_t count = 4099;
      std::vector<std::vector<uint8_t>> in;
      for (int r = 0; r < n; ++r)
        in.push_back(randomFloats(dt, count, 77 + static_cast<uint64_t>(r)));
      const std::vector<uint8_t> want = chainSum(dt, in, count);
      for (const std::string& family : families) {
        std::vector<std::string> errors(static_cast<size_t>(n));
        auto got = sumOnRanks(comms, family, dt, in, count, &errors);
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(errors[static_cast<size_t>(r)], "") << family << " rank " << r;
          EXPECT_TRUE(got[static_cast<size_t>(r)] == want)
              << family << " " << dtypeName(dt) << " n=" << n << " rank " << r
              << ": not the left-to-right chain sum";
        }
      }
    }
  }
}

TEST(ApiDeterminism, DeterministicEnvironmentMakesTheTunerChooseTheChainSum) {
  setTestEnvironment();
  test::ScopedEnv deterministic("TESSERA_DETERMINISTIC", "1");
  const int n = 5;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
    for (tsrDataType_t dt : {tsrFloat16, tsrFloat32}) {
      std::vector<std::vector<uint8_t>> in;
      for (int r = 0; r < n; ++r)
        in.push_back(randomFloats(dt, count, 900 + static_cast<uint64_t>(r)));
      const std::vector<uint8_t> want = chainSum(dt, in, count);
      std::vector<std::string> errors(static_cast<size_t>(n));
      auto got = sumOnRanks(comms, "", dt, in, count, &errors);
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
        EXPECT_TRUE(got[static_cast<size_t>(r)] == want)
            << dtypeName(dt) << " count " << count << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::apitest
