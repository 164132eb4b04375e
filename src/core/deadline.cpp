#include "core/deadline.hpp"

#include <thread>

namespace tessera {

void Backoff::pause() {
  ++iter_;
  if (iter_ < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else if (iter_ < 256) {
    std::this_thread::yield();
  } else {
    uint32_t us = iter_ < 1024 ? 10 : 1000;
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}

}  // namespace tessera
