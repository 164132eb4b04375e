// The communicator through the C API: creation (in-process and unique id), queries, split,
// non-blocking init, finalize/destroy/abort, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Communicators of `n` thread ranks made with a unique id (TCP bootstrap over loopback).
std::vector<tsrComm_t> initWithUniqueId(int n, tsrConfig_t* config = nullptr) {
  tsrUniqueId id;
  EXPECT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  std::vector<tsrComm_t> comms(static_cast<size_t>(n), nullptr);
  tessera::test::runRanks(n, [&](int r) {
    EXPECT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, config), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  return comms;
}

void destroyAll(std::vector<tsrComm_t>& comms) {
  for (tsrComm_t c : comms) {
    if (c != nullptr) {
      EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
    }
  }
  comms.clear();
}

class CommSizes : public ::testing::TestWithParam<int> {};

TEST_P(CommSizes, InitAllGivesEveryRankItsNumber) {
  const int n = GetParam();
  std::vector<tsrComm_t> comms(static_cast<size_t>(n));
  ASSERT_EQ(tsrCommInitAll(comms.data(), n, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    int rank = -1, count = -1, dev = -3;
    ASSERT_EQ(tsrCommUserRank(comms[static_cast<size_t>(r)], &rank), tsrSuccess);
    ASSERT_EQ(tsrCommCount(comms[static_cast<size_t>(r)], &count), tsrSuccess);
    ASSERT_EQ(tsrCommCuDevice(comms[static_cast<size_t>(r)], &dev), tsrSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
    if (!tessera::test::gpuUnavailableReason().empty()) {
      EXPECT_EQ(dev, TSR_DEVICE_HOST);
    }
  }
  destroyAll(comms);
}

TEST_P(CommSizes, InitRankWithUniqueIdOnThreads) {
  const int n = GetParam();
  auto comms = initWithUniqueId(n);
  for (int r = 0; r < n; ++r) {
    int rank = -1, count = -1;
    ASSERT_EQ(tsrCommUserRank(comms[static_cast<size_t>(r)], &rank), tsrSuccess);
    ASSERT_EQ(tsrCommCount(comms[static_cast<size_t>(r)], &count), tsrSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
  }
  tessera::test::runRanks(n, [&](int r) {
    EXPECT_EQ(tsrCommFinalize(comms[static_cast<size_t>(r)]), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  destroyAll(comms);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommSizes, ::testing::Values(1, 2, 3, 4, 8));

// Expected outcome of a split, computed from the definition: members of a color ordered by
// (key, parent rank).
struct Expect {
  int rank = -1;
  int count = 0;
};
std::vector<Expect> expectedSplit(const std::vector<int>& color, const std::vector<int>& key) {
  int n = static_cast<int>(color.size());
  std::vector<Expect> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (color[static_cast<size_t>(r)] == TSR_SPLIT_NOCOLOR) continue;
    std::vector<int> members;
    for (int p = 0; p < n; ++p)
      if (color[static_cast<size_t>(p)] == color[static_cast<size_t>(r)]) members.push_back(p);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)];
    });
    out[static_cast<size_t>(r)].count = static_cast<int>(members.size());
    out[static_cast<size_t>(r)].rank =
        static_cast<int>(std::find(members.begin(), members.end(), r) - members.begin());
  }
  return out;
}

void checkSplit(std::vector<tsrComm_t>& comms, const std::vector<int>& color,
                const std::vector<int>& key) {
  const int n = static_cast<int>(comms.size());
  std::vector<tsrComm_t> children(static_cast<size_t>(n), nullptr);
  tessera::test::runRanks(n, [&](int r) {
    EXPECT_EQ(tsrCommSplit(comms[static_cast<size_t>(r)], color[static_cast<size_t>(r)],
                           key[static_cast<size_t>(r)], &children[static_cast<size_t>(r)], nullptr),
              tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  auto expect = expectedSplit(color, key);
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("parent rank " + std::to_string(r));
    tsrComm_t c = children[static_cast<size_t>(r)];
    if (color[static_cast<size_t>(r)] == TSR_SPLIT_NOCOLOR) {
      EXPECT_EQ(c, nullptr);
      continue;
    }
    ASSERT_NE(c, nullptr);
    int rank = -1, count = -1;
    ASSERT_EQ(tsrCommUserRank(c, &rank), tsrSuccess);
    ASSERT_EQ(tsrCommCount(c, &count), tsrSuccess);
    EXPECT_EQ(rank, expect[static_cast<size_t>(r)].rank);
    EXPECT_EQ(count, expect[static_cast<size_t>(r)].count);
  }
  // The children's collectives are right: an all-reduce of a prime count of int64 values, checked
  // against the serial sum over the color's members.
  const size_t elems = 1009;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n), std::vector<int64_t>(elems, -1));
  auto value = [](int parent, size_t i) { return int64_t{parent + 1} * 1000003 + int64_t(i); };
  tessera::test::runRanks(n, [&](int r) {
    tsrComm_t c = children[static_cast<size_t>(r)];
    if (c == nullptr) return;
    std::vector<int64_t> in(elems);
    for (size_t i = 0; i < elems; ++i) in[i] = value(r, i);
    EXPECT_EQ(tsrAllReduce(in.data(), out[static_cast<size_t>(r)].data(), elems, tsrInt64, tsrSum,
                           c, nullptr),
              tsrSuccess)
        << tsrGetLastError(c);
  });
  for (int r = 0; r < n; ++r) {
    if (children[static_cast<size_t>(r)] == nullptr) continue;
    std::vector<int64_t> want(elems, 0);
    for (int p = 0; p < n; ++p)
      if (color[static_cast<size_t>(p)] == color[static_cast<size_t>(r)])
        for (size_t i = 0; i < elems; ++i) want[i] += value(p, i);
    EXPECT_EQ(out[static_cast<size_t>(r)], want) << "parent rank " << r;
  }
  // The children work on their own: split each again (everyone one color, reversed keys).
  std::vector<tsrComm_t> grand(static_cast<size_t>(n), nullptr);
  tessera::test::runRanks(n, [&](int r) {
    tsrComm_t c = children[static_cast<size_t>(r)];
    if (c == nullptr) return;
    EXPECT_EQ(tsrCommSplit(c, 0, -r, &grand[static_cast<size_t>(r)], nullptr), tsrSuccess);
  });
  for (int r = 0; r < n; ++r) {
    tsrComm_t g = grand[static_cast<size_t>(r)];
    if (children[static_cast<size_t>(r)] == nullptr) continue;
    int rank = -1, count = -1;
    ASSERT_EQ(tsrCommUserRank(g, &rank), tsrSuccess);
    ASSERT_EQ(tsrCommCount(g, &count), tsrSuccess);
    EXPECT_EQ(count, expect[static_cast<size_t>(r)].count);
    // Reversed parent order: the member with the highest parent rank comes first.
    int higher = 0;
    for (int p = r + 1; p < n; ++p)
      if (color[static_cast<size_t>(p)] == color[static_cast<size_t>(r)]) ++higher;
    EXPECT_EQ(rank, higher);
  }
  destroyAll(grand);
  destroyAll(children);
}

TEST(CommSplit, ColorsAndKeysInProcess) {
  const int n = 8;
  std::vector<tsrComm_t> comms(n);
  ASSERT_EQ(tsrCommInitAll(comms.data(), n, nullptr), tsrSuccess);
  // Three colors, one rank without; keys reverse the order within a color, with ties.
  std::vector<int> color = {0, 1, 2, 0, 1, TSR_SPLIT_NOCOLOR, 0, 1};
  std::vector<int> key = {5, 1, 0, 5, -3, 0, 2, 7};
  checkSplit(comms, color, key);
  destroyAll(comms);
}

TEST(CommSplit, ColorsAndKeysOverUniqueId) {
  auto comms = initWithUniqueId(6);
  std::vector<int> color = {3, 3, 9, 9, 3, 9};
  std::vector<int> key = {2, 1, 0, 0, 0, -1};
  checkSplit(comms, color, key);
  destroyAll(comms);
}

// 3 and 4 ranks, several ranks per color, over both thread bootstraps (in-process and unique id).
TEST(CommSplit, SeveralRanksPerColorAtThreeAndFourRanks) {
  for (int n : {3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<int> color(static_cast<size_t>(n)), key(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      color[static_cast<size_t>(r)] = r % 2;
      key[static_cast<size_t>(r)] = n - r;
    }
    std::vector<tsrComm_t> comms(static_cast<size_t>(n));
    ASSERT_EQ(tsrCommInitAll(comms.data(), n, nullptr), tsrSuccess) << tsrGetLastError(nullptr);
    checkSplit(comms, color, key);
    destroyAll(comms);
    comms = initWithUniqueId(n);
    checkSplit(comms, color, key);
    destroyAll(comms);
  }
}

TEST(CommSplit, NegativeColorOtherThanNoColorIsRejected) {
  std::vector<tsrComm_t> comms(1);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 1, nullptr), tsrSuccess);
  tsrComm_t child = nullptr;
  EXPECT_EQ(tsrCommSplit(comms[0], -5, 0, &child, nullptr), tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("-5"), std::string::npos);
  EXPECT_EQ(child, nullptr);
  destroyAll(comms);
}

TEST(CommNonBlocking, InitReturnsInProgressThenCompletes) {
  const int n = 3;
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.blocking = 0;
  std::vector<tsrComm_t> comms(n, nullptr);
  tessera::test::runRanks(n, [&](int r) {
    tsrResult_t res = tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &config);
    EXPECT_TRUE(res == tsrInProgress || res == tsrSuccess) << tsrGetErrorString(res);
    ASSERT_NE(comms[static_cast<size_t>(r)], nullptr);
    tsrResult_t state = tsrInProgress;
    auto t0 = Clock::now();
    while (state == tsrInProgress && secondsSince(t0) < 60) {
      ASSERT_EQ(tsrCommGetAsyncError(comms[static_cast<size_t>(r)], &state), tsrSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(state, tsrSuccess);
    int rank = -1;
    EXPECT_EQ(tsrCommUserRank(comms[static_cast<size_t>(r)], &rank), tsrSuccess);
    EXPECT_EQ(rank, r);
  });
  destroyAll(comms);
}

TEST(CommFailure, RankThatNeverJoinsTimesOutWithinTheDeadline) {
  tessera::test::ScopedEnv timeout("TESSERA_BOOTSTRAP_TIMEOUT", "2");
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  std::vector<tsrComm_t> comms(3, nullptr);
  std::vector<std::string> why(3);
  auto t0 = Clock::now();
  tessera::test::runRanks(2, [&](int r) {  // rank 2 never comes
    EXPECT_EQ(tsrCommInitRank(&comms[static_cast<size_t>(r)], 3, id, r), tsrTimeout);
    why[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
    EXPECT_EQ(comms[static_cast<size_t>(r)], nullptr);
  });
  EXPECT_LT(secondsSince(t0), 2 + 15.0);
  for (int r = 0; r < 2; ++r) EXPECT_NE(why[static_cast<size_t>(r)].find("2"), std::string::npos);
}

TEST(CommFailure, AbortStopsAPendingNonBlockingInit) {
  tessera::test::ScopedEnv timeout("TESSERA_BOOTSTRAP_TIMEOUT", "60");
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrConfig_t config = TSR_CONFIG_INITIALIZER;
  config.blocking = 0;
  tsrComm_t comm = nullptr;
  ASSERT_EQ(tsrCommInitRankConfig(&comm, 2, id, 0, &config), tsrInProgress);  // rank 1 never comes
  // Gives the background init time to get stuck waiting for rank 1: it must still be pending.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  tsrResult_t state = tsrSuccess;
  ASSERT_EQ(tsrCommGetAsyncError(comm, &state), tsrSuccess);
  EXPECT_EQ(state, tsrInProgress);
  int count = 0;
  EXPECT_EQ(tsrCommCount(comm, &count), tsrInvalidUsage);
  auto t0 = Clock::now();
  EXPECT_EQ(tsrCommAbort(comm), tsrSuccess);
  EXPECT_LT(secondsSince(t0), 15.0);
}

TEST(CommFailure, UseOfADestroyedCommunicatorIsInvalidUsage) {
  std::vector<tsrComm_t> comms(2);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 2, nullptr), tsrSuccess);
  tsrComm_t dead = comms[0];
  ASSERT_EQ(tsrCommDestroy(dead), tsrSuccess);
  auto t0 = Clock::now();
  int v = 0;
  EXPECT_EQ(tsrCommCount(dead, &v), tsrInvalidUsage);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("destroyed"), std::string::npos);
  EXPECT_EQ(tsrCommUserRank(dead, &v), tsrInvalidUsage);
  EXPECT_EQ(tsrCommCuDevice(dead, &v), tsrInvalidUsage);
  tsrComm_t child = nullptr;
  EXPECT_EQ(tsrCommSplit(dead, 0, 0, &child, nullptr), tsrInvalidUsage);
  EXPECT_EQ(tsrCommFinalize(dead), tsrInvalidUsage);
  tsrResult_t async;
  EXPECT_EQ(tsrCommGetAsyncError(dead, &async), tsrInvalidUsage);
  EXPECT_EQ(tsrCommDestroy(dead), tsrInvalidUsage);  // twice
  EXPECT_EQ(tsrCommAbort(dead), tsrInvalidUsage);
  EXPECT_LT(secondsSince(t0), 5.0);
  // A new communicator never reuses the old handle.
  std::vector<tsrComm_t> again(1);
  ASSERT_EQ(tsrCommInitAll(again.data(), 1, nullptr), tsrSuccess);
  EXPECT_NE(again[0], dead);
  EXPECT_EQ(tsrCommCount(dead, &v), tsrInvalidUsage);
  EXPECT_EQ(tsrCommDestroy(comms[1]), tsrSuccess);
  destroyAll(again);
}

