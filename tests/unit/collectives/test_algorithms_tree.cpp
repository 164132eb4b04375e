// The tree, rhd and hier families beyond "the verifier accepts them" (test_algorithms.cpp checks
// every family generically): the shape each family promises, read back from the generated ops
// and compared with numbers derived by hand from the algorithm's definition (tree heights,
// complementary interior nodes, log2 exchange partners, bytes per rank, who talks across hosts),
// plus the verifier on the cases that matter to each family (non-powers of two, uneven hosts,
// larger rank counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/plan.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/log.hpp"
#include "core/status.hpp"

namespace tessera {
namespace {

void quietLogs() {
  LogConfig config;
  config.level = LogLevel::kNone;
  logConfigure(config);
}

GenParams params(const std::string& algo, Collective c, int n) {
  GenParams p;
  p.algorithm = algo;
  p.collective = c;
  p.nranks = n;
  return p;
}

// The family's own entry point (not generatePlan, whose registry may not offer zero-copy for a
// family: these tests cover the family's zero-copy variants too).
Result generate(const GenParams& p, Plan* plan) {
  if (p.algorithm == "tree") return generateTree(p, plan);
  if (p.algorithm == "rhd") return generateRhd(p, plan);
  return generateHier(p, plan);
}

// Generates and verifies; returns the plan (no ranks on failure, with a test failure recorded).
Plan verified(const GenParams& p) {
  Plan plan;
  const std::string what = strprintf("%s %s n=%d pipeline=%d workers=%d zc=%d root=%d",
                                     p.algorithm.c_str(), collectiveName(p.collective), p.nranks,
                                     p.pipeline, p.workers, p.zeroCopy ? 1 : 0, p.root);
  if (generate(p, &plan) != tsrSuccess) {
    ADD_FAILURE() << what << ": generate: " << lastErrorMessage();
    return Plan{};
  }
  VerifyReport report;
  if (verifyPlan(plan, &report) != tsrSuccess) {
    ADD_FAILURE() << what << ": " << report.message;
    return Plan{};
  }
  return plan;
}

// The ranks a rank writes to (put / reduceSend destinations) and signals, per worker.
std::set<int> sendPeers(const RankPlan& rp, int worker = -1) {
  std::set<int> peers;
  for (size_t w = 0; w < rp.workers.size(); ++w) {
    if (worker >= 0 && static_cast<int>(w) != worker) continue;
    for (const Op& op : rp.workers[w].ops) {
      if (op.code == OpCode::kSignal) peers.insert(op.peer);
      if ((op.code == OpCode::kPut || op.code == OpCode::kReduceSend) && op.dst.remote()) {
        peers.insert(op.dst.rank);
      }
    }
  }
  return peers;
}

// Chunks a rank sends (put / reduceSend), in total and to ranks for which `counted` holds.
template <typename Pred>
int sentChunks(const RankPlan& rp, Pred counted) {
  int chunks = 0;
  for (const Worker& w : rp.workers) {
    for (const Op& op : w.ops) {
      if ((op.code == OpCode::kPut || op.code == OpCode::kReduceSend) && counted(op.dst.rank)) {
        chunks += op.dst.count;
      }
    }
  }
  return chunks;
}

int floorLog2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

// ---- tree ---------------------------------------------------------------------------------------

// Parent of each rank in the tree run by `worker` (workers = 2): the peer its first data op
// writes to, which is the parent (leaves put, interior nodes reduceSend); -1 at the root.
std::vector<int> parentsOf(const Plan& plan, int worker) {
  std::vector<int> parent(static_cast<size_t>(plan.nranks), -1);
  for (int r = 0; r < plan.nranks; ++r) {
    const Worker& w = plan.ranks[static_cast<size_t>(r)].workers[static_cast<size_t>(worker)];
    for (const Op& op : w.ops) {
      if (op.code == OpCode::kPut || op.code == OpCode::kReduceSend) {
        parent[static_cast<size_t>(r)] = op.dst.rank;
        break;
      }
      if (op.code == OpCode::kReduce || op.code == OpCode::kCopy) break;  // the root
    }
  }
  return parent;
}

TEST(TreeFamily, TwoBinaryTreesOfMinimalHeightWithComplementaryInteriors) {
  quietLogs();
  for (int n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 100}) {
    SCOPED_TRACE(strprintf("n=%d", n));
    GenParams p = params("tree", Collective::kAllReduce, n);
    p.workers = 2;
    Plan plan;
    ASSERT_EQ(generate(p, &plan), tsrSuccess) << lastErrorMessage();
    std::vector<int> interiorIn(static_cast<size_t>(n), 0);
    for (int t = 0; t < 2; ++t) {
      const std::vector<int> parent = parentsOf(plan, t);
      EXPECT_EQ(std::count(parent.begin(), parent.end(), -1), 1) << "tree " << t << ": one root";
      std::vector<int> children(static_cast<size_t>(n), 0);
      int height = 0;
      for (int r = 0; r < n; ++r) {
        int depth = 0;
        for (int v = r; parent[static_cast<size_t>(v)] >= 0; v = parent[static_cast<size_t>(v)]) {
          ASSERT_LT(++depth, n) << "tree " << t << " has a cycle through rank " << r;
        }
        height = std::max(height, depth);
        if (parent[static_cast<size_t>(r)] >= 0)
          ++children[static_cast<size_t>(parent[static_cast<size_t>(r)])];
      }
      // A binary tree over n nodes is at least floor(log2 n) high; these reach that bound.
      EXPECT_EQ(height, floorLog2(n)) << "tree " << t;
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(children[static_cast<size_t>(r)], 2) << "tree " << t << " rank " << r;
        if (children[static_cast<size_t>(r)] > 0) ++interiorIn[static_cast<size_t>(r)];
      }
    }
    // Each rank forwards (is interior) in at most one tree.
    for (int r = 0; r < n; ++r) EXPECT_LE(interiorIn[static_cast<size_t>(r)], 1) << "rank " << r;
  }
}

