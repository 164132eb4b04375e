// The verifier against hand-written plans (test_plan_plans.hpp): correct ones pass, and each
// deliberately broken one fails naming the property, the place and what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "collectives/plan/plan.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/status.hpp"
#include "test_plan_plans.hpp"

namespace tessera {
namespace {

using namespace testplans;

VerifyReport verify(const Plan& p, VerifyOptions options = {}) {
  VerifyReport report;
  Result r = verifyPlan(p, &report, options);
  EXPECT_EQ(r == tsrSuccess, report.ok()) << report.message;
  if (r != tsrSuccess) {
    EXPECT_EQ(r, tsrInvalidArgument);
    EXPECT_EQ(report.message, std::string(lastErrorMessage()));
  }
  return report;
}

#define EXPECT_VERIFIES(plan)               \
  do {                                      \
    VerifyReport rep_ = verify(plan);       \
    EXPECT_TRUE(rep_.ok()) << rep_.message; \
  } while (0)

void expectFails(const VerifyReport& r, VerifyProperty property, const std::string& words) {
  EXPECT_EQ(r.property, property) << r.message;
  EXPECT_EQ(r.message.rfind(verifyPropertyName(property), 0), 0u) << r.message;
  EXPECT_NE(r.message.find(words), std::string::npos)
      << "\"" << words << "\" not in: " << r.message;
}

TEST(Verifier, PropertyNames) {
  EXPECT_STREQ(verifyPropertyName(VerifyProperty::kOk), "ok");
  EXPECT_STREQ(verifyPropertyName(VerifyProperty::kRawInput), "raw-input");
  EXPECT_STREQ(verifyPropertyName(VerifyProperty::kDeadlock), "deadlock");
}

TEST(Verifier, AcceptsRingAllReduce) {
  for (int n : {2, 3, 4, 5}) {
    SCOPED_TRACE(n);
    EXPECT_VERIFIES(ringAllReduce(n));
  }
}

TEST(Verifier, AcceptsOneRankCopy) {
  Plan p = emptyPlan(Collective::kAllReduce, 1, 4);
  p.ranks[0].workers[0].ops.push_back(copy(local(kIn, 0, 4), local(kOut, 0, 4)));
  p.canonicalOrder = true;
  EXPECT_VERIFIES(p);
}

TEST(Verifier, AcceptsBroadcastAndAllGather) {
  EXPECT_VERIFIES(starBroadcast(3, 1, 2));
  EXPECT_VERIFIES(starBroadcast(4, 0, 1));
  EXPECT_VERIFIES(getAllGather(3, 2));
  EXPECT_VERIFIES(getAllGather(2, 1));
}

TEST(Verifier, TwoRankRingIsCanonicalThreeRankRingIsNot) {
  // Two ranks: each sum is x0 + x1 (operands commute exactly), so canonical order holds.
  Plan two = ringAllReduce(2);
  two.canonicalOrder = true;
  EXPECT_VERIFIES(two);
  // Three ranks: rank 0 adds its input to x1 + x2, i.e. x0 + (x1 + x2).
  Plan three = ringAllReduce(3);
  three.canonicalOrder = true;
  VerifyReport r = verify(three);
  expectFails(r, VerifyProperty::kOrder, "canonicalOrder");
  EXPECT_EQ(r.rank, 0);  // its first reduce is x0 + x2
  EXPECT_EQ(r.worker, 0);
  EXPECT_EQ(r.op, 4);
}

TEST(Verifier, MissingSignalDeadlocks) {
  Plan p = ringAllReduce(2);
  auto& ops = p.ranks[0].workers[0].ops;
  ops.erase(ops.begin() + 2);  // rank 0's first data signal to rank 1
  // Rank 1's first wait consumes the all-gather's signal instead, so its last wait starves.
  VerifyReport r = verify(p);
  expectFails(r, VerifyProperty::kDeadlock,
              "rank 1 worker 0 op 9 (wait rank 0 channel 0) in iteration 0 waits for signal 2 of "
              "(rank 0 -> rank 1, channel 0); rank 0 sent 1");
}

TEST(Verifier, ExtraSignalIsUnbalanced) {
  Plan p = ringAllReduce(2);
  p.ranks[0].workers[0].ops.push_back(signal(1, 5));
  expectFails(verify(p), VerifyProperty::kDeadlock, "signal left unconsumed");
}

TEST(Verifier, WrongChunkFailsPostcondition) {
  Plan p = ringAllReduce(3);
  // Rank 2's last all-gather copy lands in output[0] (chunk 0, done) instead of output[1].
  auto& ops = p.ranks[2].workers[0].ops;
  ASSERT_EQ(ops.back().code, OpCode::kSignal);
  Op& last = ops[ops.size() - 2];
  ASSERT_EQ(last.code, OpCode::kCopy);
  ASSERT_EQ(last.dst.index, 1);
  last.dst.index = 0;
  VerifyReport r = verify(p);
  // Chunk 1's data lands at position 0 of the output: caught where it is stored.
  expectFails(r, VerifyProperty::kPostcondition,
              "stores {rank 0 chunk 1, rank 1 chunk 1, rank 2 chunk 1} in rank 2 output[0] at "
              "chunk position 0, but that data is of chunk position 1");
  EXPECT_EQ(r.rank, 2);
}

TEST(Verifier, ParkingDataAtAnotherPositionFails) {
  // One rank, cps 2: chunk 0 goes through scratch slot 1 (allowed) into output[1] (position 1,
  // not allowed: the executor sizes output[1] as chunk 1, which is shorter with uneven counts),
  // and from the slot into output[0]; output[1] is rewritten with chunk 1 at the end, so the
  // final outputs are right and only the position rule catches it.
  Plan p = emptyPlan(Collective::kAllReduce, 1, 2);
  p.ranks[0].scratchSegments = 1;
  auto& ops = p.ranks[0].workers[0].ops;
  ops = {copy(local(kIn, 0), local(kScr, 1)), copy(local(kScr, 1), local(kOut, 1)),
         copy(local(kScr, 1), local(kOut, 0)), copy(local(kIn, 1), local(kOut, 1))};
  VerifyReport r = verify(p);
  expectFails(
      r, VerifyProperty::kPostcondition,
      "op 1 (copy scratch[1] -> output[1]) in iteration 0 stores {rank 0 chunk 0} in rank 0 "
      "output[1] at "
      "chunk position 1, but that data is of chunk position 0");
  EXPECT_EQ(r.op, 1);
  ops.erase(ops.begin() + 1);  // without the parking step it is correct
  EXPECT_VERIFIES(p);
}

// Two puts of one worker to one peer are not ordered before a flush or signal (UCX orders puts
// only at a fence), so two of them to the same remote chunk race.
TEST(Verifier, TwoUnflushedPutsToOneChunkRace) {
  Plan p = emptyPlan(Collective::kReduceScatter, 2, 1);
  for (int r = 0; r < 2; ++r) {
    int q = 1 - r;
    RankPlan& rp = p.ranks[static_cast<size_t>(r)];
    rp.scratchSegments = 1;
    rp.credits = {Credit{q, 1, 1}};
    // The second put carries the chunk the peer needs; the first is overwritten.
    rp.workers[0].ops = {wait(q, 1),
                         put(local(kIn, r), remote(q, kScr, 0)),
                         put(local(kIn, q), remote(q, kScr, 0)),
                         signal(q, 0),
                         wait(q, 0),
                         reduce({local(kIn, r), local(kScr, 0)}, local(kOut, 0)),
                         signal(q, 1)};
  }
  VerifyReport r = verify(p);
  expectFails(r, VerifyProperty::kRace,
              "op 2 (put input[1] -> rank 1 scratch[0]) in iteration 0 writes rank 1 scratch[0] "
              "while rank 0 worker 0 op 1 (put input[0] -> rank 1 scratch[0]) in iteration 0 may "
              "still write it");
  // A flush between them completes the first put.
  for (RankPlan& rp : p.ranks) {
    rp.workers[0].ops.insert(rp.workers[0].ops.begin() + 2, flush(rp.credits[0].peer));
  }
  EXPECT_VERIFIES(p);
}

TEST(Verifier, ReusingScratchWithoutCreditRaces) {
  Plan p = starBroadcast(2, 0, 1);
  auto& ops = p.ranks[0].workers[0].ops;
  ASSERT_EQ(ops[0].code, OpCode::kWait);
  ops.erase(ops.begin());
  p.ranks[0].credits.clear();
  VerifyReport r = verify(p);
  expectFails(r, VerifyProperty::kRace,
              "rank 0 worker 0 op 0 (put input[0] -> rank 1 scratch[0]) in iteration 1 writes "
              "rank 1 scratch[0] while rank 1 worker 0 op 1 (copy scratch[0] -> output[0]) in "
              "iteration 0 may still read it");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.op, 0);
  EXPECT_FALSE(r.inPlace);
}

TEST(Verifier, OneIterationMissesTheReuseRace) {
  Plan p = starBroadcast(2, 0, 1);
  p.ranks[0].workers[0].ops.erase(p.ranks[0].workers[0].ops.begin());
  p.ranks[0].credits.clear();
  VerifyOptions once;
  once.iterations = 1;
  // One iteration has no reuse, so only the leftover credit signal shows.
  expectFails(verify(p, once), VerifyProperty::kDeadlock, "signal left unconsumed");
}

TEST(Verifier, OverwritingAPutSourceBeforeItCompletesRaces) {
  // Rank 0 stages through its own scratch and overwrites the slot before the signal that
  // completes the put: a transport may still be reading it.
  Plan p = starBroadcast(2, 0, 1);
  p.ranks[0].scratchSegments = 1;
  auto& ops = p.ranks[0].workers[0].ops;
  ops = {wait(1, 1),
         copy(local(kIn, 0), local(kScr, 0)),
         put(local(kScr, 0), remote(1, kScr, 0)),
         copy(local(kIn, 0), local(kScr, 0)),
         signal(1, 0),
         copy(local(kIn, 0), local(kOut, 0))};
  expectFails(verify(p), VerifyProperty::kRace,
              "op 3 (copy input[0] -> scratch[0]) in iteration 0 writes rank 0 scratch[0] while "
              "rank 0 worker 0 op 2 (put scratch[0] -> rank 1 scratch[0]) in iteration 0 may "
              "still read it");
  // A flush completes the put.
  ops.insert(ops.begin() + 3, flush(1));
  EXPECT_VERIFIES(p);
}

TEST(Verifier, OutOfBoundsChunk) {
  Plan p = ringAllReduce(2);
  p.ranks[1].workers[0].ops[4].srcs[1].index = 4;  // scratch has 2 segments of 2 chunks
  VerifyReport r = verify(p);
  expectFails(r, VerifyProperty::kBounds,
              "ranks[1].workers[0].ops[4].srcs[1].index: chunk 4 out of range (scratch has 4 "
              "chunks)");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.worker, 0);
  EXPECT_EQ(r.op, 4);
}

