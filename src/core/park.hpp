// How a host thread waits for its peers (DESIGN.md, "Waiting"): it spins while the core is its
// own, and parks on a futex when the core is shared or the wait is long. It never sleeps blindly:
// a parked waiter is woken by the signal it waits for, and a signaller makes that system call only
// when the waiter said it parked.
//
// The words: a waiter sleeps on the low 32 bits of a semaphore's inbound counter (the futex word;
// it changes with every signal) and raises a "parked" flag next to it. The signaller adds to the
// counter, then reads the flag and wakes the word when the flag is up (device::hostWakeParked).
// Both sides use sequentially consistent operations in the order "write mine, then read theirs",
// so at least one sees the other: either the waiter sees the new count and does not sleep, or the
// signaller sees the flag and wakes it; and the kernel's futex compares the word before it sleeps,
// so a signal between the waiter's last look and its sleep ends the sleep at once. The words are
// shared futexes (no FUTEX_PRIVATE_FLAG): the counter lives in memory other processes map (shm).
//
// Several words at once go to futex_waitv (Linux 5.16); an older kernel gets a short timed wait on
// the first word instead (the others then cost at most that timeout in latency).
//
// The policy (HostWaiter), per wait:
//   1. spin (pause, poll) for kProbeNs;
//   2. yield once and time it: if another thread ran on this core meanwhile, the core is shared:
//      hand it over at every poll (a peer rank on the same core then runs at once, and the core
//      never goes idle); if the other thread kept it for a whole time slice (it waits for no one),
//      park now, and for a while later waits do not yield (each yield would hand that thread
//      another slice): they spin up to the budget, then park;
//   3. otherwise spin on (yielding now and then, which costs nothing on an idle core) up to the
//      spin budget (TESSERA_WAIT_SPIN_US), then park: a long wait gives its core away.
// Waking a parked thread costs the waker a system call and, where the waiter's core went idle,
// the core's wake-up (about 20 us in a virtual machine): the spin budget keeps short waits on a
// core of one's own from paying it.
#pragma once

#include <cstdint>

#include "core/deadline.hpp"

namespace tessera {

// The most words one park waits on (futex_waitv takes at most 128).
inline constexpr int kMaxParkWords = 64;

// The words a thread is about to sleep on.
class ParkSet {
 public:
  void clear() { n_ = 0; }
  // `word` changes when what the caller waits for arrives; `parked` is the flag its signaller
  // reads. False (and nothing added) when the set is full.
  bool add(const uint32_t* word, uint32_t* parked);
  int size() const { return n_; }
  bool empty() const { return n_ == 0; }

  // Raises every flag, then reads every word. The caller then checks once more whether what it
  // waits for arrived (a signal that landed before the words were read shows there) and calls
  // sleep() only when it did not.
  void arm();
  // Sleeps until a word differs from what arm() read, `timeoutNs` passed, or a spurious wake;
  // then lowers every flag. Returns the nanoseconds it slept.
  uint64_t sleep(uint64_t timeoutNs);
  // Lowers every flag without sleeping (the check after arm() found work).
  void disarm();

 private:
  struct Entry {
    const uint32_t* word;
    uint32_t* parked;
    uint32_t seen;
  };
  Entry e_[kMaxParkWords];
  int n_ = 0;
};

enum class WaitStep : uint8_t {
  kPoll,  // poll again (the waiter paused or yielded already)
  kPark,  // park now: collect the words waited on and sleep, or nap() when there are none
};

// One thread's waiting policy. Keep one per waiting loop; moved() at every pass that moved.
class HostWaiter {
 public:
  HostWaiter();
  // A pass moved: the wait (if any) is over.
  void moved() { polls_ = 0; }
  // A pass moved nothing: pauses, yields, or says to park.
  WaitStep idle();
  // For waits that cannot park (no words: an unmapped transport, device memory): a bounded
  // backoff instead (yield, then sleeps of 10 and 100 us).
  void nap();
  // The timeout of one park: waits wake at least this often to look at deadlines, aborts and
  // peers' liveness.
  static constexpr uint64_t kParkSliceNs = 20'000'000;

 private:
  uint32_t polls_ = 0;
  uint64_t start_ = 0;  // when this wait began (clockNs)
  uint64_t nextYield_ = 0;
  uint32_t naps_ = 0;
  bool sharing_ = false;  // a yield of this wait ran another thread
  uint32_t fastYields_ = 0;
};

// The timeout of one park that must end by `deadline`: at most HostWaiter::kParkSliceNs.
uint64_t parkSliceNs(const Deadline& deadline);

// The policy's settings (TESSERA_WAIT_SPIN_US, TESSERA_WAIT_PARK), read once per process.
struct WaitSettings {
  uint64_t spinNs = 50'000;  // spin budget on a core of one's own
  bool park = true;          // false: never park (spin, yield, sleep)
};
const WaitSettings& waitSettings();
// Tests: replace the settings (not thread-safe: call before any wait).
void setWaitSettingsForTest(const WaitSettings& s);
// Tests: use the single-word fallback even where futex_waitv exists.
void forceParkFallbackForTest(bool on);

// Counters of this thread's waits, for tests and the perf binaries' diagnostics.
struct WaitStats {
  uint64_t parks = 0;      // sleeps on a futex
  uint64_t parkedNs = 0;   // time spent in them
  uint64_t timeouts = 0;   // of them, those that ended at their timeout, not by a wake-up
  uint64_t shared = 0;     // waits whose yield ran another thread (the core is shared)
  uint64_t contended = 0;  // yields that gave the core away for a whole time slice
  uint64_t naps = 0;       // bounded sleeps of waits that could not park
};
WaitStats& threadWaitStats();

}  // namespace tessera