TEST(TreeFamily, EachTreeCarriesHalfTheChunks) {
  quietLogs();
  for (int pipeline : {1, 4}) {
    GenParams p = params("tree", Collective::kAllReduce, 6);
    p.workers = 2;
    p.pipeline = pipeline;
    Plan plan = verified(p);
    ASSERT_EQ(static_cast<int>(plan.ranks.size()), p.nranks);
    ASSERT_EQ(plan.chunksPerSegment, 2 * pipeline);
    for (int r = 0; r < 6; ++r) {
      for (int t = 0; t < 2; ++t) {
        std::set<int> chunks;
        for (const Op& op :
             plan.ranks[static_cast<size_t>(r)].workers[static_cast<size_t>(t)].ops) {
          if (op.code == OpCode::kSignal || op.code == OpCode::kWait) continue;
          if (op.dst.buffer == BufferKind::kOutput) chunks.insert(op.dst.index);
        }
        std::set<int> expected;
        for (int c = t * pipeline; c < (t + 1) * pipeline; ++c) expected.insert(c);
        EXPECT_EQ(chunks, expected) << "rank " << r << " tree " << t;
      }
    }
  }
}

TEST(TreeFamily, VerifiesForEveryShape) {
  quietLogs();
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 33}) {
    for (int workers : {1, 2}) {
      for (int pipeline : {1, 3}) {
        for (bool zc : {false, true}) {
          GenParams p = params("tree", Collective::kAllReduce, n);
          p.workers = workers;
          p.pipeline = pipeline;
          p.zeroCopy = zc;
          const Plan plan = verified(p);
          ASSERT_EQ(static_cast<int>(plan.ranks.size()), p.nranks);
          // A rank sends its half up each tree and, in the one tree where it is interior, to two
          // children: at most 4 halves, twice the vector.
          for (const RankPlan& rp : plan.ranks) {
            EXPECT_LE(sentChunks(rp, [](int) { return true; }), 2 * plan.chunksPerSegment);
          }
        }
      }
    }
  }
}

TEST(TreeFamily, RejectsOtherCollectives) {
  quietLogs();
  Plan plan;
  EXPECT_EQ(generateTree(params("tree", Collective::kBroadcast, 4), &plan), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("broadcast"), std::string::npos);
}

// ---- rhd ----------------------------------------------------------------------------------------

TEST(RhdFamily, VerifiesPowersAndNonPowersOfTwo) {
  quietLogs();
  for (Collective c :
       {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 16, 20}) {
      for (int pipeline : {0, 2}) {
        for (bool zc : {false, true}) {
          GenParams p = params("rhd", c, n);
          p.pipeline = pipeline;
          p.zeroCopy = zc;
          verified(p);
        }
      }
    }
  }
}

