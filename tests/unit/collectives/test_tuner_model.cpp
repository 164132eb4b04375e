// The tuner's cost model (collectives/tuner/cost_model.cpp) through Tuner::predictUs: values
// worked out by hand from its documented closed forms, growth with message size, families that
// do not apply; and that choose() allocates nothing on its common path.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/tuner.hpp"

// Counts heap allocations while `gCounting` is set (to check that choose() allocates nothing).
namespace {
std::atomic<bool> gCounting{false};
std::atomic<size_t> gAllocations{0};
}  // namespace

// GCC pairs the inlined replacement new with free() below and calls it a mismatch; they are
// the matching malloc/free pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(size_t size) {
  if (gCounting.load(std::memory_order_relaxed)) gAllocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace tessera {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TuneInput input(Collective c, size_t bytes, int n, int hosts = 1) {
  TuneInput in;
  in.collective = c;
  in.bytes = bytes;
  in.nranks = n;
  if (hosts > 1)
    for (int r = 0; r < n; ++r) in.hostOf.push_back(r * hosts / n);  // contiguous blocks
  return in;
}

TEST(TunerChoose, CommonPathAllocatesNothing) {
  Tuner tuner;
  TuneInput in = input(Collective::kAllReduce, 64 * kMiB, 8, 2);
  TuneChoice out;
  ASSERT_EQ(tuner.choose(in, &out), tsrSuccess);  // first use builds the registry
  gAllocations = 0;
  gCounting = true;
  Result r = tuner.choose(in, &out);
  gCounting = false;
  ASSERT_EQ(r, tsrSuccess);
  EXPECT_EQ(gAllocations.load(), 0u);
}
// ---- The cost model ----------------------------------------------------------------------------

// Values worked out by hand from the formulas documented in cost_model.cpp.
TEST(TunerModel, MatchesTheDocumentedClosedForms) {
  TunerParams p;
  for (LinkModel& l : p.links) l = LinkModel{2.0, 1.0};  // a = 2 us, b = 1000 B/us
  p.gammaGBs = 0.5;                                      // g = 500 B/us
  p.callOverheadUs = 1.0;
  Tuner tuner(p, AlgoFilter{});
  TuneInput in = input(Collective::kAllReduce, 1000, 2);
  // oneshot: o + [B/c] + a + max(tx, pr) + min(tx, pr): tx = 1, pr = 2.
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "oneshot", 1), 1 + 1 + 2 + 2 + 1);
  in.zeroCopyPossible = true;
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "oneshot", 1), 1 + 2 + 2 + 1);
  // ring, n = 4, B/n = 1000: 3 reduce steps (a + 1 + 2), 3 gather steps (a + 1 [+ 1 copy-out]).
  in = input(Collective::kAllReduce, 4000, 4);
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "ring", 1), 1 + 3 * 5 + 3 * 4);
  in.zeroCopyPossible = true;
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "ring", 1), 1 + 3 * 5 + 3 * 3);
  // Two pieces per step: each step adds a + h/b (h = 64 KiB) and overlaps half the shorter part.
  double extra = 2 + 65536 / 1000.0;
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "ring", 2),
                   1 + 3 * (2 + extra + 2 + 0.5) + 3 * (2 + extra + 1));
  // ring broadcast: a chain of 3 hops, each a + 1 + 1 (copy-out).
  in = input(Collective::kBroadcast, 1000, 4);
  EXPECT_DOUBLE_EQ(tuner.predictUs(in, "ring", 1), 1 + 3 * 4);
}

TEST(TunerModel, PredictedTimesGrowWithBytes) {
  Tuner tuner;
  std::vector<size_t> sizes = {0, 1};
  for (size_t b = 8; b <= 1024 * kMiB; b *= 4) sizes.push_back(b);
  for (int ci = 0; ci < kCollectiveCount; ++ci) {
    Collective c = static_cast<Collective>(ci);
    for (int n : {1, 2, 3, 4, 7, 8, 16})
      for (int hosts : {1, 2})
        for (bool zc : {false, true}) {
          if (hosts > n) continue;
          for (const AlgorithmInfo& a : algorithms())
            for (int pipeline : {1, 4, 16}) {
              double last = -1;
              for (size_t bytes : sizes) {
                TuneInput in = input(c, bytes, n, hosts);
                in.zeroCopyPossible = zc;
                double t = tuner.predictUs(in, a.name, pipeline);
                bool applies = algorithmSupports(a.name, c) && (!a.needsHosts || hosts > 1);
                EXPECT_EQ(t >= 0, applies) << a.name << " " << collectiveName(c);
                if (t < 0) break;
                EXPECT_GE(t, last) << a.name << " " << collectiveName(c) << " n=" << n
                                   << " bytes=" << bytes << " pipeline=" << pipeline;
                last = t;
              }
            }
          double last = 0;
          for (size_t bytes : sizes) {  // the choice: a minimum of increasing functions
            TuneInput in = input(c, bytes, n, hosts);
            in.zeroCopyPossible = zc;
            TuneChoice out;
            ASSERT_EQ(tuner.choose(in, &out), tsrSuccess);
            EXPECT_GE(out.predictedUs, last) << collectiveName(c) << " n=" << n << " " << bytes;
            last = out.predictedUs;
          }
        }
  }
}

TEST(TunerModel, FamiliesThatDoNotApplyPredictNegative) {
  Tuner tuner;
  TuneInput in = input(Collective::kAllGather, 1024, 4);
  EXPECT_LT(tuner.predictUs(in, "tree", 1), 0);
  EXPECT_LT(tuner.predictUs(in, "no-such-family", 1), 0);
  EXPECT_LT(tuner.predictUs(in, "hier", 1), 0);
  EXPECT_LT(tuner.predictUs(in, "ring", 0), 0);
  EXPECT_GT(tuner.predictUs(in, "ring", 1), 0);
}

}  // namespace
}  // namespace tessera
