// The executor's waits when they park (src/core/park.hpp, runOperations): with no spin budget,
// every wait that finds nothing parks on the semaphores its operation waits for, so a lost
// wake-up would show as a call that takes its whole deadline. Collectives of several families
// and sizes, a send/recv group and calls in a group run on 4 thread ranks (more ranks than this
// machine's cores: the case parking is for) and on 3 processes, each checked against the serial
// reference, and the waits did park.
#include <gtest/gtest.h>

#include "core/park.hpp"
#include "support/harness.hpp"
#include "test_exec_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::exectest {
namespace {

using test::RankMode;

const FamilyColl kCases[] = {
    {"ring", Collective::kAllReduce},     {"oneshot", Collective::kAllReduce},
    {"tree", Collective::kAllReduce},     {"rhd", Collective::kAllReduce},
    {"ring", Collective::kReduceScatter}, {"ring", Collective::kAllGather},
    {"ring", Collective::kBroadcast},     {"pairwise", Collective::kAllToAll},
};

std::string runAll(TransportContext& ctx, int rounds) {
  const int n = ctx.nranks(), me = ctx.rank();
  std::unique_ptr<CollectiveEngine> e;
  EngineSetup setup;
  setup.timeoutSeconds = 30;
  TT_CHECK_OK(makeEngine(ctx, setup, &e));
  threadWaitStats() = WaitStats{};
  for (int r = 0; r < rounds; ++r) {
    for (const FamilyColl& fc : kCases) {
      for (size_t count : {size_t{1}, size_t{700}, size_t{30000}}) {
        CollCase c{fc.coll, fc.family, tsrFloat32, RedKind::kSum, count, r % n, r % 2 == 1, r};
        if (c.inPlace && fc.coll == Collective::kAllToAll) c.inPlace = false;
        std::string err = runAndCheck(*e, me, n, c);
        if (!err.empty()) return strprintf("round %d: %s", r, err.c_str());
      }
    }
    std::vector<int32_t> out(20000), in(20000);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(i) * 5 + me + r;
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    TT_CHECK_OK(runP2P(*e, {P2PCall{false, prev, nullptr, in.data(), in.size(), tsrInt32},
                            P2PCall{true, next, out.data(), nullptr, out.size(), tsrInt32}}));
    for (size_t i = 0; i < in.size(); ++i)
      TT_CHECK(in[i] == static_cast<int32_t>(i) * 5 + prev + r, "round %d: p2p element %zu: %d", r,
               i, in[i]);
  }
  // Every rank's parks and those that ended at their timeout (20 ms) instead of by the signal
  // they waited for: a lost wake-up costs a timeout, not a hang, so the timeouts are the test.
  const WaitStats& st = threadWaitStats();
  std::vector<uint64_t> all(2 * static_cast<size_t>(n));
  all[2 * static_cast<size_t>(me)] = st.parks;
  all[2 * static_cast<size_t>(me) + 1] = st.timeouts;
  TT_CHECK_OK(ctx.bootstrap().allGather(all.data(), 2 * sizeof(uint64_t)));
  uint64_t parks = 0, timeouts = 0;
  for (int p = 0; p < n; ++p) {
    parks += all[2 * static_cast<size_t>(p)];
    timeouts += all[2 * static_cast<size_t>(p) + 1];
  }
  TT_CHECK(parks > 0, "no wait parked on any of %d ranks", n);
  // A peer descheduled for 20 ms on a busy machine times a park out now and then; lost wake-ups
  // time out (nearly) every park.
  TT_CHECK(timeouts <= parks / 10 + 2, "%llu of %llu parks ended at their timeout",
           static_cast<unsigned long long>(timeouts), static_cast<unsigned long long>(parks));
  return "";
}

class ExecParking : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = waitSettings();
    WaitSettings s;
    s.spinNs = 0;
    setWaitSettingsForTest(s);
  }
  void TearDown() override { setWaitSettingsForTest(saved_); }
  WaitSettings saved_;
};

TEST_F(ExecParking, ThreadRanksOnFewerCoresThanRanks) {
  test::RankOptions o;
  o.runSeconds = 120;
  test::expectAllRanksOk(test::runTransportRanks(
      RankMode::kThreads, 4, [&](TransportContext& ctx) { return runAll(ctx, 6); }, o));
}

TEST_F(ExecParking, ProcessRanksOverShm) {
  test::RankOptions o;
  o.runSeconds = 120;
  test::expectAllRanksOk(test::runTransportRanks(
      RankMode::kProcesses, 3, [&](TransportContext& ctx) { return runAll(ctx, 4); }, o));
}

}  // namespace
}  // namespace tessera::exectest
