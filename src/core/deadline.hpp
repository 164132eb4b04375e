// Deadlines for every wait (DESIGN.md, principle 4: nothing waits forever).
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  // A deadline `seconds` from now; seconds <= 0 means "already expired".
  static Deadline after(double seconds) {
    Deadline d;
    d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds > 0 ? seconds : 0));
    d.seconds_ = seconds;
    return d;
  }
  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Remaining time in milliseconds, clamped to [0, INT32_MAX] (for poll()).
  int remainingMs() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    if (left > INT32_MAX) return INT32_MAX;
    return static_cast<int>(left);
  }
  double remainingSeconds() const {
    return std::chrono::duration<double>(at_ - Clock::now()).count();
  }
  // The total length this deadline was created with, for error sentences.
  double seconds() const { return seconds_; }

 private:
  Clock::time_point at_{};
  double seconds_ = 0;
};

// Backoff for host polling loops: the same steps as device::backoff (tessera/device/atomics.hpp),
// the one policy for every wait: spin, then yield, then sleep, at most 100 us at a time (a
// transport wait pays each sleep as latency).
class Backoff {
 public:
  void pause();
  void reset() { iter_ = 0; }

 private:
  uint32_t iter_ = 0;
};

}  // namespace tessera
