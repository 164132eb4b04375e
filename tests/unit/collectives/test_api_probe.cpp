// tsrProbe over thread ranks: from one peer and from any source it names the sender and size of
// the next message without receiving it (a second probe sees the same, the tsrRecv that follows
// gets the bytes that were sent); from any source every sender's messages arrive whole and in
// its order, and the senders are served in turn; bad input is refused with a sentence and leaves
// the communicator usable; a probe that nothing answers ends at the deadline naming the ranks it
// waited for.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "support/harness.hpp"
#include "tessera/tessera.h"
#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

bool says(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// Message k of rank r: (r + 1) * 7 + k int32s, element i = r * 1000000 + k * 1000 + i.
size_t lengthOf(int r, int k) { return static_cast<size_t>((r + 1) * 7 + k); }
std::vector<int32_t> messageOf(int r, int k) {
  std::vector<int32_t> m(lengthOf(r, k));
  for (size_t i = 0; i < m.size(); ++i) m[i] = r * 1000000 + k * 1000 + static_cast<int32_t>(i);
  return m;
}

// Every rank but 0 exchanges one message with rank 0 (the pair's link), then ranks 1..n-1 send
// kPer messages each (they fit the pair's slots, so the sends complete at once) and everyone
// meets in an all-reduce: every message is waiting before rank 0's first probe. Rank 0 probes for
// any source and receives what each probe names: the senders come in turn (1, 2, .., n-1, 1, ..),
// and each one's messages whole and in its order. A probe of that one sender right after names
// the same message (a probe consumes nothing).
TEST(ApiProbe, AnySourceServesTheSendersInTurnWithEachOnesMessagesInOrder) {
  setTestEnvironment();
  constexpr int kPer = 4;
  for (int n : {2, 4}) {
    ThreadComms comms(n);
    ASSERT_TRUE(comms.ok()) << comms.error();
    std::vector<std::string> errors(static_cast<size_t>(n));
    std::vector<int> order;  // rank 0: the source of each message, in arrival order
    std::map<int, std::vector<std::vector<int32_t>>> got;
    test::runRanks(n, [&](int r) {
      tsrComm_t c = comms[r];
      auto fail = [&](const std::string& what) {
        errors[static_cast<size_t>(r)] = what + ": " + tsrGetLastError(nullptr);
      };
      int32_t hello = r;
      int64_t one = 1, all = 0;
      if (r != 0) {
        if (tsrSend(&hello, 1, tsrInt32, 0, c, nullptr) != tsrSuccess) return fail("hello");
        for (int k = 0; k < kPer; ++k) {
          std::vector<int32_t> m = messageOf(r, k);
          if (tsrSend(m.data(), m.size(), tsrInt32, 0, c, nullptr) != tsrSuccess)
            return fail("send");
        }
        if (tsrAllReduce(&one, &all, 1, tsrInt64, tsrSum, c, nullptr) != tsrSuccess)
          return fail("all-reduce");
        return;
      }
      for (int p = 1; p < n; ++p) {
        int32_t h = -1;
        if (tsrRecv(&h, 1, tsrInt32, p, c, nullptr) != tsrSuccess || h != p)
          return fail("hello from " + std::to_string(p));
      }
      if (tsrAllReduce(&one, &all, 1, tsrInt64, tsrSum, c, nullptr) != tsrSuccess)
        return fail("all-reduce");
      for (int i = 0; i < kPer * (n - 1); ++i) {
        int source = -5, again = -5;
        size_t bytes = 0, bytesAgain = 0;
        if (tsrProbe(TSR_ANY_SOURCE, c, &source, &bytes) != tsrSuccess) return fail("probe");
        if (source < 1 || source >= n) {
          errors[0] = "probe " + std::to_string(i) + " named rank " + std::to_string(source);
          return;
        }
        if (tsrProbe(source, c, &again, &bytesAgain) != tsrSuccess) return fail("probe");
        if (again != source || bytesAgain != bytes) {
          errors[0] = "probe " + std::to_string(i) + " named rank " + std::to_string(source) +
                      " (" + std::to_string(bytes) + " bytes), a probe of it then rank " +
                      std::to_string(again) + " (" + std::to_string(bytesAgain) + " bytes)";
          return;
        }
        std::vector<int32_t> m(bytes / sizeof(int32_t), -1);
        if (tsrRecv(m.data(), m.size(), tsrInt32, source, c, nullptr) != tsrSuccess)
          return fail("recv");
        order.push_back(source);
        got[source].push_back(std::move(m));
      }
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "n=" << n;
    std::vector<int> inTurn;
    for (int k = 0; k < kPer; ++k)
      for (int r = 1; r < n; ++r) inTurn.push_back(r);
    EXPECT_EQ(order, inTurn) << "n=" << n;
    for (int r = 1; r < n; ++r) {
      ASSERT_EQ(got[r].size(), static_cast<size_t>(kPer)) << "n=" << n << " from " << r;
      for (int k = 0; k < kPer; ++k)
        EXPECT_EQ(got[r][static_cast<size_t>(k)], messageOf(r, k))
            << "n=" << n << " message " << k << " of rank " << r;
    }
  }
}

TEST(ApiProbe, OnePeerNamesItsNextMessage) {
  setTestEnvironment();
  ThreadComms comms(3);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> errors(3);
  std::vector<int32_t> got;
  test::runRanks(3, [&](int r) {
    tsrComm_t c = comms[r];
    if (r == 2) {
      std::vector<int32_t> m = messageOf(2, 1);
      if (tsrSend(m.data(), m.size(), tsrInt32, 0, c, nullptr) != tsrSuccess)
        errors[2] = tsrGetLastError(nullptr);
    } else if (r == 0) {
      int source = -5;
      size_t bytes = 0;
      if (tsrProbe(2, c, &source, &bytes) != tsrSuccess) {
        errors[0] = tsrGetLastError(nullptr);
        return;
      }
      if (source != 2 || bytes != lengthOf(2, 1) * sizeof(int32_t)) {
        errors[0] = "probe said rank " + std::to_string(source) + ", " + std::to_string(bytes);
        return;
      }
      got.assign(bytes / sizeof(int32_t), -1);
      if (tsrRecv(got.data(), got.size(), tsrInt32, 2, c, nullptr) != tsrSuccess)
        errors[0] = tsrGetLastError(nullptr);
    }
  });
  for (int r = 0; r < 3; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  EXPECT_EQ(got, messageOf(2, 1));
}

TEST(ApiProbe, BadInputIsRefusedAndChangesNothing) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  int source = 7;
  size_t bytes = 7;
  EXPECT_EQ(tsrProbe(TSR_ANY_SOURCE, nullptr, &source, &bytes), tsrInvalidArgument);
  EXPECT_EQ(tsrProbe(TSR_ANY_SOURCE, comms[0], nullptr, &bytes), tsrInvalidArgument);
  EXPECT_EQ(tsrProbe(TSR_ANY_SOURCE, comms[0], &source, nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrProbe(2, comms[0], &source, &bytes), tsrInvalidArgument);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "peer 2 is outside [0, 2)"))
      << tsrGetLastError(nullptr);
  EXPECT_EQ(tsrProbe(-3, comms[0], &source, &bytes), tsrInvalidArgument);
  EXPECT_EQ(tsrProbe(0, comms[0], &source, &bytes), tsrInvalidUsage);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "is this rank")) << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  EXPECT_EQ(tsrProbe(1, comms[0], &source, &bytes), tsrInvalidUsage);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "inside a group")) << tsrGetLastError(nullptr);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess);
  // No link yet: nothing could arrive, so a sentence at once rather than a wait.
  EXPECT_EQ(tsrProbe(TSR_ANY_SOURCE, comms[0], &source, &bytes), tsrInvalidUsage);
  EXPECT_TRUE(says(tsrGetLastError(nullptr), "has exchanged no message with any rank yet"))
      << tsrGetLastError(nullptr);
  EXPECT_EQ(source, -1);
  EXPECT_EQ(bytes, 0u);
  // The communicator is still good: an all-reduce and a send/recv pair.
  std::vector<int64_t> sums(2, -1);
  std::vector<int32_t> got(3, -1);
  test::runRanks(2, [&](int r) {
    int64_t mine = r + 5;
    EXPECT_EQ(
        tsrAllReduce(&mine, &sums[static_cast<size_t>(r)], 1, tsrInt64, tsrSum, comms[r], nullptr),
        tsrSuccess)
        << tsrGetLastError(nullptr);
    std::vector<int32_t> m = messageOf(0, 0);
    m.resize(3);
    if (r == 1)
      EXPECT_EQ(tsrSend(m.data(), 3, tsrInt32, 0, comms[r], nullptr), tsrSuccess);
    else
      EXPECT_EQ(tsrRecv(got.data(), 3, tsrInt32, 1, comms[r], nullptr), tsrSuccess);
  });
  EXPECT_EQ(sums, (std::vector<int64_t>{11, 11}));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
}

