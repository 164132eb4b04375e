// this-host calibration (calibrate.hpp).
#include "collectives/sim/calibrate.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "collectives/exec/host_ops.hpp"
#include "core/log.hpp"

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr size_t kRegion = 64u << 20;
constexpr size_t kBlock = 4u << 20;
constexpr int kRounds = 5;

double measureCopy(char* src, char* dst) {
  std::vector<double> rates;
  for (int r = 0; r < kRounds; ++r) {
    double t0 = nowSeconds();
    for (size_t off = 0; off < kRegion; off += kBlock)
      hostCopyBytes(dst + off, nullptr, src + off, kBlock);
    rates.push_back(static_cast<double>(kRegion) / (nowSeconds() - t0) / 1e9);
  }
  return median(rates);
}

Result measureReduce(char* a, char* b, char* out, double* gbs) {
  std::vector<double> rates;
  for (int r = 0; r < kRounds; ++r) {
    double t0 = nowSeconds();
    for (size_t off = 0; off < kRegion / 2; off += kBlock) {
      const void* srcs[2] = {a + off, b + off};
      HostReduceArgs args{};
      args.op.kind = RedKind::kSum;
      args.dtype = tsrFloat32;
      args.srcs = srcs;
      args.nsrcs = 2;
      args.dst = out + off;
      args.count = kBlock / 4;
      TSR_CHECK(hostReduce(args));
    }
    rates.push_back(static_cast<double>(kRegion / 2) / (nowSeconds() - t0) / 1e9);
  }
  *gbs = median(rates);
  return tsrSuccess;
}

// Ping-pong through one shared word: the child answers each value with the next one. The waits
// spin and yield, as the host executor's do before they park.
Result measureSignal(double* us) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return TSR_FAIL(tsrSystemError, "calibration: mmap: %s", strerror(errno));
  auto* word = new (mem) std::atomic<uint64_t>(0);
  constexpr uint64_t kTrips = 20000;
  auto waitFor = [&](uint64_t v, double deadline) {
    for (uint32_t spin = 0; word->load(std::memory_order_acquire) < v; ++spin) {
      if ((spin & 255) == 255) {
        sched_yield();
        if (nowSeconds() > deadline) return false;
      }
    }
    return true;
  };
  pid_t child = fork();
  if (child < 0) return TSR_FAIL(tsrSystemError, "calibration: fork: %s", strerror(errno));
  if (child == 0) {
    double deadline = nowSeconds() + 20;
    for (uint64_t v = 1; v < 2 * kTrips; v += 2) {
      if (!waitFor(v, deadline)) _exit(1);
      word->store(v + 1, std::memory_order_release);
    }
    _exit(0);
  }
  double deadline = nowSeconds() + 20;
  bool ok = true;
  double t0 = nowSeconds();
  for (uint64_t v = 1; v < 2 * kTrips && ok; v += 2) {
    word->store(v, std::memory_order_release);
    ok = waitFor(v + 1, deadline);
  }
  double t1 = nowSeconds();
  int status = 0;
  if (!ok) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  munmap(mem, 4096);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return TSR_FAIL(tsrSystemError, "calibration: the signal round trip did not complete in 20 s");
  *us = (t1 - t0) / static_cast<double>(kTrips) / 2 * 1e6;
  return tsrSuccess;
}

}  // namespace

Result calibrateThisHost(Calibration* out) {
  double start = nowSeconds();
  Calibration c;
  cpu_set_t set;
  CPU_ZERO(&set);
  c.cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                          : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  c.cores = std::max(c.cores, 1);
  std::vector<char> a(kRegion, 1), b(kRegion, 2), d(kRegion, 0);
  c.copyGBs = measureCopy(a.data(), d.data());
  TSR_CHECK(measureReduce(a.data(), b.data(), d.data(), &c.reduceGBs));
  TSR_CHECK(measureSignal(&c.signalUs));
  c.seconds = nowSeconds() - start;
  *out = c;
  return tsrSuccess;
}

Machine thisHostMachine(const Calibration& c, int ranks) {
  Machine m;
  m.name = "this-host";
  m.source = strprintf(
      "this machine, calibrated at start: %d cores, copy %.2f GB/s and float32 sum %.2f GB/s per "
      "core (host executor kernels), signal %.3f us one way (shared-word ping-pong)",
      c.cores, c.copyGBs, c.reduceGBs, c.signalUs);
  m.kind = MachineKind::kCpu;
  m.nodes = 1;
  m.ranksPerNode = ranks;
  m.cores = c.cores;
  m.copyGBs = c.copyGBs;
  m.reduceGBs = c.reduceGBs;
  m.signalUs = c.signalUs;
  m.nicsPerNode = 1;
  return m;
}

}  // namespace tessera::sim
