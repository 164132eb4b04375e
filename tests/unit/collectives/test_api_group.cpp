// Groups, point-to-point, registration and teardown through the C API over thread ranks:
// send/recv posted in any order inside a group, to self, several collectives in one group, one
// thread driving every rank of a communicator, nesting, a failed call failing its group,
// registered (zero-copy) buffers, and abort/destroy releasing a call that waits for a peer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "support/harness.hpp"
#include "unit/collectives/test_api_common.hpp"

namespace tessera::apitest {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> iota(size_t count, int32_t base) {
  std::vector<int32_t> v(count);
  std::iota(v.begin(), v.end(), base);
  return v;
}

// Every rank sends to the next and receives from the previous, in one group; even ranks post the
// receive first, odd ranks the send first.
TEST(ApiGroup, RingExchangeInAnyOrder) {
  setTestEnvironment();
  for (int n : {2, 3, 4}) {
    ThreadComms comms(n);
    ASSERT_TRUE(comms.ok()) << comms.error();
    for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
      std::vector<std::string> errors(static_cast<size_t>(n));
      std::vector<std::vector<int32_t>> got(static_cast<size_t>(n));
      test::runRanks(n, [&](int r) {
        const int next = (r + 1) % n, prev = (r + n - 1) % n;
        std::vector<int32_t> out = iota(count, r * 1000000);
        auto& in = got[static_cast<size_t>(r)];
        in.assign(count, -1);
        tsrComm_t c = comms[r];
        tsrGroupStart();
        tsrResult_t a, b;
        if (r % 2 == 0) {
          a = tsrRecv(in.data(), count, tsrInt32, prev, c, nullptr);
          b = tsrSend(out.data(), count, tsrInt32, next, c, nullptr);
        } else {
          a = tsrSend(out.data(), count, tsrInt32, next, c, nullptr);
          b = tsrRecv(in.data(), count, tsrInt32, prev, c, nullptr);
        }
        tsrResult_t e = tsrGroupEnd();
        if (a != tsrSuccess || b != tsrSuccess || e != tsrSuccess)
          errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "n=" << n << " rank " << r;
        EXPECT_EQ(got[static_cast<size_t>(r)], iota(count, ((r + n - 1) % n) * 1000000))
            << "n=" << n << " count " << count << " rank " << r;
      }
    }
  }
}

TEST(ApiGroup, SendToSelfAndToPeersInOneGroup) {
  setTestEnvironment();
  const int n = 3;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  const size_t count = 777;
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::vector<std::vector<int32_t>>> got(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) {
    auto& in = got[static_cast<size_t>(r)];
    in.assign(static_cast<size_t>(n), std::vector<int32_t>(count, -1));
    std::vector<int32_t> out = iota(count, r * 10000);
    tsrGroupStart();
    bool ok = true;
    // Receives from the highest peer down, sends from the lowest up: the group matches them.
    for (int p = n - 1; p >= 0; --p)
      ok &= tsrRecv(in[static_cast<size_t>(p)].data(), count, tsrInt32, p, comms[r], nullptr) ==
            tsrSuccess;
    for (int p = 0; p < n; ++p)
      ok &= tsrSend(out.data(), count, tsrInt32, p, comms[r], nullptr) == tsrSuccess;
    ok &= tsrGroupEnd() == tsrSuccess;
    if (!ok) errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    for (int p = 0; p < n; ++p)
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(p)], iota(count, p * 10000))
          << "rank " << r << " from " << p;
  }
}

