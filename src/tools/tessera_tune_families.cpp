// tessera_tune, the family measurements: for one rank count, forked processes of this host over
// shm time every family of every collective at every size, in rounds that take the families in
// turn; rank 0 records the medians in shared memory for the parent (tessera_tune.cpp).
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"
#include "tessera_tune.hpp"

namespace tessera::tune {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool generatesOnOneHost(const AlgorithmInfo& a, Collective c) {
  return !a.needsHosts &&
         std::find(a.collectives.begin(), a.collectives.end(), c) != a.collectives.end();
}

std::vector<uint64_t> sizeLadder(const Options& o) {
  std::vector<uint64_t> sizes;
  for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0001;
       b *= o.factor)
    sizes.push_back(static_cast<uint64_t>(b));
  if (sizes.empty() || sizes.back() < o.maxBytes) sizes.push_back(o.maxBytes);
  return sizes;
}

namespace {
// nccl-tests counts a call's bytes by its larger buffer, in segments of `count` elements: every
// rank's segment for reducescatter, allgather and alltoall, one for the others.
uint64_t countedSegments(Collective c, int n) {
  return static_cast<uint64_t>(std::max(inputSegments(c, n), outputSegments(c, n)));
}
}  // namespace

size_t countFor(Collective c, uint64_t bytes, int n) {
  return std::max<size_t>(1, static_cast<size_t>(bytes / countedSegments(c, n) / sizeof(float)));
}
uint64_t callBytesOf(Collective c, size_t count, int n) {
  return count * sizeof(float) * countedSegments(c, n);
}

namespace {

std::vector<int> familiesOf(Collective c) {
  std::vector<int> out;
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (generatesOnOneHost(all[i], c)) out.push_back(static_cast<int>(i));
  return out;
}

tsrResult_t call(Collective c, const float* in, float* out, size_t count, tsrComm_t comm) {
  switch (c) {
    case Collective::kAllReduce:
      return tsrAllReduce(in, out, count, tsrFloat32, tsrSum, comm, nullptr);
    case Collective::kAllGather: return tsrAllGather(in, out, count, tsrFloat32, comm, nullptr);
    case Collective::kReduceScatter:
      return tsrReduceScatter(in, out, count, tsrFloat32, tsrSum, comm, nullptr);
    case Collective::kBroadcast: return tsrBroadcast(in, out, count, tsrFloat32, 0, comm, nullptr);
    case Collective::kReduce:
      return tsrReduce(in, out, count, tsrFloat32, tsrSum, 0, comm, nullptr);
    case Collective::kAllToAll: return tsrAlltoAll(in, out, count, tsrFloat32, comm, nullptr);
  }
  return tsrInvalidArgument;
}

// One rank of one rank count: every collective, size and family. Rank 0 records into `sh`.
std::string rankBody(const Options& o, int n, int rank, const std::vector<tsrUniqueId>& ids,
                     Shared* sh) {
  const auto& all = algorithms();
  tsrComm_t ctl;
  if (tsrCommInitRank(&ctl, n, ids[0], rank) != tsrSuccess) return tsrGetLastError(nullptr);
  auto check = [](tsrResult_t r, const char* what) {
    return r == tsrSuccess ? std::string() : std::string(what) + ": " + tsrGetLastError(nullptr);
  };
  float one = 1, sink = 0;
  auto barrier = [&] { return tsrAllReduce(&one, &sink, 1, tsrFloat32, tsrSum, ctl, nullptr); };
  auto slowest = [&](double v, double* out) {
    return tsrAllReduce(&v, out, 1, tsrFloat64, tsrMax, ctl, nullptr);
  };
  // A communicator per family, its engine made (and TESSERA_ALGO read) by a first call.
  std::vector<tsrComm_t> comms(all.size(), nullptr);
  for (size_t f = 0; f < all.size(); ++f) {
    Collective first{};
    bool any = false;
    for (Collective c : o.collectives)
      if (generatesOnOneHost(all[f], c) && familiesOf(c).size() > 1 && !any) first = c, any = true;
    if (!any) continue;
    setenv("TESSERA_ALGO", all[f].name, 1);
    setenv("TESSERA_TUNER_FILE", o.stagedFile.c_str(), 1);
    std::string e = check(tsrCommInitRank(&comms[f], n, ids[f + 1], rank), "init");
    float x = 1, y[64] = {};
    if (e.empty()) e = check(call(first, &x, y, 1, comms[f]), all[f].name);
    unsetenv("TESSERA_ALGO");
    unsetenv("TESSERA_TUNER_FILE");
    if (!e.empty()) return e;
  }
  tsrComm_t cross = nullptr;
  if (!o.crossFile.empty()) {
    setenv("TESSERA_TUNER_FILE", o.crossFile.c_str(), 1);
    std::string e = check(tsrCommInitRank(&cross, n, ids.back(), rank), "init");
    float x = 1, y = 0;
    if (e.empty()) e = check(tsrAllReduce(&x, &y, 1, tsrFloat32, tsrSum, cross, nullptr), "cross");
    unsetenv("TESSERA_TUNER_FILE");
    if (!e.empty()) return e;
  }
  size_t maxElems = static_cast<size_t>(o.maxBytes / sizeof(float)) + 64;
  std::vector<float> in(maxElems, 1.0f), out(maxElems, 0.0f);
  for (Collective c : o.collectives) {
    std::vector<int> fams = familiesOf(c);
    if (fams.size() < 2) continue;
    for (uint64_t b : sizeLadder(o)) {
      size_t count = countFor(c, b, n);
      uint64_t bytes = callBytesOf(c, count, n);
      if (bytes > o.maxBytes) break;
      // Calls per measurement, from one call of the first family.
      std::string e = check(barrier(), "barrier");
      double t0 = nowSeconds();
      if (e.empty()) e = check(call(c, in.data(), out.data(), count, comms[fams[0]]), "probe");
      double t1 = 0;
      if (e.empty()) e = check(slowest(nowSeconds() - t0, &t1), "max");
      if (!e.empty()) return e;
      int calls =
          static_cast<int>(std::clamp(o.targetMs * 1e-3 / std::max(t1, 1e-7), 1.0, 20000.0));
      // The families, then (index fams.size()) cross-memory attach where it may run.
      size_t ways = fams.size() + (cross != nullptr && bytes >= kCrossMinBytes ? 1 : 0);
      std::vector<std::vector<double>> us(ways);
      for (int r = 0; r < o.rounds; ++r) {
        for (size_t k = 0; k < ways; ++k) {
          size_t i = (k + static_cast<size_t>(r)) % ways;
          tsrComm_t comm = i < fams.size() ? comms[static_cast<size_t>(fams[i])] : cross;
          e = check(call(c, in.data(), out.data(), count, comm), "warm-up");
          if (e.empty()) e = check(barrier(), "barrier");
          t0 = nowSeconds();
          for (int j = 0; j < calls && e.empty(); ++j)
            e = check(call(c, in.data(), out.data(), count, comm),
                      i < fams.size() ? all[static_cast<size_t>(fams[i])].name : "cross-memory");
          double t = 0;
          if (e.empty()) e = check(slowest(nowSeconds() - t0, &t), "max");
          if (!e.empty()) return e;
          us[i].push_back(t / calls * 1e6);
        }
      }
      if (rank == 0) {
        for (size_t i = 0; i < ways; ++i) {
          std::sort(us[i].begin(), us[i].end());
          if (sh->count >= kMaxEntries) return "too many measurements for the table";
          int family = i < fams.size() ? fams[i] : -1;
          sh->e[sh->count++] =
              Entry{static_cast<int>(c), n, family, bytes, us[i][us[i].size() / 2]};
        }
      }
    }
  }
  for (tsrComm_t comm : comms)
    if (comm != nullptr) tsrCommDestroy(comm);
  if (cross != nullptr) tsrCommDestroy(cross);
  tsrCommDestroy(ctl);
  return "";
}

}  // namespace

