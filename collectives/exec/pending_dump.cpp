// TESSERA_DUMP_ON_TIMEOUT (pending_dump.hpp): the SIGUSR1 plumbing. What is logged comes from the
// operations' blocked() sentences, on the threads that drive them (run.cpp), never from the
// signal handler.
#include "collectives/exec/pending_dump.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/env.hpp"
#include "core/status.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

std::atomic<uint64_t> gGeneration{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the signal handler needs it");

void onSigusr1(int) { gGeneration.fetch_add(1, std::memory_order_relaxed); }

// Whether process `pid` catches SIGUSR1 (its SigCgt mask in /proc/PID/status).
bool catchesSigusr1(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (mask >> (SIGUSR1 - 1)) & 1ULL;
  }
  return false;
}

}  // namespace

// Read at each use (an engine's creation, a timeout: neither is hot), so that the variable as it
// is then counts, not as it was at the process's first timeout.
bool dumpOnTimeout() {
  bool v = false;
  return envBool("TESSERA_DUMP_ON_TIMEOUT", &v) == tsrSuccess && v;
}

void installDumpSignal() {
  if (!dumpOnTimeout()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onSigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, nullptr) != 0)
      TSR_WARN("TESSERA_DUMP_ON_TIMEOUT: cannot catch SIGUSR1: %s", std::strerror(errno));
  });
}

uint64_t dumpGeneration() { return gGeneration.load(std::memory_order_relaxed); }

int signalDumpPeers(const std::vector<int>& pids) {
  int sent = 0;
  const int self = static_cast<int>(getpid());
  for (size_t i = 0; i < pids.size(); ++i) {
    const int pid = pids[i];
    if (pid <= 0 || pid == self) continue;
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = pids[j] == pid;
    if (seen) continue;
    if (!catchesSigusr1(pid)) {
      TSR_INFO("TESSERA_DUMP_ON_TIMEOUT: process %d does not catch SIGUSR1; not signalled", pid);
      continue;
    }
    if (kill(pid, SIGUSR1) == 0) ++sent;
  }
  return sent;
}

}  // namespace tessera
