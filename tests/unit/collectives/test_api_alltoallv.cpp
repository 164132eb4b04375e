// tsrAlltoAllv over thread ranks (uneven blocks, zeros, gaps between blocks, inside a user's
// group beside a collective; every argument error before anything moves; sizes that differ
// between a sender and its receiver), and tsrConfig_t.timeoutMs (a deadline per communicator).
// References: the blocks each rank computes from the senders' seeded values, byte for byte.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "support/harness.hpp"
#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

using Clock = std::chrono::steady_clock;

// Elements rank s sends rank d (0 included, asymmetric).
size_t blockCount(int s, int d, size_t scale) {
  return ((static_cast<size_t>(s) * 7 + static_cast<size_t>(d) * 3) % 5) * scale;
}

// The value element i of the block s -> d holds.
int64_t valueOf(int s, int d, size_t i) {
  return static_cast<int64_t>(s) * 1000003 + static_cast<int64_t>(d) * 10007 +
         static_cast<int64_t>(i);
}

struct Layout {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  size_t sendTotal = 0, recvTotal = 0;
};

// Blocks laid out in reverse peer order with a gap of 3 elements between them (displacements are
// not prefix sums).
Layout layoutFor(int r, int n, size_t scale) {
  Layout l;
  l.sendCounts.resize(static_cast<size_t>(n));
  l.sendDispls.resize(static_cast<size_t>(n));
  l.recvCounts.resize(static_cast<size_t>(n));
  l.recvDispls.resize(static_cast<size_t>(n));
  for (int i = n - 1; i >= 0; --i) {
    const auto p = static_cast<size_t>(i);
    l.sendCounts[p] = blockCount(r, i, scale);
    l.sendDispls[p] = l.sendTotal;
    l.sendTotal += l.sendCounts[p] + 3;
    l.recvCounts[p] = blockCount(i, r, scale);
    l.recvDispls[p] = l.recvTotal;
    l.recvTotal += l.recvCounts[p] + 3;
  }
  return l;
}

template <class T>
void checkUneven(int n, size_t scale, tsrDataType_t dtype, bool inUserGroup) {
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::string> wrong(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) {
    Layout l = layoutFor(r, n, scale);
    std::vector<T> send(l.sendTotal, T(0)), recv(l.recvTotal, T(-1));
    for (int d = 0; d < n; ++d)
      for (size_t i = 0; i < l.sendCounts[static_cast<size_t>(d)]; ++i)
        send[l.sendDispls[static_cast<size_t>(d)] + i] = static_cast<T>(valueOf(r, d, i));
    std::vector<int32_t> one{r + 1};
    tsrComm_t c = comms[r];
    tsrResult_t a = tsrSuccess, b = tsrSuccess, e = tsrSuccess;
    if (inUserGroup) tsrGroupStart();
    a = tsrAlltoAllv(send.data(), l.sendCounts.data(), l.sendDispls.data(), recv.data(),
                     l.recvCounts.data(), l.recvDispls.data(), dtype, c, nullptr);
    if (inUserGroup) {
      b = tsrAllReduce(one.data(), one.data(), 1, tsrInt32, tsrSum, c, nullptr);
      e = tsrGroupEnd();
    }
    if (a != tsrSuccess || b != tsrSuccess || e != tsrSuccess) {
      errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
      return;
    }
    if (inUserGroup && one[0] != n * (n + 1) / 2) wrong[static_cast<size_t>(r)] = "allreduce";
    for (int s = 0; s < n && wrong[static_cast<size_t>(r)].empty(); ++s) {
      const auto p = static_cast<size_t>(s);
      for (size_t i = 0; i < l.recvCounts[p]; ++i)
        if (recv[l.recvDispls[p] + i] != static_cast<T>(valueOf(s, r, i))) {
          wrong[static_cast<size_t>(r)] =
              "element " + std::to_string(i) + " from rank " + std::to_string(s);
          break;
        }
      // The gap after the block is untouched.
      for (size_t g = 0; g < 3; ++g)
        if (recv[l.recvDispls[p] + l.recvCounts[p] + g] != T(-1))
          wrong[static_cast<size_t>(r)] = "the gap after rank " + std::to_string(s) + "'s block";
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "n=" << n << " rank " << r;
    EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "n=" << n << " rank " << r;
  }
}

TEST(ApiAlltoAllv, UnevenBlocksWithGaps) {
  setTestEnvironment();
  for (int n : {1, 2, 3, 4}) {
    checkUneven<int64_t>(n, 1, tsrInt64, false);
    checkUneven<int32_t>(n, 1000, tsrInt32, false);
    checkUneven<double>(n, 40000, tsrFloat64, false);  // pipelined through the p2p slots
  }
}

TEST(ApiAlltoAllv, JoinsTheCallersGroup) {
  setTestEnvironment();
  for (int n : {2, 4}) checkUneven<int32_t>(n, 10, tsrInt32, true);
}

TEST(ApiAlltoAllv, ArgumentErrorsBeforeAnythingMoves) {
  setTestEnvironment();
  ThreadComms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  tsrComm_t c = comms[0];
  std::vector<int32_t> send(16, 7), recv(16, -1);
  size_t counts[1] = {4}, displs[1] = {0};
  auto expectFail = [&](tsrResult_t r, tsrResult_t code, const char* words) {
    EXPECT_EQ(r, code);
    EXPECT_NE(std::string(tsrGetLastError(nullptr)).find(words), std::string::npos)
        << tsrGetLastError(nullptr);
    EXPECT_EQ(recv, std::vector<int32_t>(16, -1)) << "written despite the error";
  };
  expectFail(
      tsrAlltoAllv(send.data(), nullptr, displs, recv.data(), counts, displs, tsrInt32, c, nullptr),
      tsrInvalidArgument, "sendcounts or sdispls is NULL");
  expectFail(
      tsrAlltoAllv(nullptr, counts, displs, recv.data(), counts, displs, tsrInt32, c, nullptr),
      tsrInvalidArgument, "sendbuff is NULL but sendcounts[0] = 4");
  // Receiving into bytes that are sent: no in-place form.
  expectFail(tsrAlltoAllv(recv.data(), counts, displs, recv.data() + 2, counts, displs, tsrInt32, c,
                          nullptr),
             tsrInvalidArgument, "overlaps the receive block");
  size_t huge[1] = {SIZE_MAX / 2};
  expectFail(
      tsrAlltoAllv(send.data(), counts, huge, recv.data(), counts, displs, tsrInt32, c, nullptr),
      tsrInvalidArgument, "PTRDIFF_MAX");
  expectFail(tsrAlltoAllv(send.data(), counts, displs, recv.data(), counts, displs,
                          static_cast<tsrDataType_t>(99), c, nullptr),
             tsrInvalidArgument, "");
  // Nothing was left queued: a valid call after the errors works.
  EXPECT_EQ(
      tsrAlltoAllv(send.data(), counts, displs, recv.data(), counts, displs, tsrInt32, c, nullptr),
      tsrSuccess)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(std::vector<int32_t>(recv.begin(), recv.begin() + 4), std::vector<int32_t>(4, 7));
}

TEST(ApiAlltoAllv, OverlappingReceiveBlocksAreRefused) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<int32_t> send(8, 1), recv(8, -1);
  size_t counts[2] = {4, 4}, sd[2] = {0, 4}, rd[2] = {0, 2};
  EXPECT_EQ(
      tsrAlltoAllv(send.data(), counts, sd, recv.data(), counts, rd, tsrInt32, comms[0], nullptr),
      tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("receive blocks of ranks 0 and 1 overlap"),
            std::string::npos)
      << tsrGetLastError(nullptr);
  EXPECT_EQ(recv, std::vector<int32_t>(8, -1));
}

