// Semaphore waits that park (src/core/park.hpp): with no spin budget every wait that finds no
// signal sleeps on the counter's futex word, and the peer's signal (Semaphore::signal, the
// memory channel's device-handle signal, and a port channel's signal, which the proxy thread
// carries out) must wake it: a ping-pong of many rounds finishes, and almost no park ends at its
// timeout (a signal that wakes no one leaves every park to its 20 ms slice, and the run still
// finishes inside its deadline: only the timeout count shows it). Over ucx, whose remote atomics
// wake no one, waits must not park at all (they poll).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "core/park.hpp"
#include "transport/channel.hpp"
#include "transport/proxy.hpp"
#include "transport/semaphore.hpp"
#include "transport_matrix.hpp"

namespace tessera::test {
namespace {

constexpr int kRounds = 2000;

enum class Signaller { kSemaphore, kMemoryChannelHandle, kPortChannel };

std::string pingPong(TransportContext& ctx, TransportKind kind, Signaller how) {
  int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, kind, &conn));
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
  const uint32_t* word = nullptr;
  uint32_t* parked = nullptr;
  bool parkable = sem->parkable(&word, &parked);
  bool wakes = kind == TransportKind::kInproc || kind == TransportKind::kShm;
  TT_CHECK(parkable == wakes, "%s semaphore says parkable=%d", transportName(kind), parkable);
  std::unique_ptr<MemoryChannel> mc;
  std::unique_ptr<PortChannel> pc;
  std::shared_ptr<Memory> local;
  std::shared_ptr<RemoteMemory> remote;
  if (how != Signaller::kSemaphore) {
    TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &local));
    TT_CHECK_OK(ctx.exchangeMemory(*conn, *local, &remote, 0));
    if (how == Signaller::kMemoryChannelHandle)
      TT_CHECK_OK(ctx.createMemoryChannel(conn, remote, local, sem, &mc));
    else
      TT_CHECK_OK(ctx.createPortChannel(conn, remote, local, sem, &pc));
  }
  threadWaitStats() = WaitStats{};
  for (int i = 0; i < kRounds; ++i) {
    bool mine = (i % 2) == me;  // rank 0 signals on even rounds, rank 1 on odd ones
    if (mine) {
      // Now and then the signal comes late, so the peer's wait certainly sleeps first.
      if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (mc)
        mc->deviceHandle().signal();
      else if (pc)
        TT_CHECK_OK(pc->signal());
      else
        TT_CHECK_OK(sem->signal());
    } else {
      TT_CHECK_OK(sem->wait(10));
    }
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (pc) {
    TT_CHECK_OK(pc->flush());
    // Neither rank tears its endpoint down while the other's flush is still in flight (over ucx
    // that reset the peer's flush: "Connection reset by remote peer", CI 1 in 2).
    TT_CHECK_OK(ctx.bootstrap().barrier());
  }
  uint64_t parks = threadWaitStats().parks, timeouts = threadWaitStats().timeouts;
  if (wakes) TT_CHECK(parks > 0, "no wait parked over %s", transportName(kind));
  // A wake lost now and then to a descheduled signaller is noise; lost wakes are every park.
  TT_CHECK(timeouts * 10 <= parks,
           "%llu of %llu parked waits over %s ended at their timeout: the signal woke no one",
           static_cast<unsigned long long>(timeouts), static_cast<unsigned long long>(parks),
           transportName(kind));
  if (!wakes)
    TT_CHECK(parks == 0, "%llu waits parked over %s, which wakes no sleeper",
             static_cast<unsigned long long>(parks), transportName(kind));
  return "";
}

class SemaphorePark : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override {
    saved_ = waitSettings();
    WaitSettings s;
    s.spinNs = 0;  // park at every wait that finds no signal
    setWaitSettingsForTest(s);
  }
  void TearDown() override { setWaitSettingsForTest(saved_); }
  // Both ranks run `body`; every wait's deadline 15 s, the whole run's 60 s (a hang's bound).
  void runBoth(const std::function<std::string(TransportContext&)>& body) {
    RankOptions o;
    o.timeoutSeconds = 15;
    o.runSeconds = 60;
    expectAllRanksOk(runCase(GetParam(), body, o));
  }
  WaitSettings saved_;
};