TEST(RhdFamily, PartnersAreFoldPartnerPlusLog2) {
  quietLogs();
  for (Collective c :
       {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
    for (int n : {2, 3, 5, 6, 8, 11, 16}) {
      SCOPED_TRACE(strprintf("%s n=%d", collectiveName(c), n));
      const int p = 1 << floorLog2(n);
      const int extra = n - p;
      const Plan plan = verified(params("rhd", c, n));
      ASSERT_EQ(static_cast<int>(plan.ranks.size()), n);
      for (int r = 0; r < n; ++r) {
        const std::set<int> peers = sendPeers(plan.ranks[static_cast<size_t>(r)]);
        if (r < 2 * extra && r % 2 == 1) {
          EXPECT_EQ(peers, std::set<int>{r - 1}) << "folded rank " << r;
        } else {
          const int folded = r < 2 * extra ? 1 : 0;
          EXPECT_EQ(static_cast<int>(peers.size()), floorLog2(p) + folded) << "rank " << r;
        }
      }
    }
  }
}

TEST(RhdFamily, AllReduceSendsTwiceTheDataTimesPMinusOneOverP) {
  quietLogs();
  // Rabenseifner: each of the p ranks sends (p-1)/p of the vector while halving and again while
  // doubling; with a fold the even rank also sends the whole vector back to its partner.
  for (int n : {2, 4, 8, 16, 6, 12}) {
    const int p = 1 << floorLog2(n);
    const int extra = n - p;
    for (int pipeline : {1, 3}) {
      GenParams gp = params("rhd", Collective::kAllReduce, n);
      gp.pipeline = pipeline;
      const Plan plan = verified(gp);
      ASSERT_EQ(static_cast<int>(plan.ranks.size()), gp.nranks);
      const int cps = plan.chunksPerSegment;
      ASSERT_EQ(cps, p * pipeline);
      for (int r = 0; r < n; ++r) {
        const bool foldedOdd = r < 2 * extra && r % 2 == 1;
        const bool foldedEven = r < 2 * extra && r % 2 == 0;
        const int expected = foldedOdd ? cps : 2 * (cps - cps / p) + (foldedEven ? cps : 0);
        EXPECT_EQ(sentChunks(plan.ranks[static_cast<size_t>(r)], [](int) { return true; }),
                  expected)
            << "n=" << n << " rank " << r;
      }
    }
  }
}

// ---- hier ---------------------------------------------------------------------------------------

std::vector<std::vector<int>> hostLayouts(int n) {
  std::vector<std::vector<int>> layouts;
  auto make = [&](auto hostOfRank) {
    std::vector<int> h(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) h[static_cast<size_t>(r)] = hostOfRank(r);
    layouts.push_back(h);
  };
  make([](int) { return 0; });                              // one host
  make([](int r) { return r / 4; });                        // 4 per host, last one short
  make([](int r) { return r % 3; });                        // interleaved hosts
  make([](int r) { return r; });                            // one rank per host
  make([](int r) { return r < 5 ? 2 : (r < 7 ? 0 : 1); });  // 5, 2, rest; ids out of order
  return layouts;
}

TEST(HierFamily, VerifiesOnEveryHostLayout) {
  quietLogs();
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce}) {
    for (int n : {1, 2, 5, 8, 11}) {
      for (const std::vector<int>& hostOf : hostLayouts(n)) {
        for (bool zc : {false, true}) {
          GenParams p = params("hier", c, n);
          p.hostOf = hostOf;
          p.zeroCopy = zc;
          p.root = collectiveHasRoot(c) ? (n * 2) / 3 : 0;
          verified(p);
        }
      }
    }
  }
}

