// Failures of the device executor's sends and receives (emulated on host threads): a size mismatch
// is reported (not a hang) and names both sizes; a missing peer ends in tsrTimeout within the
// deadline, naming the peer, for a blocked send and a blocked receive; abort ends a stuck group;
// what enqueueP2P refuses up front (an unmatched send to self, too many calls, a bad peer) leaves
// the engine usable; a pair reached only through a proxy (ucx) is refused with a sentence.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/harness.hpp"
#include "test_device_p2p_common.hpp"
#include "transport/transport.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::p2ptest {
namespace {

using test::RankMode;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

P2PCall sendOf(int peer, const void* buf, size_t count) {
  return P2PCall{true, peer, buf, nullptr, count, tsrInt32};
}
P2PCall recvOf(int peer, void* buf, size_t count) {
  return P2PCall{false, peer, nullptr, buf, count, tsrInt32};
}

TEST(DeviceP2PFailures, SizeMismatchIsReported) {
  for (size_t sent : {size_t{10}, size_t{0}}) {
    auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      P2PSetup setup;
      setup.timeoutSeconds = 10;
      TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
      std::vector<int32_t> buf(16, 1);
      if (ctx.rank() == 0) {
        // The send completes on credit alone.
        TT_CHECK_OK(runDeviceP2P(*e, {sendOf(1, buf.data(), sent)}));
        TT_CHECK_OK(ctx.bootstrap().barrier());
        return std::string();
      }
      const auto t0 = Clock::now();
      Result r = runDeviceP2P(*e, {recvOf(0, buf.data(), 12)});
      std::string msg = lastErrorMessage();
      TT_CHECK_OK(ctx.bootstrap().barrier());
      TT_CHECK(r == tsrInvalidUsage, "got %s: %s", resultName(r), msg.c_str());
      TT_CHECK(since(t0) < 5, "the mismatch took %.2f s to be reported", since(t0));
      const std::string want =
          strprintf("receives 48 bytes from rank 0, which sends %zu bytes", sent * 4);
      TT_CHECK(
          msg.find(want) != std::string::npos && msg.find("send/recv group 1") != std::string::npos,
          "sentence: %s", msg.c_str());
      Result d = e->deviceError();
      TT_CHECK(d == tsrInvalidUsage, "deviceError gave %s", resultName(d));
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

// Both ranks make one group (the link is set up); then rank 0 alone makes `calls`, which must end
// in tsrTimeout within the deadline with a sentence naming `want`.
void missingPeer(bool send, const char* want) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    P2PSetup setup;
    setup.timeoutSeconds = 1.0;
    setup.slotBytes = 256;
    TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
    const int other = 1 - ctx.rank();
    std::vector<int32_t> a(1000, ctx.rank()), b(1000, -1);
    TT_CHECK_OK(runDeviceP2P(*e, {sendOf(other, a.data(), 10), recvOf(other, b.data(), 10)}));
    std::string err;
    if (ctx.rank() == 0) {
      // 4000 bytes need 16 slots of 256: a send blocks once the ring of 8 is full.
      const auto t0 = Clock::now();
      Result r = runDeviceP2P(*e, {send ? sendOf(1, a.data(), 1000) : recvOf(1, b.data(), 1000)});
      const double took = since(t0);
      std::string msg = lastErrorMessage();
      if (r != tsrTimeout)
        err = strprintf("got %s: %s", resultName(r), msg.c_str());
      else if (took > 6)
        err = strprintf("the timeout took %.2f s with a 1 s deadline", took);
      else if (msg.find(want) == std::string::npos || msg.find("peer rank 1") == std::string::npos)
        err = "the sentence names neither the wait nor the peer: " + msg;
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return err;
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2PFailures, MissingReceiverTimesOut) { missingPeer(true, "a send to rank 1 waited"); }

TEST(DeviceP2PFailures, MissingSenderTimesOut) {
  missingPeer(false, "a receive from rank 1 waited");
}

TEST(DeviceP2PFailures, AbortEndsAStuckGroup) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    P2PSetup setup;
    setup.timeoutSeconds = 60;
    TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
    std::vector<int32_t> a(64, 1), b(64, 0);
    const int other = 1 - ctx.rank();
    TT_CHECK_OK(runDeviceP2P(*e, {sendOf(other, a.data(), 64), recvOf(other, b.data(), 64)}));
    std::string err;
    if (ctx.rank() == 0) {
      TT_CHECK_OK(e->enqueueP2P({recvOf(1, b.data(), 64)}, nullptr));
      const auto t0 = Clock::now();
      std::thread aborter([&] {
        // Late on purpose (no hook says the wait has begun): the abort must end a stuck wait.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        e->abortDevice();
      });
      Result r = e->deviceSynchronize();
      aborter.join();
      if (r != tsrRemoteError)
        err = strprintf("got %s: %s", resultName(r), lastErrorMessage());
      else if (since(t0) > 5)
        err = strprintf("abort took %.2f s to end the wait", since(t0));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return err;
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2PFailures, RefusedUpFrontLeavesTheEngineUsable) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeP2PEngine(ctx, P2PSetup{}, &e));
    const int me = ctx.rank(), other = 1 - me;
    std::vector<int32_t> a(256, me + 7), b(256, 0), c(256, 0);
    Result r = e->enqueueP2P({sendOf(me, a.data(), 4)}, nullptr);
    TT_CHECK(r == tsrInvalidUsage, "an unmatched send to self gave %s", resultName(r));
    r = e->enqueueP2P({sendOf(me, a.data(), 4), recvOf(me, b.data(), 5)}, nullptr);
    TT_CHECK(r == tsrInvalidUsage, "a send to self of another size gave %s", resultName(r));
    r = e->enqueueP2P({sendOf(2, a.data(), 4)}, nullptr);
    TT_CHECK(r == tsrInvalidArgument, "a send to rank 2 of 2 gave %s", resultName(r));
    std::vector<P2PCall> many;
    for (int i = 0; i < 65; ++i) {
      many.push_back(sendOf(other, a.data(), 1));
      many.push_back(recvOf(other, b.data(), 1));
    }
    r = e->enqueueP2P(many, nullptr);
    TT_CHECK(r == tsrInvalidUsage &&
                 std::string(lastErrorMessage()).find("at most 128") != std::string::npos,
             "130 calls gave %s: %s", resultName(r), lastErrorMessage());
    // Nothing was enqueued: the next group runs as usual.
    TT_CHECK_OK(runDeviceP2P(*e, {recvOf(other, b.data(), 256), sendOf(other, a.data(), 256),
                                  sendOf(me, a.data(), 256), recvOf(me, c.data(), 256)}));
    for (size_t i = 0; i < b.size(); ++i) {
      TT_CHECK(b[i] == other + 7, "element %zu from rank %d is %d", i, other, b[i]);
      TT_CHECK(c[i] == me + 7, "element %zu from self is %d", i, c[i]);
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2PFailures, ProxyPeersAreRefused) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  test::ScopedEnv transport("TESSERA_TRANSPORT", "ucx");
  test::ScopedEnv tls("UCX_TLS", "tcp");
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    P2PSetup setup;
    setup.timeoutSeconds = 10;
    TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
    std::vector<int32_t> a(16, 1), b(16, 0);
    const int other = 1 - ctx.rank();
    Result r = e->enqueueP2P({sendOf(other, a.data(), 16), recvOf(other, b.data(), 16)}, nullptr);
    std::string msg = lastErrorMessage();
    TT_CHECK(r == tsrInvalidUsage && msg.find("maps the peer's memory") != std::string::npos,
             "got %s: %s", resultName(r), msg.c_str());
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::p2ptest
