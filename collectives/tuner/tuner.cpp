// The tuner: reads its configuration from the environment and picks the cheapest allowed family
// for a call with the cost model (cost_model.cpp). choose() runs on every call that misses the
// engine's choice cache, so its common path allocates nothing beyond the chosen name (short
// enough for std::string's inline buffer) and builds its log line only when TUNING INFO is on.
#include "collectives/tuner/tuner.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/tuner/cost_model.hpp"
#include "core/env.hpp"
#include "core/hash.hpp"

namespace tessera {
namespace {
constexpr Subsys kLogSubsys = Subsys::kTuning;

// A tuner file is a few lines; anything larger is a wrong path.
constexpr std::streamoff kMaxTunerFileBytes = 1 << 20;
// Candidates kept for the log line (families beyond it are still compared).
constexpr size_t kLoggedCandidates = 16;

struct Candidate {
  const char* name = "";
  int pipeline = 1;
  bool zeroCopy = false;
  double us = -1;  // negative: the family does not apply
};

bool filterAllows(const AlgoFilter& f, Collective c, size_t family) {
  const std::vector<bool>& v = f.allowed[static_cast<size_t>(c)];
  return family >= v.size() || v[family];
}

bool generates(const AlgorithmInfo& a, Collective c) {
  return std::find(a.collectives.begin(), a.collectives.end(), c) != a.collectives.end();
}

// Plans generated to learn a family's slice: beyond this many ranks the slice is not modelled.
constexpr int kSliceShareMaxRanks = 512;

// The bytes of a segment one iteration of the family's staged plan carries per byte of scratch:
// cps / scratchChunksUsed of its plan (DESIGN.md, "The slice rule"). Every generator's scratch
// chunks grow with the pipeline as its chunks per segment do, so the share of its pipeline-1
// plan holds for every depth. 0: the plan uses no scratch, or it was not generated (too many
// ranks, a generator error). Cached per (family, collective, ranks, root, hosts): generating
// takes microseconds to milliseconds, choose() runs once per call shape.
double sliceShare(const AlgorithmInfo& a, const TuneInput& in) {
  if (in.nranks > kSliceShareMaxRanks) return 0;
  using Key = std::tuple<const char*, int, int, int, std::vector<int>>;
  static std::mutex mu;
  static std::map<Key, double> cache;
  Key key{a.name, static_cast<int>(in.collective), in.nranks, in.root, in.hostOf};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  GenParams g;
  g.collective = in.collective;
  g.algorithm = a.name;
  g.nranks = in.nranks;
  g.root = in.root;
  g.pipeline = 1;
  g.hostOf = in.hostOf;
  Plan plan;
  double share = 0;
  if (generatePlan(g, &plan) == tsrSuccess) {
    const int32_t chunks = scratchChunksUsed(plan);
    if (chunks > 0) share = static_cast<double>(plan.chunksPerSegment) / chunks;
  }
  if (cache.size() > 4096) cache.clear();
  cache.emplace(std::move(key), share);
  return share;
}

// The family's best pipeline depth for this call (the model trades a piece's latency against
// overlap, so the result stays monotonic in bytes: a minimum over fixed depths).
Candidate bestPipeline(const TunerParams& params, const TuneInput& in, const HostLayout& hl,
                       const AlgorithmInfo& a) {
  Candidate best;
  best.name = a.name;
  CostFamily family = costFamilyOf(a.name);
  best.zeroCopy = in.zeroCopyPossible && hasZeroCopyForm(family, in.collective);
  const double slice =
      in.scratchBytes > 0 && !best.zeroCopy ? sliceShare(a, in) * in.scratchBytes : 0;
  // The device ring runs a ring per CTA with a piece of every block each (exec planKeyOf): its
  // pipeline is at least the CTAs, the depths below that are not what would run.
  const int minDepth = in.deviceExecutor && family == CostFamily::kRing ? in.workers : 1;
  std::array<int, std::size(kPipelineChoices) + 1> depths{};
  size_t nDepths = 0;
  depths[nDepths++] = std::max(minDepth, 1);
  for (int p : kPipelineChoices)
    if (p > minDepth) depths[nDepths++] = p;
  for (size_t i = 0; i < nDepths; ++i) {
    const int p = depths[i];
    // A family may use nranks * pipeline chunks per segment (ring); stay within the plan limit.
    if (p > 1 && static_cast<int64_t>(p) * hl.nranks > kMaxChunksPerSegment) break;
    double t = familyCostUs(params, in, hl, family, p, best.zeroCopy, slice);
    if (t < 0) return best;
    if (best.us < 0 || t < best.us) {
      best.us = t;
      best.pipeline = p;
    }
  }
  return best;
}

std::string filterText(const AlgoFilter& f) {
  if (!f.text.empty()) return "'" + f.text + "'";
  for (const std::vector<bool>& v : f.allowed)
    if (!v.empty()) return "(a filter set by the caller)";
  return "(unset)";
}

Result nothingLeft(const TuneInput& in, const AlgoFilter& filter, bool deterministic,
                   const std::string& generators, const std::string& canonical) {
  const char* coll = collectiveName(in.collective);
  if (generators.empty())
    return TSR_FAIL(tsrInvalidUsage, "no algorithm generates %s for %d ranks on this layout", coll,
                    in.nranks);
  if (deterministic)
    return TSR_FAIL(tsrInvalidUsage,
                    "%s=%s with TESSERA_DETERMINISTIC=1 leaves no algorithm for %s: "
                    "deterministic %s needs one of the canonical-order families (%s); families "
                    "that generate it here: %s",
                    filter.var, filterText(filter).c_str(), coll, coll,
                    canonical.empty() ? "none generates it" : canonical.c_str(),
                    generators.c_str());
  return TSR_FAIL(tsrInvalidUsage,
                  "%s=%s leaves no algorithm for %s (families that generate it here: %s)",
                  filter.var, filterText(filter).c_str(), coll, generators.c_str());
}

void logChoice(const TuneInput& in, const HostLayout& hl, const Candidate& chosen,
               const Candidate* all, size_t count, const char* excluded, Protocol protocol,
               double llUs, const char* llNote, bool measured) {
  char line[2048];
  size_t at = 0;
  auto add = [&](const char* fmt, auto... args) {
    if (at >= sizeof(line)) return;
    int k = std::snprintf(line + at, sizeof(line) - at, fmt, args...);
    if (k > 0) at += static_cast<size_t>(k);
  };
  add("%s %zu B n=%d", collectiveName(in.collective), in.bytes, in.nranks);
  if (hl.hosts > 1) add(" hosts=%d", hl.hosts);
  add(": %s (pipeline %d%s) %.1f us%s", chosen.name, chosen.pipeline,
      chosen.zeroCopy ? ", zero-copy" : "", chosen.us, measured ? " measured" : "");
  if (protocol == Protocol::kLL)
    add(", protocol LL %.1f us (the plan is Simple's fallback)", llUs);
  else if (llUs >= 0)
    add(", protocol Simple (LL %.1f us)", llUs);
  else
    add(", protocol Simple");
  if (llNote[0] != '\0') add(" (%s)", llNote);
  for (size_t i = 0; i < count; ++i)
    if (all[i].name != chosen.name) add("; %s %.1f us", all[i].name, all[i].us);
  if (measured) add(" (the others as modelled)");
  if (excluded[0] != '\0') add("; excluded: %s", excluded);
  TSR_INFO("%s", line);
}

Result readTunerFile(const std::string& path, TunerParams* params, MeasuredTable* table) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return TSR_FAIL(tsrInvalidArgument, "TESSERA_TUNER_FILE=%s cannot be opened: %s", path.c_str(),
                    std::strerror(errno));
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  if (size < 0 || size > kMaxTunerFileBytes)
    return TSR_FAIL(tsrInvalidArgument,
                    "TESSERA_TUNER_FILE=%s is not a readable file of at most %lld bytes",
                    path.c_str(), static_cast<long long>(kMaxTunerFileBytes));
  f.seekg(0);
  std::stringstream text;
  text << f.rdbuf();
  Result r = tunerFileFromJson(text.str(), params, table);
  if (r != tsrSuccess) return addContext(r, "TESSERA_TUNER_FILE=%s", path.c_str());
  return tsrSuccess;
}

// The table's point for the call, where a table applies (one host, staged or cross-memory
// attach; host calls over host transports, device calls over a device transport: tessera_tune
// measures host calls over shm and, with --device, device calls over p2p, so neither executor
// reads the other's times, and the device emulation, over host transports, reads none).
const MeasuredPoint* measuredPoint(const MeasuredTable* table, const TuneInput& in,
                                   const HostLayout& hl) {
  const bool deviceTransport =
      in.intraHost == TransportKind::kP2p || in.intraHost == TransportKind::kCudaIpc;
  if (table == nullptr || in.modelOnly || hl.hosts > 1 || in.deviceExecutor != deviceTransport ||
      (in.zeroCopyPossible && !in.crossMemory))
    return nullptr;
  const MeasuredSet* set = table->find(in.collective, in.nranks, in.intraHost);
  return set == nullptr ? nullptr : nearestPoint(*set, in.bytes);
}

// The fastest family measured at `pt` that the call may run, or false (none of them is allowed).
bool measuredChoice(const MeasuredPoint& pt, const TuneInput& in, const AlgoFilter& filter,
                    bool deterministic, const char** family, double* us) {
  const std::vector<AlgorithmInfo>& families = algorithms();
  bool found = false;
  for (const MeasuredFamily& m : pt.families) {
    for (size_t i = 0; i < families.size(); ++i) {
      const AlgorithmInfo& a = families[i];
      if (m.family != a.name || !generates(a, in.collective) || a.needsHosts) continue;
      if (!filterAllows(filter, in.collective, i) || (deterministic && !a.canonicalOrder)) continue;
      if (!found || m.us < *us) {
        *family = a.name;
        *us = m.us;
        found = true;
      }
    }
  }
  return found;
}

}  // namespace