TEST(Verifier, ContributionCountedTwice) {
  Plan p = ringAllReduce(2);
  Op& red = p.ranks[1].workers[0].ops[4];
  ASSERT_EQ(red.code, OpCode::kReduce);
  red.srcs.push_back(red.srcs[0]);
  VerifyReport r = verify(p);
  expectFails(r, VerifyProperty::kPostcondition, "counted twice");
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.op, 4);
}

TEST(Verifier, PeerReadsOutputAfterOwnerReturned) {
  VerifyReport r = verify(getAllGather(3, 1, /*done=*/false));
  expectFails(r, VerifyProperty::kRace,
              "reads rank 1 output[1], but rank 1's plan may end iteration 0 before that (no "
              "happens-before to its end): peer may still access rank 1's output after rank 1's "
              "call returned");
}

TEST(Verifier, PeerWritesBeforeOwnerStarted) {
  // Zero-copy broadcast by puts into peers' outputs, with no sign that the peer has started.
  Plan p = emptyPlan(Collective::kBroadcast, 2, 1);
  p.zeroCopy = true;
  p.ranks[0].workers[0].ops = {put(local(kIn, 0), remote(1, kOut, 0)), signal(1),
                               copy(local(kIn, 0), local(kOut, 0)), wait(1, 1)};
  p.ranks[1].workers[0].ops = {wait(0), signal(0, 1)};
  expectFails(verify(p), VerifyProperty::kRace, "before rank 1 may have started iteration 0");
  // A ready signal from rank 1 first makes it correct.
  p.ranks[1].workers[0].ops.insert(p.ranks[1].workers[0].ops.begin(), signal(0, 2));
  p.ranks[0].workers[0].ops.insert(p.ranks[0].workers[0].ops.begin(), wait(1, 2));
  EXPECT_VERIFIES(p);
}

