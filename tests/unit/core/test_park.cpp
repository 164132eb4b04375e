// The parking primitive of waiting host threads (src/core/park.hpp) and the host side of a
// semaphore signal (device::hostWakeParked): a sleeper wakes when its word changes and the
// signaller sees its flag, a sleep without a signal ends at its timeout, no wake-up is lost under
// a ping-pong that parks at every wait (between threads and between processes), and the flags are
// lowered again.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>

#include "core/park.hpp"
#include "support/harness.hpp"
#include "tessera/device/semaphore_device.hpp"

namespace tessera {
namespace {

using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// One semaphore block as transport/semaphore.hpp lays it out.
struct alignas(64) Block {
  uint64_t inbound = 0;
  uint64_t expected = 0;
  uint32_t parked = 0;
  uint32_t pad[11] = {};
};
static_assert(offsetof(Block, parked) == device::kSemaphoreParkedOffset);

void signal(Block* b) {
  __atomic_fetch_add(&b->inbound, 1, __ATOMIC_SEQ_CST);
  device::hostWakeParked(&b->inbound, &b->parked);
}

double msSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

// Waits for b->inbound >= want the way runOperations does (poll, HostWaiter, park on the word),
// except that a park sleeps until the deadline: only the signal's wake-up ends it early, so a lost
// wake-up fails the wait instead of costing one 20 ms slice.
bool waitFor(Block* b, uint64_t want, double seconds) {
  HostWaiter w;
  ParkSet set;
  Deadline d = Deadline::after(seconds);
  for (;;) {
    if (__atomic_load_n(&b->inbound, __ATOMIC_ACQUIRE) >= want) return true;
    if (d.expired()) return false;
    if (w.idle() == WaitStep::kPoll) continue;
    set.clear();
    set.add(device::counterFutexWord(&b->inbound), &b->parked);
    set.arm();
    if (__atomic_load_n(&b->inbound, __ATOMIC_ACQUIRE) >= want) {
      set.disarm();
      continue;
    }
    double left = d.remainingSeconds();
    set.sleep(left > 0 ? static_cast<uint64_t>(left * 1e9) : 0);
  }
}

class ParkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = waitSettings();
    forceParkFallbackForTest(false);
  }
  void TearDown() override {
    setWaitSettingsForTest(saved_);
    forceParkFallbackForTest(false);
  }
  // Every wait parks after no spin at all: the hardest case for lost wake-ups.
  void parkAtOnce() {
    WaitSettings s;
    s.spinNs = 0;
    s.park = true;
    setWaitSettingsForTest(s);
  }
  WaitSettings saved_;
};

TEST_F(ParkTest, SleepEndsAtItsTimeoutWhenNothingChanges) {
  Block b;
  ParkSet set;
  ASSERT_TRUE(set.add(device::counterFutexWord(&b.inbound), &b.parked));
  set.arm();
  EXPECT_EQ(b.parked, 1u);
  auto t0 = SteadyClock::now();
  uint64_t slept = set.sleep(20'000'000);
  double ms = msSince(t0);
  EXPECT_GE(ms, 15.0);
  EXPECT_LT(ms, 2000.0);
  EXPECT_GE(slept, 15'000'000u);
  EXPECT_EQ(b.parked, 0u) << "sleep() lowers the flag";
}