TEST(HierFamily, OnlyLeadersCrossHosts) {
  quietLogs();
  const int n = 11;
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce}) {
    for (const std::vector<int>& hostOf : hostLayouts(n)) {
      GenParams p = params("hier", c, n);
      p.hostOf = hostOf;
      p.root = collectiveHasRoot(c) ? 6 : 0;
      const Plan plan = verified(p);
      ASSERT_EQ(static_cast<int>(plan.ranks.size()), p.nranks);
      std::set<int> hosts(hostOf.begin(), hostOf.end());
      for (int r = 0; r < n; ++r) {
        const int h = hostOf[static_cast<size_t>(r)];
        // The leader: the root on its host for rooted collectives, else the host's lowest rank.
        int leader = -1;
        for (int q = n - 1; q >= 0; --q) {
          if (hostOf[static_cast<size_t>(q)] == h) leader = q;
        }
        if (collectiveHasRoot(c) && hostOf[static_cast<size_t>(p.root)] == h) leader = p.root;
        const std::set<int> peers = sendPeers(plan.ranks[static_cast<size_t>(r)]);
        int crossHost = 0;
        for (int q : peers) {
          if (hostOf[static_cast<size_t>(q)] != h) {
            ++crossHost;
          } else if (r != leader) {
            EXPECT_EQ(q, leader) << collectiveName(c) << ": rank " << r << " talks to " << q;
          }
        }
        if (r != leader) {
          EXPECT_EQ(crossHost, 0) << collectiveName(c) << " rank " << r;
        }
        // Ring or chain: at most one next leader (and the previous one, for credits).
        EXPECT_LE(crossHost, std::min<int>(2, static_cast<int>(hosts.size()) - 1))
            << collectiveName(c) << " rank " << r;
      }
    }
  }
}

TEST(HierFamily, AllReduceRingVolumeBetweenHosts) {
  quietLogs();
  // Ring across H leaders: each leader sends 2 (H-1)/H of the vector to the next host.
  const std::vector<int> hostOf = {0, 0, 0, 1, 1, 2, 2, 2, 3};
  const int hosts = 4;
  for (int pipeline : {1, 2}) {
    GenParams p = params("hier", Collective::kAllReduce, 9);
    p.hostOf = hostOf;
    p.pipeline = pipeline;
    const Plan plan = verified(p);
    ASSERT_EQ(static_cast<int>(plan.ranks.size()), p.nranks);
    ASSERT_EQ(plan.chunksPerSegment, hosts * pipeline);
    for (int leader : {0, 3, 5, 8}) {
      const int cross = sentChunks(plan.ranks[static_cast<size_t>(leader)], [&](int q) {
        return q >= 0 && hostOf[static_cast<size_t>(q)] != hostOf[static_cast<size_t>(leader)];
      });
      EXPECT_EQ(cross, 2 * (hosts - 1) * pipeline) << "leader " << leader;
    }
  }
}

TEST(HierFamily, RejectsWrongHostMapAndAllToAll) {
  quietLogs();
  Plan plan;
  GenParams p = params("hier", Collective::kAllReduce, 4);
  p.hostOf = {0, 1};
  EXPECT_EQ(generateHier(p, &plan), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("hostOf"), std::string::npos);
  p = params("hier", Collective::kAllToAll, 4);
  EXPECT_EQ(generateHier(p, &plan), tsrInvalidArgument);
}

// The verifier does see these plans' synchronization: a non-leader / leaf / folded rank that
// copies its result out before waiting for it must be rejected (race or wrong result).
TEST(TreeRhdHier, VerifierRejectsAResultReadBeforeItsWait) {
  quietLogs();
  GenParams hier = params("hier", Collective::kAllReduce, 6);
  hier.hostOf = {0, 0, 0, 1, 1, 1};
  for (const GenParams& p : {params("tree", Collective::kAllReduce, 5),
                             params("rhd", Collective::kAllReduce, 6), hier}) {
    Plan plan = verified(p);
    ASSERT_EQ(static_cast<int>(plan.ranks.size()), p.nranks);
    std::vector<Op>& ops = plan.ranks[1].workers[0].ops;  // a leaf, a folded rank, a non-leader
    const auto last = std::find_if(ops.rbegin(), ops.rend(),
                                   [](const Op& op) { return op.code == OpCode::kWait; });
    ASSERT_NE(last, ops.rend()) << p.algorithm;
    const Op wait = *last;
    ops.erase(std::next(last).base());
    ops.push_back(wait);
    VerifyReport report;
    EXPECT_EQ(verifyPlan(plan, &report), tsrInvalidArgument) << p.algorithm;
    EXPECT_TRUE(report.property == VerifyProperty::kRace ||
                report.property == VerifyProperty::kPostcondition)
        << p.algorithm << ": " << report.message;
  }
}

}  // namespace
}  // namespace tessera
