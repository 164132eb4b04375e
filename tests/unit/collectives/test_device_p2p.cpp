// Sends and receives on the device executor, emulated on host threads (enqueueP2P +
// deviceSynchronize): pairs over every size class (0 bytes, one element, odd sizes, one slot and
// many) and datatype width, rings, all-to-all with uneven sizes in any call order, sends to self,
// groups in a row (the ring counters carry over), ordering with device collectives, host and
// device groups side by side, one CTA (lanes alternate), launch mode, forked processes (shm).
// Every byte received is checked against the seeded pattern of its sender.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/datatype.hpp"
#include "support/harness.hpp"
#include "test_device_p2p_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::p2ptest {
namespace {

using test::RankMode;

// One datatype per element width (1, 2, 4, 8 bytes).
const tsrDataType_t kWidths[] = {tsrInt8, tsrBfloat16, tsrFloat32, tsrUint64};

// Rank 0 and rank 1 send each other `counts` of every width, in both directions.
Spec pairSpec(std::vector<size_t> counts) {
  return [counts](int from, int to) {
    std::vector<Msg> out;
    if (from == to) return out;
    for (tsrDataType_t t : kWidths)
      for (size_t c : counts) out.push_back(Msg{c, t});
    return out;
  };
}

// Runs `rounds` exchanges of `spec` on every rank (threads or processes), each in its own group.
void runOnRanks(RankMode mode, int n, const P2PSetup& setup, const Spec& spec, int rounds = 2,
                uint32_t seedBase = 1) {
  auto results = test::runTransportRanks(mode, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
    for (int round = 1; round <= rounds; ++round) {
      std::string err = runExchange(*e, ctx.rank(), n, spec, static_cast<uint32_t>(round),
                                    seedBase + static_cast<uint32_t>(round));
      if (!err.empty()) return err;
    }
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2P, PairsEverySizeAndWidthSmallSlots) {
  // 256-byte slots: 1000 uint64 elements span 32 slots, four times round the ring.
  for (int ctas : {1, 2, 3}) {
    P2PSetup setup;
    setup.slotBytes = 256;
    setup.ctas = ctas;
    runOnRanks(RankMode::kThreads, 2, setup, pairSpec({0, 1, 31, 1237, 33, 1000}));
  }
}

TEST(DeviceP2P, PairsDefaultSlots) {
  // 64 KiB slots: one slot exactly, one and a bit, and many (2 MiB of float32).
  P2PSetup setup;
  runOnRanks(RankMode::kThreads, 2, setup, [](int from, int to) {
    std::vector<Msg> out;
    if (from == to) return out;
    out.push_back(Msg{16384, tsrFloat32});
    out.push_back(Msg{65537, tsrInt8});
    out.push_back(Msg{512 * 1024 + 3, tsrFloat32});
    return out;
  });
}

TEST(DeviceP2P, RingsInOneGroup) {
  // Each rank sends to r + 1 and receives from r - 1 (calls in peer order), three groups in a row.
  for (int n : {3, 4, 5}) {
    P2PSetup setup;
    setup.slotBytes = 512;
    runOnRanks(
        RankMode::kThreads, n, setup,
        [n](int from, int to) {
          std::vector<Msg> out;
          if (to == (from + 1) % n) out.push_back(Msg{3000 + 17 * size_t(from), tsrInt32});
          return out;
        },
        3, 0);
  }
}

// Every rank sends every rank (itself too) uneven sizes, some of them 0 bytes.
Spec unevenAllToAll() {
  return [](int from, int to) {
    std::vector<Msg> out;
    const size_t base = (static_cast<size_t>(from) * 7 + static_cast<size_t>(to) * 3) % 5;
    out.push_back(Msg{base * 397, tsrFloat64});
    out.push_back(Msg{(base + 1) * 1001 + static_cast<size_t>(to), tsrInt8});
    if ((from + to) % 2 == 0) out.push_back(Msg{0, tsrFloat16});
    return out;
  };
}

TEST(DeviceP2P, AllToAllUnevenAnyOrder) {
  for (int n : {2, 4}) {
    for (int ctas : {1, 2}) {
      P2PSetup setup;
      setup.slotBytes = 1024;
      setup.ctas = ctas;
      runOnRanks(RankMode::kThreads, n, setup, unevenAllToAll(), 3);
    }
  }
}

TEST(DeviceP2P, SendToSelfOnly) {
  for (int n : {1, 2}) {
    runOnRanks(RankMode::kThreads, n, P2PSetup{}, [](int from, int to) {
      std::vector<Msg> out;
      if (from == to)
        for (size_t c : {size_t{0}, size_t{1}, size_t{4097}, size_t{100000}})
          out.push_back(Msg{c, tsrFloat16});
      return out;
    });
  }
}

// Rank 0's first device call is a group to itself while rank 1 calls nothing until it is done:
// the copies run without starting the device executor (copyToSelfOnStream, the path src/comm
// takes before the engine exists, whose setup is collective), and the engine then serves an
// exchange between both ranks (its executor started by that first group naming a peer).
TEST(DeviceP2P, SendToSelfAloneNeedsNoPeer) {
  std::atomic<bool> selfDone{false};
  const Spec toSelf = [](int from, int to) {
    std::vector<Msg> out;
    if (from == 0 && to == 0)
      for (size_t c : {size_t{1}, size_t{4097}}) out.push_back(Msg{c, tsrFloat32});
    return out;
  };
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeP2PEngine(ctx, P2PSetup{}, &e));
    const int me = ctx.rank();
    if (me == 0) {
      std::string err = runExchange(*e, 0, 2, toSelf, 1, 7);
      selfDone = true;
      if (!err.empty()) return err;
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!selfDone && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      TT_CHECK(selfDone,
               "rank 0's group to itself did not complete within 10 s while rank 1 "
               "called nothing");
    }
    return runExchange(*e, me, 2, pairSpec({1, 5000}), 2, 8);
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2P, ManyGroupsInARowKeepTheCounters) {
  // Small slots and odd message sizes: the rings wrap at a different slot in every group.
  P2PSetup setup;
  setup.slotBytes = 64;
  runOnRanks(
      RankMode::kThreads, 3, setup,
      [](int from, int to) {
        std::vector<Msg> out;
        if (from != to) out.push_back(Msg{static_cast<size_t>(100 + 13 * from + 5 * to), tsrInt8});
        return out;
      },
      12);
}

TEST(DeviceP2P, BothWaysOneCtaNeverDeadlocks) {
  // Each rank sends 64 slots' worth before it receives (call order), on one CTA: only lanes that
  // take turns finish.
  P2PSetup setup;
  setup.slotBytes = 256;
  setup.ctas = 1;
  runOnRanks(
      RankMode::kThreads, 2, setup,
      [](int from, int to) {
        std::vector<Msg> out;
        if (from != to) out.push_back(Msg{64 * 256 + 5, tsrInt8});
        return out;
      },
      2, 0);
}

TEST(DeviceP2P, OrderedWithDeviceCollectives) {
  // p2p, allreduce, p2p enqueued back to back and synchronized once: each in queue order.
  const int n = 3;
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    P2PSetup setup;
    setup.slotBytes = 512;
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeP2PEngine(ctx, setup, &e));
    const int me = ctx.rank();
    Spec spec = unevenAllToAll();
    Exchange a(me, n, spec, 1, 5), b(me, n, spec, 2, 6);
    std::vector<int32_t> in(5000, me + 1), out(5000, 0);
    CollCall call;
    call.collective = Collective::kAllReduce;
    call.sendbuf = in.data();
    call.recvbuf = out.data();
    call.count = in.size();
    call.dtype = tsrInt32;
    (void)redOpBuiltin(tsrSum, &call.op);
    TT_CHECK_OK(e->enqueueP2P(a.calls(), nullptr));
    TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->enqueueP2P(b.calls(), nullptr));
    TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    std::string err = a.check();
    if (err.empty()) err = b.check();
    if (!err.empty()) return err;
    for (size_t i = 0; i < out.size(); ++i)
      TT_CHECK(out[i] == n * (n + 1) / 2, "allreduce element %zu is %d", i, out[i]);
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2P, HostAndDeviceGroupsSideBySide) {
  // The host executor's and the device executor's sends are matched separately: both groups are
  // in flight at once between the same pairs.
  const int n = 3;
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeP2PEngine(ctx, P2PSetup{}, &e));
    const int me = ctx.rank();
    Exchange dev(me, n, unevenAllToAll(), 1, 3), host(me, n, unevenAllToAll(), 2, 4);
    TT_CHECK_OK(e->enqueueP2P(dev.calls(), nullptr));
    std::unique_ptr<Operation> op;
    TT_CHECK_OK(e->startP2P(host.calls(), &op));
    TT_CHECK_OK(runOperation(op.get(), 20));
    TT_CHECK_OK(e->deviceSynchronize());
    std::string err = dev.check();
    return err.empty() ? host.check() : err;
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceP2P, LaunchMode) {
  test::ScopedEnv launch("TESSERA_LAUNCH", "kernel");
  P2PSetup setup;
  setup.slotBytes = 256;
  runOnRanks(RankMode::kThreads, 3, setup, unevenAllToAll(), 2);
}

TEST(DeviceP2P, ProcessesOverShm) {
  P2PSetup setup;
  setup.slotBytes = 4096;
  setup.timeoutSeconds = 10;
  runOnRanks(RankMode::kProcesses, 3, setup, unevenAllToAll(), 2);
}

}  // namespace
}  // namespace tessera::p2ptest
