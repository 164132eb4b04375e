// tsrCommShrink through the C API on thread ranks: survivors of a healthy communicator, survivors
// of one whose peer aborted mid-call (TSR_SHRINK_ABORT), both thread bootstraps (in-process and
// unique id), and bad input. The shrunk communicator's all-reduce is checked against a serial sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink_support.hpp"
#include "support/harness.hpp"
#include "tessera/tessera.h"

namespace {

using tessera::test::Boot;
using tessera::test::expectShrunkWorks;
using tessera::test::makeComms;

class CommShrink : public ::testing::TestWithParam<Boot> {};

// No failure: rank 1 sits out (it does not call); the parent stays usable by all four.
TEST_P(CommShrink, HealthyParentExcludingOneRank) {
  const int n = 4;
  std::vector<tsrComm_t> comms = makeComms(GetParam(), n);
  const std::vector<int> survivors = {0, 2, 3};
  const int excluded[] = {1};
  std::vector<tsrComm_t> shrunk(n, nullptr);
  tessera::test::runRanks(3, [&](int i) {
    const int r = survivors[static_cast<size_t>(i)];
    EXPECT_EQ(tsrCommShrink(comms[static_cast<size_t>(r)], excluded, 1,
                            &shrunk[static_cast<size_t>(r)], nullptr, TSR_SHRINK_DEFAULT),
              tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  for (int r : survivors) ASSERT_NE(shrunk[static_cast<size_t>(r)], nullptr);
  expectShrunkWorks(shrunk, survivors);
  // The parent, all four ranks, still reduces right.
  std::vector<int64_t> sums(n, -1);
  tessera::test::runRanks(n, [&](int r) {
    int64_t mine = r + 1;
    EXPECT_EQ(tsrAllReduce(&mine, &sums[static_cast<size_t>(r)], 1, tsrInt64, tsrSum,
                           comms[static_cast<size_t>(r)], nullptr),
              tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(sums[static_cast<size_t>(r)], 10);
  for (tsrComm_t c : shrunk) {
    if (c != nullptr) {
      EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
    }
  }
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

// A failure: rank 3 aborts instead of joining an all-reduce; the others' calls fail (within the
// 3 s deadline of their config), they shrink with TSR_SHRINK_ABORT, destroy the broken
// communicator and carry on with the shrunk one.
TEST_P(CommShrink, SurvivorsOfAnAbortedPeerShrinkAndCarryOn) {
  const int n = 4;
  std::vector<tsrComm_t> comms = makeComms(GetParam(), n, 3000);
  if (GetParam() == Boot::kInproc) {
    // tsrCommInitAll has no config: the short deadline comes from splitting with one.
    tsrConfig_t config = TSR_CONFIG_INITIALIZER;
    config.timeoutMs = 3000;
    std::vector<tsrComm_t> children(n, nullptr);
    tessera::test::runRanks(n, [&](int r) {
      EXPECT_EQ(tsrCommSplit(comms[static_cast<size_t>(r)], 0, r, &children[static_cast<size_t>(r)],
                             &config),
                tsrSuccess)
          << tsrGetLastError(nullptr);
    });
    for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
    comms = children;
  }
  const std::vector<int> survivors = {0, 1, 2};
  const int dead[] = {3};
  std::vector<tsrComm_t> shrunk(n, nullptr);
  std::vector<std::string> errors(n);
  tessera::test::runRanks(
      n,
      [&](int r) {
        tsrComm_t c = comms[static_cast<size_t>(r)];
        // The same call works first, so the failure hits the call itself (its transports'
        // waits, within the config's 3 s), not the setup of its plan through the bootstrap.
        std::vector<float> warm(1 << 16, 1.0f);
        EXPECT_EQ(
            tsrAllReduce(warm.data(), warm.data(), warm.size(), tsrFloat32, tsrSum, c, nullptr),
            tsrSuccess);
        if (r == 3) {
          EXPECT_EQ(tsrCommAbort(c), tsrSuccess);
          return;
        }
        std::vector<float> buf(1 << 16, 1.0f);
        tsrResult_t res =
            tsrAllReduce(buf.data(), buf.data(), buf.size(), tsrFloat32, tsrSum, c, nullptr);
        EXPECT_NE(res, tsrSuccess)
            << "rank " << r << ": a peer that aborted cannot have taken part";
        errors[static_cast<size_t>(r)] = tsrGetLastError(c);
        EXPECT_EQ(
            tsrCommShrink(c, dead, 1, &shrunk[static_cast<size_t>(r)], nullptr, TSR_SHRINK_ABORT),
            tsrSuccess)
            << tsrGetLastError(nullptr);
        // The broken communicator refuses further work, and is destroyed.
        int64_t x = 0;
        EXPECT_NE(tsrAllReduce(&x, &x, 1, tsrInt64, tsrSum, c, nullptr), tsrSuccess);
        EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
      },
      60);
  for (int r : survivors) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)]);
    EXPECT_FALSE(errors[static_cast<size_t>(r)].empty());
    ASSERT_NE(shrunk[static_cast<size_t>(r)], nullptr);
  }
  expectShrunkWorks(shrunk, survivors);
  for (tsrComm_t c : shrunk) {
    if (c != nullptr) {
      EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bootstraps, CommShrink, ::testing::Values(Boot::kInproc, Boot::kUniqueId),
                         [](const auto& p) {
                           return p.param == Boot::kInproc ? "inproc" : "unique_id";
                         });

TEST(CommShrinkBadInput, RefusedWithASentenceAndNothingMade) {
  std::vector<tsrComm_t> comms(2, nullptr);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 2, nullptr), tsrSuccess);
  tsrComm_t out = reinterpret_cast<tsrComm_t>(0x1);
  struct Case {
    std::vector<int> list;
    int count;
    int flags;
    const char* says;
  } cases[] = {
      {{0}, 1, TSR_SHRINK_DEFAULT, "this rank (0)"},
      {{5}, 1, TSR_SHRINK_DEFAULT, "outside [0, 2)"},
      {{-1}, 1, TSR_SHRINK_DEFAULT, "outside [0, 2)"},
      {{1, 1}, 2, TSR_SHRINK_DEFAULT, "excluded twice"},
      {{1}, -1, TSR_SHRINK_DEFAULT, "excludeRanksCount is -1"},
      {{1}, 1, 0x4, "unknown flags 0x4"},
  };
  for (const Case& c : cases) {
    out = reinterpret_cast<tsrComm_t>(0x1);
    EXPECT_EQ(tsrCommShrink(comms[0], c.list.data(), c.count, &out, nullptr, c.flags),
              tsrInvalidArgument)
        << c.says;
    EXPECT_EQ(out, nullptr);
    std::string why = tsrGetLastError(nullptr);
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
  }
  EXPECT_EQ(tsrCommShrink(comms[0], nullptr, 1, &out, nullptr, 0), tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("excludeRanksList is NULL"),
            std::string::npos);
  const int one[] = {1};
  EXPECT_EQ(tsrCommShrink(comms[0], one, 1, nullptr, nullptr, 0), tsrInvalidArgument);
  EXPECT_EQ(tsrCommShrink(nullptr, one, 1, &out, nullptr, 0), tsrInvalidArgument);
  // The communicator is untouched: both ranks still reduce right.
  tessera::test::expectPairStillReduces(comms);
  // Excluding nobody: a copy of the communicator, ranks unchanged.
  std::vector<tsrComm_t> copy(2, nullptr);
  tessera::test::runRanks(2, [&](int r) {
    EXPECT_EQ(tsrCommShrink(comms[static_cast<size_t>(r)], nullptr, 0,
                            &copy[static_cast<size_t>(r)], nullptr, 0),
              tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  expectShrunkWorks(copy, {0, 1});
  for (tsrComm_t c : copy) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

}  // namespace
