// The verifier at scale: every family's plan at 64 ranks (default parameters) is verified, and a
// plan whose simulation would not fit in memory is refused before anything large is allocated.
#include <gtest/gtest.h>

#include <string>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/plan.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/status.hpp"

namespace tessera {
namespace {

// 64 ranks is where the tuner's all-to-all-shaped plans (oneshot, twoshot, pairwise: one put
// stream per peer) were refused as "too large" although they simulate in well under a second.
TEST(VerifierScale, EveryFamilyVerifiesAt64Ranks) {
  constexpr int kRanks = 64;
  int verified = 0;
  for (const AlgorithmInfo& info : algorithms()) {
    if (info.needsHosts) continue;  // hier: covered by its own tests with host layouts
    for (Collective c : info.collectives) {
      SCOPED_TRACE(std::string(info.name) + " " + collectiveName(c));
      GenParams g;
      g.collective = c;
      g.algorithm = info.name;
      g.nranks = kRanks;
      Plan p;
      ASSERT_EQ(generatePlan(g, &p), tsrSuccess) << lastErrorMessage();
      VerifyReport report;
      EXPECT_EQ(verifyPlan(p, &report), tsrSuccess) << report.message;
      ++verified;
    }
  }
  EXPECT_GE(verified, 6);  // ring, tree, rhd, oneshot, twoshot, pairwise at least
}

// kMaxPlanRanks ranks of 64 workers and no ops: half a million threads, whose clocks would need
// terabytes. Refused up front with the size sentence, not a bad_alloc.
TEST(VerifierScale, RefusesTooManyThreadsBeforeAllocating) {
  Plan p;
  p.nranks = kMaxPlanRanks;
  p.ranks.resize(static_cast<size_t>(p.nranks));
  for (RankPlan& r : p.ranks) r.workers.resize(static_cast<size_t>(kMaxWorkers));
  VerifyReport report;
  EXPECT_EQ(verifyPlan(p, &report), tsrInvalidArgument);
  EXPECT_EQ(report.property, VerifyProperty::kShape);
  EXPECT_NE(report.message.find("too large to verify"), std::string::npos) << report.message;
  EXPECT_NE(report.message.find("clock entries"), std::string::npos) << report.message;
}

// Put streams count as threads too: one rank putting to every peer from one worker makes
// nranks - 1 streams. 1024 ranks that each put to all peers: about 1M threads.
TEST(VerifierScale, CountsPutStreamsAsThreads) {
  Plan p;
  p.collective = Collective::kAllGather;
  p.nranks = 1024;
  p.ranks.resize(static_cast<size_t>(p.nranks));
  for (int r = 0; r < p.nranks; ++r) {
    RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    rp.scratchSegments = 0;
    rp.workers.resize(1);
    for (int q = 0; q < p.nranks; ++q) {
      if (q == r) continue;
      Op op;
      op.code = OpCode::kPut;
      op.srcs = {ChunkRef{-1, BufferKind::kInput, 0, 1}};
      op.dst = ChunkRef{q, BufferKind::kOutput, r, 1};
      rp.workers[0].ops.push_back(op);
    }
  }
  p.zeroCopy = true;
  VerifyReport report;
  EXPECT_EQ(verifyPlan(p, &report), tsrInvalidArgument);
  EXPECT_NE(report.message.find("too large to verify"), std::string::npos) << report.message;
}

}  // namespace
}  // namespace tessera