TEST(CommFailure, FinalizedCommunicatorOnlyDestroys) {
  std::vector<tsrComm_t> comms(2);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 2, nullptr), tsrSuccess);
  tessera::test::runRanks(
      2, [&](int r) { EXPECT_EQ(tsrCommFinalize(comms[static_cast<size_t>(r)]), tsrSuccess); });
  int v = 0;
  EXPECT_EQ(tsrCommCount(comms[0], &v), tsrInvalidUsage);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("finalized"), std::string::npos);
  destroyAll(comms);
}

TEST(CommArguments, BadInputGetsASentence) {
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrComm_t comm = nullptr;
  struct Case {
    tsrResult_t expected;
    tsrResult_t got;
    const char* mention;
  };
  std::vector<Case> cases;
  cases.push_back({tsrInvalidArgument, tsrCommInitRank(nullptr, 2, id, 0), "NULL"});
  cases.push_back({tsrInvalidArgument, tsrCommInitRank(&comm, 0, id, 0), "nranks = 0"});
  // A huge count is refused before anything is allocated for it (here or at the root).
  cases.push_back(
      {tsrInvalidArgument, tsrCommInitRank(&comm, 2147483646, id, 0), "nranks = 2147483646"});
  cases.push_back({tsrInvalidArgument, tsrCommInitAll(&comm, 1 << 20, nullptr), "ndev"});
  cases.push_back({tsrInvalidArgument, tsrCommInitRank(&comm, 4, id, 4), "rank 4"});
  cases.push_back({tsrInvalidArgument, tsrCommInitRank(&comm, 4, id, -1), "rank -1"});
  cases.push_back({tsrInvalidArgument, tsrCommInitAll(&comm, 0, nullptr), "ndev = 0"});
  cases.push_back({tsrInvalidArgument, tsrCommInitAll(nullptr, 2, nullptr), "NULL"});
  int badDev[] = {99};
  cases.push_back({tsrInvalidArgument, tsrCommInitAll(&comm, 1, badDev), "99"});
  tsrConfig_t noMagic = TSR_CONFIG_INITIALIZER;
  noMagic.magic = 0;
  cases.push_back({tsrInvalidArgument, tsrCommInitRankConfig(&comm, 1, id, 0, &noMagic), "magic"});
  tsrConfig_t ctas = TSR_CONFIG_INITIALIZER;
  ctas.minCTAs = 8;
  ctas.maxCTAs = 2;
  cases.push_back({tsrInvalidArgument, tsrCommInitRankConfig(&comm, 1, id, 0, &ctas), "minCTAs"});
  tsrConfig_t net = TSR_CONFIG_INITIALIZER;
  net.netName = "Carrier pigeon";
  cases.push_back({tsrInvalidArgument, tsrCommInitRankConfig(&comm, 1, id, 0, &net), "pigeon"});
  tsrConfig_t socket = TSR_CONFIG_INITIALIZER;
  socket.netName = "Socket";  // no socket network: refused, never a silent run over UCX
  cases.push_back({tsrInvalidArgument, tsrCommInitRankConfig(&comm, 1, id, 0, &socket), "Socket"});
  tsrConfig_t dev = TSR_CONFIG_INITIALIZER;
  dev.device = 77;
  cases.push_back({tsrInvalidArgument, tsrCommInitRankConfig(&comm, 1, id, 0, &dev), "77"});
  cases.push_back({tsrInvalidArgument, tsrGetUniqueId(nullptr), "NULL"});
  cases.push_back({tsrInvalidArgument, tsrGetVersion(nullptr), "NULL"});
  cases.push_back({tsrInvalidArgument, tsrCommCount(nullptr, nullptr), "NULL"});
  cases.push_back({tsrInvalidUsage,
                   tsrCommCount(reinterpret_cast<tsrComm_t>(uintptr_t{0x1000}), nullptr),
                   "not a communicator"});
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    EXPECT_EQ(cases[i].got, cases[i].expected);
  }
  EXPECT_EQ(comm, nullptr);
  // The sentence of the last case is the last error of this thread.
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find(cases.back().mention), std::string::npos);
  // Each sentence names what was wrong: re-run a few and look.
  tsrCommInitRank(&comm, 4, id, 4);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("rank 4 is outside [0, 4)"),
            std::string::npos);
  tsrCommInitRankConfig(&comm, 1, id, 0, &net);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("Carrier pigeon"), std::string::npos);
}

