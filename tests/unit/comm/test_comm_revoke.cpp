// tsrCommRevoke and automatic revocation on thread ranks (DESIGN.md, "Faults and revocation"):
// an explicit revoke, an abort and one rank's deadline each make every other rank's call fail at
// once with tsrRemoteError naming the culprit, while their own deadlines are a minute away; the
// survivors then shrink without waiting and the shrunk communicator reduces right (a serial sum).
// With TESSERA_REVOKE_NOTICES=0 the same abort is learned only at the deadline. Bad input.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "shrink_support.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace {

using tessera::test::Boot;
using tessera::test::expectShrunkWorks;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Thread ranks over the unique-id bootstrap, rank r's config deadline timeoutMs[r].
std::vector<tsrComm_t> makeComms(const std::vector<int>& timeoutMs) {
  const int n = static_cast<int>(timeoutMs.size());
  std::vector<tsrComm_t> comms(timeoutMs.size(), nullptr);
  tsrUniqueId id;
  EXPECT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tessera::test::runRanks(n, [&](int r) {
    tsrConfig_t config = TSR_CONFIG_INITIALIZER;
    config.timeoutMs = timeoutMs[static_cast<size_t>(r)];
    EXPECT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  return comms;
}

bool says(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// What each rank's stuck call returned, and when.
struct Outcome {
  tsrResult_t result = tsrSuccess;
  std::string error;
  double seconds = -1;  // after the culprit acted
};

constexpr int kRanks = 4;
constexpr int kLongMs = 60000;  // no survivor may get its error from its own deadline

// Ranks other than `culprit` warm up and then start an all-reduce the culprit never joins;
// `act` is what the culprit does instead (once the others are in the call, as far as a flag can
// tell). Returns each rank's outcome; the culprit's is what `act` returned.
std::vector<Outcome> stuckCall(const std::vector<tsrComm_t>& comms, int culprit,
                               const std::function<tsrResult_t(tsrComm_t)>& act) {
  std::vector<Outcome> out(comms.size());
  std::atomic<int> entering{0};
  std::atomic<int64_t> actedAtNs{0};
  tessera::test::runRanks(
      static_cast<int>(comms.size()),
      [&](int r) {
        tsrComm_t c = comms[static_cast<size_t>(r)];
        std::vector<float> warm(1 << 14, 1.0f);
        EXPECT_EQ(
            tsrAllReduce(warm.data(), warm.data(), warm.size(), tsrFloat32, tsrSum, c, nullptr),
            tsrSuccess)
            << tsrGetLastError(c);
        Outcome& o = out[static_cast<size_t>(r)];
        if (r == culprit) {
          tessera::test::waitUntil(
              [&] { return entering.load() == static_cast<int>(comms.size()) - 1; }, 10);
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into the call
          actedAtNs.store(Clock::now().time_since_epoch().count());
          o.result = act(c);
          return;
        }
        std::vector<float> buf(1 << 14, 1.0f);
        entering.fetch_add(1);
        o.result = tsrAllReduce(buf.data(), buf.data(), buf.size(), tsrFloat32, tsrSum, c, nullptr);
        const auto end = Clock::now().time_since_epoch().count();
        o.error = tsrGetLastError(c);
        tessera::test::waitUntil([&] { return actedAtNs.load() != 0; }, 60);
        o.seconds = static_cast<double>(end - actedAtNs.load()) * 1e-9;
      },
      120);
  return out;
}

// The survivors shrink (TSR_SHRINK_DEFAULT: the parent is revoked, its work stopped already)
// within `seconds`, and the shrunk communicator reduces right.
void survivorsShrink(const std::vector<tsrComm_t>& comms, const std::vector<int>& survivors,
                     const std::vector<int>& dead, double seconds) {
  std::vector<tsrComm_t> shrunk(comms.size(), nullptr);
  const auto t0 = Clock::now();
  tessera::test::runRanks(static_cast<int>(survivors.size()), [&](int i) {
    const int r = survivors[static_cast<size_t>(i)];
    EXPECT_EQ(
        tsrCommShrink(comms[static_cast<size_t>(r)], dead.data(), static_cast<int>(dead.size()),
                      &shrunk[static_cast<size_t>(r)], nullptr, TSR_SHRINK_DEFAULT),
        tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  EXPECT_LT(since(t0), seconds) << "the shrink after a revocation waited for something";
  expectShrunkWorks(shrunk, survivors);
  for (tsrComm_t c : shrunk) {
    if (c != nullptr) {
      EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
    }
  }
}

TEST(CommRevoke, EveryRanksCallFailsAtOnceNamingTheRevoker) {
  std::vector<tsrComm_t> comms = makeComms(std::vector<int>(kRanks, kLongMs));
  std::vector<Outcome> out =
      stuckCall(comms, 3, [](tsrComm_t c) { return tsrCommRevoke(c, TSR_REVOKE_DEFAULT); });
  EXPECT_EQ(out[3].result, tsrSuccess);
  for (int r = 0; r < 3; ++r) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.error);
    EXPECT_EQ(o.result, tsrRemoteError);
    EXPECT_TRUE(says(o.error, "revoked by rank 3")) << o.error;
    EXPECT_TRUE(says(o.error, "tsrCommRevoke")) << o.error;
    EXPECT_LT(o.seconds, 5.0) << "the deadline is 60 s: only the notice can end it this soon";
  }
  for (int r = 0; r < kRanks; ++r) {
    tsrComm_t c = comms[static_cast<size_t>(r)];
    int64_t x = 1;
    EXPECT_EQ(tsrAllReduce(&x, &x, 1, tsrInt64, tsrSum, c, nullptr), tsrRemoteError);
    EXPECT_TRUE(says(tsrGetLastError(c), "revoked")) << tsrGetLastError(c);
    EXPECT_EQ(tsrCommFinalize(c), tsrRemoteError) << "NCCL: finalize after revoke is invalid";
    tsrResult_t async = tsrInProgress;
    EXPECT_EQ(tsrCommGetAsyncError(c, &async), tsrSuccess);
    // The rank that revoked sees a quiescent communicator (NCCL's ncclCommRevoke); the others
    // were revoked by a peer.
    EXPECT_EQ(async, r == 3 ? tsrSuccess : tsrRemoteError) << "rank " << r;
    EXPECT_EQ(tsrCommRevoke(c, TSR_REVOKE_DEFAULT), tsrSuccess) << "a second revoke does nothing";
  }
  survivorsShrink(comms, {0, 1, 2}, {3}, 5.0);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

TEST(CommRevoke, AnAbortTellsTheOthers) {
  std::vector<tsrComm_t> comms = makeComms(std::vector<int>(kRanks, kLongMs));
  std::vector<Outcome> out = stuckCall(comms, 2, [](tsrComm_t c) { return tsrCommAbort(c); });
  for (int r : {0, 1, 3}) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.error);
    EXPECT_EQ(o.result, tsrRemoteError);
    EXPECT_TRUE(says(o.error, "rank 2 aborted the communicator")) << o.error;
    EXPECT_LT(o.seconds, 5.0);
  }
  survivorsShrink(comms, {0, 1, 3}, {2}, 5.0);
  for (int r : {0, 1, 3}) EXPECT_EQ(tsrCommDestroy(comms[static_cast<size_t>(r)]), tsrSuccess);
}

// Rank 0's deadline is 1.5 s, the others' a minute: rank 0 times out (its own tsrTimeout), and
// its revocation ends ranks 1 and 2's calls; rank 3, which sat out, finds it revoked.
TEST(CommRevoke, OneRanksDeadlineRevokesForEveryone) {
  std::vector<tsrComm_t> comms = makeComms({1500, kLongMs, kLongMs, kLongMs});
  std::vector<Outcome> out = stuckCall(comms, 3, [&](tsrComm_t c) {
    // Sits out until rank 0 has given up, then tries a call.
    tessera::test::waitUntil(
        [&] {
          tsrResult_t async = tsrSuccess;
          tsrCommGetAsyncError(c, &async);
          return async != tsrSuccess;
        },
        30);
    int64_t x = 1;
    return tsrAllReduce(&x, &x, 1, tsrInt64, tsrSum, c, nullptr);
  });
  EXPECT_EQ(out[0].result, tsrTimeout) << out[0].error;
  EXPECT_FALSE(says(out[0].error, "revoked")) << "rank 0's error is its own: " << out[0].error;
  for (int r : {1, 2}) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.error);
    EXPECT_EQ(o.result, tsrRemoteError);
    EXPECT_TRUE(says(o.error, "revoked by rank 0")) << o.error;
    // Within a moment of rank 0's deadline (1.5 s after the culprit sat out), not at their own.
    EXPECT_LT(o.seconds, 1.5 + 5.0);
  }
  EXPECT_EQ(out[3].result, tsrRemoteError);
  survivorsShrink(comms, {0, 1, 2}, {3}, 5.0);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

// Without notices an abort is learned at the deadline (here 2 s), as before revocation existed.
TEST(CommRevoke, WithoutNoticesTheOthersWaitForTheirDeadline) {
  setenv("TESSERA_REVOKE_NOTICES", "0", 1);
  std::vector<tsrComm_t> comms = makeComms(std::vector<int>(kRanks, 2000));
  unsetenv("TESSERA_REVOKE_NOTICES");
  std::vector<Outcome> out = stuckCall(comms, 2, [](tsrComm_t c) { return tsrCommAbort(c); });
  for (int r : {0, 1, 3}) {
    const Outcome& o = out[static_cast<size_t>(r)];
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + o.error);
    EXPECT_NE(o.result, tsrSuccess);
    EXPECT_FALSE(says(o.error, "aborted the communicator")) << o.error;
  }
  for (int r : {0, 1, 3}) EXPECT_EQ(tsrCommDestroy(comms[static_cast<size_t>(r)]), tsrSuccess);
}

TEST(CommRevokeBadInput, RefusedWithASentence) {
  EXPECT_EQ(tsrCommRevoke(nullptr, TSR_REVOKE_DEFAULT), tsrInvalidArgument);
  std::vector<tsrComm_t> comms(2, nullptr);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 2, nullptr), tsrSuccess);
  EXPECT_EQ(tsrCommRevoke(comms[0], 0x2), tsrInvalidArgument);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "revokeFlags is 0x2")) << tsrGetLastError(nullptr);
  // Refused flags revoke nothing: both ranks still reduce right.
  tessera::test::expectPairStillReduces(comms);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

}  // namespace