TEST_F(ParkTest, ASignalWakesTheSleeperAndLowersItsFlag) {
  Block b;
  std::atomic<bool> armed{false};
  std::thread waker([&] {
    while (!armed.load()) std::this_thread::yield();
    std::this_thread::sleep_for(Ms(20));  // late on purpose: the sleeper must be asleep
    signal(&b);
  });
  ParkSet set;
  set.add(device::counterFutexWord(&b.inbound), &b.parked);
  set.arm();
  armed = true;
  auto t0 = SteadyClock::now();
  set.sleep(10'000'000'000ull);
  double ms = msSince(t0);
  waker.join();
  EXPECT_EQ(b.inbound, 1u);
  EXPECT_LT(ms, 5000.0) << "the signal must end a 10 s sleep";
  EXPECT_EQ(b.parked, 0u);
}

TEST_F(ParkTest, ASignalWithoutASleeperMakesNoSystemCallAndKeepsTheFlagDown) {
  Block b;
  signal(&b);
  signal(&b);
  EXPECT_EQ(b.inbound, 2u);
  EXPECT_EQ(b.parked, 0u);
}

TEST_F(ParkTest, AChangeBeforeTheSleepEndsItAtOnce) {
  // The word moved between arm() (which read it) and sleep(): the kernel compares and returns.
  Block b;
  ParkSet set;
  set.add(device::counterFutexWord(&b.inbound), &b.parked);
  set.arm();
  __atomic_fetch_add(&b.inbound, 1, __ATOMIC_SEQ_CST);  // no wake call at all
  auto t0 = SteadyClock::now();
  set.sleep(5'000'000'000ull);
  EXPECT_LT(msSince(t0), 2000.0);
}

void expectAnyOfThreeWakes(bool fallback) {
  forceParkFallbackForTest(fallback);
  for (int which = 0; which < 3; ++which) {
    Block b[3];
    std::atomic<bool> armed{false};
    std::thread waker([&] {
      while (!armed.load()) std::this_thread::yield();
      std::this_thread::sleep_for(Ms(10));  // late on purpose: the sleeper must be asleep
      signal(&b[which]);
    });
    ParkSet set;
    for (Block& x : b) set.add(device::counterFutexWord(&x.inbound), &x.parked);
    set.arm();
    armed = true;
    auto t0 = SteadyClock::now();
    // Returns after the signal (futex_waitv) or after one fallback slice of 100 us; either way
    // long before the timeout, and the caller then sees the count.
    while (__atomic_load_n(&b[which].inbound, __ATOMIC_ACQUIRE) == 0) {
      set.arm();
      if (__atomic_load_n(&b[which].inbound, __ATOMIC_ACQUIRE) != 0) {
        set.disarm();
        break;
      }
      set.sleep(5'000'000'000ull);
      ASSERT_LT(msSince(t0), 4000.0) << "word " << which << (fallback ? " (fallback)" : "");
    }
    waker.join();
    for (Block& x : b) EXPECT_EQ(x.parked, 0u);
  }
}

TEST_F(ParkTest, AnyOfSeveralWordsWakes) { expectAnyOfThreeWakes(false); }

TEST_F(ParkTest, AnyOfSeveralWordsWakesWithoutFutexWaitv) { expectAnyOfThreeWakes(true); }

TEST_F(ParkTest, PingPongThatParksAtEveryWaitLosesNoWakeUp) {
  parkAtOnce();
  constexpr uint64_t kRounds = 20000;
  Block a, b;  // a: thread 0's counter, b: thread 1's
  std::atomic<int> failed{0};
  uint64_t parks0 = 0;
  std::thread peer([&] {
    for (uint64_t i = 1; i <= kRounds; ++i) {
      if (!waitFor(&b, i, 10)) {
        failed = 1;
        return;
      }
      signal(&a);
    }
  });
  threadWaitStats() = WaitStats{};
  for (uint64_t i = 1; i <= kRounds && !failed; ++i) {
    signal(&b);
    if (!waitFor(&a, i, 10)) failed = 2;
  }
  parks0 = threadWaitStats().parks;
  peer.join();
  EXPECT_EQ(failed.load(), 0) << "a wait ran into its 10 s deadline: a wake-up was lost";
  EXPECT_EQ(a.inbound, kRounds);
  EXPECT_EQ(b.inbound, kRounds);
  EXPECT_GT(parks0, 0u) << "with no spin budget the waits must park";
}

TEST_F(ParkTest, PingPongBetweenProcessesOnSharedPages) {
  parkAtOnce();
  constexpr uint64_t kRounds = 5000;
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* blocks = new (mem) Block[2];
  std::vector<int> rc = test::forkRanks(
      2,
      [&](int rank) {
        Block* mine = &blocks[rank];
        Block* theirs = &blocks[1 - rank];
        for (uint64_t i = 1; i <= kRounds; ++i) {
          if (rank == 0) signal(theirs);
          if (!waitFor(mine, i, 10)) return 10 + rank;
          if (rank == 1) signal(theirs);
        }
        return threadWaitStats().parks > 0 ? 0 : 20 + rank;
      },
      60);
  EXPECT_EQ(rc, (std::vector<int>{0, 0})) << "10+r: rank r lost a wake-up; 20+r: it never parked";
  munmap(mem, 4096);
}

TEST_F(ParkTest, WithParkingOffTheWaiterNeverSaysPark) {
  WaitSettings s;
  s.park = false;
  setWaitSettingsForTest(s);
  HostWaiter w;
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(w.idle(), WaitStep::kPoll) << "poll " << i;
}

TEST_F(ParkTest, AWaitParksOnceItsSpinBudgetIsSpent) {
  WaitSettings s;
  s.spinNs = 200'000;  // 0.2 ms
  setWaitSettingsForTest(s);
  HostWaiter w;
  auto t0 = SteadyClock::now();
  while (w.idle() == WaitStep::kPoll) ASSERT_LT(msSince(t0), 5000.0);
  // Parking comes after the budget, or earlier when a yield found the core shared; either way
  // the loop above ended.
  SUCCEED();
}

}  // namespace
}  // namespace tessera
