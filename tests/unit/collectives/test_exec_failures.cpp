// What the engine refuses and how it fails: a rank that never calls (tsrTimeout naming the wait),
// calls that do not match across ranks (tsrInvalidUsage naming both), plans that do not verify,
// alltoall in place, and user plans that do.
#include <gtest/gtest.h>

#include <atomic>

#include "collectives/exec/plan_cache.hpp"
#include "collectives/plan/verifier.hpp"
#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

CollCall allreduce(const float* in, float* out, size_t count) {
  CollCall c;
  c.sendbuf = in;
  c.recvbuf = out;
  c.count = count;
  c.algorithm = "ring";
  return c;
}

TEST(ExecFailures, RankThatNeverCallsTimesOutNamingTheWait) {
  std::atomic<bool> finished{false};
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    EngineSetup setup;
    setup.timeoutSeconds = 1;
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, setup, &e));
    std::vector<float> in(64, 1.0f), out(64);
    // Both ranks set the plan up together first.
    TT_CHECK_OK(runCall(*e, allreduce(in.data(), out.data(), in.size())));
    if (ctx.rank() == 1) {
      // Stay alive (a destroyed peer would be a remote error, not a timeout) until rank 0 is
      // through its 30 s wait at the most.
      TT_CHECK(test::waitUntil([&] { return finished.load(); }, 60),
               "rank 0 did not finish its call");
      return std::string();
    }
    Result r = runCall(*e, allreduce(in.data(), out.data(), in.size()), 30);
    finished.store(true);
    TT_CHECK(r == tsrTimeout, "got %s", resultName(r));
    std::string msg = lastErrorMessage();
    TT_CHECK(msg.find("allreduce ring n=2 (call 2): rank 0 worker 0 op ") != std::string::npos &&
                 msg.find("waits for signal") != std::string::npos &&
                 msg.find("of rank 1 channel") != std::string::npos,
             "sentence: %s", msg.c_str());
    // An engine that failed runs nothing more.
    std::unique_ptr<Operation> op;
    TT_CHECK(e->start(allreduce(in.data(), out.data(), in.size()), &op) == tsrInvalidUsage,
             "a failed engine started another call");
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// A process rank that is gone (its transport closed) is a remote error, long before the deadline.
TEST(ExecFailures, PeerThatExitedIsARemoteError) {
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::vector<float> in(64, 1.0f), out(64);
    TT_CHECK_OK(runCall(*e, allreduce(in.data(), out.data(), in.size())));
    if (ctx.rank() == 1) return std::string();  // leaves: its context and transports close
    auto t0 = std::chrono::steady_clock::now();
    Result r = runCall(*e, allreduce(in.data(), out.data(), in.size()), 30);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    TT_CHECK(r == tsrRemoteError, "got %s: %s", resultName(r), lastErrorMessage());
    TT_CHECK(s < 10, "noticed after %.1f s", s);
    std::string msg = lastErrorMessage();
    TT_CHECK(msg.find("waits for signal") != std::string::npos, "sentence: %s", msg.c_str());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(ExecFailures, MismatchedCountsAboveTheZeroCopyThresholdAreReported) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "1024");
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::vector<float> in(3000, 1.0f), out(3000);
    TT_CHECK_OK(runCall(*e, allreduce(in.data(), out.data(), 2000)));
    size_t count = ctx.rank() == 0 ? 2000 : 3000;
    Result r = runCall(*e, allreduce(in.data(), out.data(), count));
    TT_CHECK(r == tsrInvalidUsage, "got %s", resultName(r));
    std::string msg = lastErrorMessage();
    TT_CHECK(msg.find("mismatched collective calls") != std::string::npos &&
                 msg.find("count=2000") != std::string::npos &&
                 msg.find("count=3000") != std::string::npos,
             "sentence: %s", msg.c_str());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(ExecFailures, AllToAllInPlaceIsRefused) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::vector<float> buf(8);
    CollCall c;
    c.collective = Collective::kAllToAll;
    c.sendbuf = buf.data();
    c.recvbuf = buf.data();
    c.count = 4;
    std::unique_ptr<Operation> op;
    TT_CHECK(e->start(c, &op) == tsrInvalidArgument, "alltoall in place was accepted");
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Calls refused on one rank only (unknown algorithm, a plan for other ranks, alltoall in place)
// run nothing and must not count: the next call's number still matches the peers' (the handshake
// of a large call compares them).
TEST(ExecFailures, RefusedCallsDoNotCount) {
  test::ScopedEnv threshold("TESSERA_ZERO_COPY_MIN_BYTES", "1024");
  GenParams g;
  g.algorithm = "ring";
  g.nranks = 3;
  auto threeRanks = std::make_shared<Plan>();
  ASSERT_EQ(generatePlan(g, threeRanks.get()), tsrSuccess) << lastErrorMessage();
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    std::vector<float> in(3000, static_cast<float>(ctx.rank() + 1)), out(3000);
    if (ctx.rank() == 0) {
      std::unique_ptr<Operation> op;
      CollCall c = allreduce(in.data(), out.data(), in.size());
      c.algorithm = "no-such-family";
      TT_CHECK(e->start(c, &op) == tsrInvalidArgument, "an unknown algorithm was accepted");
      c = allreduce(in.data(), out.data(), in.size());
      c.plan = threeRanks;
      TT_CHECK(e->start(c, &op) == tsrInvalidArgument, "a plan for 3 ranks was accepted");
      c = allreduce(in.data(), in.data(), 4);
      c.collective = Collective::kAllToAll;
      TT_CHECK(e->start(c, &op) == tsrInvalidArgument, "alltoall in place was accepted");
    }
    std::unique_ptr<Operation> op;
    TT_CHECK_OK(e->start(allreduce(in.data(), out.data(), in.size()), &op));
    TT_CHECK_OK(runOperations({op.get()}, 20));
    TT_CHECK(op->describe().find("(call 1)") != std::string::npos, "%s", op->describe().c_str());
    for (size_t i = 0; i < out.size(); ++i)
      TT_CHECK(out[i] == 3.0f, "element %zu: %g", i, static_cast<double>(out[i]));
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// ExecOp::sem is 16 bits: a rank with more (peer, channel) semaphores than that is refused
// (compiled, it would wait on the wrong semaphore).
TEST(ExecFailures, PlansWithMoreSemaphoresThanSlotsAreRefused) {
  constexpr int kRanks = 600;  // 599 peers x kMaxChannels channels > 32767
  auto plan = std::make_shared<Plan>();
  plan->name = "many-semaphores";
  plan->nranks = kRanks;
  plan->ranks.resize(kRanks);
  for (RankPlan& rp : plan->ranks) rp.workers.resize(1);
  for (int p = 1; p < kRanks; ++p) {
    for (int ch = 0; ch < kMaxChannels; ++ch) {
      Op signal;
      signal.code = OpCode::kSignal;
      signal.peer = p;
      signal.channel = ch;
      plan->ranks[0].workers[0].ops.push_back(signal);
      Op wait = signal;
      wait.code = OpCode::kWait;
      wait.peer = 0;
      plan->ranks[static_cast<size_t>(p)].workers[0].ops.push_back(wait);
    }
  }
  BoundPlan fits;
  ASSERT_EQ(compilePlan(plan, 1, &fits), tsrSuccess) << lastErrorMessage();
  EXPECT_EQ(fits.sems.size(), static_cast<size_t>(kMaxChannels));
  BoundPlan tooMany;
  ASSERT_EQ(compilePlan(plan, 0, &tooMany), tsrInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("38336 semaphores"), std::string::npos)
      << lastErrorMessage();
}

TEST(ExecFailures, UserPlansRunAndBrokenOnesAreRefused) {
  const int n = 3;
  GenParams g;
  g.algorithm = "ring";
  g.nranks = n;
  auto good = std::make_shared<Plan>();
  ASSERT_EQ(generatePlan(g, good.get()), tsrSuccess) << lastErrorMessage();
  // Without the first wait of rank 1, rank 1 may overwrite what a peer still reads.
  auto broken = std::make_shared<Plan>(*good);
  auto& ops = broken->ranks[1].workers[0].ops;
  for (auto it = ops.begin(); it != ops.end(); ++it)
    if (it->code == OpCode::kWait) {
      ops.erase(it);
      break;
    }
  VerifyReport report;
  ASSERT_NE(verifyPlan(*broken, &report), tsrSuccess);
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeEngine(ctx, EngineSetup{}, &e));
    for (size_t count : {size_t{5}, size_t{40000}}) {
      std::vector<float> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(ctx.rank() * 3 + i % 11);
      CollCall c = allreduce(in.data(), out.data(), count);
      c.plan = good;
      TT_CHECK_OK(runCall(*e, c));
      for (size_t i = 0; i < count; ++i)
        TT_CHECK(out[i] == static_cast<float>(9 + 3 * (i % 11)), "element %zu: %g", i,
                 static_cast<double>(out[i]));
      c.plan = broken;
      std::unique_ptr<Operation> op;
      TT_CHECK(e->start(c, &op) == tsrInvalidArgument, "the broken plan was accepted");
      TT_CHECK(std::string(lastErrorMessage()).find(report.message) != std::string::npos,
               "sentence: %s", lastErrorMessage());
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::exectest
