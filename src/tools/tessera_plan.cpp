// tessera_plan: make, check and read collective plans (collectives/plan).
//   tessera_plan generate --coll C --algo A --nranks N [--root R] [--pipeline P] [--workers W]
//                         [--zero-copy] [--hosts 0,0,1,1] [-o plan.json]
//   tessera_plan verify [--iterations K] plan.json...
//   tessera_plan show plan.json
// Exit codes: 0 ok, 1 verification or I/O failure, 2 usage.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/algorithms/algorithms.hpp"
#include "collectives/plan/plan.hpp"
#include "collectives/plan/plan_json.hpp"
#include "collectives/plan/verifier.hpp"
#include "core/env.hpp"
#include "core/log.hpp"
#include "core/status.hpp"

namespace {

using namespace tessera;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage:\n"
    "  tessera_plan generate --coll C --algo A --nranks N [--root R] [--pipeline P]\n"
    "                        [--workers W] [--zero-copy] [--hosts H0,H1,...] [-o FILE]\n"
    "      generate a plan, verify it, and write it as JSON (standard output without -o)\n"
    "  tessera_plan verify [--iterations K] FILE...\n"
    "      prove each plan file correct (collective, deadlock, races), or say where it fails\n"
    "  tessera_plan show FILE\n"
    "      list a plan file rank by rank, one op per line\n"
    "  tessera_plan --help\n"
    "collectives: allreduce, reducescatter, allgather, broadcast, reduce, alltoall\n"
    "writing an algorithm: generate a plan to start from (or write one, plan_json.hpp), verify\n"
    "  it, run it with a perf binary (all_reduce_perf -t 8 --plan my.json), and simulate it on\n"
    "  machines you do not have, beside the generators' plans:\n"
    "    tessera_plan generate --coll allreduce --algo ring --nranks 16 --workers 8 \\\n"
    "        --hosts 0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1 -o my.json    (then edit my.json)\n"
    "    tessera_plan verify my.json\n"
    "    tessera_sim --plan my.json --platform dgx-h100 -b 1M -e 256M\n"
    "    tessera_sim --algo ring --zero-copy --workers 8 --platform dgx-h100 --nodes 2 ...\n"
    "    tessera_sim --algo tree --zero-copy --platform dgx-h100 --nodes 2 ...\n"
    "exit codes: 0 ok, 1 verification or I/O failure, 2 usage\n";

int usage(const char* why) {
  std::fprintf(stderr, "tessera_plan: %s\n%s", why, kUsage);
  return kExitUsage;
}

int failed(const char* what) {
  std::fprintf(stderr, "tessera_plan: %s: %s\n", what, lastErrorMessage());
  return kExitFailed;
}

// A decimal int in [lo, hi]; false otherwise.
bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseHosts(const std::string& s, std::vector<int>* out) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int h = 0;
    if (!parseInt(item.c_str(), 0, kMaxPlanRanks, &h)) return false;
    out->push_back(h);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return !out->empty();
}

std::string summary(const Plan& p) {
  size_t ops = 0, workers = 0;
  for (const RankPlan& r : p.ranks) {
    workers += r.workers.size();
    for (const Worker& w : r.workers) ops += w.ops.size();
  }
  std::string s =
      strprintf("%s %s, %d ranks", collectiveName(p.collective), p.algorithm.c_str(), p.nranks);
  if (collectiveHasRoot(p.collective)) s += strprintf(", root %d", p.root);
  s += strprintf(", %d chunks per segment, %zu workers, %zu ops", p.chunksPerSegment, workers, ops);
  if (p.zeroCopy) s += ", zero-copy";
  if (p.canonicalOrder) s += ", canonical order";
  return s;
}

