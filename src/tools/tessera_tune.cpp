// tessera_tune: measures this machine for the tuner (collectives/tuner) and writes the tuner file
// communicators read: this host's cache (tunerCachePath()) unless -o names another.
//
//   tessera_tune [-n 2,4] [-c allreduce,allgather,...] [-b 8] [-e 256M] [-f 4] [-r 5] [-m 40]
//                [-o FILE]
//
// 1. The cost model's parameters (tessera_tune_links.cpp).
// 2. For each rank count (processes of this host over shm, started here) and collective, at
//    every size from -b to -e (times -f, and -e itself), the time of each family that generates it,
//    as a user gets it with TESSERA_ALGO=<family> (the tuner then still picks that family's
//    pipeline): one communicator per family, rounds (-r) that take the families in turn so that
//    they share the machine's moods, as many calls per measurement as fill -m milliseconds, the
//    slowest rank's time, the median over rounds. Buffers are malloc memory (not registered),
//    float32, sum. Ranks get a core each where there are enough (as mpirun binds them), else none.
// 3. The table goes into the file with the parameters; a summary shows, per size, the family
//    measured fastest beside the model's own choice.
// Exit codes: 0 written, 1 a measurement or the file failed, 2 usage.
#include "tessera_tune.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"
#include "tessera/version.h"

