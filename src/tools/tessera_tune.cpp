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
//    (tessera_tune_families.cpp)
// 3. The table goes into the file with the parameters; a summary shows, per size, the family
//    measured fastest beside the model's own choice.
// --device measures step 2 on device buffers instead (thread ranks sharing GPU 0,
// tessera_tune_device.cpp) and adds those sets (transport p2p) to the file's host sets.
// Exit codes: 0 written, 1 a measurement or the file failed, 2 usage.
#include "tessera_tune.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/exec/engine.hpp"
#include "core/status.hpp"
#include "tessera/tessera.h"
#include "tessera/version.h"

namespace tessera::tune {
namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2;

constexpr const char* kUsage =
    "usage: tessera_tune [-n 2,4] [-c allreduce,allgather,reducescatter,broadcast,reduce]\n"
    "                    [-b 8] [-e 256M] [-f 4] [-r 5] [-m 40] [-o FILE] [--device]\n"
    "  -n  rank counts (processes of this host)      -c  collectives\n"
    "  -b/-e/-f  sizes from -b to -e, times -f each   -r  rounds per size (median)\n"
    "  -m  milliseconds of calls per measurement      -o  file (default: this host's cache,\n"
    "      $XDG_CACHE_HOME or ~/.cache, tessera/tuner-<host>.json, which communicators read)\n"
    "  --device  device buffers: thread ranks sharing GPU 0 (-n), the device executor's\n"
    "      defaults; the sets join the file's host sets (the tuner reads them for device calls)\n"
    "  tessera_tune --cache-path   prints where this host's file is (or would be)\n";

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

// The measurements of `sh` as sets of `transport`.
MeasuredTable tableOf(const Shared& sh, TransportKind transport) {
  MeasuredTable table;
  const auto& all = algorithms();
  for (int i = 0; i < sh.count; ++i) {
    const Entry& e = sh.e[i];
    auto coll = static_cast<Collective>(e.coll);
    MeasuredSet* set = nullptr;
    for (MeasuredSet& s : table.sets)
      if (s.collective == coll && s.nranks == e.nranks) set = &s;
    if (set == nullptr) {
      table.sets.push_back(MeasuredSet{coll, e.nranks, transport, {}});
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
  return table;
}

// Per size, the family measured fastest beside the model's own choice (the measured parameters,
// no table): for host calls over shm, or (device) for the device executor's calls over p2p with
// its default grid and scratch.
void printSummary(const MeasuredTable& table, const TunerParams& params, bool device) {
  Tuner model(params, AlgoFilter{});
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
      in.intraHost = s.transport;
      if (device) {
        in.deviceExecutor = true;
        in.workers = kDeviceCtas;
        in.scratchBytes = kDeviceScratchBytes;
      }
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
}

int writeFile(const std::string& path, const TunerParams& params, const MeasuredTable& table,
              const std::string& host) {
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

Shared* sharedPage() {
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) return nullptr;
  sh->count = 0;
  sh->error[0] = '\0';
  return sh;
}

// --device: the device sets go into the file beside what it holds (its parameters and host
// sets are kept; earlier device sets are replaced).
int runDevice(const Options& o, const std::string& path, const std::string& host) {
  TunerParams params = defaultTunerParams();
  MeasuredTable table;
  if (std::ifstream f(path); f) {
    std::stringstream text;
    text << f.rdbuf();
    if (tunerFileFromJson(text.str(), &params, &table) != tsrSuccess) {
      std::fprintf(stderr, "tessera_tune: %s: %s (move it away, or give -o)\n", path.c_str(),
                   lastErrorMessage());
      return kExitFailed;
    }
    std::erase_if(table.sets,
                  [](const MeasuredSet& s) { return s.transport == TransportKind::kP2p; });
  }
  Shared* sh = sharedPage();
  if (sh == nullptr) return kExitFailed;
  for (int n : o.nranks) {
    double t0 = nowSeconds();
    std::string err = measureDeviceFamilies(o, n, sh);
    if (!err.empty()) {
      std::fprintf(stderr, "tessera_tune: %d ranks on GPU 0: %s\n", n, err.c_str());
      return kExitFailed;
    }
    std::printf("# %d thread ranks on GPU 0 measured in %.1f s\n", n, nowSeconds() - t0);
  }
  MeasuredTable device = tableOf(*sh, TransportKind::kP2p);
  printSummary(device, params, true);
  for (MeasuredSet& s : device.sets) table.sets.push_back(std::move(s));
  return writeFile(path, params, table, host);
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
  std::printf("# tessera_tune %s on %s: writing %s%s\n", TESSERA_VERSION_STRING, host.c_str(),
              path.c_str(), o.device ? " (device buffers, GPU 0)" : "");
  if (o.device) return runDevice(o, path, host);
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
  Shared* sh = sharedPage();
  if (sh == nullptr) return kExitFailed;
  for (int n : o.nranks) {
    double t0 = nowSeconds();
    err = measureFamilies(run, n, sh);
    if (!err.empty()) {
      std::fprintf(stderr, "tessera_tune: %s\n", err.c_str());
      if (!run.crossFile.empty()) std::remove(run.crossFile.c_str());
      std::remove(run.stagedFile.c_str());
      return kExitFailed;
    }
    std::printf("# %d ranks measured in %.1f s\n", n, nowSeconds() - t0);
  }
  if (!run.crossFile.empty()) std::remove(run.crossFile.c_str());
  std::remove(run.stagedFile.c_str());
  MeasuredTable table = tableOf(*sh, TransportKind::kShm);
  printSummary(table, params, false);
  return writeFile(path, params, table, host);
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
    } else if (a == "--device") {
      o.device = true;
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