std::string tunerCachePath() {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] == '/')
    dir = x;
  else if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0')
    dir = std::string(h) + "/.cache";
  else
    return "";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  for (char* c = host; *c != '\0'; ++c)
    if (*c == '/') *c = '_';
  return dir + "/tessera/tuner-" + host + ".json";
}

Tuner::Tuner(TunerParams params, std::shared_ptr<const MeasuredTable> table, AlgoFilter filter,
             ProtoFilter proto)
    : params_(params),
      table_(std::move(table)),
      filter_(std::move(filter)),
      proto_(std::move(proto)) {
  if (table_ && table_->empty()) table_.reset();
}

Result Tuner::fromEnv(Tuner* out) {
  std::string algo, proto, file;
  bool deterministic = false, cache = true;
  TSR_CHECK(envString("TESSERA_ALGO", &algo));
  TSR_CHECK(envString("TESSERA_PROTO", &proto));
  TSR_CHECK(envBool("TESSERA_DETERMINISTIC", &deterministic));
  TSR_CHECK(envString("TESSERA_TUNER_FILE", &file));
  TSR_CHECK(envBool("TESSERA_TUNER_CACHE", &cache));
  AlgoFilter filter;
  TSR_CHECK(parseAlgoFilter(algo, &filter, envSourceName("TESSERA_ALGO")));
  ProtoFilter protoFilter;
  TSR_CHECK(parseProtoFilter(proto, &protoFilter, envSourceName("TESSERA_PROTO")));
  TunerParams params = defaultTunerParams();
  auto table = std::make_shared<MeasuredTable>();
  std::string source = "built-in defaults";
  if (!file.empty()) {
    TSR_CHECK(readTunerFile(file, &params, table.get()));
    source = file;
  } else if (std::string cached = cache ? tunerCachePath() : ""; !cached.empty()) {
    if (FILE* f = std::fopen(cached.c_str(), "r"); f != nullptr) {
      std::fclose(f);
      TunerParams p = params;
      MeasuredTable t;
      if (readTunerFile(cached, &p, &t) == tsrSuccess) {
        params = p;
        *table = std::move(t);
        source = cached;
      } else {
        TSR_WARN("ignoring this host's cached tuner file %s (%s); run tessera_tune to remake it",
                 cached.c_str(), lastErrorMessage());
        clearLastError();
      }
    }
  }
  Tuner t(params, std::move(table), std::move(filter), std::move(protoFilter));
  t.deterministic_ = deterministic;
  t.source_ = source;
  *out = std::move(t);
  return tsrSuccess;
}