// A rank whose first calls on a communicator are a send and a receive to itself, while its peer
// calls nothing (crosscheck seed 477692944808: rank p sends count + p % 3 elements, so rank 0's
// count was 0): the copy completes at once on that rank alone, without the engine's collective
// setup that the peer never joins; a mismatched pair is refused with a sentence. The
// communicator then still serves a collective on both ranks.
TEST(ApiGroup, SendToSelfAloneNeedsNoPeer) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<int32_t> out = iota(5, 7), in(5, -1);
  const auto t0 = Clock::now();
  tsrGroupStart();
  ASSERT_EQ(tsrSend(out.data(), 5, tsrInt32, 1, comms[1], nullptr), tsrSuccess);
  ASSERT_EQ(tsrRecv(in.data(), 5, tsrInt32, 1, comms[1], nullptr), tsrSuccess);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(in, out);
  tsrGroupStart();
  ASSERT_EQ(tsrSend(out.data(), 5, tsrInt32, 1, comms[1], nullptr), tsrSuccess);
  ASSERT_EQ(tsrRecv(in.data(), 4, tsrInt32, 1, comms[1], nullptr), tsrSuccess);
  EXPECT_EQ(tsrGroupEnd(), tsrInvalidUsage);
  EXPECT_NE(std::string(tsrGetLastError(nullptr)).find("send to self #0 has 20 bytes"),
            std::string::npos)
      << tsrGetLastError(nullptr);
  std::vector<std::string> errors(2);
  std::vector<std::vector<int32_t>> sums(2, std::vector<int32_t>(3, 0));
  test::runRanks(2, [&](int r) {
    std::vector<int32_t> mine = iota(3, r);
    if (tsrAllReduce(mine.data(), sums[static_cast<size_t>(r)].data(), 3, tsrInt32, tsrSum,
                     comms[r], nullptr) != tsrSuccess)
      errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], (std::vector<int32_t>{1, 3, 5})) << "rank " << r;
  }
}

// Outside a group a send returns once its receive took the data.
TEST(ApiGroup, BlockingSendAndRecvOutsideAGroup) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> errors(2);
  std::vector<int32_t> got(5000, -1);
  test::runRanks(2, [&](int r) {
    std::vector<int32_t> out = iota(5000, 42);
    tsrResult_t res = r == 0 ? tsrSend(out.data(), out.size(), tsrInt32, 1, comms[r], nullptr)
                             : tsrRecv(got.data(), got.size(), tsrInt32, 0, comms[r], nullptr);
    if (res != tsrSuccess) errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(got, iota(5000, 42));
}

// allreduce, allgather, broadcast, reducescatter and a send/recv pair in one group per rank.
TEST(ApiGroup, SeveralCollectivesInOneGroup) {
  setTestEnvironment();
  const int n = 3;
  const size_t count = 1001;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  struct Out {
    std::vector<int32_t> sum, gathered, bcast, scattered, fromPrev;
  };
  std::vector<Out> out(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) {
    Out& o = out[static_cast<size_t>(r)];
    std::vector<int32_t> mine = iota(count, r * 100), big = iota(count * n, r);
    o.sum.assign(count, 0);
    o.gathered.assign(count * n, 0);
    o.bcast = r == 2 ? iota(count, 5) : std::vector<int32_t>(count, 0);
    o.scattered.assign(count, 0);
    o.fromPrev.assign(count, 0);
    tsrComm_t c = comms[r];
    bool ok = tsrGroupStart() == tsrSuccess;
    ok &= tsrAllReduce(mine.data(), o.sum.data(), count, tsrInt32, tsrSum, c, nullptr) == 0;
    ok &= tsrSend(mine.data(), count, tsrInt32, (r + 1) % n, c, nullptr) == 0;
    ok &= tsrAllGather(mine.data(), o.gathered.data(), count, tsrInt32, c, nullptr) == 0;
    ok &= tsrBroadcast(o.bcast.data(), o.bcast.data(), count, tsrInt32, 2, c, nullptr) == 0;
    ok &= tsrRecv(o.fromPrev.data(), count, tsrInt32, (r + n - 1) % n, c, nullptr) == 0;
    ok &=
        tsrReduceScatter(big.data(), o.scattered.data(), count, tsrInt32, tsrMax, c, nullptr) == 0;
    ok &= tsrGroupEnd() == tsrSuccess;
    if (!ok) errors[static_cast<size_t>(r)] = tsrGetLastError(nullptr);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    const Out& o = out[static_cast<size_t>(r)];
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(o.sum[i], static_cast<int32_t>(3 * i + 300)) << "allreduce, rank " << r;
      ASSERT_EQ(o.bcast[i], static_cast<int32_t>(5 + i)) << "broadcast, rank " << r;
      // Block r of rank q's `big` starts at q + r * count: the max is rank n-1's.
      ASSERT_EQ(o.scattered[i], static_cast<int32_t>(n - 1 + r * count + i)) << "rank " << r;
      ASSERT_EQ(o.fromPrev[i], static_cast<int32_t>(((r + n - 1) % n) * 100 + i)) << "rank " << r;
      for (int q = 0; q < n; ++q)
        ASSERT_EQ(o.gathered[static_cast<size_t>(q) * count + i], static_cast<int32_t>(q * 100 + i))
            << "allgather, rank " << r;
    }
  }
}

