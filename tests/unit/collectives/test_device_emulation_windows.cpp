// Windows of the device executor, emulated on host threads (device_window.cpp): collective
// registration, zero-copy plans on buffers in windows at 2, 4 and 8 ranks (every collective, the
// tuner's choice and every family forced), calls outside windows staged, deregistration refused
// on every rank while a call on the window is in flight, processes that map each other's windows
// (shared memory) and those that cannot (malloc: staged). Every result is compared with the host
// executor's, bit for bit, and with the serial reference.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "collectives/exec/device/device_executor.hpp"
#include "collectives/exec/engine_impl.hpp"
#include "support/harness.hpp"
#include "test_device_emulation_common.hpp"
#include "test_exec_common.hpp"
#include "transport/host_alloc.hpp"
#include "transport/transport.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::devtest {
namespace {

using test::RankMode;

// A rank's window buffer: page-aligned host memory (malloc), or memory the host's processes can
// map (sharedHostAlloc, as tsrMemAlloc).
class WindowBuffer {
 public:
  WindowBuffer(size_t bytes, bool shared) : bytes_(bytes), shared_(shared) {
    if (shared_) {
      if (sharedHostAlloc(bytes, &p_) != tsrSuccess) p_ = nullptr;
    } else {
      p_ = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);  // a multiple, as C asks
    }
  }
  ~WindowBuffer() {
    if (p_ == nullptr) return;
    if (shared_)
      (void)sharedHostFree(p_);
    else
      std::free(p_);
  }
  char* data() const { return static_cast<char*>(p_); }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  bool shared_;
  void* p_ = nullptr;
};

uint64_t zeroCopyCalls(CollectiveEngine& e) {
  auto* impl = dynamic_cast<EngineImpl*>(&e);
  const DeviceExecutor* ex = impl != nullptr ? impl->deviceExecutor() : nullptr;
  return ex != nullptr ? ex->zeroCopyCalls() : 0;
}

size_t windowCount(CollectiveEngine& e) {
  auto* impl = dynamic_cast<EngineImpl*>(&e);
  const DeviceExecutor* ex = impl != nullptr ? impl->deviceExecutor() : nullptr;
  return ex != nullptr ? ex->windowCount() : 0;
}

// Every collective on the window, the tuner choosing among zero-copy forms; `zeroCopyAtLeast`:
// how many of them must have run a zero-copy plan.
std::string everyCollectiveOnWindow(CollectiveEngine& e, int rank, int n, char* win, size_t bytes,
                                    uint64_t zeroCopyAtLeast) {
  const uint64_t before = zeroCopyCalls(e);
  int salt = 100;
  const size_t count = 20000;  // past the LL protocol's sizes
  for (tsrDataType_t t : {tsrFloat32, tsrBfloat16}) {
    for (Collective coll :
         {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce}) {
      for (RedKind op : {RedKind::kSum, RedKind::kMax}) {
        DevCase c{coll, "", t, op, count, coll == Collective::kReduce ? n - 1 : 0, false, ++salt};
        std::string err = runDeviceCaseIn(e, rank, n, c, win, bytes);
        if (!err.empty()) return err;
      }
    }
    for (Collective coll : {Collective::kAllGather, Collective::kAllToAll}) {
      DevCase c{coll, "", t, RedKind::kSum, count / 4, 0, false, ++salt};
      std::string err = runDeviceCaseIn(e, rank, n, c, win, bytes);
      if (!err.empty()) return err;
    }
    for (int root : {0, n - 1}) {
      DevCase c{Collective::kBroadcast, "", t, RedKind::kSum, count, root, false, ++salt};
      std::string err = runDeviceCaseIn(e, rank, n, c, win, bytes);
      if (!err.empty()) return err;
    }
  }
  for (Collective coll : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce}) {
    DevCase c{coll, "", tsrFloat32, RedKind::kSum, 12347, 1 % n, true, ++salt};
    std::string err = runDeviceCaseIn(e, rank, n, c, win, bytes);
    if (!err.empty()) return err;
  }
  const uint64_t ran = zeroCopyCalls(e) - before;
  if (ran < zeroCopyAtLeast)
    return strprintf(
        "rank %d: %llu calls ran zero-copy plans on the window, expected at least %llu", rank,
        static_cast<unsigned long long>(ran), static_cast<unsigned long long>(zeroCopyAtLeast));
  return "";
}

size_t windowBytesFor(int n) { return size_t{20000} * 4 * static_cast<size_t>(n + 1) + 8192; }