// A probe that no message answers ends with the communicator's deadline (here 0.5 s), naming
// the ranks it waited for.
TEST(ApiProbe, NothingArrivesByTheDeadline) {
  tsrUniqueId id;
  ASSERT_EQ(tsrGetUniqueId(&id), tsrSuccess);
  std::vector<tsrComm_t> comms(2, nullptr);
  test::runRanks(2, [&](int r) {
    tsrConfig_t config = TSR_CONFIG_INITIALIZER;
    config.timeoutMs = 500;
    EXPECT_EQ(tsrCommInitRankConfig(&comms[static_cast<size_t>(r)], 2, id, r, &config), tsrSuccess)
        << tsrGetLastError(nullptr);
  });
  std::string why;
  tsrResult_t result = tsrSuccess;
  test::runRanks(2, [&](int r) {
    tsrComm_t c = comms[static_cast<size_t>(r)];
    int32_t one = 1;
    if (r == 1) {
      EXPECT_EQ(tsrSend(&one, 1, tsrInt32, 0, c, nullptr), tsrSuccess);
      return;
    }
    EXPECT_EQ(tsrRecv(&one, 1, tsrInt32, 1, c, nullptr), tsrSuccess);
    int source = -5;
    size_t bytes = 0;
    result = tsrProbe(TSR_ANY_SOURCE, c, &source, &bytes);
    why = tsrGetLastError(nullptr);
  });
  EXPECT_EQ(result, tsrTimeout);
  EXPECT_TRUE(says(why, "probe for a message from any rank")) << why;
  EXPECT_TRUE(says(why, "waits for a message from rank(s) 1")) << why;
  for (tsrComm_t c : comms) EXPECT_EQ(tsrCommDestroy(c), tsrSuccess);
}

}  // namespace
}  // namespace tessera::apitest