TEST(CommArguments, GarbageUniqueIdFailsAtOnce) {
  tsrUniqueId id;
  for (size_t i = 0; i < sizeof(id.internal); ++i) id.internal[i] = static_cast<char>(i * 37 + 11);
  tsrComm_t comm = nullptr;
  auto t0 = Clock::now();
  EXPECT_EQ(tsrCommInitRank(&comm, 2, id, 0), tsrInvalidArgument);
  EXPECT_LT(secondsSince(t0), 2.0);
  EXPECT_EQ(comm, nullptr);
}

TEST(CommArguments, InvalidEnvironmentIsAnErrorNotADefault) {
  tessera::test::ScopedEnv bad("TESSERA_BOOTSTRAP_TIMEOUT", "ten");
  std::vector<tsrComm_t> comms(1, nullptr);
  EXPECT_EQ(tsrCommInitAll(comms.data(), 1, nullptr), tsrInvalidArgument);
  std::string why = tsrGetLastError(nullptr);
  EXPECT_NE(why.find("TESSERA_BOOTSTRAP_TIMEOUT"), std::string::npos) << why;
  EXPECT_NE(why.find("ten"), std::string::npos) << why;
}

TEST(CommApi, VersionIsTheHeadersCode) {
  int v = 0;
  ASSERT_EQ(tsrGetVersion(&v), tsrSuccess);
  EXPECT_EQ(v, TESSERA_MAJOR * 10000 + TESSERA_MINOR * 100 + TESSERA_PATCH);
}

