// The host fused executor when things go wrong: a peer that never makes the call (a timeout
// naming the rank and what it waited for, not a hang), ranks whose calls differ (every rank
// refuses, none is left waiting), and bad options.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/harness.hpp"
#include "unit/fused/test_host_fused_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::fusedtest {
namespace {

using fused::FusedOp;
using test::RankMode;

FusedCase smallCase(FusedOp op, int nranks) {
  FusedCase c;
  c.op = op;
  c.m = 4 * static_cast<uint64_t>(nranks);
  c.n = 9;
  c.k = 5;
  return c;
}

// The last rank skips the second call: the others time out within their 1 s deadline with a
// sentence naming themselves and the wait; after that the executor refuses further calls.
void missingPeer(RankMode mode, int n, FusedOp op) {
  auto results = test::runTransportRanks(mode, n, [&](TransportContext& ctx) {
    const int r = ctx.rank();
    std::unique_ptr<fused::HostFusedExecutor> ex;
    TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex, 1.0));
    FusedCase c = smallCase(op, n);
    std::string err = runCase(*ex, r, n, c);
    if (!err.empty()) return err;
    if (r != n - 1) {
      RankInputs in = makeInputs(c, r, n);
      std::vector<float> out(c.m * rankN(c, r));
      fused::FusedCall call = makeCall(c, in, out.data(), nullptr, r, n);
      auto start = std::chrono::steady_clock::now();
      Result res = ex->run(call);
      double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string why = lastErrorMessage();
      TT_CHECK(res == tsrTimeout, "the call without its peer gave %s: %s", resultName(res),
               why.c_str());
      TT_CHECK(took < 5, "the 1 s deadline took %.1f s", took);
      TT_CHECK(why.find(strprintf("rank %d", r)) != std::string::npos &&
                   why.find("fused") != std::string::npos &&
                   why.find("waited") != std::string::npos,
               "the sentence does not name the rank and the wait: %s", why.c_str());
      res = ex->run(call);
      TT_CHECK(res == tsrInvalidUsage, "a call after the failure gave %s", resultName(res));
    }
    // The skipping rank keeps its workspace alive until the others are through.
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(HostFusedFailures, MissingPeerTimesOutOnThreads) {
  missingPeer(RankMode::kThreads, 2, FusedOp::kGemmReduceScatter);
  missingPeer(RankMode::kThreads, 3, FusedOp::kAllGatherGemm);
  missingPeer(RankMode::kThreads, 2, FusedOp::kGemmAllReduce);
}

TEST(HostFusedFailures, MissingPeerTimesOutOnProcesses) {
  missingPeer(RankMode::kProcesses, 2, FusedOp::kGemmAllReduce);
}

// Rank 1 passes another M: both ranks learn it at the re-baseline and refuse the call with a
// sentence; the next matching call works.
TEST(HostFusedFailures, MismatchedCallsFailOnEveryRank) {
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    const int r = ctx.rank();
    std::unique_ptr<fused::HostFusedExecutor> ex;
    TT_CHECK_OK(makeExecutor(ctx, tiles(8, 8, 1, 1), &ex, 5.0));
    FusedCase c = smallCase(FusedOp::kGemmReduceScatter, 2);
    c.m = r == 0 ? 8 : 12;
    RankInputs in = makeInputs(c, r, 2);
    std::vector<float> out(c.m * c.n);
    fused::FusedCall call = makeCall(c, in, out.data(), nullptr, r, 2);
    Result res = ex->run(call);
    std::string why = lastErrorMessage();
    TT_CHECK(res == tsrInvalidUsage, "mismatched calls gave %s: %s", resultName(res), why.c_str());
    TT_CHECK(why.find("differs in its M") != std::string::npos, "unclear sentence: %s",
             why.c_str());
    std::string err = runCase(*ex, r, 2, smallCase(FusedOp::kGemmAllReduce, 2));
    if (!err.empty()) return err;
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  }));
}

TEST(HostFusedFailures, CreateRejectsBadOptions) {
  test::expectAllRanksOk(test::runTransportRanks(RankMode::kThreads, 1, [&](TransportContext& ctx) {
    std::unique_ptr<fused::HostFusedExecutor> ex;
    fused::FusedOptions o;
    TT_CHECK(fused::HostFusedExecutor::create(o, &ex) == tsrInvalidArgument, "no context");
    o.transports = &ctx;
    o.rank = 1;
    TT_CHECK(fused::HostFusedExecutor::create(o, &ex) == tsrInvalidArgument, "rank 1 of 1");
    o.rank = 0;
    o.timeoutSeconds = 0;
    TT_CHECK(fused::HostFusedExecutor::create(o, &ex) == tsrInvalidArgument, "no deadline");
    o.timeoutSeconds = 5;
    TT_CHECK_OK(fused::HostFusedExecutor::create(o, &ex));
    // Zero-sized tiles are refused at the call, not divided by.
    ex->setTileConfig(tiles(0, 8, 1, 1));
    FusedCase c = smallCase(FusedOp::kGemmReduceScatter, 1);
    RankInputs in = makeInputs(c, 0, 1);
    std::vector<float> out(c.m * c.n);
    Result res = ex->run(makeCall(c, in, out.data(), nullptr, 0, 1));
    TT_CHECK(res == tsrInvalidArgument, "tiles of 0 rows gave %s", resultName(res));
    ex->setTileConfig(tiles(8, 8, 1, 1));
    return runCase(*ex, 0, 1, c);
  }));
}

}  // namespace
}  // namespace tessera::fusedtest