// One thread issues the call of every rank inside a group (the tsrCommInitAll pattern), nested.
TEST(ApiGroup, OneThreadDrivesEveryRankWithNestedGroups) {
  setTestEnvironment();
  const int n = 4;
  const size_t count = 5000;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> in, out, ring;
  for (int r = 0; r < n; ++r) {
    in.emplace_back(count, static_cast<float>(r + 1));
    out.emplace_back(count, 0.0f);
    ring.emplace_back(count, -1.0f);
  }
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  for (int r = 0; r < n / 2; ++r)
    ASSERT_EQ(tsrAllReduce(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                           count, tsrFloat32, tsrSum, comms[r], nullptr),
              tsrSuccess);
  // An inner end starts nothing: ranks 0 and 1 alone would wait for 2 and 3 forever.
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  for (int r = n / 2; r < n; ++r)
    ASSERT_EQ(tsrAllReduce(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                           count, tsrFloat32, tsrSum, comms[r], nullptr),
              tsrSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(tsrSend(in[static_cast<size_t>(r)].data(), count, tsrFloat32, (r + 1) % n, comms[r],
                      nullptr),
              tsrSuccess);
    ASSERT_EQ(tsrRecv(ring[static_cast<size_t>(r)].data(), count, tsrFloat32, (r + n - 1) % n,
                      comms[r], nullptr),
              tsrSuccess);
  }
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(out[static_cast<size_t>(r)], std::vector<float>(count, 10.0f)) << "rank " << r;
    EXPECT_EQ(ring[static_cast<size_t>(r)],
              std::vector<float>(count, static_cast<float>((r + n - 1) % n + 1)))
        << "rank " << r;
  }
}

TEST(ApiGroup, GroupEndWithoutStartIsInvalidUsage) {
  EXPECT_EQ(tsrGroupEnd(), tsrInvalidUsage);
  EXPECT_NE(std::strstr(tsrGetLastError(nullptr), "tsrGroupStart"), nullptr);
}

// A call that fails its checks fails at once and fails tsrGroupEnd; nothing of the group runs
// (the valid call's output stays as it was), and the next group starts clean.
TEST(ApiGroup, FailedCallFailsItsGroupAndNothingRuns) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<float> in(100, 1.0f), out0(100, -7.0f), out1(100, -7.0f);
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  EXPECT_EQ(tsrAllReduce(in.data(), out0.data(), 100, tsrFloat32, tsrSum, comms[0], nullptr),
            tsrSuccess);
  EXPECT_EQ(tsrAllReduce(in.data(), out1.data(), 100, static_cast<tsrDataType_t>(99), tsrSum,
                         comms[1], nullptr),
            tsrInvalidArgument);
  EXPECT_EQ(tsrGroupEnd(), tsrInvalidArgument);
  EXPECT_NE(std::strstr(tsrGetLastError(nullptr), "datatype"), nullptr) << tsrGetLastError(nullptr);
  EXPECT_EQ(out0, std::vector<float>(100, -7.0f));
  EXPECT_EQ(out1, std::vector<float>(100, -7.0f));
  // A bad communicator handle inside a group fails the group too.
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  EXPECT_EQ(tsrAllReduce(in.data(), out0.data(), 100, tsrFloat32, tsrSum, comms[0], nullptr),
            tsrSuccess);
  EXPECT_EQ(tsrSend(in.data(), 100, tsrFloat32, 0, nullptr, nullptr), tsrInvalidArgument);
  EXPECT_EQ(tsrGroupEnd(), tsrInvalidArgument);
  EXPECT_EQ(out0, std::vector<float>(100, -7.0f));
  // The failure does not stick to the next group.
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(tsrAllReduce(in.data(), (r == 0 ? out0 : out1).data(), 100, tsrFloat32, tsrSum,
                           comms[r], nullptr),
              tsrSuccess);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_EQ(out0, std::vector<float>(100, 2.0f));
  EXPECT_EQ(out1, std::vector<float>(100, 2.0f));
}