uint64_t Tuner::fileDigest() const {
  uint64_t h = fnv1a64(&params_, sizeof params_);
  return table_ ? h ^ (table_->digest() * 0x9e3779b97f4a7c15ull) : h;
}

uint64_t Tuner::filterDigest() const {
  std::string bytes;
  for (const std::vector<bool>& v : filter_.allowed) {
    for (bool b : v) bytes += b ? '1' : '0';
    bytes += '|';
  }
  for (const auto& a : proto_.allowed)
    for (bool b : a) bytes += b ? '1' : '0';
  bytes += deterministic_ ? 'D' : 'd';
  return fnv1a64(bytes.data(), bytes.size());
}

void Tuner::useDefaults() {
  params_ = defaultTunerParams();
  table_.reset();
  source_ = "built-in defaults";
}

Result Tuner::choose(const TuneInput& in, TuneChoice* out) const {
  HostLayout hl;
  TSR_CHECK(describeHosts(in, &hl));
  bool deterministic = (in.deterministic || deterministic_) && collectiveReduces(in.collective);
  bool logging = logEnabled(LogLevel::kInfo, kLogSubsys);

  std::array<Candidate, kLoggedCandidates> logged;
  size_t nLogged = 0;
  Candidate best;
  std::string excluded;  // only filled when logging
  const std::vector<AlgorithmInfo>& families = algorithms();
  for (size_t i = 0; i < families.size(); ++i) {
    const AlgorithmInfo& a = families[i];
    if (!generates(a, in.collective) || (a.needsHosts && hl.hosts < 2)) continue;
    const char* why = !filterAllows(filter_, in.collective, i) ? filter_.var
                      : (deterministic && !a.canonicalOrder)   ? "deterministic"
                                                               : nullptr;
    if (why != nullptr) {
      if (logging) excluded += strprintf("%s%s (%s)", excluded.empty() ? "" : ", ", a.name, why);
      continue;
    }
    Candidate c = bestPipeline(params_, in, hl, a);
    if (c.us < 0) continue;  // not modelled: never guess a cost
    if (nLogged < logged.size()) logged[nLogged++] = c;
    if (best.us < 0 || c.us < best.us) best = c;
  }
  // This machine's measurements, where they apply, override the model's ranking of families (the
  // pipeline stays the model's for that family, as when TESSERA_ALGO names it).
  const char* measuredFamily = nullptr;
  double measuredUs = 0;
  const MeasuredPoint* point = measuredPoint(table_.get(), in, hl);
  bool measured = best.us >= 0 && point != nullptr && !in.crossMemory &&
                  measuredChoice(*point, in, filter_, deterministic, &measuredFamily, &measuredUs);
  if (best.us >= 0 && point != nullptr && in.crossMemory) {
    // Cross-memory attach where it was measured, and faster than the staged choice (the same
    // point's families).
    bool staged = measuredChoice(*point, in, filter_, deterministic, &measuredFamily, &measuredUs);
    if (point->crossUs > 0 && (!staged || point->crossUs < measuredUs)) {
      best.us = point->crossUs;
      measured = true;
    } else {
      best.zeroCopy = false;  // no candidate: the caller stages
      measured = true;
    }
    measuredFamily = nullptr;
  }
  if (measured && measuredFamily != nullptr) {
    for (size_t i = 0; i < nLogged; ++i)
      if (std::strcmp(logged[i].name, measuredFamily) == 0) best = logged[i];
    if (std::strcmp(best.name, measuredFamily) != 0) {
      best = bestPipeline(params_, in, hl, *findAlgorithm(measuredFamily));
    }
    best.us = measuredUs;
  }

  if (best.us < 0) {
    // The error path may allocate: say which families would have applied.
    std::string generators, canonical;
    for (const AlgorithmInfo& a : families) {
      if (!generates(a, in.collective) || (a.needsHosts && hl.hosts < 2)) continue;
      generators += (generators.empty() ? "" : ", ") + std::string(a.name);
      if (a.canonicalOrder) canonical += (canonical.empty() ? "" : ", ") + std::string(a.name);
    }
    return nothingLeft(in, filter_, deterministic, generators, canonical);
  }

  out->algorithm = best.name;
  out->pipeline = best.pipeline;
  // The two trees (and nothing else yet) are independent streams of work: one worker each.
  out->workers = costFamilyOf(best.name) == CostFamily::kTree ? 2 : 1;
  out->zeroCopy = best.zeroCopy;
  out->predictedUs = best.us;
  out->measured = measured;
  out->protocol = Protocol::kSimple;
  // The protocol: LL where it applies, is allowed and is cheaper or forced (Simple forbidden). The
  // best Simple plan stays in `out` as the fallback. Where LL does not apply, Simple runs even
  // when TESSERA_PROTO forbids it ("LL forces it where supported").
  const double llUs = llCostUs(params_, in, hl);
  const bool llAllowed = proto_.allows(in.collective, Protocol::kLL);
  const bool simpleAllowed = proto_.allows(in.collective, Protocol::kSimple);
  if (llUs >= 0 && llAllowed && (!simpleAllowed || llUs < best.us)) {
    out->protocol = Protocol::kLL;
    out->predictedUs = llUs;
  }
  if (logging) {
    const char* note = llUs < 0     ? (in.deviceExecutor ? "LL does not apply" : "host executor")
                       : !llAllowed ? "LL excluded by TESSERA_PROTO"
                                    : "";
    logChoice(in, hl, best, logged.data(), nLogged, excluded.c_str(), out->protocol, llUs, note,
              measured);
  }
  return tsrSuccess;
}

double Tuner::predictLLUs(const TuneInput& in) const {
  HostLayout hl;
  if (describeHosts(in, &hl) != tsrSuccess) return -1;
  return llCostUs(params_, in, hl);
}

double Tuner::predictUs(const TuneInput& in, const std::string& algorithm, int pipeline) const {
  const AlgorithmInfo* a = findAlgorithm(algorithm);
  if (a == nullptr || !generates(*a, in.collective) || pipeline < 1) return -1;
  HostLayout hl;
  if (describeHosts(in, &hl) != tsrSuccess) return -1;
  if (a->needsHosts && hl.hosts < 2) return -1;
  CostFamily family = costFamilyOf(a->name);
  const bool zeroCopy = in.zeroCopyPossible && hasZeroCopyForm(family, in.collective);
  const double slice = in.scratchBytes > 0 && !zeroCopy ? sliceShare(*a, in) * in.scratchBytes : 0;
  return familyCostUs(params_, in, hl, family, pipeline, zeroCopy, slice);
}

}  // namespace tessera
