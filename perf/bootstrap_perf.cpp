// bootstrap_perf: the smoke run of the foundation. Brings up a communicator of N ranks twice —
// as threads (tsrCommInitAll, in-process bootstrap) and as processes (fork + tsrGetUniqueId, TCP
// bootstrap) — checks every rank's number, then times the bootstrap: init, barrier, and
// allGather by size (median of the iterations, in microseconds), split and teardown.
//
//   bootstrap_perf [-n ranks] [-i iterations] [-b max bytes per rank] [-m threads|procs|both]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "comm/comm_access.hpp"
#include "comm/comm_impl.hpp"
#include "comm/handles.hpp"
#include "perf_util.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using tessera::perf::usSince;

struct Options {
  int nranks = 4;
  int iters = 20;
  size_t maxBytes = 1 << 20;
  std::string mode = "both";
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Per-rank figures; rank 0's are printed (rank 0 waits for the slowest rank in each collective).
struct Figures {
  double initUs = 0;
  double barrierUs = 0;
  std::vector<std::pair<size_t, double>> allGatherUs;
  double splitUs = 0;
  double destroyUs = 0;
  bool ok = true;
  std::string error;
};

// The bootstrap is internal: reach it through the C++ object behind the handle.
tessera::Bootstrap* bootstrapOf(tsrComm_t comm) {
  std::shared_ptr<tessera::Communicator> c;
  if (tessera::handleLookup(comm, "bootstrap_perf", &c) != tsrSuccess) return nullptr;
  return &tessera::commImpl(*c)->bootstrap();
}

#define PERF_CHECK(cond, msg)                                       \
  do {                                                              \
    if (!(cond)) {                                                  \
      f.ok = false;                                                 \
      f.error = std::string(msg) + ": " + tsrGetLastError(nullptr); \
      return f;                                                     \
    }                                                               \
  } while (0)

Figures measure(tsrComm_t comm, int expectRank, int nranks, const Options& o, double initUs) {
  Figures f;
  f.initUs = initUs;
  int rank = -1, count = -1;
  PERF_CHECK(tsrCommUserRank(comm, &rank) == tsrSuccess && rank == expectRank, "rank");
  PERF_CHECK(tsrCommCount(comm, &count) == tsrSuccess && count == nranks, "count");
  tessera::Bootstrap* boot = bootstrapOf(comm);
  PERF_CHECK(boot != nullptr, "bootstrap");
  std::vector<double> t;
  for (int i = 0; i < o.iters; ++i) {
    auto t0 = Clock::now();
    PERF_CHECK(boot->barrier() == tsrSuccess, "barrier");
    t.push_back(usSince(t0));
  }
  f.barrierUs = median(t);
  for (size_t bytes = 8; bytes <= o.maxBytes; bytes *= 8) {
    std::vector<unsigned char> buf(bytes * static_cast<size_t>(nranks));
    t.clear();
    for (int i = 0; i < o.iters; ++i) {
      std::fill(buf.begin(), buf.end(), 0);
      std::memset(buf.data() + bytes * static_cast<size_t>(rank), rank + 1 + i, bytes);
      auto t0 = Clock::now();
      PERF_CHECK(boot->allGather(buf.data(), bytes) == tsrSuccess, "allGather");
      t.push_back(usSince(t0));
      for (int r = 0; r < nranks; ++r)
        PERF_CHECK(buf[bytes * static_cast<size_t>(r) + bytes - 1] ==
                       static_cast<unsigned char>(r + 1 + i),
                   "allGather result");
    }
    f.allGatherUs.emplace_back(bytes, median(t));
  }
  auto t0 = Clock::now();
  tsrComm_t half = nullptr;
  PERF_CHECK(tsrCommSplit(comm, rank % 2, rank, &half, nullptr) == tsrSuccess, "split");
  f.splitUs = usSince(t0);
  int halfCount = 0;
  PERF_CHECK(
      tsrCommCount(half, &halfCount) == tsrSuccess && halfCount == (nranks + 1 - rank % 2) / 2,
      "split size");
  PERF_CHECK(tsrCommFinalize(half) == tsrSuccess && tsrCommDestroy(half) == tsrSuccess,
             "split teardown");
  t0 = Clock::now();
  PERF_CHECK(tsrCommFinalize(comm) == tsrSuccess, "finalize");
  PERF_CHECK(tsrCommDestroy(comm) == tsrSuccess, "destroy");
  f.destroyUs = usSince(t0);
  return f;
}

Figures runThreads(const Options& o) {
  std::vector<tsrComm_t> comms(static_cast<size_t>(o.nranks));
  auto t0 = Clock::now();
  if (tsrCommInitAll(comms.data(), o.nranks, nullptr) != tsrSuccess) {
    Figures f;
    f.ok = false;
    f.error = std::string("tsrCommInitAll: ") + tsrGetLastError(nullptr);
    return f;
  }
  double initUs = usSince(t0);
  std::vector<Figures> figs(static_cast<size_t>(o.nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.nranks; ++r)
    threads.emplace_back([&, r] {
      figs[static_cast<size_t>(r)] = measure(comms[static_cast<size_t>(r)], r, o.nranks, o, initUs);
    });
  for (auto& th : threads) th.join();
  for (auto& f : figs)
    if (!f.ok) return f;
  return figs[0];
}

Figures runProcesses(const Options& o) {
  Figures bad;
  bad.ok = false;
  tsrUniqueId id;
  if (tsrGetUniqueId(&id) != tsrSuccess) {
    bad.error = std::string("tsrGetUniqueId: ") + tsrGetLastError(nullptr);
    return bad;
  }
  std::vector<pid_t> children;
  for (int r = 1; r < o.nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      tsrComm_t comm = nullptr;
      auto t0 = Clock::now();
      if (tsrCommInitRank(&comm, o.nranks, id, r) != tsrSuccess) {
        std::fprintf(stderr, "rank %d: %s\n", r, tsrGetLastError(nullptr));
        _exit(1);
      }
      Figures f = measure(comm, r, o.nranks, o, usSince(t0));
      if (!f.ok) std::fprintf(stderr, "rank %d: %s\n", r, f.error.c_str());
      _exit(f.ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  tsrComm_t comm = nullptr;
  auto t0 = Clock::now();
  Figures f;
  if (tsrCommInitRank(&comm, o.nranks, id, 0) != tsrSuccess) {
    f = bad;
    f.error = std::string("rank 0 init: ") + tsrGetLastError(nullptr);
  } else {
    f = measure(comm, 0, o.nranks, o, usSince(t0));
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      f.ok = false;
      if (f.error.empty()) f.error = "a child rank failed";
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-n")
      o.nranks = std::atoi(next());
    else if (a == "-i")
      o.iters = std::atoi(next());
    else if (a == "-b")
      o.maxBytes = std::strtoull(next(), nullptr, 0);
    else if (a == "-m")
      o.mode = next();
    else {
      std::fprintf(
          stderr,
          "usage: bootstrap_perf [-n ranks] [-i iters] [-b max bytes] [-m threads|procs|both]\n");
      return 2;
    }
  }
  if (o.nranks < 1 || o.iters < 1) {
    std::fprintf(stderr, "bootstrap_perf: -n and -i must be at least 1\n");
    return 2;
  }
  std::vector<std::pair<std::string, Figures>> results;
  if (o.mode == "threads" || o.mode == "both")
    results.emplace_back("threads/inproc", runThreads(o));
  if (o.mode == "procs" || o.mode == "both") results.emplace_back("procs/tcp", runProcesses(o));
  int rc = 0;
  std::printf("# bootstrap_perf: %d ranks, %d iterations, median microseconds (rank 0's view)\n",
              o.nranks, o.iters);
  std::printf("# %-22s", "");
  for (auto& [name, f] : results) std::printf(" %16s", name.c_str());
  std::printf("\n");
  for (auto& [name, f] : results)
    if (!f.ok) {
      std::printf("# %s FAILED: %s\n", name.c_str(), f.error.c_str());
      rc = 1;
    }
  if (rc != 0) return rc;
  auto row = [&](const char* label, auto get) {
    std::printf("  %-22s", label);
    for (auto& [name, f] : results) std::printf(" %16.1f", get(f));
    std::printf("\n");
  };
  row("init", [](const Figures& f) { return f.initUs; });
  row("barrier", [](const Figures& f) { return f.barrierUs; });
  for (size_t k = 0; k < results[0].second.allGatherUs.size(); ++k) {
    char label[64];
    std::snprintf(label, sizeof(label), "allGather %zu B/rank",
                  results[0].second.allGatherUs[k].first);
    row(label, [k](const Figures& f) { return f.allGatherUs[k].second; });
  }
  row("split (2 colors)", [](const Figures& f) { return f.splitUs; });
  row("finalize+destroy", [](const Figures& f) { return f.destroyUs; });
  std::printf("# all ranks checked their rank, size, allGather contents and split sizes: OK\n");
  return 0;
}
