// this-host calibration (calibrate.hpp).
#include "collectives/sim/calibrate.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "collectives/exec/host_ops.hpp"
#include "core/log.hpp"

namespace tessera::sim {
namespace {
constexpr Subsys kLogSubsys = Subsys::kColl;

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr size_t kRegion = 64u << 20;
constexpr size_t kBlock = 4u << 20;
constexpr int kRounds = 5;

// Copies `region` bytes in blocks (at most kBlock), `repeat` times per round.
double measureCopy(char* src, char* dst, size_t region, int repeat) {
  const size_t block = std::min(region, kBlock);
  std::vector<double> rates;
  for (int r = 0; r < kRounds; ++r) {
    double t0 = nowSeconds();
    for (int k = 0; k < repeat; ++k)
      for (size_t off = 0; off < region; off += block)
        hostCopyBytes(dst + off, nullptr, src + off, block);
    rates.push_back(static_cast<double>(region) * repeat / (nowSeconds() - t0) / 1e9);
  }
  return median(rates);
}

Result measureReduce(char* a, char* b, char* out, size_t region, int repeat, double* gbs) {
  const size_t block = std::min(region, kBlock);
  std::vector<double> rates;
  for (int r = 0; r < kRounds; ++r) {
    double t0 = nowSeconds();
    for (int k = 0; k < repeat; ++k)
      for (size_t off = 0; off < region; off += block) {
        const void* srcs[2] = {a + off, b + off};
        HostReduceArgs args{};
        args.op.kind = RedKind::kSum;
        args.dtype = tsrFloat32;
        args.srcs = srcs;
        args.nsrcs = 2;
        args.dst = out + off;
        args.count = block / 4;
        TSR_CHECK(hostReduce(args));
      }
    rates.push_back(static_cast<double>(region) * repeat / (nowSeconds() - t0) / 1e9);
  }
  *gbs = median(rates);
  return tsrSuccess;
}

// Spins (yielding every 256 polls, as the host executor's waits do before they park) until the
// shared word reaches v; false at the deadline.
bool waitAtLeast(const std::atomic<uint64_t>* word, uint64_t v, double deadline) {
  for (uint32_t spin = 0; word->load(std::memory_order_acquire) < v; ++spin) {
    if ((spin & 255) == 255) {
      sched_yield();
      if (nowSeconds() > deadline) return false;
    }
  }
  return true;
}

// Ping-pong through one shared word: the child answers each value with the next one.
Result measureSignal(double* us) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return TSR_FAIL(tsrSystemError, "calibration: mmap: %s", strerror(errno));
  auto* word = new (mem) std::atomic<uint64_t>(0);
  constexpr uint64_t kTrips = 20000;
  pid_t child = fork();
  if (child < 0) return TSR_FAIL(tsrSystemError, "calibration: fork: %s", strerror(errno));
  if (child == 0) {
    double deadline = nowSeconds() + 20;
    for (uint64_t v = 1; v < 2 * kTrips; v += 2) {
      if (!waitAtLeast(word, v, deadline)) _exit(1);
      word->store(v + 1, std::memory_order_release);
    }
    _exit(0);
  }
  double deadline = nowSeconds() + 20;
  bool ok = true;
  double t0 = nowSeconds();
  for (uint64_t v = 1; v < 2 * kTrips && ok; v += 2) {
    word->store(v, std::memory_order_release);
    ok = waitAtLeast(word, v + 1, deadline);
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

// Data another process just wrote, copied (even rounds) or reduced with a local buffer (odd
// rounds) by this one: what a rank does with what a peer put into its scratch. `region` bytes of
// shared memory, written by a forked child between rounds.
Result measureCrossCore(size_t region, char* local, char* out, double* copyGBs, double* reduceGBs) {
  const size_t bytes = region + 4096;
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return TSR_FAIL(tsrSystemError, "calibration: mmap: %s", strerror(errno));
  auto* word = new (mem) std::atomic<uint64_t>(0);
  char* data = static_cast<char*>(mem) + 4096;
  constexpr uint64_t kTurns = 4 * kRounds;
  pid_t child = fork();
  if (child < 0) {
    munmap(mem, bytes);
    return TSR_FAIL(tsrSystemError, "calibration: fork: %s", strerror(errno));
  }
  if (child == 0) {
    double deadline = nowSeconds() + 20;
    for (uint64_t k = 0; k < kTurns; ++k) {
      if (!waitAtLeast(word, 2 * k + 1, deadline)) _exit(1);
      std::memset(data, static_cast<int>(k), region);
      word->store(2 * k + 2, std::memory_order_release);
    }
    _exit(0);
  }
  double deadline = nowSeconds() + 20;
  std::vector<double> copies, reduces;
  bool ok = true;
  for (uint64_t k = 0; k < kTurns && ok; ++k) {
    word->store(2 * k + 1, std::memory_order_release);
    if (!(ok = waitAtLeast(word, 2 * k + 2, deadline))) break;
    double t0 = nowSeconds();
    if (k % 2 == 0) {
      hostCopyBytes(out, nullptr, data, region);
      copies.push_back(static_cast<double>(region) / (nowSeconds() - t0) / 1e9);
    } else {
      const void* srcs[2] = {data, local};
      HostReduceArgs args{};
      args.op.kind = RedKind::kSum;
      args.dtype = tsrFloat32;
      args.srcs = srcs;
      args.nsrcs = 2;
      args.dst = out;
      args.count = region / 4;
      if (hostReduce(args) != tsrSuccess) ok = false;
      reduces.push_back(static_cast<double>(region) / (nowSeconds() - t0) / 1e9);
    }
  }
  int status = 0;
  if (!ok) kill(child, SIGKILL);
  waitpid(child, &status, 0);
  munmap(mem, bytes);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return TSR_FAIL(tsrSystemError, "calibration: the cross-core rounds did not complete in 20 s");
  *copyGBs = median(copies);
  *reduceGBs = median(reduces);
  return tsrSuccess;
}

// The largest cache of cpu0 from sysfs ("32768K"), 0 when unknown.
double lastLevelCacheBytes() {
  double best = 0;
  for (int i = 0; i < 8; ++i) {
    FILE* f =
        std::fopen(strprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i).c_str(), "r");
    if (f == nullptr) continue;
    double v = 0;
    char unit = 0;
    if (std::fscanf(f, "%lf%c", &v, &unit) >= 1)
      best = std::max(best, v * (unit == 'K' ? 1024.0 : unit == 'M' ? 1048576.0 : 1.0));
    std::fclose(f);
  }
  return best;
}

}  // namespace

Result calibrateThisHost(Calibration* out) {
  double start = nowSeconds();
  Calibration c;
  cpu_set_t set;
  CPU_ZERO(&set);
  c.cores = sched_getaffinity(0, sizeof(set), &set) == 0
                ? CPU_COUNT(&set)
                : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  c.cores = std::max(c.cores, 1);
  std::vector<char> a(kRegion, 1), b(kRegion, 2), d(kRegion, 0);
  c.copyGBs = measureCopy(a.data(), d.data(), kRegion, 1);
  TSR_CHECK(measureReduce(a.data(), b.data(), d.data(), kRegion / 2, 1, &c.reduceGBs));
  c.cacheBytes = lastLevelCacheBytes();
  if (c.cacheBytes > 0) {
    // Three buffers of a twelfth of the cache each, the one read written by another process
    // just before: the data stays in the cache but moves between cores.
    const auto region = static_cast<size_t>(c.cacheBytes / 12) & ~size_t{4095};
    TSR_CHECK(measureCrossCore(region, b.data(), d.data(), &c.cacheCopyGBs, &c.cacheReduceGBs));
  }
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
      "core from memory, %.2f and %.2f GB/s on a peer's writes within the %.0f MiB last-level "
      "cache (host executor kernels), signal %.3f us one way (shared-word ping-pong)",
      c.cores, c.copyGBs, c.reduceGBs, c.cacheCopyGBs, c.cacheReduceGBs, c.cacheBytes / 1048576,
      c.signalUs);
  m.kind = MachineKind::kCpu;
  m.nodes = 1;
  m.ranksPerNode = ranks;
  m.cores = c.cores;
  m.copyGBs = c.copyGBs;
  m.reduceGBs = c.reduceGBs;
  m.signalUs = c.signalUs;
  m.cacheBytes = c.cacheBytes;
  m.cacheCopyGBs = c.cacheCopyGBs;
  m.cacheReduceGBs = c.cacheReduceGBs;
  m.nicsPerNode = 1;
  return m;
}

}  // namespace tessera::sim