TEST(Verifier, RawInputInPlace) {
  // One rank that leaves the output alone: fine for a broadcast in place, but an allreduce
  // must load its input through an input ref (the pre-op), and out of place it never writes.
  Plan p = emptyPlan(Collective::kAllReduce, 1, 1);
  VerifyOptions inPlaceOnly;
  inPlaceOnly.outOfPlace = false;
  VerifyReport r = verify(p, inPlaceOnly);
  expectFails(r, VerifyProperty::kRawInput,
              "rank 0 output[0] (iteration 0) still holds the raw input");
  EXPECT_TRUE(r.inPlace);
  expectFails(verify(p), VerifyProperty::kPostcondition,
              "rank 0 output[0] (iteration 0) holds "
              "nothing (never written)");
  // Reading the output before writing it: raw input in place, uninitialised out of place.
  p.ranks[0].scratchSegments = 1;
  p.ranks[0].workers[0].ops = {copy(local(kOut, 0), local(kScr, 0)),
                               copy(local(kIn, 0), local(kOut, 0))};
  expectFails(verify(p, inPlaceOnly), VerifyProperty::kRawInput,
              "op 0 (copy output[0] -> scratch[0]) in iteration 0 reads rank 0 output[0], which "
              "still holds the raw input");
  expectFails(verify(p), VerifyProperty::kPostcondition, "uninitialised");
}