namespace tessera::tune {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2;
constexpr int kMaxEntries = 8192;

constexpr const char* kUsage =
    "usage: tessera_tune [-n 2,4] [-c allreduce,allgather,reducescatter,broadcast,reduce]\n"
    "                    [-b 8] [-e 256M] [-f 4] [-r 5] [-m 40] [-o FILE]\n"
    "  -n  rank counts (processes of this host)      -c  collectives\n"
    "  -b/-e/-f  sizes from -b to -e, times -f each   -r  rounds per size (median)\n"
    "  -m  milliseconds of calls per measurement      -o  file (default: this host's cache,\n"
    "      $XDG_CACHE_HOME or ~/.cache, tessera/tuner-<host>.json, which communicators read)\n"
    "  tessera_tune --cache-path   prints where this host's file is (or would be)\n";

// Calls from this size on run the zero-copy handshake, where cross-memory attach may apply
// (TESSERA_ZERO_COPY_MIN_BYTES' default).
constexpr uint64_t kCrossMinBytes = 256 << 10;

struct Options {
  std::vector<int> nranks{2, 4};
  std::vector<Collective> collectives{Collective::kAllReduce, Collective::kAllGather,
                                      Collective::kReduceScatter, Collective::kBroadcast,
                                      Collective::kReduce};
  uint64_t minBytes = 8, maxBytes = uint64_t{256} << 20;
  double factor = 4;
  int rounds = 5;
  double targetMs = 40;
  std::string out;
  // Tuner files for the measuring communicators, both with the measured parameters (so that each
  // family gets the pipeline it will get from the file written): `stagedFile` never prefers
  // cross-memory attach, `crossFile` asks for it at every large size ("" where it is refused).
  std::string stagedFile, crossFile;
};

struct Entry {
  int coll, nranks, family;
  uint64_t bytes;
  double us;
};
struct Shared {
  int count;
  Entry e[kMaxEntries];
  char error[2048];
};

bool parseBytes(const char* s, uint64_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  double mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024, ++end;
  else if (*end == 'M' || *end == 'm')
    mult = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g')
    mult = 1024.0 * 1024 * 1024, ++end;
  if (*end != '\0') return false;
  *out = static_cast<uint64_t>(v * mult);
  return true;
}

template <class T, class F>
bool parseList(const char* s, std::vector<T>* out, F parseOne) {
  out->clear();
  std::string all = s;
  size_t at = 0;
  while (at <= all.size()) {
    size_t comma = all.find(',', at);
    std::string one = all.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    T v;
    if (one.empty() || !parseOne(one, &v)) return false;
    out->push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !out->empty();
}

bool generatesHere(const AlgorithmInfo& a, Collective c) {
  return !a.needsHosts &&
         std::find(a.collectives.begin(), a.collectives.end(), c) != a.collectives.end();
}

std::vector<int> familiesOf(Collective c) {
  std::vector<int> out;
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (generatesHere(all[i], c)) out.push_back(static_cast<int>(i));
  return out;
}

// Elements per rank for a call of about `bytes` (as nccl-tests counts them), at least one.
size_t countFor(Collective c, uint64_t bytes, int n) {
  uint64_t per =
      c == Collective::kAllGather || c == Collective::kReduceScatter || c == Collective::kAllToAll
          ? bytes / static_cast<uint64_t>(n)
          : bytes;
  return std::max<size_t>(1, static_cast<size_t>(per / sizeof(float)));
}
uint64_t callBytesOf(Collective c, size_t count, int n) {
  uint64_t b = count * sizeof(float);
  return c == Collective::kAllGather || c == Collective::kReduceScatter ||
                 c == Collective::kAllToAll
             ? b * static_cast<uint64_t>(n)
             : b;
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

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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
      if (generatesHere(all[f], c) && familiesOf(c).size() > 1 && !any) first = c, any = true;
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
    std::vector<uint64_t> sizes;
    for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0001;
         b *= o.factor)
      sizes.push_back(static_cast<uint64_t>(b));
    if (sizes.empty() || sizes.back() < o.maxBytes) sizes.push_back(o.maxBytes);
    for (uint64_t b : sizes) {
      size_t count = countFor(c, b, n);
      uint64_t bytes = callBytesOf(c, count, n);
      if (bytes > o.maxBytes) break;
      // Calls per measurement, from one call of the first family.
      std::string e = check(barrier(), "barrier");
      double t0 = now();
      if (e.empty()) e = check(call(c, in.data(), out.data(), count, comms[fams[0]]), "probe");
      double t1 = 0;
      if (e.empty()) e = check(slowest(now() - t0, &t1), "max");
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
          t0 = now();
          for (int j = 0; j < calls && e.empty(); ++j)
            e = check(call(c, in.data(), out.data(), count, comm),
                      i < fams.size() ? all[static_cast<size_t>(fams[i])].name : "cross-memory");
          double t = 0;
          if (e.empty()) e = check(slowest(now() - t0, &t), "max");
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

bool mkdirs(const std::string& file) {
  for (size_t at = 1; (at = file.find('/', at)) != std::string::npos; ++at) {
    std::string dir = file.substr(0, at);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string fmtBytes(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0)
    return strprintf("%lluM", static_cast<unsigned long long>(b >> 20));
  if (b >= 1024 && b % 1024 == 0)
    return strprintf("%lluK", static_cast<unsigned long long>(b >> 10));
  return strprintf("%llu", static_cast<unsigned long long>(b));
}

int run(const Options& o) {
  std::string host = "localhost";
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) == 0 && h[0] != '\0') host = h;
  std::string path = o.out.empty() ? tunerCachePath() : o.out;
  if (path.empty()) {
    std::fprintf(stderr, "tessera_tune: neither XDG_CACHE_HOME nor HOME is set: give -o FILE\n");
    return kExitUsage;
  }
  // The measurements run the measured model, never an older file.
  setenv("TESSERA_TUNER_CACHE", "0", 1);
  unsetenv("TESSERA_TUNER_FILE");
  unsetenv("TESSERA_ALGO");
  std::printf("# tessera_tune %s on %s: writing %s\n", TESSERA_VERSION_STRING, host.c_str(),
              path.c_str());
  TunerParams params = defaultTunerParams();
  std::string report;
  std::string err = measureLinks(&params, &report);
  if (!err.empty()) {
    std::fprintf(stderr, "tessera_tune: measuring the links: %s\n", err.c_str());
    return kExitFailed;
  }
  std::printf("%s\n", report.c_str());
  // A file for the cross-memory communicator: the measured parameters and a table that asks for
  // cross-memory attach at every large size (no staged family measured there).
  Options run = o;
  {
    TunerParams staged = params;
    staged.crossMemory = LinkModel{1e6, 1e-3};
    run.stagedFile = strprintf("/tmp/tessera_tune_staged_%d.json", static_cast<int>(getpid()));
    std::ofstream(run.stagedFile) << tunerFileToJson(staged, MeasuredTable{}, "tessera_tune", host,
                                                     "");
  }
  if (report.find("cross-memory refused") == std::string::npos) {
    MeasuredTable crossTable;
    for (Collective c : o.collectives)
      for (int n : o.nranks) {
        MeasuredSet set{c, n, TransportKind::kShm, {}};
        for (uint64_t b = kCrossMinBytes; b <= std::max(o.maxBytes, kCrossMinBytes); b *= 2)
          set.points.push_back(MeasuredPoint{b, {}, 1e-3});
        crossTable.sets.push_back(set);
      }
    run.crossFile = strprintf("/tmp/tessera_tune_cross_%d.json", static_cast<int>(getpid()));
    std::ofstream(run.crossFile) << tunerFileToJson(params, crossTable, "tessera_tune", host, "");
  }
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) return kExitFailed;
  sh->count = 0;
  sh->error[0] = '\0';
  for (int n : o.nranks) {
    double t0 = now();
    err = measureFamilies(run, n, sh);
    if (!err.empty()) {
      std::fprintf(stderr, "tessera_tune: %s\n", err.c_str());
      if (!run.crossFile.empty()) std::remove(run.crossFile.c_str());
      std::remove(run.stagedFile.c_str());
      return kExitFailed;
    }
    std::printf("# %d ranks measured in %.1f s\n", n, now() - t0);
  }
  if (!run.crossFile.empty()) std::remove(run.crossFile.c_str());
  std::remove(run.stagedFile.c_str());
  // The table, and the summary beside the model's choice (the measured parameters, no table).
  MeasuredTable table;
  const auto& all = algorithms();
  Tuner model(params, AlgoFilter{});
  for (int i = 0; i < sh->count; ++i) {
    const Entry& e = sh->e[i];
    auto coll = static_cast<Collective>(e.coll);
    MeasuredSet* set = nullptr;
    for (MeasuredSet& s : table.sets)
      if (s.collective == coll && s.nranks == e.nranks) set = &s;
    if (set == nullptr) {
      table.sets.push_back(MeasuredSet{coll, e.nranks, TransportKind::kShm, {}});
      set = &table.sets.back();
    }
    if (set->points.empty() || set->points.back().bytes != e.bytes)
      set->points.push_back(MeasuredPoint{e.bytes, {}, 0});
    if (e.family < 0)
      set->points.back().crossUs = e.us;
    else
      set->points.back().families.push_back(
          MeasuredFamily{all[static_cast<size_t>(e.family)].name, e.us});
  }
  std::printf("#\n# %-13s %5s %8s  %-10s %10s  %-10s %10s  %12s\n", "collective", "ranks", "bytes",
              "measured", "us", "model", "its us", "cross-memory");
  for (const MeasuredSet& s : table.sets) {
    for (const MeasuredPoint& p : s.points) {
      const MeasuredFamily* best = &p.families[0];
      for (const MeasuredFamily& f : p.families)
        if (f.us < best->us) best = &f;
      TuneInput in;
      in.collective = s.collective;
      in.bytes = p.bytes;
      in.nranks = s.nranks;
      in.intraHost = TransportKind::kShm;
      TuneChoice c;
      std::string modelName = "?";
      double modelUs = 0;
      if (model.choose(in, &c) == tsrSuccess) {
        modelName = c.algorithm;
        for (const MeasuredFamily& f : p.families)
          if (f.family == c.algorithm) modelUs = f.us;
      }
      std::printf("  %-13s %5d %8s  %-10s %10.2f  %-10s %10.2f  %12s\n",
                  collectiveName(s.collective), s.nranks, fmtBytes(p.bytes).c_str(),
                  best->family.c_str(), best->us, modelName.c_str(), modelUs,
                  p.crossUs > 0 ? strprintf("%.2f", p.crossUs).c_str() : "-");
    }
  }
  std::time_t t = std::time(nullptr);
  char created[64];
  std::strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  std::string text = tunerFileToJson(
      params, table, std::string("tessera_tune ") + TESSERA_VERSION_STRING, host, created);
  if (text.empty()) {
    std::fprintf(stderr, "tessera_tune: this build has no JSON support: nothing written\n");
    return kExitFailed;
  }
  std::string tmp = path + ".tmp";
  if (!mkdirs(path)) {
    std::fprintf(stderr, "tessera_tune: cannot make the folders of %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return kExitFailed;
  }
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    if (!f) {
      std::fprintf(stderr, "tessera_tune: cannot write %s\n", tmp.c_str());
      return kExitFailed;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {  // readers see the old file or the new one
    std::fprintf(stderr, "tessera_tune: cannot rename %s: %s\n", tmp.c_str(), std::strerror(errno));
    return kExitFailed;
  }
  std::printf("# wrote %s (%zu sets)\n", path.c_str(), table.sets.size());
  return kExitOk;
}

}  // namespace
}  // namespace tessera::tune

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::tune;
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    bool ok = true;
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return kExitOk;
    } else if (a == "--cache-path") {
      std::string path = tunerCachePath();
      std::printf("%s\n", path.c_str());
      return path.empty() ? kExitFailed : kExitOk;
    } else if (a == "-n" && (v = value())) {
      ok = parseList<int>(v, &o.nranks, [](const std::string& s, int* n) {
        *n = std::atoi(s.c_str());
        return *n >= 2 && *n <= 64;
      });
    } else if (a == "-c" && (v = value())) {
      ok = parseList<Collective>(v, &o.collectives, [](const std::string& s, Collective* c) {
        return collectiveParse(s, c) == tsrSuccess;
      });
    } else if (a == "-b" && (v = value())) {
      ok = parseBytes(v, &o.minBytes) && o.minBytes > 0;
    } else if (a == "-e" && (v = value())) {
      ok = parseBytes(v, &o.maxBytes);
    } else if (a == "-f" && (v = value())) {
      o.factor = std::atof(v);
      ok = o.factor > 1;
    } else if (a == "-r" && (v = value())) {
      o.rounds = std::atoi(v);
      ok = o.rounds >= 1;
    } else if (a == "-m" && (v = value())) {
      o.targetMs = std::atof(v);
      ok = o.targetMs > 0;
    } else if (a == "-o" && (v = value())) {
      o.out = v;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "tessera_tune: bad argument %s\n%s", a.c_str(), kUsage);
      return kExitUsage;
    }
  }
  if (o.maxBytes < o.minBytes) {
    std::fprintf(stderr, "tessera_tune: -e is below -b\n");
    return kExitUsage;
  }
  return run(o);
}