std::string measureFamilies(const Options& o, int n, Shared* sh) {
  // One id (root) per communicator: the control one, one per family, the cross-memory one; rank
  // 0 makes them after the fork (shareIds says why).
  const int nids = static_cast<int>(algorithms().size()) + 2;
  if (nids > SharedIds::kMax) return "too many communicators for SharedIds";
  auto* shared = static_cast<SharedIds*>(
      mmap(nullptr, sizeof(SharedIds), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return "mmap failed";
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    pid_t p = fork();
    if (p == 0) {
      // As mpirun places ranks by default: one core each while there are enough, else unbound.
      long cpus = sysconf(_SC_NPROCESSORS_ONLN);
      if (cpus >= n) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r, &set);
        (void)sched_setaffinity(0, sizeof set, &set);
      }
      std::vector<tsrUniqueId> ids;
      std::string e = shareIds(shared, r, nids, &ids, 120);
      if (e.empty()) e = rankBody(o, n, r, ids, sh);
      if (!e.empty() && sh->error[0] == '\0')
        std::snprintf(sh->error, sizeof sh->error, "%d ranks, rank %d: %s", n, r, e.c_str());
      _exit(e.empty() ? 0 : 1);
    }
    if (p < 0) {
      // The ranks forked so far wait for peers that never come, until their deadlines.
      for (pid_t k : kids) kill(k, SIGKILL);
      for (pid_t k : kids) waitpid(k, nullptr, 0);
      munmap(shared, sizeof(SharedIds));
      return "fork failed";
    }
    kids.push_back(p);
  }
  bool ok = true;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  munmap(shared, sizeof(SharedIds));
  if (!ok) return sh->error[0] ? sh->error : strprintf("a rank of %d died", n);
  return "";
}

}  // namespace tessera::tune