int generate(int argc, char** argv) {
  GenParams g;
  std::string coll, out;
  bool haveRanks = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto needs = [&](const char* name) {
      if (v == nullptr) return usage(strprintf("%s needs a value", name).c_str());
      ++i;
      return kExitOk;
    };
    if (a == "--zero-copy") {
      g.zeroCopy = true;
    } else if (a == "--coll" || a == "--algo" || a == "-o" || a == "--hosts" || a == "--nranks" ||
               a == "--root" || a == "--pipeline" || a == "--workers") {
      if (needs(a.c_str()) != kExitOk) return kExitUsage;
      bool ok = true;
      if (a == "--coll") coll = v;
      if (a == "--algo") g.algorithm = v;
      if (a == "-o") out = v;
      if (a == "--hosts") ok = parseHosts(v, &g.hostOf);
      if (a == "--nranks") ok = haveRanks = parseInt(v, 1, kMaxPlanRanks, &g.nranks);
      if (a == "--root") ok = parseInt(v, 0, kMaxPlanRanks - 1, &g.root);
      if (a == "--pipeline") ok = parseInt(v, 0, kMaxChunksPerSegment, &g.pipeline);
      if (a == "--workers") ok = parseInt(v, 1, kMaxWorkers, &g.workers);
      if (!ok) return usage(strprintf("bad value \"%s\" for %s", v, a.c_str()).c_str());
    } else {
      return usage(strprintf("unknown argument \"%s\" for generate", a.c_str()).c_str());
    }
  }
  if (coll.empty() || g.algorithm.empty() || !haveRanks) {
    return usage("generate needs --coll, --algo and --nranks");
  }
  if (collectiveParse(coll, &g.collective) != tsrSuccess) return usage(lastErrorMessage());
  Plan plan;
  if (generatePlan(g, &plan) != tsrSuccess) return failed("generate");
  VerifyReport report;
  if (verifyPlan(plan, &report) != tsrSuccess) {
    std::fprintf(stderr, "tessera_plan: generated plan %s fails verification: %s\n",
                 plan.name.c_str(), report.message.c_str());
    return kExitFailed;
  }
  if (!out.empty()) {
    if (writePlanFile(plan, out) != tsrSuccess) return failed("write");
    std::fprintf(stderr, "%s: written (%s)\n", out.c_str(), summary(plan).c_str());
    return kExitOk;
  }
  std::string text;
  if (planToJson(plan, &text, true) != tsrSuccess) return failed("write");
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

int verify(int argc, char** argv) {
  VerifyOptions options;
  std::vector<std::string> files;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations") {
      if (i + 1 >= argc || !parseInt(argv[i + 1], 1, 64, &options.iterations)) {
        return usage("--iterations needs a count in 1..64");
      }
      ++i;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage(strprintf("unknown option \"%s\" for verify", a.c_str()).c_str());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage("verify needs a plan file");
  int rc = kExitOk;
  for (const std::string& f : files) {
    Plan plan;
    if (readPlanFile(f, &plan) != tsrSuccess) {
      std::printf("%s: FAIL: %s\n", f.c_str(), lastErrorMessage());
      rc = kExitFailed;
      continue;
    }
    VerifyReport report;
    if (verifyPlan(plan, &report, options) != tsrSuccess) {
      std::printf("%s: FAIL: %s\n", f.c_str(), report.message.c_str());
      rc = kExitFailed;
      continue;
    }
    std::printf("%s: ok (%s)\n", f.c_str(), summary(plan).c_str());
  }
  return rc;
}

int show(int argc, char** argv) {
  if (argc != 1) return usage("show needs exactly one plan file");
  Plan plan;
  if (readPlanFile(argv[0], &plan) != tsrSuccess) return failed("show");
  std::string text = showPlan(plan);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // This tool prints every error sentence itself; the WARN log would repeat each one.
  if (envRaw("TESSERA_DEBUG") == nullptr) {  // or NCCL_DEBUG, where aliases are active
    LogConfig config = logConfigFromEnv();
    config.level = LogLevel::kNone;
    logConfigure(config);
  }
  if (argc < 2) return usage("missing command");
  std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (cmd == "generate") return generate(argc - 2, argv + 2);
  if (cmd == "verify") return verify(argc - 2, argv + 2);
  if (cmd == "show") return show(argc - 2, argv + 2);
  return usage(strprintf("unknown command \"%s\"", cmd.c_str()).c_str());
}
