// What the engine refuses and how it fails: a rank that never calls (tsrTimeout naming the wait),
// calls that do not match across ranks (tsrInvalidUsage naming both), plans that do not verify,
// alltoall in place, and user plans that do.
#include <gtest/gtest.h>

#include <atomic>

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
      // Stay alive (a destroyed peer would be a remote error, not a timeout).
      while (!finished.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