TEST(Verifier, ShapeErrors) {
  Plan p = ringAllReduce(2);
  p.ranks[0].workers[0].ops[1].srcs.push_back(local(kIn, 0));  // a put with two sources
  expectFails(verify(p), VerifyProperty::kShape, "a put takes exactly 1 source, found 2");
  Plan q = ringAllReduce(2);
  q.ranks[1].workers.push_back(Worker{{signal(0, 0)}});  // second signaller of (1 -> 0, ch 0)
  expectFails(verify(q), VerifyProperty::kShape, "one worker per side of a semaphore");
  VerifyOptions bad;
  bad.iterations = 0;
  VerifyReport r;
  EXPECT_EQ(verifyPlan(ringAllReduce(2), &r, bad), tsrInvalidArgument);
}

TEST(Verifier, BarrierMismatchDeadlocks) {
  Plan p = emptyPlan(Collective::kAllReduce, 1, 2);
  p.ranks[0].workers.resize(2);
  p.ranks[0].workers[0].ops = {copy(local(kIn, 0), local(kOut, 0)), barrier()};
  p.ranks[0].workers[1].ops = {copy(local(kIn, 1), local(kOut, 1))};
  expectFails(verify(p), VerifyProperty::kDeadlock, "waits at barrier 0 (1 of 2 workers arrived)");
  p.ranks[0].workers[1].ops.push_back(barrier());
  EXPECT_VERIFIES(p);
}

