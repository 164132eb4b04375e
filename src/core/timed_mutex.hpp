#pragma once
// A mutex with try_lock_until, in place of std::timed_mutex.
//
// Why not std::timed_mutex: GCC 12's libstdc++ implements its try_lock_until on
// steady_clock with pthread_mutex_clocklock, which GCC 12's ThreadSanitizer does not
// intercept. TSan then never sees the lock and reports every unlock as "unlock of an unlocked
// mutex" and the data it guards as races (scripts/sanitize.sh tsan). This one is a std::mutex,
// a condition variable and a flag; TSan understands all three (it intercepts
// pthread_cond_clockwait), so its findings around the lock are real ones.
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tessera {

class TimedMutex {
 public:
  TimedMutex() = default;
  TimedMutex(const TimedMutex&) = delete;
  TimedMutex& operator=(const TimedMutex&) = delete;

  void lock() {
    std::unique_lock<std::mutex> g(m_);
    cv_.wait(g, [this] { return !locked_; });
    locked_ = true;
  }
  bool try_lock() {
    std::lock_guard<std::mutex> g(m_);
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& at) {
    std::unique_lock<std::mutex> g(m_);
    if (!cv_.wait_until(g, at, [this] { return !locked_; })) return false;
    locked_ = true;
    return true;
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(std::chrono::steady_clock::now() + d);
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> g(m_);
      locked_ = false;
    }
    cv_.notify_one();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool locked_ = false;
};

}  // namespace tessera