TEST(DeviceWindows, ZeroCopyEveryCollectiveAtTwoFourEightRanks) {
  for (int n : {2, 4, 8}) {
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      DevSetup setup;
      setup.scratchBytes = 16 << 10;  // staged calls of this size take many slices
      TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
      WindowBuffer buf(windowBytesFor(n), false);
      TT_CHECK(buf.data() != nullptr, "no memory for the window");
      void* win = nullptr;
      TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
      // Every family the tuner picks for these 23 calls has a zero-copy form (measured: all 23
      // ran zero-copy at 2, 4 and 8 ranks); a tuner that stages one of them fails here.
      std::string err = everyCollectiveOnWindow(*e, ctx.rank(), n, buf.data(), buf.size(), 23);
      if (!err.empty()) return err;
      // The same calls on buffers outside any window are staged, and still right.
      const uint64_t before = zeroCopyCalls(*e);
      DevCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 20000, 0, false, 7};
      err = runDeviceCase(*e, ctx.rank(), n, c);
      if (!err.empty()) return err;
      TT_CHECK(zeroCopyCalls(*e) == before, "a call outside the windows ran zero-copy");
      TT_CHECK_OK(e->deregisterWindow(win));
      TT_CHECK(windowCount(*e) == 0, "the window is still there after deregistration");
      // After deregistration the same buffer is staged.
      err = runDeviceCaseIn(*e, ctx.rank(), n, c, buf.data(), buf.size());
      if (!err.empty()) return "after deregistration: " + err;
      TT_CHECK(zeroCopyCalls(*e) == before, "a call on a deregistered window ran zero-copy");
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

// Every family named (TESSERA_ALGO-like forcing through CollCall::algorithm) on windows: its
// zero-copy form where it has one, else its staged plan.
TEST(DeviceWindows, EveryFamilyForcedOnWindows) {
  const int n = 4;
  std::vector<std::string> skipped;
  std::vector<exectest::Usable> plans = exectest::usablePlans(n, {}, &skipped);
  auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    WindowBuffer buf(windowBytesFor(n), false);
    void* win = nullptr;
    TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
    const uint64_t before = zeroCopyCalls(*e);
    int salt = 0, ran = 0;
    for (const exectest::Usable& u : plans) {
      if (u.family == "hier") continue;  // needs several hosts
      DevCase c{u.coll, u.family, tsrFloat32, RedKind::kSum, 3001, u.root, false, ++salt};
      std::string err = runDeviceCaseIn(*e, ctx.rank(), n, c, buf.data(), buf.size());
      if (!err.empty()) return err;
      ++ran;
    }
    TT_CHECK(ran >= 10, "only %d forced cases ran", ran);
    TT_CHECK(zeroCopyCalls(*e) - before >= 5, "only %llu forced cases ran zero-copy",
             static_cast<unsigned long long>(zeroCopyCalls(*e) - before));
    TT_CHECK_OK(e->deregisterWindow(win));
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Rank 0 has a call on the window in flight (rank 1 has not made its own yet): deregistration is
// refused on both ranks, the window stays and the call completes; afterwards it succeeds.
TEST(DeviceWindows, DeregistrationWhileACallIsInFlightIsRefusedOnEveryRank) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    const size_t count = 50000;
    WindowBuffer buf(count * 4 * 2 + 4096, false);
    void* win = nullptr;
    TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
    auto* in = reinterpret_cast<float*>(buf.data());
    auto* out = reinterpret_cast<float*>(buf.data() + count * 4);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(ctx.rank() + 1 + i % 7);
    CollCall call;
    call.collective = Collective::kAllReduce;
    call.count = count;
    call.dtype = tsrFloat32;
    (void)redOpBuiltin(tsrSum, &call.op);
    call.sendbuf = in;
    call.recvbuf = out;
    // Once on both ranks first: binding the plan talks to the peer, which the test keeps away.
    TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(ctx.rank() + 1 + i % 7);
    const bool early = ctx.rank() == 0;
    if (early) TT_CHECK_OK(e->enqueue(call, nullptr));  // waits for rank 1's call
    Result r = e->deregisterWindow(win);
    TT_CHECK(r == tsrInvalidUsage, "deregistration with rank 0's call in flight gave %s",
             resultName(r));
    std::string why = lastErrorMessage();
    TT_CHECK(why.find("rank 0 still has a call on it in flight") != std::string::npos,
             "the refusal does not name rank 0: %s", why.c_str());
    TT_CHECK(windowCount(*e) == 1, "the refused window is gone");
    if (!early) TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    TT_CHECK(zeroCopyCalls(*e) == 2, "the calls did not run zero-copy");
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(3 + 2 * (i % 7));
      TT_CHECK(out[i] == want, "element %zu is %g, expected %g", i, out[i], want);
    }
    TT_CHECK_OK(e->deregisterWindow(win));
    TT_CHECK(windowCount(*e) == 0, "the window is still there");
    return std::string();
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceWindows, BadArgumentsAreRefusedAlikeOnEveryRank) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    void* win = nullptr;
    char byte = 0;
    TT_CHECK(e->registerWindow(nullptr, 64, &win) == tsrInvalidArgument, "a null buffer passed");
    TT_CHECK(e->registerWindow(&byte, 0, &win) == tsrInvalidArgument, "0 bytes passed");
    TT_CHECK(e->registerWindow(&byte, 1, nullptr) == tsrInvalidArgument, "a null handle passed");
    int notAWindow = 0;
    TT_CHECK(e->deregisterWindow(&notAWindow) == tsrInvalidArgument,
             "deregistering something else passed");
    // Nothing was left half-done: a window and a call still work.
    WindowBuffer buf(1 << 20, false);
    TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
    DevCase c{Collective::kAllGather, "", tsrFloat32, RedKind::kSum, 20000, 0, false, 3};
    std::string err = runDeviceCaseIn(*e, ctx.rank(), 2, c, buf.data(), buf.size());
    if (!err.empty()) return err;
    TT_CHECK_OK(e->deregisterWindow(win));
    TT_CHECK(e->deregisterWindow(win) == tsrInvalidArgument, "deregistering twice passed");
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Forked processes over shm: windows of memory the processes can map run zero-copy; windows of
// malloc memory (not exportable to another process) are registered but staged, alike on both.
TEST(DeviceWindows, ProcessesMapSharedWindowsAndStageOthers) {
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = 10;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    for (bool shared : {true, false}) {
      WindowBuffer buf(windowBytesFor(2), shared);
      TT_CHECK(buf.data() != nullptr, "no memory for the window");
      void* win = nullptr;
      TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
      const uint64_t before = zeroCopyCalls(*e);
      int salt = shared ? 10 : 20;
      for (Collective coll :
           {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
        DevCase c{coll, "", tsrFloat32, RedKind::kSum, 20000, 0, false, ++salt};
        std::string err = runDeviceCaseIn(*e, ctx.rank(), 2, c, buf.data(), buf.size());
        if (!err.empty()) return std::string(shared ? "shared: " : "malloc: ") + err;
      }
      const uint64_t ran = zeroCopyCalls(*e) - before;
      if (shared)
        TT_CHECK(ran == 3, "%llu of 3 calls on a shared window ran zero-copy",
                 static_cast<unsigned long long>(ran));
      else
        TT_CHECK(ran == 0, "%llu calls on a malloc window ran zero-copy across processes",
                 static_cast<unsigned long long>(ran));
      TT_CHECK_OK(e->deregisterWindow(win));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Over ucx every peer is reached through port channels, which map no memory: windows register
// (every rank agrees they are not usable) and calls on them are staged, and right; so are calls
// on local registrations.
TEST(DeviceWindows, PeersOverUcxStageCallsOnWindows) {
  std::string why;
  if (!transportBuilt(TransportKind::kUcx, &why)) GTEST_SKIP() << "ucx: " << why;
  test::ScopedEnv transport("TESSERA_TRANSPORT", "ucx");
  test::ScopedEnv tls("UCX_TLS", "tcp");
  auto results = test::runTransportRanks(RankMode::kProcesses, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = 10;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    WindowBuffer buf(windowBytesFor(2), true);
    void* win = nullptr;
    TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
    DevCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 20000, 0, false, 5};
    std::string err = runDeviceCaseIn(*e, ctx.rank(), 2, c, buf.data(), buf.size());
    if (!err.empty()) return err;
    TT_CHECK(zeroCopyCalls(*e) == 0, "a call ran zero-copy over port channels");
    TT_CHECK_OK(e->deregisterWindow(win));
    // A local registration of the same memory: no peer maps it over ucx, staged alike.
    void* reg = nullptr;
    TT_CHECK_OK(e->registerDeviceBuffer(buf.data(), buf.size(), &reg));
    err = runDeviceCaseIn(*e, ctx.rank(), 2, c, buf.data(), buf.size());
    if (!err.empty()) return "local registration: " + err;
    TT_CHECK(zeroCopyCalls(*e) == 0, "a call on a local registration ran zero-copy over ucx");
    TT_CHECK_OK(e->deregisterDeviceBuffer(reg));
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Local registrations (tsrCommRegister) where every rank is in this process: no windows, each
// rank's buffers at an offset of its own (the boards carry each call's pointers), and every call
// zero-copy; a call outside the registrations staged; deregistration refused while this rank's
// call is in flight, then accepted; forked processes stage calls on local registrations.
TEST(DeviceWindows, LocalRegistrationsOfOneProcessRunZeroCopyThroughBoards) {
  for (int n : {2, 4, 8}) {
    auto results = test::runTransportRanks(RankMode::kThreads, n, [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      DevSetup setup;
      setup.scratchBytes = 16 << 10;
      TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
      const size_t skew = 256 * static_cast<size_t>(ctx.rank());  // offsets differ by rank
      WindowBuffer buf(windowBytesFor(n) + skew, false);
      void* reg = nullptr;
      TT_CHECK_OK(e->registerDeviceBuffer(buf.data(), buf.size(), &reg));
      std::string err =
          everyCollectiveOnWindow(*e, ctx.rank(), n, buf.data() + skew, buf.size() - skew, 23);
      if (!err.empty()) return err;
      const uint64_t before = zeroCopyCalls(*e);
      DevCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 20000, 0, false, 9};
      err = runDeviceCase(*e, ctx.rank(), n, c);
      if (!err.empty()) return err;
      TT_CHECK(zeroCopyCalls(*e) == before, "a call outside the registrations ran zero-copy");
      TT_CHECK_OK(e->deregisterDeviceBuffer(reg));
      TT_CHECK(e->deregisterDeviceBuffer(reg) == tsrInvalidArgument, "deregistered twice");
      err = runDeviceCaseIn(*e, ctx.rank(), n, c, buf.data(), buf.size());
      if (!err.empty()) return "after deregistration: " + err;
      TT_CHECK(zeroCopyCalls(*e) == before, "a call after deregistration ran zero-copy");
      return std::string();
    });
    test::expectAllRanksOk(results);
  }
}

TEST(DeviceWindows, LocalDeregistrationWhileItsCallIsInFlightIsRefused) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    const size_t count = 50000;
    WindowBuffer buf(count * 4 * 2 + 4096, false);
    void* reg = nullptr;
    TT_CHECK_OK(e->registerDeviceBuffer(buf.data(), buf.size(), &reg));
    auto* in = reinterpret_cast<float*>(buf.data());
    auto* out = reinterpret_cast<float*>(buf.data() + count * 4);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(ctx.rank() + 1 + i % 5);
    CollCall call;
    call.collective = Collective::kAllReduce;
    call.count = count;
    call.dtype = tsrFloat32;
    (void)redOpBuiltin(tsrSum, &call.op);
    call.sendbuf = in;
    call.recvbuf = out;
    // Once on both ranks first: the boards and the plan are set up with the peer.
    TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    TT_CHECK_OK(ctx.bootstrap().barrier());
    if (ctx.rank() == 0) {
      TT_CHECK_OK(e->enqueue(call, nullptr));  // waits for rank 1's call
      Result r = e->deregisterDeviceBuffer(reg);
      TT_CHECK(r == tsrInvalidUsage, "deregistration with a call in flight gave %s", resultName(r));
      TT_CHECK(std::string(lastErrorMessage()).find("in flight") != std::string::npos,
               "the refusal says: %s", lastErrorMessage());
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    if (ctx.rank() == 1) TT_CHECK_OK(e->enqueue(call, nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    TT_CHECK(zeroCopyCalls(*e) == 2, "the calls did not run zero-copy");
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(3 + 2 * (i % 5));
      TT_CHECK(out[i] == want, "element %zu is %g, expected %g", i, out[i], want);
    }
    TT_CHECK_OK(e->deregisterDeviceBuffer(reg));
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Local registrations between forked processes (shm): where every rank's buffers can be mapped by
// every peer (memory the processes share, as tsrMemAlloc's), each call exchanges the new
// registrations' exports and the calls run zero-copy through the boards, each rank's buffers at an
// offset of its own; a second registration is shared at its first call, a deregistered one is
// dropped by the peers; malloc memory (which another process cannot map) is staged on every rank.
// The layouts: 2 and 4 processes of one rank, and 2 processes of 2 thread ranks (inproc within a
// process, shm between them).
TEST(DeviceWindows, LocalRegistrationsAcrossProcessesRunZeroCopyWhereThePeersMapThem) {
  for (int layout : {2, 4, -2}) {
    const int n = layout > 0 ? layout : 4;
    auto body = [&](TransportContext& ctx) {
      std::unique_ptr<CollectiveEngine> e;
      DevSetup setup;
      setup.timeoutSeconds = 10;
      setup.scratchBytes = 16 << 10;
      TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
      const size_t skew = 512 * static_cast<size_t>(ctx.rank());  // offsets differ by rank
      WindowBuffer buf(windowBytesFor(n) + skew, true);
      TT_CHECK(buf.data() != nullptr, "no shared memory");
      void* reg = nullptr;
      TT_CHECK_OK(e->registerDeviceBuffer(buf.data(), buf.size(), &reg));
      std::string err =
          everyCollectiveOnWindow(*e, ctx.rank(), n, buf.data() + skew, buf.size() - skew, 20);
      if (!err.empty()) return "first registration: " + err;
      // A second registration, first used now; then the first one dropped, and the second still
      // zero-copy after the peers heard of the drop.
      WindowBuffer other(windowBytesFor(n), true);
      TT_CHECK(other.data() != nullptr, "no shared memory");
      void* reg2 = nullptr;
      TT_CHECK_OK(e->registerDeviceBuffer(other.data(), other.size(), &reg2));
      uint64_t before = zeroCopyCalls(*e);
      DevCase c{Collective::kAllReduce, "", tsrFloat32, RedKind::kSum, 20000, 0, false, 61};
      err = runDeviceCaseIn(*e, ctx.rank(), n, c, other.data(), other.size());
      if (!err.empty()) return "second registration: " + err;
      TT_CHECK_OK(e->deregisterDeviceBuffer(reg));
      DevCase g{Collective::kAllGather, "", tsrFloat32, RedKind::kSum, 5000, 0, false, 62};
      err = runDeviceCaseIn(*e, ctx.rank(), n, g, other.data(), other.size());
      if (!err.empty()) return "after dropping the first: " + err;
      TT_CHECK(zeroCopyCalls(*e) - before == 2,
               "%llu of 2 calls on the second registration ran "
               "zero-copy",
               static_cast<unsigned long long>(zeroCopyCalls(*e) - before));
      TT_CHECK_OK(e->deregisterDeviceBuffer(reg2));
      // Malloc memory: registered locally, but no peer can map it: staged, and right.
      WindowBuffer priv(windowBytesFor(n), false);
      void* reg3 = nullptr;
      TT_CHECK_OK(e->registerDeviceBuffer(priv.data(), priv.size(), &reg3));
      before = zeroCopyCalls(*e);
      err = runDeviceCaseIn(*e, ctx.rank(), n, c, priv.data(), priv.size());
      if (!err.empty()) return "malloc: " + err;
      TT_CHECK(zeroCopyCalls(*e) == before,
               "a call on malloc memory ran zero-copy across "
               "processes");
      TT_CHECK_OK(e->deregisterDeviceBuffer(reg3));
      TT_CHECK_OK(ctx.bootstrap().barrier());
      return std::string();
    };
    test::expectAllRanksOk(layout > 0 ? test::runTransportRanks(RankMode::kProcesses, n, body)
                                      : exectest::runMixedRanks(2, 2, body, 60));
  }
}

// Launch mode (a grid per call): zero-copy calls on windows, and deregistration after them.
TEST(DeviceWindows, LaunchMode) {
  test::ScopedEnv launch("TESSERA_LAUNCH", "kernel");
  auto results = test::runTransportRanks(RankMode::kThreads, 3, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, DevSetup{}, &e));
    WindowBuffer buf(windowBytesFor(3), false);
    void* win = nullptr;
    TT_CHECK_OK(e->registerWindow(buf.data(), buf.size(), &win));
    int salt = 40;
    for (Collective coll :
         {Collective::kAllReduce, Collective::kAllGather, Collective::kBroadcast}) {
      DevCase c{coll, "", tsrFloat32, RedKind::kSum, 5000, 1, false, ++salt};
      std::string err = runDeviceCaseIn(*e, ctx.rank(), 3, c, buf.data(), buf.size());
      if (!err.empty()) return err;
    }
    TT_CHECK(zeroCopyCalls(*e) >= 1, "no call ran zero-copy in launch mode");
    TT_CHECK_OK(e->deregisterWindow(win));
    return std::string();
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::devtest
