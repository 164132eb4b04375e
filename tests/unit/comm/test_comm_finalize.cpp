// tsrCommFinalize keeps its promise: it completes this rank's outstanding work before the barrier,
// refuses calls that start after it, and a peer that never finalizes is a tsrTimeout within the
// deadline. And the config fields tessera does not honour are refused with a sentence.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool mentions(const char* text) {
  return std::string(tsrGetLastError(nullptr)).find(text) != std::string::npos;
}

// A host GEMM+AllReduce big enough to run for a good part of a second: C = A B summed over the
// ranks, with A and B all ones, is K * nranks everywhere (exact in float).
constexpr size_t kM = 512, kN = 512, kK = 512;

TEST(CommFinalize, CompletesCallsStillRunningOnOtherThreads) {
  // Should a rank's call end before its finalize begins (the call refused on the other rank), the
  // other rank's call fails within this deadline instead of the default 300 s.
  tessera::test::ScopedEnv timeout("TESSERA_TRANSPORT_TIMEOUT", "20");
  const int n = 2;
  std::vector<tsrComm_t> comms(n);
  ASSERT_EQ(tsrCommInitAll(comms.data(), n, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  tessera::test::runRanks(n, [&](int r) {
    tsrComm_t comm = comms[static_cast<size_t>(r)];
    std::vector<float> a(kM * kK, 1.0f), b(kK * kN, 1.0f), c(kM * kN, 0.0f);
    // The first call sets the executors up (collectively); the second is the one in flight.
    ASSERT_EQ(tsrGemmAllReduce(a.data(), b.data(), nullptr, c.data(), kM, kN, kK, tsrFloat32,
                               tsrFloat32, TSR_FUSED_DEFAULT, comm, nullptr),
              tsrSuccess)
        << tsrGetLastError(nullptr);
    std::fill(c.begin(), c.end(), 0.0f);
    std::atomic<bool> returned{false};
    tsrResult_t callResult = tsrInternalError;
    auto t0 = Clock::now();
    std::thread call([&] {
      callResult = tsrGemmAllReduce(a.data(), b.data(), nullptr, c.data(), kM, kN, kK, tsrFloat32,
                                    tsrFloat32, TSR_FUSED_DEFAULT, comm, nullptr);
      returned.store(true);
    });
    // Finalize once the call is counted as running (a GEMM of this size then runs for a while).
    std::shared_ptr<tessera::Communicator> handle;
    ASSERT_EQ(tessera::handleLookup(comm, "test", &handle), tsrSuccess);
    tessera::CommImpl* impl = tessera::commImpl(*handle);
    ASSERT_TRUE(
        tessera::test::waitUntil([&] { return impl->callsInFlight() > 0 || returned.load(); }, 20));
    const bool runningAtFinalize = !returned.load();
    EXPECT_EQ(tsrCommFinalize(comm), tsrSuccess) << tsrGetLastError(nullptr);
    // The call's result is complete and correct the moment finalize returns.
    EXPECT_TRUE(returned.load());
    size_t wrong = 0;
    for (float v : c) wrong += v != static_cast<float>(kK * n);
    EXPECT_EQ(wrong, 0u) << "rank " << r << ": C is not complete after tsrCommFinalize";
    call.join();
    EXPECT_EQ(callResult, tsrSuccess);
    if (!runningAtFinalize)
      std::printf("rank %d: the call ended %.3f s after it started, before finalize began\n", r,
                  secondsSince(t0));
    // Only destroy may follow.
    std::vector<float> x(4, 1.0f);
    EXPECT_EQ(tsrAllReduce(x.data(), x.data(), 4, tsrFloat32, tsrSum, comm, nullptr),
              tsrInvalidUsage);
  });
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

TEST(CommFinalize, PeerThatNeverFinalizesIsATimeoutWithinTheDeadline) {
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.timeoutMs = 1500;
  std::vector<tsrComm_t> comms(2, nullptr);
  tessera::test::runRanks(2, [&](int r) {
    ASSERT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &config), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(tsrCommFinalize(comms[0]), tsrTimeout);  // rank 1 never finalizes
  EXPECT_LT(secondsSince(t0), 1.5 + 10.0);
  EXPECT_TRUE(mentions("tsrCommFinalize")) << tsrGetLastError(nullptr);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

TEST(CommFinalize, RefusedWhileThisThreadsGroupHoldsItsCalls) {
  std::vector<tsrComm_t> comms(1);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 1, nullptr), tsrSuccess);
  float x = 1.0f;
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  ASSERT_EQ(tsrAllReduce(&x, &x, 1, tsrFloat32, tsrSum, comms[0], nullptr), tsrSuccess);
  EXPECT_EQ(tsrCommFinalize(comms[0]), tsrInvalidUsage);
  EXPECT_TRUE(mentions("tsrGroupEnd")) << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommFinalize(comms[0]), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comms[0]), tsrSuccess);
}

// ---- config fields: used or refused with a sentence -----------------------------------------

TEST(CommConfig, FieldsTesseraDoesNotHonourAreRefused) {
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  struct Case {
    const char* what;
    tsrConfig_t config;
    const char* mention;
  };
  std::vector<Case> cases;
  tsrConfig_t c = TSR_CONFIG_INITIALIZER;
  c.splitShare = 1;
  cases.push_back({"splitShare = 1", c, "never shares"});
  c = TSR_CONFIG_INITIALIZER;
  c.cgaClusterSize = 4;
  cases.push_back({"cgaClusterSize = 4", c, "clusters"});
  c = TSR_CONFIG_INITIALIZER;
  c.netName = "IB";
  cases.push_back({"netName IB", c, "\"IB\""});
  c = TSR_CONFIG_INITIALIZER;
  c.netName = "Socket";
  cases.push_back({"netName Socket", c, "ucx"});
  for (Case& k : cases) {
    SCOPED_TRACE(k.what);
    tsrComm_t comm = nullptr;
    EXPECT_EQ(tsrCommInitRankConfig(&comm, 1, id, 0, &k.config), tsrInvalidArgument);
    EXPECT_TRUE(mentions(k.mention)) << tsrGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
  }
}

TEST(CommConfig, DefaultsAndHonouredValuesAreAccepted) {
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.splitShare = 0;
  config.cgaClusterSize = 1;  // a cluster of one CTA: no cluster
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitRankConfig(&comm, 1, id, 0, &config), tsrSuccess)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

TEST(CommConfig, SplitShareIsRefusedForAChildAndFromTheEnvironment) {
  std::vector<tsrComm_t> comms(1);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 1, nullptr), tsrSuccess);
  tsrConfig_t share = TSR_CONFIG_INITIALIZER;
  share.splitShare = 1;
  tsrComm_t child = nullptr;
  EXPECT_EQ(tsrCommSplit(comms[0], 0, 0, &child, &share), tsrInvalidArgument);
  EXPECT_TRUE(mentions("splitShare")) << tsrGetLastError(nullptr);
  EXPECT_EQ(child, nullptr);
  // The parent's undefined fields are inherited, so a child without a config is made.
  ASSERT_EQ(tsrCommSplit(comms[0], 0, 0, &child, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(child), tsrSuccess);
  EXPECT_EQ(tsrCommDestroy(comms[0]), tsrSuccess);
  {
    tessera::test::ScopedEnv env("TESSERA_SPLIT_SHARE", "1");
    tsrComm_t one = nullptr;
    EXPECT_EQ(tsrCommInitAll(&one, 1, nullptr), tsrInvalidArgument);
    EXPECT_TRUE(mentions("TESSERA_SPLIT_SHARE")) << tsrGetLastError(nullptr);
  }
}

}  // namespace
