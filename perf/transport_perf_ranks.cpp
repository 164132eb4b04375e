#include "transport_perf_ranks.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>

#include "bootstrap/inproc_bootstrap.hpp"
#include "bootstrap/tcp_bootstrap.hpp"
#include "core/status.hpp"
#include "perf_util.hpp"
#include "transport/channel.hpp"
#include "transport/context.hpp"
#include "transport/semaphore.hpp"

namespace tessera::perf {
namespace {

using PerfClock = std::chrono::steady_clock;

constexpr size_t kMaxSteps = 128;
constexpr size_t kErrorBytes = 1024;

// What the ranks hand back; plain data, so that forked ranks can write it into a shared page.
struct Report {
  char error[2][kErrorBytes];
  uint32_t bandwidthSteps;
  uint32_t latencySteps;
  uint32_t memcpySteps;
  StepTiming bandwidth[kMaxSteps];
  StepTiming memcpy[kMaxSteps];
  StepTiming latency[kMaxSteps];
};

double usBetween(PerfClock::time_point a, PerfClock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

StepTiming summarize(const SizeStep& s, std::vector<double> us) {
  StepTiming t;
  t.bytes = s.bytes;
  t.puts = s.puts;
  t.iters = static_cast<uint32_t>(us.size());
  if (!us.empty()) {
    t.minUs = *std::min_element(us.begin(), us.end());
    t.medianUs = medianOf(std::move(us));
  }
  return t;
}

// The byte a rank writes at both ends of its source before a step, checked by the receiver after
// the first transfer of that step: a put that moved nothing, or the wrong range, fails the run.
uint8_t stampOf(int rank, size_t step, bool latency) {
  return static_cast<uint8_t>(0x40 + rank * 0x51 + step * 7 + (latency ? 0x23 : 0));
}

#define PERF_OK(expr)                                                                       \
  do {                                                                                      \
    ::tessera::Result perf_r_ = (expr);                                                     \
    if (perf_r_ != tsrSuccess)                                                              \
      return std::string(#expr) + " -> " + resultName(perf_r_) + ": " + lastErrorMessage(); \
  } while (0)

// One rank's side of the benchmark. Each rank's buffer is two halves: the source it puts from
// (first half) and the destination its peer puts into (second half), so a check never reads
// bytes this rank wrote itself.
class RankRunner {
 public:
  RankRunner(TransportContext& ctx, TransportKind kind, const RankPlan& plan, Report* report)
      : ctx_(ctx), kind_(kind), plan_(plan), report_(report) {}

  std::string run() {
    rank_ = ctx_.rank();
    for (const auto& s : plan_.bandwidth) half_ = std::max<size_t>(half_, s.bytes);
    for (const auto& s : plan_.latency) half_ = std::max<size_t>(half_, s.bytes);
    half_ = (std::max<size_t>(half_, 64) + 4095) & ~size_t{4095};
    PERF_OK(ctx_.connect(1 - rank_, kind_, &conn_));
    PERF_OK(ctx_.allocate(2 * half_, MemoryKind::kHost, &mem_));
    // Touch every page now: first-touch faults belong to setup, not to the first timed put.
    std::memset(mem_->data(), 0, 2 * half_);
    PERF_OK(ctx_.exchangeMemory(*conn_, *mem_, &remote_));
    PERF_OK(ctx_.createSemaphore(conn_, &sem_));
    if (plan_.viaProxy) PERF_OK(ctx_.createPortChannel(conn_, remote_, mem_, sem_, &port_));
    for (size_t i = 0; i < plan_.bandwidth.size(); ++i) {
      std::string e = bandwidthStep(i, plan_.bandwidth[i]);
      if (!e.empty()) return e;
    }
    for (size_t i = 0; i < plan_.latency.size(); ++i) {
      std::string e = latencyStep(i, plan_.latency[i]);
      if (!e.empty()) return e;
    }
    PERF_OK(ctx_.bootstrap().barrier());
    return "";
  }

 private:
  uint8_t* bytes() { return static_cast<uint8_t*>(mem_->data()); }

  Result put(size_t n) {
    if (port_) return port_->put(half_, 0, n);
    return conn_->put(*remote_, half_, *mem_, 0, n);
  }
  // Makes the earlier puts visible at the peer and tells it so.
  Result flushSignal() {
    if (port_) {
      TSR_CHECK(port_->signal());
      return port_->flush();
    }
    TSR_CHECK(conn_->flush());
    return sem_->signal();
  }
  Result signal() { return port_ ? port_->signal() : sem_->signal(); }
  Result flushOnly() { return port_ ? port_->flush() : conn_->flush(); }

  void stamp(uint8_t v, size_t n) {
    if (n == 0) return;
    bytes()[0] = v;
    bytes()[n - 1] = v;
  }
  std::string checkStamp(uint8_t v, size_t n, const char* what, uint64_t step) {
    if (n == 0) return "";
    const uint8_t* dst = bytes() + half_;
    if (dst[0] == v && dst[n - 1] == v) return "";
    return strprintf(
        "rank %d: %s of %zu bytes (step %llu) arrived wrong: first byte 0x%02x, last "
        "0x%02x, expected 0x%02x",
        rank_, what, n, static_cast<unsigned long long>(step), dst[0], dst[n - 1], v);
  }

  // Rank 0: puts back to back, flush + signal, then waits for the peer's acknowledgement.
  // Rank 1: waits for the signal, checks the data once, acknowledges.
  std::string bandwidthStep(size_t index, const SizeStep& s) {
    PERF_OK(ctx_.bootstrap().barrier());
    size_t n = static_cast<size_t>(s.bytes);
    uint8_t v = stampOf(0, index, false);
    std::vector<double> us, copyUs;
    us.reserve(s.iters);
    if (rank_ == 0) stamp(v, n);
    for (uint32_t it = 0; it < s.warmup + s.iters; ++it) {
      if (rank_ == 0) {
        // The reference: the same bytes copied by a plain memcpy from the same source to the
        // same destination pages (the peer's memory, mapped), with no transport call, so the
        // ratio is the transport's own cost. Interleaved iteration by iteration and in
        // alternating order, so both see the same machine (this box is shared and noisy) and
        // the same cache state; a separate private destination would add a third buffer to
        // the working set and measure L3 evictions instead (at 8-64 MiB on a 32 MiB L3).
        auto reference = [&] {
          if (!plan_.memcpyReference) return;
          char* dst = static_cast<char*>(remote_->mapped()) + half_;
          auto c0 = PerfClock::now();
          for (uint32_t k = 0; k < s.puts; ++k) std::memcpy(dst, bytes(), n);
          asm volatile("" : : "r"(dst) : "memory");  // the copies must happen
          if (it >= s.warmup) copyUs.push_back(usBetween(c0, PerfClock::now()));
        };
        if (it % 2 == 1) reference();
        // Timed as one-sided bandwidth is (ucx_perftest, OSU put_bw): from the first put to the
        // flush that completes them at the peer. The signal and the peer's acknowledgement
        // only keep rounds apart; how fast a sleeping peer wakes is the latency table's
        // business, not this one's.
        auto t0 = PerfClock::now();
        for (uint32_t k = 0; k < s.puts; ++k) PERF_OK(put(n));
        PERF_OK(flushOnly());
        if (it >= s.warmup) us.push_back(usBetween(t0, PerfClock::now()));
        PERF_OK(signal());
        PERF_OK(sem_->wait());
        if (it % 2 == 0) reference();
      } else {
        PERF_OK(sem_->wait());
        if (it == 0) {
          std::string e = checkStamp(v, n, "put", index);
          if (!e.empty()) return e;
        }
        PERF_OK(signal());
      }
    }
    if (rank_ == 0 && report_->bandwidthSteps < kMaxSteps)
      report_->bandwidth[report_->bandwidthSteps++] = summarize(s, std::move(us));
    if (rank_ == 0 && plan_.memcpyReference && report_->memcpySteps < kMaxSteps)
      report_->memcpy[report_->memcpySteps++] = summarize(s, std::move(copyUs));
    return "";
  }

  // Ping-pong: rank 0 puts (if any bytes) and signals, rank 1 waits and answers the same way,
  // rank 0 waits. Bytes 0 is the bare signal round trip.
  std::string latencyStep(size_t index, const SizeStep& s) {
    PERF_OK(ctx_.bootstrap().barrier());
    size_t n = static_cast<size_t>(s.bytes);
    stamp(stampOf(rank_, index, true), n);
    uint8_t expect = stampOf(1 - rank_, index, true);
    std::vector<double> us;
    us.reserve(s.iters);
    auto send = [&]() -> Result {
      if (n == 0) return signal();
      TSR_CHECK(put(n));
      return flushSignal();
    };
    for (uint32_t it = 0; it < s.warmup + s.iters; ++it) {
      if (rank_ == 0) {
        auto t0 = PerfClock::now();
        PERF_OK(send());
        PERF_OK(sem_->wait());
        if (it >= s.warmup) us.push_back(usBetween(t0, PerfClock::now()));
      } else {
        PERF_OK(sem_->wait());
        PERF_OK(send());
      }
      if (it == 0) {
        std::string e = checkStamp(expect, n, "ping-pong put", index);
        if (!e.empty()) return e;
      }
    }
    if (rank_ == 0 && report_->latencySteps < kMaxSteps)
      report_->latency[report_->latencySteps++] = summarize(s, std::move(us));
    return "";
  }

  TransportContext& ctx_;
  TransportKind kind_;
  const RankPlan& plan_;
  Report* report_;
  int rank_ = 0;
  size_t half_ = 0;
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<Memory> mem_;
  std::shared_ptr<RemoteMemory> remote_;
  std::shared_ptr<Semaphore> sem_;
  std::unique_ptr<PortChannel> port_;
};

void runRank(Bootstrap& b, TransportKind kind, const RankPlan& plan, Report* report) {
  TransportContextOptions o;
  o.bootstrap = &b;
  o.timeoutSeconds = plan.timeoutSeconds;
  std::string out;
  {
    std::unique_ptr<TransportContext> ctx;
    Result r = TransportContext::create(o, &ctx);
    if (r != tsrSuccess)
      out = std::string("TransportContext::create: ") + resultName(r) + ": " + lastErrorMessage();
    else
      out = RankRunner(*ctx, kind, plan, report).run();
  }
  if (out.empty()) out = "ok";
  std::strncpy(report->error[b.rank()], out.c_str(), kErrorBytes - 1);
}

void runThreads(TransportKind kind, const RankPlan& plan, Report* report) {
  BootstrapOptions bo;
  bo.timeoutSeconds = plan.timeoutSeconds;
  std::shared_ptr<InprocGroup> group;
  if (InprocBootstrap::createGroup(2, bo, &group) != tsrSuccess) {
    std::strncpy(report->error[0], lastErrorMessage(), kErrorBytes - 1);
    return;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      if (group->join(r, &b) != tsrSuccess)
        std::strncpy(report->error[r], lastErrorMessage(), kErrorBytes - 1);
      else
        runRank(*b, kind, plan, report);
    });
  for (auto& t : threads) t.join();
}

// Forks both ranks (the parent creates no transport state, so it can time baselines and fork
// again for the next transport). A rank still running after plan.runSeconds is killed.
void runProcesses(TransportKind kind, const RankPlan& plan, Report* report) {
  setenv("TESSERA_SOCKET_IFNAME", "lo", 0);
  tsrUniqueId id{};
  if (createUniqueId(&id) != tsrSuccess) {
    std::snprintf(report->error[0], kErrorBytes, "createUniqueId: %s", lastErrorMessage());
    return;
  }
  BootstrapOptions bo;
  bo.timeoutSeconds = plan.timeoutSeconds;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pids[2] = {-1, -1};
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      std::unique_ptr<Bootstrap> b;
      if (TcpBootstrap::create(id, r, 2, bo, &b) != tsrSuccess)
        std::snprintf(report->error[r], kErrorBytes, "TcpBootstrap::create: %s",
                      lastErrorMessage());
      else
        runRank(*b, kind, plan, report);
      b.reset();
      std::fflush(stderr);
      _exit(0);
    }
    pids[r] = pid;
  }
  auto start = PerfClock::now();
  int status[2] = {-1, -1};
  int left = 0;
  for (int r = 0; r < 2; ++r) {
    if (pids[r] > 0)
      ++left;
    else
      std::snprintf(report->error[r], kErrorBytes, "fork failed");
  }
  while (left > 0) {
    for (int r = 0; r < 2; ++r) {
      if (pids[r] <= 0 || status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        --left;
      }
    }
    if (left > 0 && usBetween(start, PerfClock::now()) > plan.runSeconds * 1e6)
      for (int r = 0; r < 2; ++r)
        if (pids[r] > 0 && status[r] == -1) kill(pids[r], SIGKILL);
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < 2; ++r)
    if (pids[r] > 0 && WIFSIGNALED(status[r]))
      std::snprintf(report->error[r], kErrorBytes, "killed by signal %d", WTERMSIG(status[r]));
}

}  // namespace

TransportRun runTransport(TransportKind kind, const RankPlan& plan) {
  TransportRun run;
  run.kind = kind;
  bool threads = kind == TransportKind::kInproc;
  run.mode = threads ? "threads" : "processes";
  void* page =
      mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) {
    run.error = "mmap of the report page failed";
    return run;
  }
  // Value-initialized: zeroed, then the members' defaults.
  auto* report = new (page) Report();
  if (threads)
    runThreads(kind, plan, report);
  else
    runProcesses(kind, plan, report);
  for (int r = 0; r < 2; ++r) {
    std::string e(report->error[r], strnlen(report->error[r], kErrorBytes));
    if (e == "ok") continue;
    if (e.empty()) e = "exited without a result";
    if (!run.error.empty()) run.error += "; ";
    run.error += strprintf("rank %d: %s", r, e.c_str());
  }
  run.bandwidth.assign(report->bandwidth, report->bandwidth + report->bandwidthSteps);
  run.latency.assign(report->latency, report->latency + report->latencySteps);
  run.memcpy.assign(report->memcpy, report->memcpy + report->memcpySteps);
  munmap(page, sizeof(Report));
  return run;
}

}  // namespace tessera::perf