TEST(Verifier, WorkersRaceWithoutBarrier) {
  // Worker 1 reads what worker 0 writes; a barrier orders them.
  Plan p = emptyPlan(Collective::kAllReduce, 1, 1);
  p.ranks[0].scratchSegments = 1;
  p.ranks[0].workers.resize(2);
  p.ranks[0].workers[0].ops = {copy(local(kIn, 0), local(kScr, 0))};
  p.ranks[0].workers[1].ops = {copy(local(kScr, 0), local(kOut, 0))};
  expectFails(verify(p), VerifyProperty::kRace, "may still be writing it");
  p.ranks[0].workers[0].ops.push_back(barrier());
  p.ranks[0].workers[1].ops.insert(p.ranks[0].workers[1].ops.begin(), barrier());
  // The next iteration's write of scratch[0] also needs ordering after this read.
  expectFails(verify(p), VerifyProperty::kRace,
              "rank 0 worker 0 op 0 (copy input[0] -> scratch[0]) in iteration 1 writes rank 0 "
              "scratch[0] while rank 0 worker 1 op 1 (copy scratch[0] -> output[0]) in iteration "
              "0 may still read it");
  p.ranks[0].workers[0].ops.push_back(barrier());
  p.ranks[0].workers[1].ops.push_back(barrier());
  EXPECT_VERIFIES(p);
}

// Zero-copy alltoall: each rank says it is ready (channel 0), puts block q of its input into
// block r of q's output, signals (channel 1) and waits for every peer's block.
Plan putAllToAll(int n, int cps) {
  Plan p = emptyPlan(Collective::kAllToAll, n, cps, "put");
  p.zeroCopy = true;
  for (int r = 0; r < n; ++r) {
    std::vector<Op>& ops = p.ranks[static_cast<size_t>(r)].workers[0].ops;
    ops.push_back(copy(local(kIn, r * cps, cps), local(kOut, r * cps, cps)));
    for (int q = 0; q < n; ++q) {
      if (q != r) ops.push_back(signal(q, 0));
    }
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      ops.push_back(wait(q, 0));
      ops.push_back(put(local(kIn, q * cps, cps), remote(q, kOut, r * cps, cps)));
      ops.push_back(signal(q, 1));
    }
    for (int q = 0; q < n; ++q) {
      if (q != r) ops.push_back(wait(q, 1));
    }
  }
  return p;
}

TEST(Verifier, AllToAll) {
  EXPECT_VERIFIES(putAllToAll(3, 2));
  Plan p = putAllToAll(3, 2);
  // Rank 1 sends rank 2's block to rank 0.
  Op& put0 = p.ranks[1].workers[0].ops[4];
  ASSERT_EQ(put0.code, OpCode::kPut);
  put0.srcs[0].index = 4;
  expectFails(verify(p), VerifyProperty::kPostcondition,
              "rank 0 output[2] (iteration 0) holds {rank 1 chunk 4} after the plan, but alltoall "
              "needs {rank 1 chunk 0}");
}

TEST(Verifier, RefusesPlansTooLargeToVerify) {
  Plan p = emptyPlan(Collective::kAllToAll, kMaxPlanRanks, kMaxChunksPerSegment);
  expectFails(verify(p), VerifyProperty::kShape, "plan too large to verify");
}

TEST(Verifier, NeverCrashesOnGarbage) {
  Plan p = ringAllReduce(3);
  p.nranks = 0;
  EXPECT_EQ(verify(p).property, VerifyProperty::kBounds);
  p = ringAllReduce(3);
  p.ranks.pop_back();
  EXPECT_EQ(verify(p).property, VerifyProperty::kShape);
  p = ringAllReduce(3);
  p.ranks[2].workers[0].ops[0].peer = 7;
  EXPECT_EQ(verify(p).property, VerifyProperty::kBounds);
  p = ringAllReduce(3);
  p.ranks[2].workers[0].ops[1].dst.count = INT32_MAX;
  EXPECT_EQ(verify(p).property, VerifyProperty::kBounds);
}

}  // namespace
}  // namespace tessera
