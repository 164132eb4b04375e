// Failures of the emulated device executor: a peer that never makes a call (the waiting rank's
// deviceSynchronize returns within the deadline, deviceError names the peer), abort while a call
// waits, and destroying the engine idle or with a call stuck, which must return promptly.
//
// Teardown while other grids live: the emulation's free of the work queue waits for the emulated
// device to go idle, as cudaFree does on a GPU (executing_side_host.cpp; it stops the process
// when that wait passes its deadline, where a GPU would hang). Destroying executors one after
// another from one thread, and aborting one while a peer's grid runs, must not wait for the
// other grids (core/idle_release.hpp holds their frees back).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "core/idle_release.hpp"
#include "support/harness.hpp"
#include "test_device_emulation_common.hpp"
#include "unit/transport/transport_test_util.hpp"

namespace tessera::devtest {
namespace {

using test::RankMode;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Call {
  std::vector<float> in = std::vector<float>(4000, 1.0f);
  std::vector<float> out = std::vector<float>(4000, 0.0f);
  CollCall call() {
    CollCall c;
    c.collective = Collective::kAllReduce;
    c.sendbuf = in.data();
    c.recvbuf = out.data();
    c.count = in.size();
    c.dtype = tsrFloat32;
    (void)redOpBuiltin(tsrSum, &c.op);
    return c;
  }
};

// Both ranks make one call (so both bind the plan); then rank 0 alone makes a second one, which
// `during` (run on rank 0) observes; rank 1 waits at the bootstrap barrier meanwhile.
template <class Fn>
void missingPeer(double timeout, Fn during) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = timeout;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    Call a;
    TT_CHECK_OK(e->enqueue(a.call(), nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    TT_CHECK(a.out[17] == 2.0f, "first call gave %g", a.out[17]);
    std::string err;
    if (ctx.rank() == 0) {
      Call b;
      TT_CHECK_OK(e->enqueue(b.call(), nullptr));
      err = during(*e);
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return err;
  });
  test::expectAllRanksOk(results);
}

TEST(DeviceEmulationFailures, MissingPeerTimesOutNamingIt) {
  missingPeer(1.0, [](CollectiveEngine& e) -> std::string {
    auto t0 = Clock::now();
    Result r = e.deviceSynchronize();
    double took = since(t0);
    std::string why = lastErrorMessage();
    TT_CHECK(r == tsrTimeout, "deviceSynchronize gave %s: %s", resultName(r), why.c_str());
    TT_CHECK(took < 6, "deviceSynchronize took %.2f s with a 1 s deadline", took);
    Result d = e.deviceError();
    std::string sentence = lastErrorMessage();
    TT_CHECK(d == tsrTimeout, "deviceError gave %s", resultName(d));
    TT_CHECK(sentence.find("peer rank 1") != std::string::npos &&
                 sentence.find("call 2") != std::string::npos,
             "the sentence names neither the peer nor the call: %s", sentence.c_str());
    return std::string();
  });
}

TEST(DeviceEmulationFailures, AbortWhileWaitingReturnsRemoteError) {
  missingPeer(30.0, [](CollectiveEngine& e) -> std::string {
    auto t0 = Clock::now();
    std::thread aborter([&] {
      // Late on purpose (no hook says the wait has begun): the abort must end a stuck wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      e.abortDevice();
    });
    Result r = e.deviceSynchronize();
    aborter.join();
    double took = since(t0);
    TT_CHECK(r == tsrRemoteError, "deviceSynchronize gave %s: %s", resultName(r),
             lastErrorMessage());
    TT_CHECK(took < 5, "abort took %.2f s to end the wait", took);
    return std::string();
  });
}

TEST(DeviceEmulationFailures, DestroyIdleAndStuckReturnPromptly) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    DevSetup setup;
    setup.timeoutSeconds = 1.0;
    {
      std::unique_ptr<CollectiveEngine> e;
      TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
      Call a;
      TT_CHECK_OK(e->enqueue(a.call(), nullptr));
      TT_CHECK_OK(e->deviceSynchronize());
      auto t0 = Clock::now();
      e.reset();  // idle
      TT_CHECK(since(t0) < 1, "destroying an idle executor took %.2f s", since(t0));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    std::unique_ptr<CollectiveEngine> e;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    Call a;
    TT_CHECK_OK(e->enqueue(a.call(), nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    if (ctx.rank() == 0) {
      Call b;
      TT_CHECK_OK(e->enqueue(b.call(), nullptr));  // rank 1 never joins: stuck
      auto t0 = Clock::now();
      e.reset();
      TT_CHECK(since(t0) < 6, "destroying a stuck executor took %.2f s", since(t0));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return std::string();
  });
  test::expectAllRanksOk(results);
}

// Four thread ranks' executors, each with its resident grid, destroyed one after another by one
// thread (as perf/fused_perf destroys its communicators): the first free must not wait for the
// three grids still running.
TEST(DeviceEmulationFailures, DestroyOneAfterAnotherFromOneThread) {
  constexpr int kRanks = 4;
  std::mutex mutex;
  std::vector<std::unique_ptr<CollectiveEngine>> engines(kRanks);
  auto results = test::runTransportRanks(RankMode::kThreads, kRanks, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = 5;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    Call a;
    TT_CHECK_OK(e->enqueue(a.call(), nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    TT_CHECK(a.out[17] == kRanks, "the call gave %g", a.out[17]);
    {
      std::lock_guard<std::mutex> lock(mutex);
      engines[static_cast<size_t>(ctx.rank())] = std::move(e);
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    std::string err;
    if (ctx.rank() == 0) {
      const int before = residentGridCtas(kEmulatedDevice);
      auto t0 = Clock::now();
      for (auto& engine : engines) engine.reset();
      const double took = since(t0);
      if (took >= 4)
        err = strprintf("destroying %d executors from one thread took %.2f s", kRanks, took);
      else if (residentGridCtas(kEmulatedDevice) != before - kRanks * setup.ctas)
        err = strprintf("%d resident CTAs counted after the destroys, %d before",
                        residentGridCtas(kEmulatedDevice), before);
      else if (residentGridCtas(kEmulatedDevice) == 0 && heldReleases(kEmulatedDevice) != 0)
        err = strprintf("%zu releases still held with no grid running",
                        heldReleases(kEmulatedDevice));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());
    return err;
  });
  test::expectAllRanksOk(results);
}

// tsrCommAbort's shape: rank 0's call waits for a rank that never makes it; rank 0 aborts and
// destroys its executor while rank 1's grid still runs (as GpuCollStream.AbortEndsAStuckCall).
TEST(DeviceEmulationFailures, AbortAndDestroyWhileAPeersGridRuns) {
  auto results = test::runTransportRanks(RankMode::kThreads, 2, [&](TransportContext& ctx) {
    std::unique_ptr<CollectiveEngine> e;
    DevSetup setup;
    setup.timeoutSeconds = 30;
    TT_CHECK_OK(makeDeviceEngine(ctx, setup, &e));
    Call a;
    TT_CHECK_OK(e->enqueue(a.call(), nullptr));
    TT_CHECK_OK(e->deviceSynchronize());
    std::string err;
    if (ctx.rank() == 0) {
      Call b;
      TT_CHECK_OK(e->enqueue(b.call(), nullptr));  // rank 1 never joins
      auto t0 = Clock::now();
      e->abortDevice();
      e.reset();
      if (since(t0) >= 5) err = strprintf("abort and destroy took %.2f s", since(t0));
    }
    TT_CHECK_OK(ctx.bootstrap().barrier());  // rank 1's grid ran through rank 0's teardown
    return err;
  });
  test::expectAllRanksOk(results);
}

}  // namespace
}  // namespace tessera::devtest