// tsrGroupSimulateEnd closes the group without running anything and prices it with the tuner: a
// larger message costs more, two collectives of one communicator cost their sum, two
// communicators side by side the slower one; a send costs its link's latency and bytes.
TEST(ApiGroup, SimulateEndEstimatesAndRunsNothing) {
  setTestEnvironment();
  ThreadComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  ThreadComms others(2);
  ASSERT_TRUE(others.ok()) << others.error();
  std::vector<float> in(1 << 20, 1.0f), out(1 << 20, -7.0f);
  auto simulate = [&](const std::vector<std::pair<tsrComm_t, size_t>>& calls) {
    double us = -1;
    EXPECT_EQ(tsrGroupStart(), tsrSuccess);
    for (auto [c, count] : calls)
      EXPECT_EQ(tsrAllReduce(in.data(), out.data(), count, tsrFloat32, tsrSum, c, nullptr),
                tsrSuccess);
    EXPECT_EQ(tsrGroupSimulateEnd(&us), tsrSuccess) << tsrGetLastError(nullptr);
    return us;
  };
  const double small = simulate({{comms[0], 256}});
  const double large = simulate({{comms[0], size_t{1} << 20}});
  EXPECT_GT(small, 0);
  EXPECT_GT(large, small);
  EXPECT_NEAR(simulate({{comms[0], 256}, {comms[0], size_t{1} << 20}}), small + large,
              1e-9 * large);
  EXPECT_NEAR(simulate({{comms[0], 256}, {others[0], size_t{1} << 20}}), large, 1e-9 * large);
  EXPECT_EQ(out, std::vector<float>(1 << 20, -7.0f));  // nothing ran
  EXPECT_EQ(tsrGroupEnd(), tsrInvalidUsage);           // the group is closed

  double send = -1;
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  ASSERT_EQ(tsrSend(in.data(), 1 << 20, tsrFloat32, 1, comms[0], nullptr), tsrSuccess);
  ASSERT_EQ(tsrGroupSimulateEnd(&send), tsrSuccess) << tsrGetLastError(nullptr);
  EXPECT_GT(send, 0);

  // Misuse: no group, a nested group, NULL.
  double us = 0;
  EXPECT_EQ(tsrGroupSimulateEnd(&us), tsrInvalidUsage);
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  EXPECT_EQ(tsrGroupSimulateEnd(nullptr), tsrInvalidArgument);
  ASSERT_EQ(tsrGroupStart(), tsrSuccess);
  EXPECT_EQ(tsrGroupSimulateEnd(&us), tsrInvalidUsage);
  EXPECT_NE(std::strstr(tsrGetLastError(nullptr), "outermost"), nullptr);
  ASSERT_EQ(tsrGroupEnd(), tsrSuccess);
  EXPECT_EQ(tsrGroupSimulateEnd(&us), tsrSuccess);
  // A real group afterwards runs and is right.
  test::runRanks(2, [&](int r) {
    std::vector<float> a(100, 1.0f), b(100, 0.0f);
    EXPECT_EQ(tsrAllReduce(a.data(), b.data(), 100, tsrFloat32, tsrSum, comms[r], nullptr),
              tsrSuccess);
    EXPECT_EQ(b, std::vector<float>(100, 2.0f));
  });
}