// A receiver that expects another size than its sender sends fails with both sizes.
TEST(ApiAlltoAllv, SizeMismatchBetweenRanksFails) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<tsrResult_t> results(2);
  std::vector<std::string> why(2);
  test::runRanks(2, [&](int r) {
    std::vector<int32_t> send(16, r), recv(16, -1);
    // Rank 0 sends 5 to rank 1, which expects 4.
    size_t sc[2] = {1, r == 0 ? size_t{5} : size_t{1}}, rc[2] = {1, 1};
    if (r == 1) rc[0] = 4;
    size_t sd[2] = {0, 8}, rd[2] = {0, 8};
    results[static_cast<size_t>(r)] =
        tsrAlltoAllv(send.data(), sc, sd, recv.data(), rc, rd, tsrInt32, comms[r], nullptr);
    why[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
  });
  EXPECT_NE(results[1], tsrSuccess);
  EXPECT_NE(why[1].find("receives 16 bytes from rank 0, which sends 20 bytes"), std::string::npos)
      << why[1];
}

// ---- tsrConfig_t.timeoutMs --------------------------------------------------------------------

TEST(ApiConfig, TimeoutMsIsTheCommunicatorsDeadline) {
  setTestEnvironment();  // TESSERA_TRANSPORT_TIMEOUT=20 s: the config's 400 ms must win
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess) << tsrGetLastError(nullptr);
  std::vector<tsrComm_t> comms(2, nullptr);
  std::vector<tsrResult_t> init(2);
  test::runRanks(2, [&](int r) {
    tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
    cfg.device = TSR_DEVICE_HOST;
    cfg.timeoutMs = 400;
    init[static_cast<size_t>(r)] =
        tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &cfg);
  });
  ASSERT_EQ(init[0], tsrSuccess);
  ASSERT_EQ(init[1], tsrSuccess);
  // Rank 0 calls a collective rank 1 never makes: it gives up at the config's deadline.
  std::vector<float> x(4, 1.0f);
  auto start = Clock::now();
  tsrResult_t r = tsrAllReduce(x.data(), x.data(), x.size(), tsrFloat32, tsrSum, comms[0], nullptr);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r, tsrTimeout) << tsrGetLastError(nullptr);
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 10.0) << "the 400 ms deadline was not used (TESSERA_TRANSPORT_TIMEOUT is 20 s)";
  EXPECT_EQ(tsrCommDestroy(comms[0]), tsrSuccess);
  EXPECT_EQ(tsrCommDestroy(comms[1]), tsrSuccess);
}

TEST(ApiConfig, TimeoutMsChecksAndOlderHeaders) {
  setTestEnvironment();
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  tsrComm_t comm = nullptr;
  tsrConfig_t cfg = TSR_CONFIG_INITIALIZER;
  cfg.device = TSR_DEVICE_HOST;
  cfg.timeoutMs = 0;
  EXPECT_EQ(tsrCommInitRankConfig(&comm, 1, id, 0, &cfg), tsrInvalidArgument);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("timeoutMs = 0"), std::string::npos)
      << tsrGetLastError(nullptr);
  // A caller built before the field existed: its struct ends at `device`, and the garbage after
  // it is not read.
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  cfg.timeoutMs = -5;
  cfg.size = offsetof(tsrConfig_t, timeoutMs);
  EXPECT_EQ(tsrCommInitRankConfig(&comm, 1, id, 0, &cfg), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrCommDestroy(comm), tsrSuccess);
}

}  // namespace
}  // namespace tessera::apitest