TEST_P(SemaphorePark, SignalsWakeParkedWaits) {
  TransportCase c = GetParam();
  runBoth([&](TransportContext& ctx) { return pingPong(ctx, c.kind, Signaller::kSemaphore); });
}

// The memory channel's device-handle signal (what the host executor's hot path uses), over the
// transports that map memory.
class SemaphoreParkMapped : public SemaphorePark {};

TEST_P(SemaphoreParkMapped, DeviceHandleSignalsWakeParkedWaits) {
  TransportCase c = GetParam();
  runBoth([&](TransportContext& ctx) {
    return pingPong(ctx, c.kind, Signaller::kMemoryChannelHandle);
  });
}

// A port channel's signal: the proxy thread adds to the peer's counter and must wake it too.
TEST_P(SemaphorePark, PortChannelSignalsWakeParkedWaits) {
  TransportCase c = GetParam();
  runBoth([&](TransportContext& ctx) { return pingPong(ctx, c.kind, Signaller::kPortChannel); });
}

// The proxy thread of an idle port channel parks on its FIFO's doorbell instead of polling, and
// a push wakes it: rounds of (idle a millisecond, put + signal + flush) each park the proxy, and
// the ring after the push ends the park (a park that lasts its whole 20 ms slice was not woken).
std::string idleProxy(TransportContext& ctx, TransportKind kind) {
  int me = ctx.rank(), peer = 1 - me;
  std::shared_ptr<Connection> conn;
  TT_CHECK_OK(ctx.connect(peer, kind, &conn));
  std::shared_ptr<Semaphore> sem;
  TT_CHECK_OK(ctx.createSemaphore(conn, &sem));
  std::shared_ptr<Memory> local;
  std::shared_ptr<RemoteMemory> remote;
  TT_CHECK_OK(ctx.allocate(4096, MemoryKind::kHost, &local));
  TT_CHECK_OK(ctx.exchangeMemory(*conn, *local, &remote, 0));
  std::unique_ptr<PortChannel> pc;
  TT_CHECK_OK(ctx.createPortChannel(conn, remote, local, sem, &pc));
  std::shared_ptr<ProxyService> proxy;
  TT_CHECK_OK(ctx.proxy(&proxy));
  TT_CHECK(proxy->parksWhenIdle(), "the proxy polls (a device FIFO, or TESSERA_WAIT_PARK=0)");
  constexpr int kIdleRounds = 200;
  uint64_t parks0 = proxy->parks(), timeouts0 = proxy->parkTimeouts();
  for (int i = 0; i < kIdleRounds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (me == 0) {
      TT_CHECK_OK(pc->putWithSignal(0, 0, 64));
      TT_CHECK_OK(pc->flush());
    } else {
      TT_CHECK_OK(sem->wait(10));
    }
  }
  TT_CHECK_OK(ctx.bootstrap().barrier());
  if (me == 0) {
    uint64_t parks = proxy->parks() - parks0, timeouts = proxy->parkTimeouts() - timeouts0;
    TT_CHECK(parks >= kIdleRounds / 2, "the idle proxy parked %llu times in %d idle gaps",
             static_cast<unsigned long long>(parks), kIdleRounds);
    TT_CHECK(timeouts * 10 <= parks,
             "%llu of the proxy's %llu parks ended at their timeout: pushes did not wake it",
             static_cast<unsigned long long>(timeouts), static_cast<unsigned long long>(parks));
  }
  return "";
}

TEST_P(SemaphorePark, IdleProxyParksAndAPushWakesIt) {
  TransportCase c = GetParam();
  runBoth([&](TransportContext& ctx) { return idleProxy(ctx, c.kind); });
}

INSTANTIATE_TEST_SUITE_P(HostTransports, SemaphorePark,
                         ::testing::Values(inprocCase(2), shmCase(2), ucxTcpCase(2)),
                         TransportCaseName());
INSTANTIATE_TEST_SUITE_P(MappingTransports, SemaphoreParkMapped,
                         ::testing::Values(inprocCase(2), shmCase(2)), TransportCaseName());

}  // namespace
}  // namespace tessera::test
