#include "core/park.hpp"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "core/env.hpp"
#include "tessera/device/atomics.hpp"

namespace tessera {
namespace {

// Spin this long before the first yield: a peer on a core of its own answers well within it
// (a cache line's round trip between two cores is about 0.1 us).
constexpr uint64_t kProbeNs = 2'000;
// Yield at most this often while spinning: a yield on an idle core costs a system call (about
// 0.4 us), and each one asks again whether another thread wants the core.
constexpr uint64_t kYieldEveryNs = 8'000;
// A yield that took longer than this ran another thread: the core is shared, and the wait hands
// it over at every poll from then on (a rank sharing the core runs until it waits in turn, and
// the core never goes idle, which would make the next wake-up cost the core's wake-up too).
constexpr uint64_t kOtherRanNs = 5'000;
constexpr uint64_t kSharedMemoryNs = 10'000'000;
constexpr uint64_t kLongYieldPairNs = 2'000'000;
// A fair scheduler (EEVDF) may hand the core straight back to the yielder while the thread that
// shares it has run more than its share: the handover waits for that, yield after yield. Only
// this many yields in a row that ran nobody mean the core is no longer shared.
constexpr uint32_t kAloneAfterYields = 32;
// A yield that took longer than this gave the core to a thread that does not wait for anyone (it
// ran a whole time slice): for kHogMemoryNs waits do not yield (each yield would hand it another
// slice); they spin up to the budget and then park, so that a long wait leaves the core to that
// thread and comes back with the wake-up.
constexpr uint64_t kHogNs = 1'000'000;
constexpr uint64_t kHogMemoryNs = 50'000'000;
// futex_waitv missing: one word is waited on, for at most this long when there are others.
constexpr uint64_t kFallbackSliceNs = 100'000;

thread_local uint64_t tlsHogUntil = 0;
thread_local uint64_t tlsSharedUntil = 0;
thread_local uint64_t tlsLastLongYield = 0;
thread_local WaitStats tlsStats;

std::atomic<bool> gForceFallback{false};
std::atomic<bool> gNoWaitv{false};  // the kernel said ENOSYS once

WaitSettings readSettings() {
  WaitSettings s;
  int64_t us = 0;
  if (envInt("TESSERA_WAIT_SPIN_US", &us) == tsrSuccess)
    s.spinNs = static_cast<uint64_t>(us) * 1000;
  bool park = true;
  if (envBool("TESSERA_WAIT_PARK", &park) == tsrSuccess) s.park = park;
  return s;
}

WaitSettings& settings() {
  static WaitSettings s = readSettings();
  return s;
}

inline void cpuPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

timespec absoluteAfter(uint64_t ns) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t t = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull +
               static_cast<uint64_t>(now.tv_nsec) + ns;
  return timespec{static_cast<time_t>(t / 1'000'000'000ull),
                  static_cast<long>(t % 1'000'000'000ull)};
}

// One word: FUTEX_WAIT with a relative timeout (shared futex). True when it timed out.
bool waitOne(const uint32_t* word, uint32_t seen, uint64_t timeoutNs) {
  timespec rel{static_cast<time_t>(timeoutNs / 1'000'000'000ull),
               static_cast<long>(timeoutNs % 1'000'000'000ull)};
  return syscall(SYS_futex, word, FUTEX_WAIT, seen, &rel, nullptr, 0) < 0 && errno == ETIMEDOUT;
}

}  // namespace

bool ParkSet::add(const uint32_t* word, uint32_t* parked) {
  if (n_ == kMaxParkWords) return false;
  for (int i = 0; i < n_; ++i)
    if (e_[i].word == word) return true;
  e_[n_++] = Entry{word, parked, 0};
  return true;
}

void ParkSet::arm() {
  for (int i = 0; i < n_; ++i) __atomic_store_n(e_[i].parked, 1u, __ATOMIC_SEQ_CST);
  for (int i = 0; i < n_; ++i) e_[i].seen = __atomic_load_n(e_[i].word, __ATOMIC_SEQ_CST);
}

void ParkSet::disarm() {
  for (int i = 0; i < n_; ++i) __atomic_store_n(e_[i].parked, 0u, __ATOMIC_RELAXED);
}

uint64_t ParkSet::sleep(uint64_t timeoutNs) {
  if (n_ == 0) return 0;
  uint64_t t0 = device::clockNs();
  bool vector = n_ > 1 && !gForceFallback.load(std::memory_order_relaxed) &&
                !gNoWaitv.load(std::memory_order_relaxed);
  bool timedOut = false;
#if defined(SYS_futex_waitv)
  if (vector) {
    struct futex_waitv w[kMaxParkWords] = {};
    for (int i = 0; i < n_; ++i) {
      w[i].val = e_[i].seen;
      w[i].uaddr = reinterpret_cast<uintptr_t>(e_[i].word);
      w[i].flags = FUTEX_32;
    }
    timespec at = absoluteAfter(timeoutNs);
    long r = syscall(SYS_futex_waitv, w, n_, 0, &at, CLOCK_MONOTONIC);
    if (r < 0 && errno == ENOSYS) {
      gNoWaitv.store(true, std::memory_order_relaxed);
      vector = false;
    }
    timedOut = r < 0 && errno == ETIMEDOUT;
  }
#else
  vector = false;
#endif
  if (!vector) {
    bool sliced = n_ > 1 && timeoutNs > kFallbackSliceNs;
    timedOut = waitOne(e_[0].word, e_[0].seen, sliced ? kFallbackSliceNs : timeoutNs) && !sliced;
  }
  disarm();
  if (timedOut) ++tlsStats.timeouts;
  uint64_t slept = device::clockNs() - t0;
  ++tlsStats.parks;
  tlsStats.parkedNs += slept;
  return slept;
}

HostWaiter::HostWaiter() = default;

WaitStep HostWaiter::idle() {
  uint32_t p = polls_++;
  if (p == 0) {
    start_ = device::clockNs();
    nextYield_ = start_ + kProbeNs;
    naps_ = 0;
    // A core found shared a moment ago likely still is: hand it over from the first poll.
    sharing_ = start_ < tlsSharedUntil;
    fastYields_ = 0;
  }
  const WaitSettings& s = settings();
  if (!s.park) {
    // The policy before parking existed: spin, then yield (sleeps come from nap()).
    if (p < 256) {
      cpuPause();
      return WaitStep::kPoll;
    }
    if (p < 65536) {
      sched_yield();
      return WaitStep::kPoll;
    }
    return WaitStep::kPark;
  }
  if (!sharing_ && (p & 7) != 7) {
    cpuPause();
    return WaitStep::kPoll;
  }
  uint64_t now = device::clockNs();
  uint64_t waited = now - start_;
  if (now < tlsHogUntil) {
    // Another thread takes whole slices of this core: a yield would hand it one, so spin (the
    // peer on its own core usually answers within microseconds) and park after the budget.
    if (waited >= s.spinNs) return WaitStep::kPark;
    cpuPause();
    return WaitStep::kPoll;
  }
  if (waited >= s.spinNs) return WaitStep::kPark;
  if (sharing_ || now >= nextYield_) {
    sched_yield();
    uint64_t after = device::clockNs();
    if (after - now >= kHogNs) {
      ++tlsStats.contended;
      tlsHogUntil = after + kHogMemoryNs;
      return WaitStep::kPark;
    }
    if (after - now >= kOtherRanNs) {
      // Another thread ran: hand the core over at every poll for the rest of this wait. Later
      // waits start that way too only after two such yields close together: a single one may be
      // the hypervisor taking the core for a moment.
      if (!sharing_) ++tlsStats.shared;
      sharing_ = true;
      if (tlsLastLongYield != 0 && now - tlsLastLongYield < kLongYieldPairNs)
        tlsSharedUntil = after + kSharedMemoryNs;
      tlsLastLongYield = after;
      fastYields_ = 0;
    } else if (sharing_ && ++fastYields_ >= kAloneAfterYields) {
      sharing_ = false;  // nobody else has wanted the core for a while
    }
    nextYield_ = after + kYieldEveryNs;
    return WaitStep::kPoll;
  }
  cpuPause();
  return WaitStep::kPoll;
}

void HostWaiter::nap() {
  ++tlsStats.naps;
  uint32_t n = naps_++;
  if (n < 2048) {
    sched_yield();
    return;
  }
  timespec ts{0, n < 4096 ? 10'000 : 100'000};
  nanosleep(&ts, nullptr);
}

uint64_t parkSliceNs(const Deadline& deadline) {
  double left = deadline.remainingSeconds() * 1e9;
  if (left <= 0) return 0;
  return left < static_cast<double>(HostWaiter::kParkSliceNs) ? static_cast<uint64_t>(left)
                                                              : HostWaiter::kParkSliceNs;
}

const WaitSettings& waitSettings() { return settings(); }
void setWaitSettingsForTest(const WaitSettings& s) { settings() = s; }
void forceParkFallbackForTest(bool on) { gForceFallback.store(on, std::memory_order_relaxed); }
WaitStats& threadWaitStats() { return tlsStats; }

}  // namespace tessera