// Buffers from tsrMemAlloc and from malloc, registered before the first collective and after,
// with calls above TESSERA_ZERO_COPY_MIN_BYTES (so the engine exchanges registrations).
TEST(ApiRegister, RegisteredBuffersGiveCorrectResults) {
  setTestEnvironment();
  test::ScopedEnv zeroCopyMin("TESSERA_ZERO_COPY_MIN_BYTES", "4096");
  const int n = 3;
  const size_t count = 100003;
  ThreadComms comms(n);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::string> wrong(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) {
    auto err = [&](const char* what) {
      errors[static_cast<size_t>(r)] = std::string(what) + ": " + tsrGetLastError(nullptr);
    };
    tsrComm_t c = comms[r];
    void *send = nullptr, *recv = nullptr, *hs = nullptr, *hr = nullptr;
    if (tsrMemAlloc(&send, count * 4) != tsrSuccess) return err("tsrMemAlloc");
    std::vector<float> heap(count * static_cast<size_t>(n));  // malloc'ed memory, registered too
    recv = heap.data();
    if (tsrCommRegister(c, send, count * 4, &hs) != tsrSuccess) return err("register send");
    if (tsrCommRegister(c, recv, heap.size() * 4, &hr) != tsrSuccess) return err("register recv");
    auto* s = static_cast<float*>(send);
    for (size_t i = 0; i < count; ++i) s[i] = static_cast<float>(r + static_cast<int>(i % 7));
    for (int round = 0; round < 2; ++round) {
      if (tsrAllReduce(send, recv, count, tsrFloat32, tsrSum, c, nullptr) != tsrSuccess)
        return err("allreduce");
      for (size_t i = 0; i < count; ++i)
        if (heap[i] != static_cast<float>(3 + 3 * static_cast<int>(i % 7)) &&
            wrong[static_cast<size_t>(r)].empty())
          wrong[static_cast<size_t>(r)] = "allreduce element " + std::to_string(i);
      if (tsrAllGather(send, recv, count, tsrFloat32, c, nullptr) != tsrSuccess)
        return err("allgather");
      for (size_t i = 0; i < heap.size(); ++i)
        if (heap[i] !=
                static_cast<float>(static_cast<int>(i / count) + static_cast<int>(i % count % 7)) &&
            wrong[static_cast<size_t>(r)].empty())
          wrong[static_cast<size_t>(r)] = "allgather element " + std::to_string(i);
    }
    // A buffer registered after the first collective.
    std::vector<float> late(count, 0.0f);
    void* hl = nullptr;
    if (tsrCommRegister(c, late.data(), count * 4, &hl) != tsrSuccess) return err("register late");
    if (tsrBroadcast(send, late.data(), count, tsrFloat32, 1, c, nullptr) != tsrSuccess)
      return err("broadcast");
    for (size_t i = 0; i < count; ++i)
      if (late[i] != static_cast<float>(1 + static_cast<int>(i % 7)) &&
          wrong[static_cast<size_t>(r)].empty())
        wrong[static_cast<size_t>(r)] = "broadcast element " + std::to_string(i);
    // Every rank is done with peers' buffers before any deregisters.
    float token = 0;
    if (tsrAllReduce(&token, &token, 1, tsrFloat32, tsrSum, c, nullptr) != tsrSuccess)
      return err("barrier");
    if (tsrCommDeregister(c, hl) != tsrSuccess || tsrCommDeregister(c, hr) != tsrSuccess ||
        tsrCommDeregister(c, hs) != tsrSuccess)
      return err("deregister");
    if (tsrMemFree(send) != tsrSuccess) return err("tsrMemFree");
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

// A call waiting for a peer that never comes returns soon after its rank is aborted, or
// destroyed from another thread, long before the transport deadline.
TEST(ApiTeardown, AbortAndDestroyReleaseAWaitingCall) {
  test::ScopedEnv timeout("TESSERA_TRANSPORT_TIMEOUT", "60");
  test::ScopedEnv bootTimeout("TESSERA_BOOTSTRAP_TIMEOUT", "60");
  for (bool destroy : {false, true}) {
    ThreadComms comms(2);
    ASSERT_TRUE(comms.ok()) << comms.error();
    std::vector<float> in(1000, 1.0f), out(1000, 0.0f);
    tsrResult_t result = tsrSuccess;
    Clock::time_point returned;
    std::thread waiter([&] {
      result =
          tsrAllReduce(in.data(), out.data(), in.size(), tsrFloat32, tsrSum, comms[0], nullptr);
      returned = Clock::now();
    });
    // Not synchronisation: the stop comes late on purpose, so that it must release a call that
    // already waits for its peer (a stop before the call would only refuse it).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const Clock::time_point stopped = Clock::now();
    tsrResult_t stop = destroy ? tsrCommDestroy(comms[0]) : tsrCommAbort(comms[0]);
    EXPECT_EQ(stop, tsrSuccess) << tsrGetLastError(nullptr);
    waiter.join();
    EXPECT_NE(result, tsrSuccess) << (destroy ? "destroy" : "abort");
    EXPECT_LT(std::chrono::duration<double>(returned - stopped).count(), 10.0)
        << (destroy ? "destroy" : "abort") << " did not release the waiting call";
    EXPECT_EQ(tsrCommCount(comms[0], nullptr), tsrInvalidUsage);  // the handle is dead
  }
}

}  // namespace
}  // namespace tessera::apitest