TEST(CommApi, PreMulSumOpsAreCreatedPerCommunicator) {
  std::vector<tsrComm_t> comms(2);
  ASSERT_EQ(tsrCommInitAll(comms.data(), 2, nullptr), tsrSuccess);
  float scalar = 0.5f;
  tsrRedOp_t a, b;
  ASSERT_EQ(tsrRedOpCreatePreMulSum(&a, &scalar, tsrFloat32, tsrScalarHostImmediate, comms[0]),
            tsrSuccess);
  ASSERT_EQ(tsrRedOpCreatePreMulSum(&b, &scalar, tsrFloat32, tsrScalarHostImmediate, comms[0]),
            tsrSuccess);
  EXPECT_GE(static_cast<int>(a), static_cast<int>(tsrNumOps));
  EXPECT_NE(a, b);
  EXPECT_EQ(tsrRedOpDestroy(a, comms[1]), tsrInvalidArgument);  // not created there
  EXPECT_EQ(tsrRedOpDestroy(a, comms[0]), tsrSuccess);
  EXPECT_EQ(tsrRedOpDestroy(a, comms[0]), tsrInvalidArgument);  // twice
  EXPECT_EQ(tsrRedOpDestroy(tsrSum, comms[0]), tsrInvalidArgument);
  EXPECT_EQ(tsrRedOpCreatePreMulSum(&a, nullptr, tsrFloat32, tsrScalarHostImmediate, comms[0]),
            tsrInvalidArgument);
  EXPECT_EQ(tsrRedOpCreatePreMulSum(&a, &scalar, static_cast<tsrDataType_t>(42),
                                    tsrScalarHostImmediate, comms[0]),
            tsrInvalidArgument);
  EXPECT_EQ(tsrRedOpCreatePreMulSum(&a, &scalar, tsrFloat32, tsrScalarDevice, comms[0]),
            tsrInvalidUsage);
  EXPECT_EQ(tsrRedOpDestroy(b, comms[0]), tsrSuccess);
  destroyAll(comms);
}

TEST(CommCpp, CommunicatorObjectsOwnTheirRank) {
  std::vector<std::unique_ptr<tessera::Communicator>> comms;
  ASSERT_EQ(tessera::Communicator::initAll(4, nullptr, &comms), tsrSuccess);
  ASSERT_EQ(comms.size(), 4u);
  std::vector<std::unique_ptr<tessera::Communicator>> halves(4);
  tessera::test::runRanks(4, [&](int r) {
    EXPECT_EQ(
        comms[static_cast<size_t>(r)]->split(r / 2, 0, nullptr, &halves[static_cast<size_t>(r)]),
        tsrSuccess);
  });
  for (int r = 0; r < 4; ++r) {
    int rank = -1, count = -1;
    ASSERT_EQ(halves[static_cast<size_t>(r)]->userRank(&rank), tsrSuccess);
    ASSERT_EQ(halves[static_cast<size_t>(r)]->count(&count), tsrSuccess);
    EXPECT_EQ(rank, r % 2);
    EXPECT_EQ(count, 2);
  }
}

}  // namespace
